/* Parameters and the optimizer: the persistent tensors of one rank and the
 * ops that reduce grads over data parallelism and apply Adam.
 *
 * Mixed precision as Megatron does it: 16-bit weights (2 bytes a parameter),
 * fp32 main grads in the grad buffer (4), fp32 master weights and Adam's two
 * moments (12): 18 bytes a parameter; with the distributed optimizer the 12
 * are sharded over the DP group (6 + 12/DP).  An fp32 model has no separate
 * master copy (16 bytes).  Parameters come in groups (the embedding, each
 * layer, the final norm, the output layer): one DP collective and one
 * multi-tensor Adam launch per group. */
#include "workload_model.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define ADAM_FLOPS_PER_PARAM 12.0

static wm_group *group_new(wm *m, const char *name, int32_t layer)
{
    wm_group *g = &m->group[m->n_groups++];
    memset(g, 0, sizeof *g);
    snprintf(g->name, sizeof g->name, "%s", name);
    g->layer = layer;
    g->dp = m->dp;
    g->dp_link = m->dp_link;
    g->dp_kind = WL_GROUP_DP;
    g->master = g->exp_avg = g->exp_avg_sq = WB_NO_TENSOR;
    return g;
}

/* The main grads: fp32, or the model's dtype without grad_reduce_in_fp32. */
static ms_dtype grad_dtype(const wm *m)
{
    return m->sc->parallel.grads_in_model_dtype ? m->dt : MS_DTYPE_FP32;
}

static uint64_t grad_size(const wm *m)
{
    return ms_dtype_size(grad_dtype(m));
}

/* A weight of `params` parameters on this rank, with its main grad. */
static wm_param param_new(wm *m, wm_group *g, const char *module, uint64_t params)
{
    wm_param p = {.params = params, .w8 = WB_NO_TENSOR};
    if (g->n >= WM_GROUP_MAX) {
        m->b->err = MS_EINTERNAL;
        return p;
    }
    const char *pre = g->layer != MS_NONE ? g->name : "";
    const char *dot = g->layer != MS_NONE ? "." : "";
    p.w = wl_build_persistent(m->b, params * m->es, m->dt, MS_TK_WEIGHT, g->layer, "%s%s%s.weight",
                              pre, dot, module);
    p.g = wl_build_persistent(m->b, params * grad_size(m), grad_dtype(m), MS_TK_GRAD, g->layer,
                              "%s%s%s.main_grad", pre, dot, module);
    g->p[g->n++] = p;
    g->params += params;
    return p;
}

/* A linear layer's weight (+ bias_elems of bias on this rank); with FP8
 * also the persistent FP8 copy and transpose of its weight matrix, which
 * Transformer Engine keeps between micro-batches (is_first_microbatch) and
 * refreshes after each optimizer step. */
static wm_param linear_new(wm *m, wm_group *g, const char *module, uint64_t params,
                           uint64_t bias_elems)
{
    wm_param p = param_new(m, g, module, params);
    if (m->fp8 && g->n > 0)
        g->p[g->n - 1].w8 = p.w8 =
            wl_build_persistent(m->b, 2 * (params - bias_elems), MS_DTYPE_FP8, MS_TK_WEIGHT,
                                g->layer, "%s.%s.weight_fp8", g->name, module);
    return p;
}

static uint64_t shard(const wm *m, const wm_group *g)
{
    return m->sc->parallel.use_distributed_optimizer ? (g->params + g->dp - 1) / g->dp
                                                     : g->params;
}

static void group_state(wm *m, wm_group *g)
{
    uint64_t bytes = shard(m, g) * 4;
    if (m->dt != MS_DTYPE_FP32)
        g->master = wl_build_persistent(m->b, bytes, MS_DTYPE_FP32, MS_TK_OPTIMIZER_STATE, g->layer,
                                        "optimizer.%s.main_param", g->name);
    g->exp_avg = wl_build_persistent(m->b, bytes, MS_DTYPE_FP32, MS_TK_OPTIMIZER_STATE, g->layer,
                                     "optimizer.%s.exp_avg", g->name);
    g->exp_avg_sq = wl_build_persistent(m->b, bytes, MS_DTYPE_FP32, MS_TK_OPTIMIZER_STATE, g->layer,
                                        "optimizer.%s.exp_avg_sq", g->name);
}

