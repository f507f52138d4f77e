/* The workload builder's private parts (core/workload*.c only).
 *
 * workload.c holds the program container: a builder that appends ops and
 * tensors with a sticky error (the first failure, usually MS_ENOMEM, is kept
 * and every later call is a no-op, so model code reads as a straight list of
 * ops), and the finishing pass that derives uses, saved_for_backward, segment
 * inputs and the public view.  workload_layer.c emits one transformer layer
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

typedef struct wb_op {
    size_t name;            /* offset into names */
    ms_kernel kernel;       /* kernel.name is a literal; bytes < 0: inputs + outputs */
    ms_phase phase;
    int32_t micro_batch;
    int32_t layer;
    ms_stream_role stream;
    size_t in_off, out_off; /* offsets into ids */
    uint32_t n_in, n_out;
    int32_t segment;
    double model_flops;
    int32_t chunk;          /* VPP model chunk (0 without interleaving) */
} wb_op;

typedef struct wb_tensor {
    size_t name;
    uint64_t bytes;
    ms_dtype dtype;
    ms_tensor_kind kind;
    int32_t producer;
    bool persistent;
    int32_t layer;
    int32_t micro_batch;
} wb_tensor;

typedef struct wb_segment {
    size_t name;
    int32_t layer, micro_batch, parent;
    uint32_t first_op, last_op;
    bool open;
} wb_segment;

/* The builder.  The "current" fields stamp every op appended. */
typedef struct wb {
    ms_status err;
    wb_op *ops;
    uint32_t n_ops, cap_ops;
    wb_tensor *tensors;
    uint32_t n_tensors, cap_tensors;
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

void wb_init(wb *b);
void wb_release(wb *b);

/* Append a tensor that exists before the step (weights, grads, state). */
uint32_t wb_persistent(wb *b, uint64_t bytes, ms_dtype dt, ms_tensor_kind kind, int32_t layer,
                       const char *fmt, ...) __attribute__((format(printf, 6, 7)));

/* Append an op reading in[0..n_in).  Its name is formatted from fmt.  Tensors
 * it writes in place (grad accumulation, in-place collectives) are added with
 * wb_inplace; new tensors with wb_out.  Returns the op id. */
uint32_t wb_op_add(wb *b, const ms_kernel *k, double model_flops, const uint32_t *in,
                   uint32_t n_in, const char *fmt, ...) __attribute__((format(printf, 6, 7)));
/* A new tensor written by the last op, named "<op name>.<suffix>". */
uint32_t wb_out(wb *b, const char *suffix, uint64_t bytes, ms_dtype dt, ms_tensor_kind kind);
/* The last op also writes t in place (t must be among its inputs). */
void wb_inplace(wb *b, uint32_t t);
/* The last op appended, to adjust its kernel bytes or model FLOPs (an op
 * reading a slice of a tensor), or NULL after an error. */
wb_op *wb_last_op(wb *b);

/* Recompute segments: open/close around forward ops; nesting = parent. */
void wb_seg_begin(wb *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void wb_seg_end(wb *b);

/* Finish: derive uses, saved_for_backward, segment inputs and backward
 * points, and move everything into a program (b is emptied). */
ms_status wb_finish(wb *b, int stage, ms_program **out);

#endif
