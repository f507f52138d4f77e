/* A mixture-of-experts MLP as Megatron-core builds it (MoELayer with the
 * TopKRouter and the all-to-all token dispatcher, SequentialMLP experts).
 *
 * On each rank the router scores its tokens (the sequence-parallel shard:
 * s b / (cp tp)) against the E experts (an h x E linear, whole on every
 * rank), keeps the fp32 probabilities and the routing map, and each token
 * goes to its top-k experts.  The permute gathers the routed rows; an
 * all-to-all over the expert-parallel group sends them to the ranks that
 * hold their experts (E / EP per rank) and, with tensor parallelism, an
 * all-gather over TP gives every TP rank all of them, since each expert is
 * split over TP like a dense MLP (Megatron's expert tensor parallel size
 * defaults to TP).  Each local expert is a SwiGLU (llama) or GeLU MLP of
 * moe_ffn_hidden_size on its rows; the combine mirrors the dispatch
 * (reduce-scatter over TP, all-to-all back) and the unpermute sums each
 * token's k expert outputs weighted by their probabilities.
 *
 * Rows: routing is taken as balanced (what the load-balancing loss aims
 * at), so a rank sends and receives k T rows for T local tokens.  With a
 * capacity factor cf each expert takes at most ceil(cf k T / E) rows from
 * each rank and, as Megatron pads to capacity (moe_pad_expert_input_to_
 * capacity), exactly that: E x that many rows.  Model FLOPs count only the
 * k T routed rows (the padding is work, not model FLOPs).
 *
 * The local experts read one buffer of all received rows and write one
 * buffer of their outputs (Megatron splits them into per-expert views), so
 * the memory is what the framework holds; each expert's matmuls move only
 * its own rows. */
#include "workload_model.h"

#include <math.h>
#include <string.h>

void wl_moe_shapes(wm *m)
{
    const ms_model_config *md = &m->sc->model;
    const ms_parallel_config *pc = &m->sc->parallel;
    m->E = (uint64_t)md->num_experts;
    m->topk = (uint64_t)md->moe_router_topk;
    m->fe = wl_expert_ffn(md);
    m->ep = (uint64_t)(pc->expert_model_parallel_size > 0 ? pc->expert_model_parallel_size : 1);
    m->n_local = m->E / m->ep;
    m->moe_tokens = m->rows_act;
    uint64_t routed = m->moe_tokens * m->topk;
    m->moe_rows_ep = routed;
    if (md->moe_capacity_factor > 0) {
        double cap = ceil(md->moe_capacity_factor * (double)routed / (double)m->E);
        m->moe_rows_ep = (uint64_t)cap * m->E;
    }
    m->moe_rows = m->moe_rows_ep * m->t;
    m->moe_useful = m->moe_rows_ep > 0 ? (double)routed / (double)m->moe_rows_ep : 0;
    /* Expert parallelism takes its ranks from the data-parallel ones:
     * consecutive DP ranks (stride t) form an EP group, the rest of the DP x
     * CP ranks reduce an expert's grads (Megatron's expert-data-parallel
     * group). */
    m->edp = m->dp / m->ep;
    m->ep_group = (int)m->ep;
    m->ep_link = (int64_t)(m->t * m->ep) <= m->sc->device.devices_per_node ? MS_LINK_INTRA_NODE
                                                                         : MS_LINK_INTER_NODE;
    m->edp_link = m->dp_link;
}

static const char *prefix(const wm *m)
{
    return m->llama ? "feed_forward." : "mlp.";
}

/* "layers.N.<prefix><what><suffix>" */
static const char *moe_name(wm *m, const char *what, const char *suffix)
{
    return wl_build_name_join(m->name, sizeof m->name, m->b->layer, prefix(m), what, suffix,
                              (char *)NULL);
}

static void expert_names(const wm *m, int e, wm_ffn_names *fn)
{
    /* "<experts><e>." */
    const char *experts = m->llama ? "feed_forward.experts." : "mlp.experts.local_experts.";
    char pre[64];
    size_t n = strlen(experts);
    memcpy(pre, experts, n);
    n += wl_build_put_int(pre + n, e);
    pre[n++] = '.';
    pre[n] = '\0';
    wl_ffn_names_init(m, fn, pre);
}

/* Rows of local expert e: the received rows split as evenly as they go
 * (at least one: a kernel runs even on a near-empty expert). */
static uint64_t expert_rows(const wm *m, int e)
{
    uint64_t n = m->n_local, r = m->moe_rows;
    uint64_t rows = r * (uint64_t)(e + 1) / n - r * (uint64_t)e / n;
    return rows > 0 ? rows : 1;
}