/* One expert of a MoE layer: its own group, since its grads are reduced
 * over the expert-data-parallel ranks (DP x CP / EP), not the DP group, and
 * the distributed optimizer shards it over those.  Split over TP like the
 * dense MLP (Megatron's expert tensor parallel size defaults to TP). */
static void expert_params(wm *m, int local, int e, const wm_counts *c)
{
    char prefix[96], name[160];
    int layer = wl_global_layer(m, local);
    snprintf(prefix, sizeof prefix, "%s%d", m->llama ? "feed_forward.experts."
                                                     : "mlp.experts.local_experts.", e);
    snprintf(name, sizeof name, "layers.%d.%s", layer, prefix);
    wm_group *g = group_new(m, name, layer);
    g->dp = m->edp;
    g->dp_link = m->edp_link;
    /* Without expert parallelism the expert group is the DP group. */
    g->dp_kind = m->edp == m->dp ? WL_GROUP_DP : WL_GROUP_EXPERT_DP;
    wm_expert_params *ep = &m->lp[local].ex[e];
    uint64_t t = m->t, hb = m->bias ? m->h : 0;
    if (m->llama && m->swiglu) {
        ep->fc1 = param_new(m, g, "w1", c->efc1 / 2 / t);
        ep->fc3 = param_new(m, g, "w3", c->efc1 / 2 / t);
    } else {
        ep->fc1 = param_new(m, g, m->llama ? "w1" : "linear_fc1", c->efc1 / t);
    }
    ep->fc2 = param_new(m, g, m->llama ? "w2" : "linear_fc2", (c->efc2 - hb) / t + hb);
    group_state(m, g);
}

/* One layer's weights on a TP rank: column-parallel weights and biases split
 * over t; row-parallel weights split, their biases and the norms whole.  A
 * MoE layer has the router (h x E, whole on every rank, as Megatron's
 * TopKRouter) in place of the MLP, and its experts in groups of their own. */
static void layer_params(wm *m, int local, const wm_counts *c)
{
    char name[48];
    int layer = wl_global_layer(m, local);
    snprintf(name, sizeof name, "layers.%d", layer);
    m->g_layer[local] = m->n_groups;
    wm_group *g = group_new(m, name, layer);
    const wm_names *nm = &m->nm;
    wm_layer_params *lp = &m->lp[local];
    uint64_t t = m->t, hb = m->bias ? m->h : 0, b = m->bias ? 1 : 0;
    uint64_t qw = m->h / t, kvw = m->g * m->d / t, fw = m->f / t;
    lp->norm1 = param_new(m, g, nm->norm1, c->norm);
    if (m->llama) {
        lp->q = linear_new(m, g, nm->q, c->q / t, b * qw);
        lp->k = linear_new(m, g, nm->k, c->kv / t, b * kvw);
        lp->v = linear_new(m, g, nm->v, c->kv / t, b * kvw);
    } else {
        lp->qkv = linear_new(m, g, nm->qkv, (c->q + 2 * c->kv) / t, b * (qw + 2 * kvw));
    }
    lp->proj = linear_new(m, g, nm->proj, (c->proj - hb) / t + hb, hb);
    lp->norm2 = param_new(m, g, nm->norm2, c->norm);
    if (m->moe) {
        lp->router = param_new(m, g, m->llama ? "feed_forward.router" : "mlp.router", c->router);
    } else if (m->llama && m->swiglu) {
        lp->fc1 = linear_new(m, g, nm->fc1, c->fc1 / 2 / t, b * fw);
        lp->fc3 = linear_new(m, g, nm->fc3, c->fc1 / 2 / t, b * fw);
        lp->fc2 = linear_new(m, g, nm->fc2, (c->fc2 - hb) / t + hb, hb);
    } else {
        uint64_t up = m->swiglu ? 2 * fw : fw;
        lp->fc1 = linear_new(m, g, nm->fc1, c->fc1 / t, b * up);
        lp->fc2 = linear_new(m, g, nm->fc2, (c->fc2 - hb) / t + hb, hb);
    }
    group_state(m, g);
    for (int e = 0; m->moe && e < (int)m->n_local; e++)
        expert_params(m, local, e, c);
}

