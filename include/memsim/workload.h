/* memsim: the step program.
 *
 * The workload builder turns a scenario into the program of one training step
 * of one device (one pipeline stage; one rank of its TP/CP/DP group): ops in
 * host issue order, tensors with their producer and consumers, and the
 * recompute segments a policy may choose.  The program is plain data: the
 * executor runs it, policies read it through their profile. */
#ifndef MEMSIM_WORKLOAD_H
#define MEMSIM_WORKLOAD_H

#include <stdbool.h>
#include <stdint.h>

#include "memsim/backend.h"
#include "memsim/scenario.h"
#include "memsim/status.h"

#ifdef __cplusplus
extern "C" {
#endif

#define MS_NONE (-1)

typedef enum ms_tensor_kind {
    MS_TK_WEIGHT = 0,
    MS_TK_GRAD,
    MS_TK_OPTIMIZER_STATE, /* fp32 master weights, Adam m and v */
    MS_TK_ACTIVATION,
    MS_TK_TEMP,
    MS_TK_COMM_BUFFER,
    MS_TK_COUNT
} ms_tensor_kind;

typedef enum ms_phase { MS_PHASE_FORWARD = 0, MS_PHASE_BACKWARD, MS_PHASE_OPTIMIZER } ms_phase;

/* Which of the device's streams an op is issued on. */
typedef enum ms_stream_role { MS_SR_COMPUTE = 0, MS_SR_COMM, MS_SR_COUNT } ms_stream_role;

MS_API const char *ms_tensor_kind_name(ms_tensor_kind k); /* "weight", "grad", ... */
MS_API const char *ms_phase_name(ms_phase p);             /* "forward", "backward", "optimizer" */

typedef struct ms_tensor {
    uint32_t id;
    const char *name;        /* "layers.3.attention.qkv.out" */
    uint64_t bytes;          /* requested size */
    ms_dtype dtype;
    ms_tensor_kind kind;
    int32_t producer;        /* op id, or MS_NONE if it exists before the step */
    bool persistent;         /* allocated at setup and kept across steps */
    bool saved_for_backward; /* produced in forward, read in backward */
    int32_t layer;           /* MS_NONE outside transformer layers */
    int32_t micro_batch;     /* MS_NONE for weights, grads, optimizer state */
    const uint32_t *uses;    /* ids of the ops that read it, ascending */
    uint32_t n_uses;
} ms_tensor;

/* A main grad: the fp32 grad of a weight, kept across steps.  Megatron's DDP
 * makes them views into one contiguous buffer (_ParamAndGradBuffer), so the
 * executor allocates them together and a swap of one is refused. */
#define MS_TENSOR_IS_MAIN_GRAD(t) ((t)->persistent && (t)->kind == MS_TK_GRAD)

typedef struct ms_op {
    uint32_t id;             /* == index in program order */
    const char *name;        /* module path + op: "layers.3.attention.core" */
    ms_kernel kernel;
    ms_phase phase;
    int32_t micro_batch;     /* MS_NONE for the optimizer */
    int32_t layer;           /* MS_NONE for embedding, head, loss, optimizer */
    ms_stream_role stream;
    const uint32_t *inputs;  /* tensor ids read */
    uint32_t n_inputs;
    /* Tensor ids written: the tensors this op allocates (their producer is
     * this op) and those it updates in place (producer another op or
     * MS_NONE: grad accumulation into the fp32 main grads, in-place
     * all-reduces, optimizer updates); an in-place tensor is also among the
     * inputs, and a later reader depends on this op as on a producer. */
    const uint32_t *outputs;
    uint32_t n_outputs;
    int32_t segment;         /* innermost recompute segment, or MS_NONE */
    double model_flops;      /* FLOPs that count toward model FLOPs / MFU */
    int32_t chunk;           /* VPP model chunk of this stage (0 without interleaving) */
} ms_op;

/* A recompute unit: a contiguous range of forward ops of one micro-batch
 * (a whole layer, or a module inside it such as the attention core).
 * Recomputing it drops the tensors it produces that are saved for backward,
 * keeping its inputs, and re-issues first_op..last_op before first_backward_op.
 * A tensor whose backward readers are not all of the segment's own layer and
 * micro-batch stays (a layer's output is the next layer's input), and
 * first_backward_op is the first backward op reading a dropped tensor.  Per
 * (layer, micro-batch) the builder makes the layer segment and, inside it,
 * the two norms, the attention core and the MLP activation. */
typedef struct ms_segment {
    uint32_t id;
    const char *name;        /* "layers.3" or "layers.3.attention.core" */
    int32_t layer;
    int32_t micro_batch;
    int32_t parent;          /* enclosing segment (layer), or MS_NONE */
    uint32_t first_op, last_op;
    const uint32_t *inputs;  /* tensors read but not produced inside (weights too), ascending */
    uint32_t n_inputs;
    uint32_t first_backward_op;
    /* One op of a module, for MindFormers' select_recompute of single ops.
     * Recomputing it drops the op's saved outputs even where later forward
     * ops read them (MindSpore recomputes an op's output, whoever reads
     * it); a module or layer segment, like torch.utils.checkpoint, keeps an
     * output that ops outside it read in forward, since they save it. */
    bool op_level;
} ms_segment;

typedef struct ms_program ms_program;

/* What every consumer of a program needs and only a pass over it gives,
 * derived once per program (ms_program_facts_derive). */
typedef struct ms_program_facts {
    int32_t *last_forward_use;   /* per tensor: op id, or MS_NONE */
    int32_t *first_backward_use; /* per tensor: op id, or MS_NONE */
    uint64_t *saved_bytes;       /* per segment: saved-for-backward bytes produced inside */
    uint64_t *input_bytes;       /* per segment: bytes of its inputs */
} ms_program_facts;

/* A read-only view of a program; valid while the program lives. */
typedef struct ms_program_view {
    const ms_op *ops;
    uint32_t n_ops;
    const ms_tensor *tensors;
    uint32_t n_tensors;
    const ms_segment *segments;
    uint32_t n_segments;
    int stage;               /* pipeline stage this program runs */
    double model_flops;      /* sum of ops' model_flops */
    /* Derived by the builder; NULL in a view made by hand, whose consumers
     * derive their own. */
    const ms_program_facts *facts;
    /* An owner that refills the same arrays with another program (the
     * PyTorch bridge after a reset) changes this, since the addresses and
     * counts alone cannot tell: what a consumer derived from a view (the
     * policy host's Lua view, facts and profile.program_id) holds while
     * arrays, counts and revision are the same.  0 for the builder's
     * programs, which never change: the policy host may read such a
     * program's arrays (making its Lua view on a script's first read) for
     * as long as the policy lives, so free the policy first. */
    uint64_t revision;
} ms_program_view;

/* Build the step program of pipeline stage `stage` of sc. */
MS_API ms_status ms_program_build(const ms_scenario *sc, int stage, ms_program **out, ms_diag *d);
MS_API ms_status ms_program_free(ms_program *p);
MS_API ms_program_view ms_program_get_view(const ms_program *p); /* all zero for NULL */

/* Check a program's ids and ranges and derive its facts in one pass (freed
 * with ms_program_facts_free).  Errors name the element and the field. */
MS_API ms_status ms_program_facts_derive(const ms_program_view *v, ms_program_facts *out, ms_diag *d);
MS_API ms_status ms_program_facts_free(ms_program_facts *f);

/* Analytic figures of the whole (unsharded) model, for checks and reports. */
MS_API ms_status ms_model_param_count(const ms_model_config *m, uint64_t *params);
/* Model FLOPs of one step over the whole model for a global batch of
 * `batch` sequences (forward + backward, no recompute). */
MS_API ms_status ms_model_step_flops(const ms_model_config *m, uint64_t batch, double *flops);

/* Parameters one token uses: all of a dense model; with experts, the
 * router and the top-k experts of each layer (Mixtral 8x7B: 12.9B of 46.7B). */
MS_API ms_status ms_model_active_param_count(const ms_model_config *m, uint64_t *params);

/* What one stage's program holds (the units are (micro-batch, model chunk)
 * pairs; one chunk without interleaving). */
typedef struct ms_program_memory {
    uint64_t persistent_bytes;   /* weights, main grads, optimizer state */
    uint64_t saved_bytes;        /* saved for backward, all units */
    uint64_t saved_bytes_mb0;    /* saved for backward by micro-batch 0, all its chunks */
    uint32_t chunks;             /* model chunks of the stage (v) */
    uint32_t micro_batches;
    /* Max over the op order of the units whose forward has begun and whose
     * backward has not finished: p - stage for 1F1B (m >= p), (p - stage - 1)
     * * 2 + (v - 1) p + 1 interleaved, so the first stage holds
     * max_in_flight / v = p (1 + (p - 1) / (p v)) micro-batches' worth. */
    uint32_t max_in_flight;
    /* Max over the op order of the saved-for-backward bytes of the units in
     * flight (each unit's from its first forward op to its last backward op). */
    uint64_t peak_saved_bytes;
} ms_program_memory;
MS_API ms_status ms_program_memory_summary(const ms_program_view *v, ms_program_memory *out);

/* Megatron-LM's theoretical memory of the most loaded (first) pipeline stage
 * (megatron/training/theoretical_memory_usage.py), in bytes.  docs/memory-
 * formulas.md compares it with memsim's programs and explains where they
 * differ. */
typedef struct ms_megatron_memory {
    double weight_and_optimizer;   /* compute_weight_and_optimizer_memory */
    double activation;             /* compute_activation_memory (SP, selective recompute) */
    double activation_without_sp;  /* compute_activation_memory_without_sp */
    double in_flight;              /* micro-batches it takes in flight on the first stage */
    double params_on_first_stage;  /* num_parameters_on_most_loaded_model_shard */
} ms_megatron_memory;
MS_API ms_status ms_megatron_theoretical_memory(const ms_scenario *sc, ms_megatron_memory *out);

#ifdef __cplusplus
}
#endif
#endif