static ms_kernel mm_kernel(const wm *m, const char *kname, double mult, uint64_t M, uint64_t N,
                           uint64_t K, double bytes)
{
    ms_kernel k = {.name = kname, .cls = MS_KC_MATMUL, .dtype = m->dt,
                   .flops = mult * 2.0 * (double)M * (double)N * (double)K, .bytes = bytes,
                   .peer = -1};
    k.shape[0] = (int64_t)M;
    k.shape[1] = (int64_t)N;
    k.shape[2] = (int64_t)K;
    k.shape[3] = 1;
    return k;
}

static double es(const wm *m)
{
    return (double)m->es;
}

/* y[M x N] = x[rows of this expert] . w: reads only its own rows. */
static uint32_t expert_mm(wm *m, const char *name, uint32_t x, const wm_param *w, uint64_t M,
                          uint64_t N, uint64_t K)
{
    double bytes = (double)(M * K + K * N + M * N) * es(m);
    ms_kernel k = mm_kernel(m, "matmul", 1, M, N, K, bytes);
    wl_build_op_add(m->b, &k, k.flops * m->moe_useful, WM_IN(x, w->w), "%s", name);
    return wl_build_out(m->b, "out", M * N * m->es, m->dt, MS_TK_ACTIVATION);
}

/* The expert's fc2 writes its rows of the shared output buffer (the first
 * expert makes it). */
static uint32_t expert_mm_out(wm *m, const char *name, uint32_t x, const wm_param *w, uint64_t M,
                              uint64_t N, uint64_t K, uint32_t out)
{
    double bytes = (double)(M * K + K * N + M * N) * es(m);
    ms_kernel k = mm_kernel(m, "matmul", 1, M, N, K, bytes);
    double mf = k.flops * m->moe_useful;
    if (out == WB_NO_TENSOR) {
        wl_build_op_add(m->b, &k, mf, WM_IN(x, w->w), "%s", name);
        return wl_build_out(m->b, "out", m->moe_rows * m->h * m->es, m->dt, MS_TK_ACTIVATION);
    }
    wl_build_op_add(m->b, &k, mf, WM_IN(x, w->w, out), "%s", name);
    wl_build_inplace(m->b, out);
    return out;
}

/* dX = dY . w^T (into acc, the shared input-grad buffer, made by the first
 * writer with `full` bytes; WB_NO_TENSOR full: a new M x K grad) and
 * dW += X^T . dY into the fp32 main grad. */
static uint32_t expert_mm_bwd(wm *m, const char *name, uint32_t dy, uint32_t x, const wm_param *w,
                              uint64_t M, uint64_t N, uint64_t K, uint32_t acc, bool shared)
{
    double bytes = (double)(M * N + 2 * M * K + K * N) * es(m) + 8.0 * (double)(K * N);
    ms_kernel k = mm_kernel(m, "matmul_backward", 2, M, N, K, bytes);
    double mf = k.flops * m->moe_useful;
    if (acc != WB_NO_TENSOR) {
        wl_build_op_add(m->b, &k, mf, WM_IN(dy, x, w->w, w->g, acc), "%s", name);
        wl_build_inplace(m->b, w->g);
        wl_build_inplace(m->b, acc);
        return acc;
    }
    wl_build_op_add(m->b, &k, mf, WM_IN(dy, x, w->w, w->g), "%s", name);
    wl_build_inplace(m->b, w->g);
    uint64_t rows = shared ? m->moe_rows : M;
    return wl_build_out(m->b, "grad_in", rows * K * m->es, m->dt, MS_TK_TEMP);
}

/* A collective over `group` ranks from one buffer to a new one. */
static uint32_t moe_comm(wm *m, const char *name, ms_comm_kind kind, wl_group group,
                         ms_link_kind link, uint32_t in, uint64_t out_bytes, ms_tensor_kind out_kind)
{
    ms_kernel k = {.name = kind == MS_COMM_ALLTOALL    ? "all_to_all"
                           : kind == MS_COMM_ALLGATHER ? "all_gather"
                                                       : "reduce_scatter",
                   .cls = MS_KC_COMM,
                   .dtype = m->dt,
                   .bytes = -1,
                   .comm = kind,
                   .group_size = group.size,
                   .link = link,
                   .ranks_per_node = wl_ranks_per_node(m, group, link),
                   .peer = -1};
    /* The full buffer (the cost model's B): an all-gather's output. */
    k.comm_bytes = (double)(kind == MS_COMM_ALLGATHER ? out_bytes : wl_bytes(m, in));
    wl_build_op_add(m->b, &k, 0, &in, 1, "%s", name);
    return wl_build_out(m->b, "out", out_bytes, m->dt, out_kind);
}

