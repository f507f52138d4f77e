/* The dense transformer model as the workload builder sees it (private to
 * core/workload*.c and core/model_math.c).
 *
 * wm holds one build: the scenario's shapes per rank, the names of the
 * modules for the architecture (MindFormers' for llama, Megatron-core's for
 * gpt), the persistent tensors (weights, fp32 main grads, optimizer state) by
 * parameter group, and the builder the ops go to. */
#ifndef MEMSIM_WORKLOAD_MODEL_H
#define MEMSIM_WORKLOAD_MODEL_H

#include <stdbool.h>
#include <stdint.h>

#include "workload_build.h"

/* Module and op names of one architecture, relative to "layers.N.". */
typedef struct wm_names {
    const char *norm1, *norm1_op;       /* attention norm: module, op */
    const char *attn_in;                /* column-parallel input side (gathers) */
    const char *qkv, *qkv_op;           /* gpt: fused linear_qkv */
    const char *q, *q_op, *k, *k_op, *v, *v_op; /* llama: separate projections */
    const char *rope;
    const char *core;                   /* attention core segment */
    const char *flash, *qk, *softmax, *attn_dropout, *av;
    const char *proj, *proj_op;         /* row-parallel output projection */
    const char *res1;                   /* residual (+ dropout) after attention */
    const char *norm2, *norm2_op;
    const char *mlp_in;
    const char *fc1, *fc1_op, *fc3, *fc3_op;
    const char *act_seg, *act_op, *mul;
    const char *fc2, *fc2_op;
    const char *res2;
    /* Outside the layers. */
    const char *embed, *embed_op, *embed_w, *pos, *embed_dropout;
    const char *final_norm, *final_norm_op;
    const char *head, *head_op;
    const char *loss;
} wm_names;

/* A weight with its fp32 main grad (Megatron's grad buffer). */
typedef struct wm_param {
    uint32_t w, g;
    uint64_t params; /* on this rank */
} wm_param;

#define WM_GROUP_MAX 10

/* A parameter group: the unit of the DP grad collective and of one
 * multi-tensor Adam launch (a layer, the embedding, the head). */
typedef struct wm_group {
    char name[48];
    int32_t layer;
    wm_param p[WM_GROUP_MAX];
    int n;
    uint64_t params;
    uint32_t master, exp_avg, exp_avg_sq; /* master is WB_NO_TENSOR for fp32 models */
} wm_group;

typedef struct wm_layer_params {
    wm_param norm1, qkv, q, k, v, proj, norm2, fc1, fc3, fc2;
} wm_layer_params;

/* What a layer's forward leaves for its backward. */
typedef struct wm_saved {
    uint32_t x, n1, qkv, q, k, v, qr, kr, probs, mask_a, probs_d, ctx, lse;
    uint32_t mask1, res1, n2, fc1, fc3, act, so, mask2, out;
} wm_saved;

typedef struct wm {
    wb *b;
    const ms_scenario *sc;
    wm_names nm;
    /* Shapes on this rank. */
    uint64_t s, mb, h, a, g, d, f, V, t, dp;
    uint64_t rows;     /* tokens of a micro-batch the TP group shares: s * mbs */
    uint64_t rows_act; /* tokens of norm / residual / dropout tensors: rows / t with SP */
    uint64_t es;       /* bytes per element of activations and weights */
    ms_dtype dt;
    bool llama, sp, flash, swiglu, rms, rope, bias;
    bool attn_drop, hidden_drop;
    int tp_group, dp_group;
    ms_link_kind tp_link, dp_link;
    /* Pipeline. */
    int stage, n_stages, layer0, n_layers, micro_batches;
    bool first, last;
    /* Persistent tensors. */
    wm_group *group;     /* embedding, layers, final norm, head (those on this stage) */
    int n_groups;
    wm_layer_params *lp; /* per local layer */
    wm_param word, pos, final_norm, head;
    int g_embed, g_final, g_head, g_layer0; /* group indices, -1 if absent */
    uint32_t grad_norm;
    char name[256];      /* scratch for op names */
} wm;

/* An op's input list written inline: WM_IN(a, b) -> array, count. */
#define WM_IN(...) ((const uint32_t[]){__VA_ARGS__}), \
                   (uint32_t)(sizeof((const uint32_t[]){__VA_ARGS__}) / sizeof(uint32_t))

/* workload_ops.c: op emission in the model's terms. */
const char *wm_name(wm *m, const char *module, const char *suffix);
uint32_t wm_matmul(wm *m, const char *name, uint32_t x, const wm_param *w, uint64_t M, uint64_t N,
                   uint64_t K);
uint32_t wm_matmul_bwd(wm *m, const char *name, uint32_t dy, uint32_t x, const wm_param *w,
                       uint64_t M, uint64_t N, uint64_t K, uint32_t acc);
uint32_t wm_elementwise(wm *m, const char *name, const char *kname, ms_kernel_class cls,
                        const uint32_t *in, uint32_t n_in, double elems, double flops_per_elem);
uint32_t wm_collective(wm *m, const char *name, ms_comm_kind kind, int group, ms_link_kind link,
                       uint32_t in, uint64_t out_bytes, ms_tensor_kind out_kind);
void wm_collective_inplace(wm *m, const char *name, ms_comm_kind kind, int group,
                           ms_link_kind link, const uint32_t *ts, uint32_t n, double comm_bytes);
uint64_t wm_bytes(const wm *m, uint32_t t);
uint64_t wm_act_bytes(const wm *m); /* one [rows_act x h] activation */
uint32_t wm_norm(wm *m, const char *op, uint32_t x, const wm_param *w);
uint32_t wm_norm_bwd(wm *m, const char *op, uint32_t x, const wm_param *w, uint32_t dy,
                     uint32_t d_residual);
uint32_t wm_dropout_bwd(wm *m, const char *name, uint32_t dy, uint32_t mask);
/* Tensor parallelism around column- and row-parallel blocks (see
 * workload_ops.c); each is the identity where it does not apply. */
uint32_t wm_gather(wm *m, const char *name, uint32_t x, ms_tensor_kind kind);
uint32_t wm_gather_in(wm *m, const char *module, uint32_t x);
uint32_t wm_reduce_in_grad(wm *m, const char *module, uint32_t dx);
uint32_t wm_reduce_out(wm *m, const char *module, uint32_t y);
uint32_t wm_gather_out_grad(wm *m, const char *module, uint32_t dy);

/* workload_layer.c */
uint32_t wm_layer_forward(wm *m, int local, uint32_t x, wm_saved *sv);
uint32_t wm_layer_backward(wm *m, int local, const wm_saved *sv, uint32_t d_out);

/* workload_optimizer.c */
ms_status wm_params_create(wm *m);
void wm_params_release(wm *m);
void wm_grad_reduce(wm *m, int group);
void wm_optimizer(wm *m);

/* model_math.c: parameter counts of the whole (unsharded) model. */
typedef struct wm_counts {
    uint64_t norm;      /* one norm's weights (+ bias for LayerNorm) */
    uint64_t q, kv;     /* h x h and h x (groups * head_dim), each (+ bias) */
    uint64_t proj;
    uint64_t fc1, fc2;  /* fc1 includes the gate half for SwiGLU (w1 and w3) */
    uint64_t layer;
    uint64_t word, pos, head;
} wm_counts;
void wm_count(const ms_model_config *m, wm_counts *c);

#endif
