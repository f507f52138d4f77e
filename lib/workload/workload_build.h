/* The workload builder's private parts (lib/workload/ only).
 *
 * workload.c holds the program container: a builder that appends ops and
 * tensors with a sticky error (the first failure, usually MS_ENOMEM, is kept
 * and every later call is a no-op, so model code reads as a straight list of
 * ops) and counts uses and saved_for_backward as ops arrive, and the
 * finishing pass that links the arrays into a program and derives segment
 * inputs.  workload_layer.c emits one transformer layer
 * (llama or gpt), workload_model.c the embedding, head, loss and the step,
 * workload_optimizer.c the parameters and the optimizer. */
#ifndef MEMSIM_WORKLOAD_BUILD_H
#define MEMSIM_WORKLOAD_BUILD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "memsim/workload.h"

#define WB_NO_TENSOR UINT32_MAX
#define WB_MAX_OPS (1u << 24)
#define WB_SEG_DEPTH 4

/* Where an op's name and tensor ids lie in the builder's names and ids,
 * which move as they grow: wl_build_finish turns these offsets into the op's
 * pointers. */
typedef struct wb_op_at {
    size_t name;
    size_t io;              /* its inputs, then its outputs */
} wb_op_at;

/* Per tensor: where its name lies, and whether a forward op made it (a
 * backward read then saves it; kept here, compact, not looked up in the
 * producer's ms_op, which is far back in the op array by then). */
typedef struct wb_tensor_at {
    size_t name;
    bool forward;
} wb_tensor_at;

typedef struct wb_segment {
    size_t name;
    int32_t layer, micro_batch, parent;
    uint32_t first_op, last_op;
    bool open;
    bool op_level;
} wb_segment;

/* The builder.  The "current" fields stamp every op appended.
 *
 * Ops and tensors are kept as the program's own ms_op and ms_tensor, handed
 * over by wl_build_finish without a copy (a second copy of a few hundred thousand
 * records was most of the finishing pass, in time and page faults); their
 * pointers (name, inputs, outputs, uses) are NULL until then.  Each op's
 * reads are checked, and counted into its inputs' n_uses and
 * saved_for_backward, as it is appended. */
typedef struct wb {
    ms_status err;
    ms_op *ops;             /* kernel.name is a literal; kernel.bytes < 0: inputs + outputs */
    wb_op_at *op_at;        /* per op */
    uint32_t n_ops, cap_ops;
    uint32_t last_name_len; /* the last op's: its tensors' names start with it */
    ms_tensor *tensors;
    wb_tensor_at *tensor_at; /* per tensor */
    uint32_t n_tensors, cap_tensors;
    size_t n_reads;         /* all ops' inputs: the program's uses */
    size_t seg_reads;       /* inputs of each segment's ops: bounds segment inputs */
    wb_segment *segs;
    uint32_t n_segs, cap_segs;
    uint32_t *ids;          /* op inputs and outputs */
    size_t n_ids, cap_ids;
    char *names;
    size_t n_names, cap_names;
    /* Stamps. */
    ms_phase phase;
    int32_t micro_batch;
    int32_t layer;
    int32_t chunk;
    int32_t seg_stack[WB_SEG_DEPTH];
    int seg_depth;
} wb;

void wl_build_init(wb *b);
void wl_build_release(wb *b);
/* Room for about `ops` ops, their tensors and names, so the arrays are not
 * copied as they grow: each copy touches fresh pages, and page faults were
 * a third of the build's time.  Capacity never touched costs only address
 * space.  A hint: failing to reserve is no error. */
void wl_build_reserve(wb *b, size_t ops);

/* Append a tensor that exists before the step (weights, grads, state). */
uint32_t wl_build_persistent(wb *b, uint64_t bytes, ms_dtype dt, ms_tensor_kind kind, int32_t layer,
                             const char *fmt, ...) __attribute__((format(printf, 6, 7)));

/* Append an op reading in[0..n_in).  Its name is formatted from fmt.  Tensors
 * it writes in place (grad accumulation, in-place collectives) are added with
 * wl_build_inplace; new tensors with wl_build_out.  Returns the op id. */
uint32_t wl_build_op_add(wb *b, const ms_kernel *k, double model_flops, const uint32_t *in,
                         uint32_t n_in, const char *fmt, ...) __attribute__((format(printf, 6, 7)));
/* A new tensor written by the last op, named "<op name>.<suffix>". */
uint32_t wl_build_out(wb *b, const char *suffix, uint64_t bytes, ms_dtype dt, ms_tensor_kind kind);
/* The last op also writes t in place (t must be among its inputs). */
void wl_build_inplace(wb *b, uint32_t t);
/* The last op appended, to adjust its kernel bytes or model FLOPs (an op
 * reading a slice of a tensor), or NULL after an error. */
ms_op *wl_build_last_op(wb *b);

/* Recompute segments: open/close around forward ops; nesting = parent. */
void wl_build_seg_begin(wb *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* The same, named "layers.<b->layer>.<module>" ("layers.<b->layer>" for a
 * NULL module) without formatting: the segments of every layer. */
void wl_build_seg_begin_layer(wb *b, const char *module);
void wl_build_seg_end(wb *b);

/* Names without printf (a few hundred thousand of them per program; see
 * workload.c).  wl_build_name_join writes "layers.<layer>.<s1><s2>..." of the
 * strings up to the NULL into buf ("<s1><s2>..." for layer MS_NONE), cut at
 * cap - 1 bytes as snprintf would, and returns buf. */
char *wl_build_name_join(char *buf, size_t cap, int32_t layer, ...) __attribute__((sentinel));
/* v in decimal, as "%d" writes it, into buf (11 bytes, no NUL); returns the
 * length. */
size_t wl_build_put_int(char *buf, int32_t v);

/* ---- repeating a unit (workload.c) ----
 * Where the builder stands: counts of everything appended so far. */
typedef struct wb_mark {
    uint32_t op, tensor, seg;
    size_t id, seg_reads;
    int seg_depth;
} wb_mark;

void wl_build_mark(const wb *b, wb_mark *at);

/* A unit appended between two marks, to append again for another micro-
 * batch.  Its ids are its own tensors, the tensors [pair_lo, pair_hi) of
 * another unit (a backward's forward), or persistent ones. */
typedef struct wb_unit {
    wb_mark from, to;
    uint32_t pair_lo, pair_hi;
    int32_t micro_batch;
} wb_unit;

/* Whether u can be repeated: nothing open across its ends, every id it
 * reads or writes as above, every segment and tensor its own. */
bool wl_build_unit_repeatable(const wb *b, const wb_unit *u);
/* Append u again as micro-batch `micro_batch`: its own tensors, ops and
 * segments renumbered after the last ones, [pair_lo, pair_hi) moved to
 * start at pair_to, the tags of its p2p ops moved by tag_shift; names are
 * shared with u's, uses and saved_for_backward counted as wl_build_op_add
 * does. */
void wl_build_repeat(wb *b, const wb_unit *u, int32_t micro_batch, uint32_t pair_to,
                     int tag_shift);

/* Finish: hand the ops, tensors, names and ids over to a program, set
 * their pointers and uses, and derive segment inputs and backward points
 * (b is emptied). */
ms_status wl_build_finish(wb *b, int stage, ms_program **out);

#endif