/* --tp-comm-overlap's buffers: Transformer Engine's initialize_ub makes one
 * [tokens x hidden] buffer (a micro-batch's tokens on the rank's context-
 * parallel slice) for each of its ten overlapped GEMM sides (qkv/fc1
 * fprop, dgrad, wgrad; proj/fc2 fprop and dgrad), kept for the whole run;
 * counted here in 16 bits. */
#define TE_USERBUFFERS 10

static void userbuffers(wm *m)
{
    if (!m->tp_overlap)
        return;
    wl_build_persistent(m->b, TE_USERBUFFERS * m->rows * m->h * m->es, m->dt, MS_TK_COMM_BUFFER,
                        MS_NONE, "transformer_engine.userbuffers");
}

ms_status wl_params_create(wm *m)
{
    wm_counts c;
    wl_count(&m->sc->model, &c);
    size_t n_local = m->moe ? (size_t)m->n_local : 0;
    m->group = calloc((size_t)m->n_layers * (1 + n_local) + 3, sizeof *m->group);
    m->lp = calloc((size_t)m->n_layers + 1, sizeof *m->lp);
    m->g_layer = calloc((size_t)m->n_layers + 1, sizeof *m->g_layer);
    if (n_local)
        m->ex_params = calloc((size_t)m->n_layers * n_local, sizeof *m->ex_params);
    if (m->group == NULL || m->lp == NULL || m->g_layer == NULL ||
        (n_local && m->ex_params == NULL))
        return MS_ENOMEM;
    for (int l = 0; n_local && l < m->n_layers; l++)
        m->lp[l].ex = m->ex_params + (size_t)l * n_local;
    m->g_embed = m->g_final = m->g_head = -1;
    const wm_names *nm = &m->nm;
    if (m->first) {
        m->g_embed = m->n_groups;
        wm_group *g = group_new(m, "embedding", MS_NONE);
        m->word = param_new(m, g, nm->embed, c.word / m->t); /* vocab-parallel */
        if (!m->rope)
            m->pos = param_new(m, g, nm->pos, c.pos);
        group_state(m, g);
    }
    for (int l = 0; l < m->n_layers; l++)
        layer_params(m, l, &c);
    if (m->last) {
        m->g_final = m->n_groups;
        wm_group *g = group_new(m, "final_norm", MS_NONE);
        m->final_norm = param_new(m, g, nm->final_norm, c.norm);
        group_state(m, g);
        /* Tied embeddings share the word embedding on a single stage; a last
         * stage of a pipeline holds its own copy (Megatron). */
        if (m->sc->model.untie_embeddings || !m->first) {
            m->g_head = m->n_groups;
            g = group_new(m, "output_layer", MS_NONE);
            m->head = param_new(m, g, nm->head, c.word / m->t);
            group_state(m, g);
        } else {
            m->head = m->word;
        }
    }
    userbuffers(m);
    return m->b->err;
}

void wl_params_release(wm *m)
{
    free(m->group);
    free(m->lp);
    free(m->g_layer);
    free(m->ex_params);
    m->group = NULL;
    m->lp = NULL;
    m->g_layer = NULL;
    m->ex_params = NULL;
}

static void group_ids(const wm_group *g, uint32_t *out, bool grads)
{
    for (int i = 0; i < g->n; i++)
        out[i] = grads ? g->p[i].g : g->p[i].w;
}

/* The DP grad collective of one group, issued as soon as the last
 * micro-batch's backward has finished with it (Megatron's overlapped
 * bucket reduction), or after the whole backward without overlap
 * (reduce_after_backward); the grad buffer is reduced in place. */