static wl_group ep_group(const wm *m)
{
    return (wl_group){m->ep_group, WL_GROUP_EP};
}

static uint64_t ep_bytes(const wm *m)
{
    return m->moe_rows_ep * m->h * m->es;
}

/* Router, top-k, permute, all-to-all, all-gather: the rows the local
 * experts read. */
static uint32_t dispatch_fwd(wm *m, const wm_layer_params *p, wm_saved *sv)
{
    uint64_t T = m->moe_tokens;
    uint32_t logits = wl_matmul(m, moe_name(m, "router", m->llama ? ".matmul" : ""), sv->n2,
                                &p->router, T, m->E, m->h);
    wl_elementwise(m, moe_name(m, "router.topk", ""), "topk_softmax", MS_KC_ELEMENTWISE,
                   WM_IN(logits), (double)(T * m->E), 6);
    sv->rprobs = wl_build_out(m->b, "probs", T * m->E * 4, MS_DTYPE_FP32, MS_TK_ACTIVATION);
    sv->rmap = wl_build_out(m->b, "routing_map", T * m->E, MS_DTYPE_INT8, MS_TK_ACTIVATION);
    wl_elementwise(m, moe_name(m, "token_dispatcher.permute", ""), "permute", MS_KC_ELEMENTWISE,
                   WM_IN(sv->n2, sv->rmap), (double)(m->moe_rows_ep * m->h), 1);
    uint32_t x = wl_build_out(m->b, "out", ep_bytes(m), m->dt, MS_TK_ACTIVATION);
    if (m->ep > 1)
        x = moe_comm(m, moe_name(m, "token_dispatcher.dispatch.all_to_all", ""), MS_COMM_ALLTOALL,
                     ep_group(m), m->ep_link, x, ep_bytes(m), MS_TK_ACTIVATION);
    if (m->t > 1)
        x = moe_comm(m, moe_name(m, "token_dispatcher.dispatch.all_gather", ""),
                     MS_COMM_ALLGATHER, wl_tp_group(m), m->tp_link, x, ep_bytes(m) * m->t,
                     MS_TK_ACTIVATION);
    return x;
}

static uint32_t expert_fwd(wm *m, int e, const wm_expert_params *ep, wm_saved *sv, uint32_t yout)
{
    wm_ffn_names fn;
    expert_names(m, e, &fn);
    wm_ffn_saved *fs = &sv->ex[e];
    uint64_t R = expert_rows(m, e), w = m->fe / m->t;
    uint64_t up = m->swiglu && !m->llama ? 2 * w : w;
    fs->fc3 = WB_NO_TENSOR;
    fs->so = WB_NO_TENSOR;
    fs->fc1 = expert_mm(m, wl_name(m, fn.fc1_op, ""), sv->xin, &ep->fc1, R, up, m->h);
    if (m->llama && m->swiglu)
        fs->fc3 = expert_mm(m, wl_name(m, fn.fc3_op, ""), sv->xin, &ep->fc3, R, w, m->h);
    wl_ffn_act_fwd(m, &fn, R, w, fs);
    return expert_mm_out(m, wl_name(m, fn.fc2_op, ""), fs->act, &ep->fc2, R, m->h, w, yout);
}

uint32_t wl_moe_fwd(wm *m, const wm_layer_params *p, wm_saved *sv)
{
    sv->xin = dispatch_fwd(m, p, sv);
    uint32_t y = WB_NO_TENSOR;
    for (int e = 0; e < (int)m->n_local; e++)
        y = expert_fwd(m, e, &p->ex[e], sv, y);
    if (m->t > 1)
        y = moe_comm(m, moe_name(m, "token_dispatcher.combine.reduce_scatter", ""),
                     MS_COMM_REDUCE_SCATTER, wl_tp_group(m), m->tp_link, y, ep_bytes(m),
                     MS_TK_ACTIVATION);
    if (m->ep > 1)
        y = moe_comm(m, moe_name(m, "token_dispatcher.combine.all_to_all", ""), MS_COMM_ALLTOALL,
                     ep_group(m), m->ep_link, y, ep_bytes(m), MS_TK_ACTIVATION);
    /* Kept for backward: the probabilities' grad is the expert output. */
    sv->comb = y;
    wl_elementwise(m, moe_name(m, "token_dispatcher.unpermute", ""), "unpermute", MS_KC_ELEMENTWISE,
                   WM_IN(sv->comb, sv->rprobs, sv->rmap), (double)(m->moe_rows_ep * m->h), 2);
    return wl_build_out(m->b, "out", wl_act_bytes(m), m->dt, MS_TK_ACTIVATION);
}

