/* The transformer model as the workload builder sees it (private to
 * lib/workload/).
 *
 * wm holds one build: the scenario's shapes per rank, the names of the
 * modules for the architecture (MindFormers' for llama, Megatron-core's for
 * gpt), the persistent tensors (weights, fp32 main grads, optimizer state) by
 * parameter group, the pipeline schedule of the stage, and the builder the
 * ops go to. */
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

/* Names of one MLP's modules and ops (the dense MLP or one expert),
 * relative to "layers.N.". */
typedef struct wm_ffn_names {
    char fc1[96], fc1_op[112], fc3[96], fc3_op[112];
    char act_seg[112], act_op[128], mul[112], fc2[96], fc2_op[112];
} wm_ffn_names;

/* What one MLP's activation keeps for backward. */
typedef struct wm_ffn_saved {
    uint32_t fc1, fc3, so, act;
    uint32_t act8; /* what fc2 reads and keeps: act, or its FP8 copy */
} wm_ffn_saved;

/* A weight with its main grad (Megatron's grad buffer); with FP8, a
 * linear layer's weight also has its FP8 copy and that copy's transpose
 * (w8, one tensor: Transformer Engine keeps both for Hopper's FP8 GEMMs,
 * which read only the "TN" layout), else w8 is WB_NO_TENSOR. */
typedef struct wm_param {
    uint32_t w, g, w8;
    uint64_t params; /* on this rank */
} wm_param;

#define WM_GROUP_MAX 10

/* A parameter group: the unit of the DP grad collective and of one
 * multi-tensor Adam launch (a layer, one expert of a layer, the embedding,
 * the head).  Its grads are reduced over, and the distributed optimizer
 * shards its state over, `dp` ranks (experts: the expert-data-parallel
 * group). */
/* Which of Megatron's groups a collective runs over, for where its ranks
 * sit (ranks_per_node): two groups of one size are not one group (TP 2 and
 * DP 2, or TP 2 and the pipeline's embedding pair). */
typedef enum wl_group_kind {
    WL_GROUP_TP,        /* consecutive ranks */
    WL_GROUP_DP,        /* data and context parallel (the grads' group): every tp-th rank */
    WL_GROUP_EP,        /* expert parallel: every tp-th rank (taken from the DP ranks) */
    WL_GROUP_EXPERT_DP, /* expert data parallel: every (tp x ep)-th rank */
    WL_GROUP_OTHER      /* counted one rank a node */
} wl_group_kind;

typedef struct wl_group {
    int size;
    wl_group_kind kind;
} wl_group;

typedef struct wm_group {
    char name[64];
    int32_t layer;
    int32_t chunk;
    wm_param p[WM_GROUP_MAX];
    int n;
    uint64_t params;
    uint64_t dp;
    ms_link_kind dp_link;
    wl_group_kind dp_kind;                /* the data-parallel group, or an expert one */
    uint32_t master, exp_avg, exp_avg_sq; /* master is WB_NO_TENSOR for fp32 models */
} wm_group;

typedef struct wm_expert_params {
    wm_param fc1, fc3, fc2;
} wm_expert_params;

typedef struct wm_layer_params {
    wm_param norm1, qkv, q, k, v, proj, norm2, fc1, fc3, fc2, router;
    wm_expert_params *ex; /* local experts (MoE), else NULL */
} wm_layer_params;

/* What a layer's forward leaves for its backward. */
typedef struct wm_saved {
    uint32_t x, n1, qkv, q, k, v, qr, kr, probs, mask_a, probs_d, ctx, lse;
    uint32_t ctx8; /* what the output projection reads and keeps: ctx, or its FP8 copy */
    uint32_t mask1, res1, n2, mask2, out;
    wm_ffn_saved ffn;     /* the dense MLP */
    /* MoE: router probabilities and routing map, the tokens the local
     * experts read (all of them, one buffer) and the combined expert output
     * the unpermute weighs by the probabilities. */
    uint32_t rprobs, rmap, xin, comb;
    wm_ffn_saved *ex;     /* per local expert; owned by the build */
} wm_saved;