void wl_grad_reduce(wm *m, int gi)
{
    if (gi < 0 || m->b->err != MS_OK || m->group[gi].dp <= 1)
        return;
    const wm_group *g = &m->group[gi];
    uint32_t ids[WM_GROUP_MAX];
    group_ids(g, ids, true);
    bool dist = m->sc->parallel.use_distributed_optimizer;
    char name[160];
    snprintf(name, sizeof name, "%s.grads.%s", g->name, dist ? "reduce_scatter" : "all_reduce");
    wl_collective_inplace(m, name, dist ? MS_COMM_REDUCE_SCATTER : MS_COMM_ALLREDUCE,
                          (wl_group){(int)g->dp, g->dp_kind}, g->dp_link, ids, (uint32_t)g->n,
                          (double)(g->params * grad_size(m)));
}

void wl_layer_grad_reduce(wm *m, int local)
{
    wl_grad_reduce(m, m->g_layer[local]);
    for (int e = 0; m->moe && e < (int)m->n_local; e++)
        wl_grad_reduce(m, m->g_layer[local] + 1 + e);
}

/* Tied embeddings across a pipeline: the first stage's word embedding and
 * the last stage's output layer are one parameter, their grads summed over
 * the two stages after the DP reduction (Megatron's finalize_model_grads,
 * _allreduce_word_embedding_grads). */
static void embedding_group_reduce(wm *m)
{
    if (m->sc->model.untie_embeddings || m->n_stages == 1 || !(m->first || m->last))
        return;
    const wm_param *p = m->first ? &m->word : &m->head;
    char name[160];
    snprintf(name, sizeof name, "%s.grads.embedding_group.all_reduce",
             m->first ? m->nm.embed : m->nm.head);
    wl_collective_inplace(m, name, MS_COMM_ALLREDUCE, (wl_group){2, WL_GROUP_OTHER},
                          wl_stage_link(m->sc, 0, m->n_stages - 1), &p->g, 1,
                          (double)(p->params * grad_size(m)));
}

/* A scalar of the grads (their norm, the found-inf flag) is summed over
 * the model-parallel group (and the DP group whose shards the distributed
 * optimizer holds). */
static void stats_reduce(wm *m, const char *name, uint32_t scalar)
{
    int group = m->tp_group * m->n_stages;
    if (m->sc->parallel.use_distributed_optimizer)
        group *= m->dp_group;
    /* One stage without the distributed optimizer: the TP group itself. */
    wl_group_kind kind = group == m->tp_group ? WL_GROUP_TP : WL_GROUP_OTHER;
    if (group > 1)
        wl_collective_inplace(m, name, MS_COMM_ALLREDUCE, (wl_group){group, kind},
                              group <= m->sc->device.devices_per_node ? MS_LINK_INTRA_NODE
                                                                      : MS_LINK_INTER_NODE,
                              &scalar, 1, 4);
}

/* The main grads of every group, in group order, into a new array. */
static uint32_t *all_grad_ids(wm *m, uint32_t *n_out)
{
    uint32_t n = 0;
    for (int gi = 0; gi < m->n_groups; gi++)
        n += (uint32_t)m->group[gi].n;
    uint32_t *ids = malloc((n ? n : 1) * sizeof *ids);
    if (ids == NULL) {
        m->b->err = MS_ENOMEM;
        return NULL;
    }
    uint32_t k = 0;
    for (int gi = 0; gi < m->n_groups; gi++) {
        group_ids(&m->group[gi], ids + k, true);
        k += (uint32_t)m->group[gi].n;
    }
    *n_out = n;
    return ids;
}

/* Parameters of this rank's optimizer shards, all groups. */
static double shard_params(const wm *m)
{
    double params = 0;
    for (int gi = 0; gi < m->n_groups; gi++)
        params += (double)shard(m, &m->group[gi]);
    return params;
}

/* fp16 trains with a dynamic loss scale: before the norm, Megatron's
 * MixedPrecisionOptimizer unscales the main grads and checks them for
 * inf/nan in one pass (torch._amp_foreach_non_finite_check_and_unscale_:
 * every fp32 main grad read and written), then all-reduces the found-inf
 * flag.  bf16 has no grad scaler, so no such pass. */
