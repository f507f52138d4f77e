/* Context parallelism: ring attention over the CP group.
 *
 * With context_parallel_size c each rank holds s/c tokens of every sequence
 * (its queries, keys and values); attention needs all keys and values, so
 * the K/V blocks travel around the ring of the c ranks, as Megatron-core's
 * TransformerEngine attention does with cp_comm_type "p2p"
 * (AttnFuncWithCPAndKVP2P): step 0 attends to the local block while the
 * first exchange is in flight, each later step to the block just received,
 * c blocks in all, c - 1 exchanges.  The partial outputs are merged into one
 * output and logsumexp (kept for backward, /c like every activation).  The
 * backward passes K/V around again together with the dK/dV accumulated for
 * each block (c - 1 exchanges of both), and a last hop returns each block's
 * dK/dV to its owner.
 *
 * An exchange is a send to the next rank and a receive from the previous one
 * at the same time.  memsim writes it as a two-rank all-gather whose full
 * buffer is both blocks (comm_bytes = 2 x block): the alpha-beta cost of an
 * all-gather of B over n ranks is (n-1)/n B / bw + (n-1) alpha, which for
 * n = 2 is exactly one block's transfer, block / bw + alpha, on the CP
 * group's link.  Causal masking is ignored here as everywhere (Narayanan et
 * al.'s FLOPs): Megatron balances causal work over the ranks anyway. */
#include "workload_model.h"

/* FlashAttention's backward re-forms the scores before the four gradient
 * matmuls (see workload_layer.c). */
#define FLASH_BWD_FACTOR 2.5

static uint32_t distinct(uint32_t *out, const uint32_t *src, int n_src)
{
    uint32_t n = 0;
    for (int i = 0; i < n_src; i++) {
        bool seen = src[i] == WB_NO_TENSOR;
        for (uint32_t j = 0; j < n; j++)
            seen |= out[j] == src[i];
        if (!seen)
            out[n++] = src[i];
    }
    return n;
}

/* K and V of this rank's tokens: the block that travels. */
static uint64_t kv_block(const wm *m)
{
    return m->rows * 2 * (m->g * m->d / m->t) * m->es;
}

/* QK^T and PV of this rank's queries against one block of s/c keys. */
static double block_flops(const wm *m)
{
    return 4.0 * (double)m->mb * (double)(m->a / m->t) * (double)m->sq * (double)m->sq *
           (double)m->d;
}

static ms_kernel attn_kernel(const wm *m, const char *kname, double flops)
{
    ms_kernel k = {.name = kname, .cls = MS_KC_ATTENTION, .dtype = m->dt, .flops = flops,
                   .bytes = -1, .peer = -1};
    k.shape[0] = (int64_t)m->sq;
    k.shape[1] = (int64_t)m->sq;
    k.shape[2] = (int64_t)m->d;
    k.shape[3] = (int64_t)(m->mb * (m->a / m->t));
    return k;
}

/* One ring step: reads the blocks it passes on, returns the K/V block it
 * receives (and, with dkv non-NULL, the dK/dV block that came with it). */
static uint32_t exchange(wm *m, const char *name, const uint32_t *in, uint32_t n_in,
                         uint32_t *dkv)
{
    int n_blocks = dkv != NULL ? 2 : 1;
    double block = (double)kv_block(m);
    ms_kernel k = {.name = "ring_exchange", .cls = MS_KC_COMM, .dtype = m->dt,
                   .bytes = 2.0 * n_blocks * block, .comm = MS_COMM_ALLGATHER,
                   .group_size = 2, .link = m->cp_link, .comm_bytes = 2.0 * n_blocks * block,
                   .peer = -1};
    wl_build_op_add(m->b, &k, 0, in, n_in, "%s", name);
    uint32_t kv = wl_build_out(m->b, "kv", kv_block(m), m->dt, MS_TK_COMM_BUFFER);
    if (dkv != NULL)
        *dkv = wl_build_out(m->b, "dkv", kv_block(m), m->dt, MS_TK_COMM_BUFFER);
    return kv;
}