typedef struct wm {
    wb *b;
    const ms_scenario *sc;
    wm_names nm;
    wm_ffn_names ffn;  /* the dense MLP */
    /* Shapes on this rank. */
    uint64_t s, mb, h, a, g, d, f, V, t;
    uint64_t dp;       /* ranks a dense grad is reduced over: DP x CP (Megatron's dp-cp group) */
    uint64_t c;        /* context parallel size */
    uint64_t sq;       /* tokens of one sequence on this rank: s / c */
    uint64_t rows;     /* tokens of a micro-batch the TP group shares: sq * mbs */
    uint64_t rows_act; /* tokens of norm / residual / dropout tensors: rows / t with SP */
    uint64_t es;       /* bytes per element of activations and weights */
    ms_dtype dt;
    bool llama, sp, flash, swiglu, rms, rope, bias;
    bool attn_drop, hidden_drop;
    bool fp8;          /* the layers' linear layers run FP8 GEMMs (model.fp8) */
    /* parallel.tp_comm_overlap: the bytes of an all-gather held for the next
     * GEMM (0: none). */
    bool tp_overlap;
    double held_gather;
    int tp_group, dp_group, cp_group;
    ms_link_kind tp_link, dp_link, cp_link;
    /* Pipeline: chunk c of this stage holds chunk_count[c] layers from
     * global layer chunk_first[c] (Megatron: (c * n_stages + stage) * L/(p v);
     * MindFormers' offset moves layers), local indices from chunk_local0[c];
     * n_layers in all, at most max_lv in a chunk. */
    int stage, n_stages, n_layers, chunks, max_lv, micro_batches;
    int *chunk_first, *chunk_count, *chunk_local0;
    ms_link_kind link_prev, link_next; /* to stage - 1 and stage + 1 (mod p) */
    bool first, last;  /* holds the embedding (chunk 0) / the head (last chunk) */
    /* Mixture of experts (moe false: dense MLP). */
    bool moe;
    uint64_t E, topk, fe, ep, n_local; /* experts, top-k, expert ffn, EP size, experts here */
    uint64_t moe_tokens;   /* tokens routed on this rank: rows_act */
    uint64_t moe_rows_ep;  /* rows dispatched to (and received by) this rank */
    uint64_t moe_rows;     /* rows the local experts read: moe_rows_ep x t */
    double moe_useful;     /* fraction of expert rows that count as model FLOPs */
    uint64_t edp;          /* expert-data-parallel ranks: DP x CP / EP */
    int ep_group;
    ms_link_kind ep_link, edp_link;
    /* Persistent tensors. */
    wm_group *group;     /* embedding, layers (+ experts), final norm, head (those here) */
    int n_groups;
    wm_layer_params *lp; /* per local layer */
    wm_expert_params *ex_params; /* n_layers x n_local */
    int *g_layer;        /* per local layer: its dense group; experts follow it */
    wm_param word, pos, final_norm, head;
    int g_embed, g_final, g_head; /* group indices, -1 if absent */
    uint32_t grad_norm;
    char name[256];      /* scratch for op names */
} wm;

/* The global layer number of local layer `local` (chunk-major). */
int wl_global_layer(const wm *m, int local);
/* The layers of each chunk of the stage (ms_scenario_chunk_layers); frees
 * with wl_layout_release. */
ms_status wl_layout(wm *m, const ms_scenario *sc, int stage);
void wl_layout_release(wm *m);

/* An op's input list written inline: WM_IN(a, b) -> array, count. */
#define WM_IN(...) ((const uint32_t[]){__VA_ARGS__}), \
                   (uint32_t)(sizeof((const uint32_t[]){__VA_ARGS__}) / sizeof(uint32_t))