static void unscale_grads(wm *m)
{
    if (m->dt != MS_DTYPE_FP16)
        return;
    uint32_t n = 0;
    uint32_t *ids = all_grad_ids(m, &n);
    if (ids == NULL)
        return;
    double params = shard_params(m);
    ms_kernel k = {.name = "amp_unscale",
                   .cls = MS_KC_ELEMENTWISE,
                   .dtype = MS_DTYPE_FP32,
                   .flops = params,
                   .bytes = 2.0 * (double)grad_size(m) * params,
                   .peer = -1};
    wl_build_op_add(m->b, &k, 0, ids, n, "optimizer.unscale_grads");
    for (uint32_t i = 0; i < n; i++)
        wl_build_inplace(m->b, ids[i]);
    uint32_t found_inf = wl_build_out(m->b, "found_inf", 4, MS_DTYPE_FP32, MS_TK_TEMP);
    stats_reduce(m, "optimizer.unscale_grads.found_inf.all_reduce", found_inf);
    free(ids);
}

static void grad_norm(wm *m)
{
    uint32_t n = 0;
    uint32_t *ids = all_grad_ids(m, &n);
    if (ids == NULL)
        return;
    double params = shard_params(m);
    ms_kernel kn = {.name = "l2norm", .cls = MS_KC_ELEMENTWISE, .dtype = MS_DTYPE_FP32,
                    .flops = 2 * params, .bytes = (double)grad_size(m) * params, .peer = -1};
    wl_build_op_add(m->b, &kn, 0, ids, n, "optimizer.grad_norm");
    m->grad_norm = wl_build_out(m->b, "out", 4, MS_DTYPE_FP32, MS_TK_TEMP);
    stats_reduce(m, "optimizer.grad_norm.all_reduce", m->grad_norm);
    free(ids);
}

/* Multi-tensor Adam over one group's shard: read the grad, read and write
 * the master weight and both moments, write the 16-bit weight. */
static void adam(wm *m, const wm_group *g)
{
    uint32_t in[3 * WM_GROUP_MAX + 4], n = 0;
    group_ids(g, in, true);
    group_ids(g, in + g->n, false);
    n = (uint32_t)(2 * g->n);
    if (g->master != WB_NO_TENSOR)
        in[n++] = g->master;
    in[n++] = g->exp_avg;
    in[n++] = g->exp_avg_sq;
    in[n++] = m->grad_norm;
    double p = (double)shard(m, g);
    double state = g->master != WB_NO_TENSOR ? 3 : 2;
    ms_kernel k = {.name = "adam", .cls = MS_KC_ELEMENTWISE, .dtype = MS_DTYPE_FP32,
                   .flops = ADAM_FLOPS_PER_PARAM * p,
                   .bytes = p * ((double)grad_size(m) + state * 8 + (double)m->es), .peer = -1};
    wl_build_op_add(m->b, &k, 0, in, n, "optimizer.%s.adam", g->name);
    for (uint32_t i = (uint32_t)g->n; i < n - 1; i++)
        wl_build_inplace(m->b, in[i]); /* weights, master, moments */
}

/* The distributed optimizer's all-gather of the updated shards into the
 * whole 16-bit weights. */
static void param_all_gather(wm *m, const wm_group *g, const char *prefix)
{
    if (!m->sc->parallel.use_distributed_optimizer || g->dp <= 1)
        return;
    char name[160];
    snprintf(name, sizeof name, "%s%s.all_gather", prefix, g->name);
    uint32_t w[WM_GROUP_MAX];
    group_ids(g, w, false);
    /* The gathered buffer, every rank's shard: the cost model's B. */
    wl_collective_inplace(m, name, MS_COMM_ALLGATHER, (wl_group){(int)g->dp, g->dp_kind},
                          g->dp_link, w, (uint32_t)g->n,
                          (double)shard(m, g) * (double)g->dp * (double)m->es);
}