void wl_cp_core_fwd(wm *m, wm_saved *sv)
{
    const wm_names *nm = &m->nm;
    uint32_t src[3] = {sv->q, sv->k, sv->v}, qkv[3], kv[2];
    uint32_t n_qkv = distinct(qkv, src, 3), n_kv = distinct(kv, src + 1, 2);
    double flops = block_flops(m);
    ms_kernel k = attn_kernel(m, "flash_attention_fwd", flops);
    wl_build_seg_begin(m->b, "layers.%d.%s", m->b->layer, nm->core);
    /* The first exchange goes out before the local block's attention so the
     * two overlap, as TE issues them. */
    uint32_t next = exchange(m, wl_name(m, nm->flash, ".ring_exchange"), kv, n_kv, NULL);
    wl_build_op_add(m->b, &k, flops, qkv, n_qkv, "%s", wl_name(m, nm->flash, ""));
    sv->ctx = wl_build_out(m->b, "out", m->rows * (m->h / m->t) * m->es, m->dt, MS_TK_ACTIVATION);
    sv->lse = wl_build_out(m->b, "softmax_lse", m->mb * (m->a / m->t) * m->sq * 4, MS_DTYPE_FP32,
                           MS_TK_ACTIVATION);
    for (uint64_t step = 1; step < m->c; step++) {
        uint32_t cur = next;
        if (step + 1 < m->c)
            next = exchange(m, wl_name(m, nm->flash, ".ring_exchange"), &cur, 1, NULL);
        /* Attention to the received block, merged into the output and the
         * logsumexp in place. */
        wl_build_op_add(m->b, &k, flops, WM_IN(src[0], cur, sv->ctx, sv->lse), "%s",
                        wl_name(m, nm->flash, ".cp_step"));
        wl_build_inplace(m->b, sv->ctx);
        wl_build_inplace(m->b, sv->lse);
    }
    wl_build_seg_end(m->b);
}

/* Grads of the distinct sources, made by the last op (shared sources share). */
static void grads_out(wm *m, const uint32_t src[3], uint32_t grads[3])
{
    static const char *const names[3] = {"grad_q", "grad_k", "grad_v"};
    for (int i = 0; i < 3; i++) {
        grads[i] = WB_NO_TENSOR;
        for (int j = 0; j < i; j++)
            if (src[j] == src[i])
                grads[i] = grads[j];
        if (grads[i] == WB_NO_TENSOR)
            grads[i] = wl_build_out(m->b, names[i], wl_bytes(m, src[i]), m->dt, MS_TK_TEMP);
    }
}

void wl_cp_core_bwd(wm *m, const wm_saved *sv, uint32_t d_ctx, uint32_t grads[3])
{
    const wm_names *nm = &m->nm;
    uint32_t src[3] = {sv->q, sv->k, sv->v}, in[8], kv[2];
    uint32_t n = distinct(in, src, 3), n_kv = distinct(kv, src + 1, 2);
    in[n++] = sv->ctx;
    in[n++] = sv->lse;
    in[n++] = d_ctx;
    double fwd = block_flops(m);
    ms_kernel k = attn_kernel(m, "flash_attention_bwd", FLASH_BWD_FACTOR * fwd);
    wl_build_op_add(m->b, &k, 2 * fwd, in, n, "%s", wl_name(m, nm->flash, ".backward"));
    grads_out(m, src, grads);
    uint32_t dkv = WB_NO_TENSOR, prev[2] = {kv[0], kv[1]}, n_prev = n_kv;
    for (uint64_t step = 1; step < m->c; step++) {
        /* K/V move on, with the dK/dV accumulated for the block so far. */
        uint32_t ex_in[3] = {prev[0], prev[1], dkv};
        if (n_prev == 1)
            ex_in[1] = dkv;
        uint32_t n_ex = n_prev + (dkv != WB_NO_TENSOR);
        uint32_t dkv_in = WB_NO_TENSOR;
        uint32_t cur = exchange(m, wl_name(m, nm->flash, ".backward.ring_exchange"), ex_in, n_ex,
                                dkv != WB_NO_TENSOR ? &dkv_in : NULL);
        uint32_t bin[7] = {src[0], cur, sv->ctx, sv->lse, d_ctx, grads[0], dkv_in};
        wl_build_op_add(m->b, &k, 2 * fwd, bin, dkv_in != WB_NO_TENSOR ? 7 : 6, "%s",
                        wl_name(m, nm->flash, ".backward.cp_step"));
        wl_build_inplace(m->b, grads[0]);
        if (dkv_in != WB_NO_TENSOR) {
            wl_build_inplace(m->b, dkv_in);
            dkv = dkv_in;
        } else {
            dkv = wl_build_out(m->b, "grad_kv", kv_block(m), m->dt, MS_TK_TEMP);
        }
        prev[0] = cur;
        n_prev = 1;
    }
    if (dkv == WB_NO_TENSOR)
        return;
    /* The last hop brings each block's dK/dV home, added into the local grads. */
    uint32_t gsrc[2] = {grads[1], grads[2]}, g[2];
    uint32_t n_g = distinct(g, gsrc, 2);
    uint32_t hin[3] = {dkv, g[0], n_g > 1 ? g[1] : WB_NO_TENSOR};
    double block = (double)kv_block(m);
    ms_kernel h = {.name = "ring_exchange", .cls = MS_KC_COMM, .dtype = m->dt, .bytes = 3 * block,
                   .comm = MS_COMM_ALLGATHER, .group_size = 2, .link = m->cp_link,
                   .comm_bytes = 2 * block, .peer = -1};
    wl_build_op_add(m->b, &h, 0, hin, 1 + n_g, "%s",
                    wl_name(m, nm->flash, ".backward.ring_return"));
    for (uint32_t i = 0; i < n_g; i++)
        wl_build_inplace(m->b, g[i]);
}