/* workload_ops.c: op emission in the model's terms. */
const char *wl_name(wm *m, const char *module, const char *suffix);
uint32_t wl_matmul(wm *m, const char *name, uint32_t x, const wm_param *w, uint64_t M, uint64_t N,
                   uint64_t K);
uint32_t wl_matmul_bwd(wm *m, const char *name, uint32_t dy, uint32_t x, const wm_param *w,
                       uint64_t M, uint64_t N, uint64_t K, uint32_t acc);
uint32_t wl_elementwise(wm *m, const char *name, const char *kname, ms_kernel_class cls,
                        const uint32_t *in, uint32_t n_in, double elems, double flops_per_elem);
uint32_t wl_collective(wm *m, const char *name, ms_comm_kind kind, wl_group group,
                       ms_link_kind link, uint32_t in, uint64_t out_bytes, ms_tensor_kind out_kind);
void wl_collective_inplace(wm *m, const char *name, ms_comm_kind kind, wl_group group,
                           ms_link_kind link, const uint32_t *ts, uint32_t n, double comm_bytes);
/* The tensor-parallel group. */
wl_group wl_tp_group(const wm *m);
/* Ranks of group on one node when link crosses nodes (1 on one node). */
int wl_ranks_per_node(const wm *m, wl_group group, ms_link_kind link);
uint64_t wl_bytes(const wm *m, uint32_t t);
uint64_t wl_act_bytes(const wm *m); /* one [rows_act x h] activation */
uint32_t wl_norm(wm *m, const char *op, uint32_t x, const wm_param *w);
/* A norm in front of a linear layer: with FP8 it writes the FP8 input of
 * the GEMM (TE's LayerNormLinear fuses the cast). */
uint32_t wl_norm_to_linear(wm *m, const char *op, uint32_t x, const wm_param *w);
/* The input of a linear layer as its GEMM reads it and its backward keeps
 * it: x, or with FP8 a cast kernel's one-byte copy (TE casts the input of
 * a row-parallel linear layer itself). */
uint32_t wl_fp8_input(wm *m, const char *module, uint32_t x);
uint32_t wl_norm_bwd(wm *m, const char *op, uint32_t x, const wm_param *w, uint32_t dy,
                     uint32_t d_residual);
uint32_t wl_dropout_bwd(wm *m, const char *name, uint32_t dy, uint32_t mask);
/* Tensor parallelism around column- and row-parallel blocks (see
 * workload_ops.c); each is the identity where it does not apply. */
uint32_t wl_gather(wm *m, const char *name, uint32_t x, ms_tensor_kind kind);
uint32_t wl_gather_in(wm *m, const char *module, uint32_t x);
/* Backward of a column-parallel block: its saved input shard gathered
 * again for the weight grad. */
uint32_t wl_regather_in(wm *m, const char *module, uint32_t x);
uint32_t wl_reduce_in_grad(wm *m, const char *module, uint32_t dx);
uint32_t wl_reduce_out(wm *m, const char *module, uint32_t y);
uint32_t wl_gather_out_grad(wm *m, const char *module, uint32_t dy);

/* workload_layer.c */
uint32_t wl_layer_forward(wm *m, int local, uint32_t x, wm_saved *sv);
uint32_t wl_layer_backward(wm *m, int local, const wm_saved *sv, uint32_t d_out);
uint32_t wl_residual_fwd(wm *m, const char *op, uint32_t branch, uint32_t x, uint32_t *mask);
uint32_t wl_residual_bwd(wm *m, const char *op, uint32_t dy, uint32_t mask);
/* MLP pieces shared by the dense MLP and the experts: names under a module
 * prefix ("feed_forward.", "mlp.experts.local_experts.3."), the activation
 * (a recompute segment) and its backward, over rows x width. */