/* With FP8 the updated weights are cast (and transposed) once for the next
 * step's micro-batches: one kernel per layer, reading the 16-bit weights
 * and writing their FP8 copies (Megatron's fp8 param path does it after
 * the optimizer; TE without it on the first micro-batch's forward, the
 * same work one step later). */
static void fp8_weight_cast(wm *m, const wm_group *g, const char *prefix)
{
    uint32_t in[2 * WM_GROUP_MAX], n = 0, out[WM_GROUP_MAX], n_out = 0;
    double elems = 0;
    for (int i = 0; i < g->n; i++)
        if (g->p[i].w8 != WB_NO_TENSOR) {
            in[n++] = g->p[i].w;
            out[n_out++] = g->p[i].w8;
            elems += (double)wl_bytes(m, g->p[i].w8) / 2;
        }
    if (n_out == 0)
        return;
    for (uint32_t i = 0; i < n_out; i++)
        in[n++] = out[i];
    ms_kernel k = {.name = "fp8_cast_transpose", .cls = MS_KC_ELEMENTWISE, .dtype = m->dt,
                   .flops = elems, .bytes = elems * ((double)m->es + 2), .peer = -1};
    wl_build_op_add(m->b, &k, 0, in, n, "%s%s.fp8_cast_transpose", prefix, g->name);
    for (uint32_t i = 0; i < n_out; i++)
        wl_build_inplace(m->b, out[i]);
}

static void zero_grads(wm *m)
{
    uint32_t n = 0;
    uint32_t *ids = all_grad_ids(m, &n);
    if (ids == NULL)
        return;
    /* Zeroing the grad buffer for the next step writes it once. */
    ms_kernel kz = {.name = "memset", .cls = MS_KC_ELEMENTWISE, .dtype = MS_DTYPE_FP32,
                    .flops = 0, .bytes = 0, .peer = -1};
    for (int gi = 0; gi < m->n_groups; gi++)
        kz.bytes += (double)grad_size(m) * (double)m->group[gi].params;
    wl_build_op_add(m->b, &kz, 0, ids, n, "optimizer.zero_grad_buffer");
    for (uint32_t i = 0; i < n; i++)
        wl_build_inplace(m->b, ids[i]);
    free(ids);
}

/* Without --overlap-grad-reduce every group's DP reduction waits for the
 * whole backward, as LocalDDP's allreduce_gradients in Megatron's
 * train_step did, before the optimizer reads the grads. */
static void reduce_after_backward(wm *m)
{
    for (int gi = 0; gi < m->n_groups; gi++) {
        m->b->layer = m->group[gi].layer;
        wl_grad_reduce(m, gi);
    }
    m->b->layer = MS_NONE;
}

/* With overlap_param_gather: group gi's weights made whole (and cast to
 * FP8) in the first forward, before their first reader, as Megatron's
 * forward pre-hooks do; the compute waits for each layer's own gather only. */
void wl_param_refresh(wm *m, int gi)
{
    if (gi < 0 || !m->sc->parallel.overlap_param_gather || m->b->err != MS_OK)
        return;
    param_all_gather(m, &m->group[gi], "");
    fp8_weight_cast(m, &m->group[gi], "");
}

void wl_optimizer(wm *m)
{
    m->b->phase = MS_PHASE_OPTIMIZER;
    m->b->micro_batch = MS_NONE;
    m->b->layer = MS_NONE;
    if (!m->sc->parallel.overlap_grad_reduce)
        reduce_after_backward(m);
    embedding_group_reduce(m);
    unscale_grads(m);
    grad_norm(m);
    for (int gi = 0; gi < m->n_groups; gi++) {
        m->b->layer = m->group[gi].layer;
        adam(m, &m->group[gi]);
        if (!m->sc->parallel.overlap_param_gather) {
            param_all_gather(m, &m->group[gi], "optimizer.");
            fp8_weight_cast(m, &m->group[gi], "optimizer.");
        }
    }
    m->b->layer = MS_NONE;
    zero_grads(m);
}