static uint32_t expert_bwd(wm *m, int e, const wm_expert_params *ep, const wm_saved *sv,
                           uint32_t g, uint32_t d_xin)
{
    wm_ffn_names fn;
    expert_names(m, e, &fn);
    const wm_ffn_saved *fs = &sv->ex[e];
    uint64_t R = expert_rows(m, e), w = m->fe / m->t;
    uint64_t up = m->swiglu && !m->llama ? 2 * w : w;
    uint32_t d_act = expert_mm_bwd(m, wl_name(m, fn.fc2_op, ".backward"), g, fs->act, &ep->fc2, R,
                                   m->h, w, WB_NO_TENSOR, false);
    uint32_t d_fc1, d_fc3;
    wl_ffn_act_bwd(m, &fn, R, w, fs, d_act, &d_fc1, &d_fc3);
    if (d_fc3 != WB_NO_TENSOR)
        d_xin = expert_mm_bwd(m, wl_name(m, fn.fc3_op, ".backward"), d_fc3, sv->xin, &ep->fc3, R, w,
                              m->h, d_xin, true);
    return expert_mm_bwd(m, wl_name(m, fn.fc1_op, ".backward"), d_fc1, sv->xin, &ep->fc1, R, up,
                         m->h, d_xin, true);
}

uint32_t wl_moe_bwd(wm *m, const wm_layer_params *p, const wm_saved *sv, uint32_t d_y)
{
    uint64_t T = m->moe_tokens;
    wl_elementwise(m, moe_name(m, "token_dispatcher.unpermute", ".backward"), "unpermute_backward",
                   MS_KC_ELEMENTWISE, WM_IN(d_y, sv->comb, sv->rprobs, sv->rmap),
                   (double)(m->moe_rows_ep * m->h), 3);
    uint32_t g = wl_build_out(m->b, "grad_in", ep_bytes(m), m->dt, MS_TK_TEMP);
    uint32_t d_probs = wl_build_out(m->b, "grad_probs", T * m->E * 4, MS_DTYPE_FP32, MS_TK_TEMP);
    if (m->ep > 1)
        g = moe_comm(m, moe_name(m, "token_dispatcher.combine.all_to_all", ".backward"),
                     MS_COMM_ALLTOALL, ep_group(m), m->ep_link, g, ep_bytes(m), MS_TK_TEMP);
    if (m->t > 1)
        g = moe_comm(m, moe_name(m, "token_dispatcher.combine.reduce_scatter", ".backward"),
                     MS_COMM_ALLGATHER, wl_tp_group(m), m->tp_link, g, ep_bytes(m) * m->t,
                     MS_TK_TEMP);
    uint32_t dx = WB_NO_TENSOR;
    for (int e = (int)m->n_local - 1; e >= 0; e--)
        dx = expert_bwd(m, e, &p->ex[e], sv, g, dx);
    if (m->t > 1)
        dx = moe_comm(m, moe_name(m, "token_dispatcher.dispatch.all_gather", ".backward"),
                      MS_COMM_REDUCE_SCATTER, wl_tp_group(m), m->tp_link, dx, ep_bytes(m),
                      MS_TK_TEMP);
    if (m->ep > 1)
        dx = moe_comm(m, moe_name(m, "token_dispatcher.dispatch.all_to_all", ".backward"),
                      MS_COMM_ALLTOALL, ep_group(m), m->ep_link, dx, ep_bytes(m), MS_TK_TEMP);
    /* Scatter-add of the routed rows' grads back to their tokens. */
    wl_elementwise(m, moe_name(m, "token_dispatcher.permute", ".backward"), "permute_backward",
                   MS_KC_ELEMENTWISE, WM_IN(dx, sv->rmap), (double)(m->moe_rows_ep * m->h), 1);
    uint32_t d_n2 = wl_build_out(m->b, "grad_in", wl_act_bytes(m), m->dt, MS_TK_TEMP);
    wl_elementwise(m, moe_name(m, "router.topk", ".backward"), "topk_softmax_backward",
                   MS_KC_ELEMENTWISE, WM_IN(d_probs, sv->rprobs), (double)(T * m->E), 4);
    uint32_t d_logits = wl_build_out(m->b, "grad_in", T * m->E * m->es, m->dt, MS_TK_TEMP);
    /* The router's input grad adds into the token grads. */
    return wl_matmul_bwd(m, moe_name(m, "router", m->llama ? ".matmul.backward" : ".backward"),
                         d_logits, sv->n2, &p->router, T, m->E, m->h, d_n2);
}