void wl_ffn_names_init(const wm *m, wm_ffn_names *fn, const char *prefix);
void wl_ffn_act_fwd(wm *m, const wm_ffn_names *fn, uint64_t rows, uint64_t width, wm_ffn_saved *fs);
void wl_ffn_act_bwd(wm *m, const wm_ffn_names *fn, uint64_t rows, uint64_t width,
                    const wm_ffn_saved *fs, uint32_t d_act, uint32_t *d_fc1, uint32_t *d_fc3);

/* workload_cp.c: ring attention over the context-parallel group (flash
 * attention on K/V blocks passed around the ring). */
void wl_cp_core_fwd(wm *m, wm_saved *sv);
/* Fills grads[0..2] (of sv->q, k, v; shared sources share one grad). */
void wl_cp_core_bwd(wm *m, const wm_saved *sv, uint32_t d_ctx, uint32_t grads[3]);

/* workload_moe.c: the MoE MLP after the second norm (router, top-k,
 * all-to-all dispatch, experts, combine); returns its [rows_act x h]
 * output, and the grad of its input. */
uint32_t wl_moe_fwd(wm *m, const wm_layer_params *p, wm_saved *sv);
uint32_t wl_moe_bwd(wm *m, const wm_layer_params *p, const wm_saved *sv, uint32_t d_y);
void wl_moe_shapes(wm *m);

/* workload_pipeline.c: the stage's schedule and the p2p between stages. */
typedef struct wm_step {
    bool forward;
    int32_t micro_batch, chunk;
} wm_step;
/* The stage's 2 x m x v steps in Megatron's order (1F1B, or interleaved
 * when v > 1). */
void wl_schedule(int p, int stage, int m, int v, wm_step *out);
ms_link_kind wl_stage_link(const ms_scenario *sc, int a, int b);
/* Receive (returns the new tensor) or send t for the current micro-batch
 * and chunk; forward: activations, else grads. */
uint32_t wl_p2p(wm *m, bool send, bool forward, uint32_t t);
/* What a p2p tag of micro-batch `from` adds to become micro-batch `to`'s. */
int wl_p2p_tag_shift(const wm *m, int from, int to);

/* ms_program_build, with or without later micro-batches copied from the
 * first (wl_build_repeat); the programs are the same (test_workload_repeat). */
ms_status wl_program_build(const ms_scenario *sc, int stage, bool repeat, ms_program **out,
                           ms_diag *d);

/* workload_check.c: the scenario's sizes, checked before building (bad
 * input gets an error naming the field and the constraint). */
ms_status wl_check_scenario(const ms_scenario *sc, int stage, ms_diag *d);

/* workload_optimizer.c */
ms_status wl_params_create(wm *m);
void wl_params_release(wm *m);
void wl_grad_reduce(wm *m, int group);
/* With parallel.overlap_param_gather, group gi's parameter all-gather (and
 * FP8 weight cast) where its first forward reads it; else nothing. */
void wl_param_refresh(wm *m, int gi);
/* The grad collectives of local layer `local` (its dense group and its experts). */
void wl_layer_grad_reduce(wm *m, int local);
void wl_optimizer(wm *m);

/* model_math.c: parameter counts of the whole (unsharded) model. */
typedef struct wm_counts {
    uint64_t norm;      /* one norm's weights (+ bias for LayerNorm) */
    uint64_t q, kv;     /* h x h and h x (groups * head_dim), each (+ bias) */
    uint64_t proj;
    uint64_t fc1, fc2;  /* fc1 includes the gate half for SwiGLU (w1 and w3); 0 with MoE */
    uint64_t router;    /* MoE: h x E */
    uint64_t efc1, efc2;/* MoE: one expert's fc1 (with gate) and fc2 */
    uint64_t layer;     /* all of one layer (every expert) */
    uint64_t layer_active; /* what one token uses: the router and top-k experts */
    uint64_t word, pos, head;
} wm_counts;
void wl_count(const ms_model_config *m, wm_counts *c);
/* The expert MLP width: moe_ffn_hidden_size, or ffn_hidden_size if 0. */
uint64_t wl_expert_ffn(const ms_model_config *m);

#endif
