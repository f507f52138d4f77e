/* One transformer layer on one tensor-parallel rank: forward, then backward.
 *
 * The layer is Megatron's (and MindFormers'): pre-norm, attention, residual,
 * pre-norm, MLP, residual.  Linear layers are column parallel (QKV, fc1/w1/w3:
 * output split over t) then row parallel (proj/wo, fc2/w2: input split, the
 * partial sums reduced).  With sequence parallelism the norms, dropouts and
 * residuals hold s/t tokens: an all-gather feeds each column-parallel block
 * and a reduce-scatter follows each row-parallel one; without it the norms
 * hold all s tokens and the row-parallel output is all-reduced in place.
 * Backward re-gathers the saved s/t input of each column-parallel block for
 * its weight grad, as Megatron does, so only the shard is saved.
 *
 * What the forward leaves for backward is exactly Korthikanti et al. 2022
 * (Reducing Activation Recomputation in Large Transformer Models, sec. 4):
 * per layer 34 s b h + 5 a s^2 b bytes (16-bit, with dropout), /t with SP and
 * s b h (10 + 24/t + 5 a s / (h t)) without.  Norm statistics (fp32 mean and
 * rstd, 4-8 bytes a token) are not modeled, as that count neglects them.
 * Flash attention saves its output and the fp32 logsumexp (4 b a s / t)
 * instead of the scores, softmax and dropout (the 5 a s^2 b / t term). */
#include "workload_model.h"

#include <string.h>

/* FlashAttention's backward re-forms the scores (S = QK^T) before the four
 * matmuls of the gradients (dV, dP, dQ, dK): five s x s matmuls against the
 * forward's two, hence 2.5 x the forward's FLOPs (Dao et al. 2022,
 * FlashAttention, Appendix B.4, Algorithm 4).  Model FLOPs still count 2x. */
#define FLASH_BWD_FACTOR 2.5

static uint32_t norm_fwd(wm *m, const char *mod, const char *op, uint32_t x, const wm_param *w)
{
    wl_build_seg_begin_layer(m->b, mod);
    uint32_t y = m->moe ? wl_norm(m, op, x, w) : wl_norm_to_linear(m, op, x, w);
    wl_build_seg_end(m->b);
    return y;
}

/* y = x + dropout(branch): Megatron's fused bias-dropout-add keeps the
 * 1-byte mask; without dropout a plain add keeps nothing. */
uint32_t wl_residual_fwd(wm *m, const char *op, uint32_t branch, uint32_t x, uint32_t *mask)
{
    double n = (double)(m->rows_act * m->h);
    *mask = WB_NO_TENSOR;
    wl_elementwise(m, wl_name(m, op, ""), m->hidden_drop ? "bias_dropout_add" : "add",
                   MS_KC_ELEMENTWISE, WM_IN(branch, x), n, m->hidden_drop ? 3 : 1);
    if (m->hidden_drop)
        *mask = wl_build_out(m->b, "mask", m->rows_act * m->h, MS_DTYPE_INT8, MS_TK_ACTIVATION);
    return wl_build_out(m->b, "out", wl_act_bytes(m), m->dt, MS_TK_ACTIVATION);
}

uint32_t wl_residual_bwd(wm *m, const char *op, uint32_t dy, uint32_t mask)
{
    if (mask == WB_NO_TENSOR)
        return dy; /* the add passes the grad to both branches unchanged */
    return wl_dropout_bwd(m, wl_name(m, op, ".backward"), dy, mask);
}

/* ---- attention ------------------------------------------------------- */

static uint64_t q_width(const wm *m)
{
    return m->h / m->t;
}

static uint64_t kv_width(const wm *m)
{
    return m->g * m->d / m->t;
}

/* Attention over this rank's sq = s / cp queries; without context
 * parallelism (the only case the unfused path builds) sq = s. */
static uint64_t score_elems(const wm *m)
{
    return m->mb * (m->a / m->t) * m->sq * m->sq;
}

/* One of Q K^T or P V: 2 b (a/t) s^2 d FLOPs. */
static double core_mm_flops(const wm *m)
{
    return 2.0 * (double)m->mb * (double)(m->a / m->t) * (double)m->sq * (double)m->sq *
           (double)m->d;
}

static ms_kernel core_kernel(const wm *m, const char *kname, ms_kernel_class cls, double flops)
{
    ms_kernel k = {.name = kname, .cls = cls, .dtype = m->dt, .flops = flops, .bytes = -1,
                   .peer = -1};
    k.shape[0] = (int64_t)m->sq;
    k.shape[1] = (int64_t)m->sq;
    k.shape[2] = (int64_t)m->d;
    k.shape[3] = (int64_t)(m->mb * (m->a / m->t));
    return k;
}

/* Distinct tensors among a, b, c (Q, K, V may all live in gpt's fused qkv). */
static uint32_t distinct(uint32_t *out, uint32_t a, uint32_t b, uint32_t c)
{
    uint32_t n = 0, src[3] = {a, b, c};
    for (int i = 0; i < 3; i++) {
        bool seen = false;
        for (uint32_t j = 0; j < n; j++)
            seen |= out[j] == src[i];
        if (!seen)
            out[n++] = src[i];
    }
    return n;
}

static void core_fwd(wm *m, wm_saved *sv)
{
    const wm_names *nm = &m->nm;
    wl_build_seg_begin_layer(m->b, nm->core);
    if (m->flash) {
        uint32_t in[5], n = distinct(in, sv->q, sv->k, sv->v);
        double flops = 2 * core_mm_flops(m);
        ms_kernel k = core_kernel(m, "flash_attention_fwd", MS_KC_ATTENTION, flops);
        wl_build_op_add(m->b, &k, flops, in, n, "%s", wl_name(m, nm->flash, ""));
        sv->ctx = wl_build_out(m->b, "out", m->rows * q_width(m) * m->es, m->dt, MS_TK_ACTIVATION);
        sv->lse = wl_build_out(m->b, "softmax_lse", m->mb * (m->a / m->t) * m->sq * 4,
                               MS_DTYPE_FP32, MS_TK_ACTIVATION);
        wl_build_seg_end(m->b);
        return;
    }
    uint64_t sc = score_elems(m);
    ms_kernel k = core_kernel(m, "batch_matmul", MS_KC_MATMUL, core_mm_flops(m));
    if (sv->q == sv->k)
        wl_build_op_add(m->b, &k, k.flops, WM_IN(sv->q), "%s", wl_name(m, nm->qk, ""));
    else
        wl_build_op_add(m->b, &k, k.flops, WM_IN(sv->q, sv->k), "%s", wl_name(m, nm->qk, ""));
    uint32_t scores = wl_build_out(m->b, "out", sc * m->es, m->dt, MS_TK_ACTIVATION);
    wl_elementwise(m, wl_name(m, nm->softmax, ""), "softmax", MS_KC_ELEMENTWISE, WM_IN(scores),
                   (double)sc, 5);
    sv->probs = sv->probs_d = wl_build_out(m->b, "out", sc * m->es, m->dt, MS_TK_ACTIVATION);
    if (m->attn_drop) {
        wl_elementwise(m, wl_name(m, nm->attn_dropout, ""), "dropout", MS_KC_ELEMENTWISE,
                       WM_IN(sv->probs), (double)sc, 2);
        sv->mask_a = wl_build_out(m->b, "mask", sc, MS_DTYPE_INT8, MS_TK_ACTIVATION);
        sv->probs_d = wl_build_out(m->b, "out", sc * m->es, m->dt, MS_TK_ACTIVATION);
    }
    wl_build_op_add(m->b, &k, k.flops, WM_IN(sv->probs_d, sv->v), "%s", wl_name(m, nm->av, ""));
    sv->ctx = wl_build_out(m->b, "out", m->rows * q_width(m) * m->es, m->dt, MS_TK_ACTIVATION);
    wl_build_seg_end(m->b);
}

/* Grads of the core's Q, K, V sources: one tensor per distinct source, the
 * first writer makes it and later writers add into it. */
typedef struct core_grads {
    uint32_t src[3], grad[3];
} core_grads;

static void grad_out(wm *m, core_grads *cg, int which)
{
    for (int j = 0; j < 3; j++)
        if (j != which && cg->src[j] == cg->src[which] && cg->grad[j] != WB_NO_TENSOR) {
            cg->grad[which] = cg->grad[j];
            return; /* another output of this op already */
        }
    cg->grad[which] = wl_build_out(m->b,
                                   which == 0   ? "grad_q"
                                   : which == 1 ? "grad_k"
                                                : "grad_v",
                                   wl_bytes(m, cg->src[which]), m->dt, MS_TK_TEMP);
}

static void grad_inplace(wm *m, core_grads *cg, int which)
{
    for (int j = 0; j < 3; j++)
        if (j != which && cg->src[j] == cg->src[which] && cg->grad[j] != WB_NO_TENSOR) {
            cg->grad[which] = cg->grad[j];
            wl_build_inplace(m->b, cg->grad[j]);
            return;
        }
}

static void core_bwd_flash(wm *m, const wm_saved *sv, uint32_t d_ctx, core_grads *cg)
{
    uint32_t in[9], n = distinct(in, sv->q, sv->k, sv->v);
    in[n++] = sv->ctx;
    in[n++] = sv->lse;
    in[n++] = d_ctx;
    double fwd = 2 * core_mm_flops(m);
    ms_kernel k = core_kernel(m, "flash_attention_bwd", MS_KC_ATTENTION, FLASH_BWD_FACTOR * fwd);
    wl_build_op_add(m->b, &k, 2 * fwd, in, n, "%s", wl_name(m, m->nm.flash, ".backward"));
    for (int i = 0; i < 3; i++)
        grad_out(m, cg, i);
}

static void core_bwd(wm *m, const wm_saved *sv, uint32_t d_ctx, core_grads *cg)
{
    const wm_names *nm = &m->nm;
    if (m->flash) {
        core_bwd_flash(m, sv, d_ctx, cg);
        return;
    }
    uint64_t sc = score_elems(m);
    ms_kernel k = core_kernel(m, "batch_matmul_backward", MS_KC_MATMUL, 2 * core_mm_flops(m));
    /* P V: dP = dO V^T, dV = P^T dO. */
    wl_build_op_add(m->b, &k, k.flops, WM_IN(d_ctx, sv->probs_d, sv->v), "%s",
                    wl_name(m, nm->av, ".backward"));
    uint32_t d_p = wl_build_out(m->b, "grad_probs", sc * m->es, m->dt, MS_TK_TEMP);
    grad_out(m, cg, 2);
    if (m->attn_drop) {
        wl_elementwise(m, wl_name(m, nm->attn_dropout, ".backward"), "dropout_backward",
                       MS_KC_ELEMENTWISE, WM_IN(d_p, sv->mask_a), (double)sc, 1);
        d_p = wl_build_out(m->b, "grad_in", sc * m->es, m->dt, MS_TK_TEMP);
    }
    wl_elementwise(m, wl_name(m, nm->softmax, ".backward"), "softmax_backward", MS_KC_ELEMENTWISE,
                   WM_IN(d_p, sv->probs), (double)sc, 4);
    uint32_t d_s = wl_build_out(m->b, "grad_in", sc * m->es, m->dt, MS_TK_TEMP);
    /* Q K^T: dQ = dS K, dK = dS^T Q; into the qkv grad when they share it. */
    uint32_t in[5] = {d_s}, n = 1;
    n += distinct(in + 1, sv->q, sv->k, sv->k);
    if (cg->src[0] == cg->src[2])
        in[n++] = cg->grad[2];
    wl_build_op_add(m->b, &k, k.flops, in, n, "%s", wl_name(m, nm->qk, ".backward"));
    if (cg->src[0] == cg->src[2]) {
        grad_inplace(m, cg, 0);
        cg->grad[1] = cg->grad[0];
    } else {
        grad_out(m, cg, 0);
        grad_out(m, cg, 1);
    }
}

static void rope_fwd(wm *m, wm_saved *sv)
{
    uint64_t nq = m->rows * q_width(m), nk = m->rows * kv_width(m);
    if (sv->q == sv->k)
        wl_elementwise(m, wl_name(m, m->nm.rope, ""), "rope", MS_KC_ELEMENTWISE, WM_IN(sv->q),
                       (double)(nq + nk), 3);
    else
        wl_elementwise(m, wl_name(m, m->nm.rope, ""), "rope", MS_KC_ELEMENTWISE,
                       WM_IN(sv->q, sv->k), (double)(nq + nk), 3);
    sv->qr = wl_build_out(m->b, "q", nq * m->es, m->dt, MS_TK_ACTIVATION);
    sv->kr = wl_build_out(m->b, "k", nk * m->es, m->dt, MS_TK_ACTIVATION);
    sv->q = sv->qr;
    sv->k = sv->kr;
}

/* Rotary embedding backward: the grads of the rotated Q, K go back through
 * the rotation (no saved tensors: cos/sin are recomputed).  With a fused
 * qkv (gpt), they land in the qkv grad, which holds V's part already. */
static void rope_bwd(wm *m, uint32_t d_q, uint32_t d_k, uint32_t d_qkv, uint32_t *gq,
                     uint32_t *gk)
{
    uint64_t nq = m->rows * q_width(m), nk = m->rows * kv_width(m);
    const char *name = wl_name(m, m->nm.rope, ".backward");
    if (d_qkv != WB_NO_TENSOR) {
        wl_elementwise(m, name, "rope_backward", MS_KC_ELEMENTWISE, WM_IN(d_q, d_k, d_qkv),
                       (double)(nq + nk), 3);
        wl_build_inplace(m->b, d_qkv);
        *gq = *gk = d_qkv;
        return;
    }
    wl_elementwise(m, name, "rope_backward", MS_KC_ELEMENTWISE, WM_IN(d_q, d_k), (double)(nq + nk),
                   3);
    *gq = wl_build_out(m->b, "grad_q", nq * m->es, m->dt, MS_TK_TEMP);
    *gk = wl_build_out(m->b, "grad_k", nk * m->es, m->dt, MS_TK_TEMP);
}

static void attention_fwd(wm *m, const wm_layer_params *p, wm_saved *sv)
{
    const wm_names *nm = &m->nm;
    uint32_t in = wl_gather_in(m, nm->attn_in, sv->n1);
    if (!m->llama) {
        sv->qkv = wl_matmul(m, wl_name(m, nm->qkv_op, ""), in, &p->qkv, m->rows,
                            q_width(m) + 2 * kv_width(m), m->h);
        sv->q = sv->k = sv->v = sv->qkv;
    } else {
        sv->q = wl_matmul(m, wl_name(m, nm->q_op, ""), in, &p->q, m->rows, q_width(m), m->h);
        sv->k = wl_matmul(m, wl_name(m, nm->k_op, ""), in, &p->k, m->rows, kv_width(m), m->h);
        sv->v = wl_matmul(m, wl_name(m, nm->v_op, ""), in, &p->v, m->rows, kv_width(m), m->h);
    }
    if (m->rope)
        rope_fwd(m, sv);
    if (m->c > 1)
        wl_cp_core_fwd(m, sv);
    else
        core_fwd(m, sv);
    sv->ctx8 = wl_fp8_input(m, nm->proj, sv->ctx);
    uint32_t o =
        wl_matmul(m, wl_name(m, nm->proj_op, ""), sv->ctx8, &p->proj, m->rows, m->h, q_width(m));
    o = wl_reduce_out(m, nm->proj, o);
    sv->res1 = wl_residual_fwd(m, nm->res1, o, sv->x, &sv->mask1);
}

/* Returns the grad of the layer input. */
static uint32_t attention_bwd(wm *m, const wm_layer_params *p, const wm_saved *sv,
                              uint32_t d_res1)
{
    const wm_names *nm = &m->nm;
    uint32_t g = wl_residual_bwd(m, nm->res1, d_res1, sv->mask1);
    g = wl_gather_out_grad(m, nm->proj, g);
    uint32_t d_ctx = wl_matmul_bwd(m, wl_name(m, nm->proj_op, ".backward"), g, sv->ctx8, &p->proj,
                                   m->rows, m->h, q_width(m), WB_NO_TENSOR);
    core_grads cg = {.src = {sv->q, sv->k, sv->v},
                     .grad = {WB_NO_TENSOR, WB_NO_TENSOR, WB_NO_TENSOR}};
    if (m->c > 1)
        wl_cp_core_bwd(m, sv, d_ctx, cg.grad);
    else
        core_bwd(m, sv, d_ctx, &cg);
    uint32_t gq = cg.grad[0], gk = cg.grad[1], gv = cg.grad[2];
    if (m->rope)
        rope_bwd(m, gq, gk, m->llama ? WB_NO_TENSOR : gv, &gq, &gk);
    uint32_t in = wl_regather_in(m, nm->attn_in, sv->n1);
    uint32_t dx;
    if (!m->llama) {
        dx = wl_matmul_bwd(m, wl_name(m, nm->qkv_op, ".backward"), gv, in, &p->qkv, m->rows,
                           q_width(m) + 2 * kv_width(m), m->h, WB_NO_TENSOR);
    } else {
        dx = wl_matmul_bwd(m, wl_name(m, nm->v_op, ".backward"), gv, in, &p->v, m->rows,
                           kv_width(m), m->h, WB_NO_TENSOR);
        wl_matmul_bwd(m, wl_name(m, nm->k_op, ".backward"), gk, in, &p->k, m->rows, kv_width(m),
                      m->h, dx);
        wl_matmul_bwd(m, wl_name(m, nm->q_op, ".backward"), gq, in, &p->q, m->rows, q_width(m),
                      m->h, dx);
    }
    dx = wl_reduce_in_grad(m, nm->attn_in, dx);
    return wl_norm_bwd(m, nm->norm1_op, sv->x, &p->norm1, dx, d_res1);
}

/* ---- MLP ------------------------------------------------------------- */

static uint64_t ffn_width(const wm *m)
{
    return m->f / m->t;
}

/* MoE names every expert this way for each forward and backward, so the
 * names are joined, not formatted. */
void wl_ffn_names_init(const wm *m, wm_ffn_names *fn, const char *prefix)
{
#define JOIN(field, ...)                                                                           \
    wl_build_name_join(fn->field, sizeof fn->field, MS_NONE, prefix, __VA_ARGS__, (char *)NULL)
    if (m->llama) {
        JOIN(fc1, "w1");
        JOIN(fc1_op, "w1.matmul");
        JOIN(fc3, "w3");
        JOIN(fc3_op, "w3.matmul");
        JOIN(act_op, "w1.activation.", m->swiglu ? "silu" : "gelu");
        JOIN(mul, "mul");
        JOIN(fc2, "w2");
        JOIN(fc2_op, "w2.matmul");
    } else {
        JOIN(fc1, "linear_fc1");
        JOIN(fc1_op, "linear_fc1");
        JOIN(fc3, "linear_fc3"); /* unused: gate fused in fc1 */
        JOIN(fc3_op, "linear_fc3");
        JOIN(act_op, "activation");
        JOIN(mul, "mul");
        JOIN(fc2, "linear_fc2");
        JOIN(fc2_op, "linear_fc2");
    }
    JOIN(act_seg, "activation");
#undef JOIN
}

/* The activation of rows x width: SiLU(w1 x) * (w3 x) as MindFormers'
 * llama writes it (two kernels, the SiLU output kept for the product's
 * backward), Megatron's fused SwiGLU on the 2-wide fc1, or GeLU. */
void wl_ffn_act_fwd(wm *m, const wm_ffn_names *fn, uint64_t rows, uint64_t width, wm_ffn_saved *fs)
{
    uint64_t n = rows * width;
    wl_build_seg_begin_layer(m->b, fn->act_seg);
    if (m->llama && m->swiglu) {
        wl_elementwise(m, wl_name(m, fn->act_op, ""), "silu", MS_KC_ELEMENTWISE, WM_IN(fs->fc1),
                       (double)n, 4);
        fs->so = wl_build_out(m->b, "out", n * m->es, m->dt, MS_TK_ACTIVATION);
        wl_elementwise(m, wl_name(m, fn->mul, ""), "mul", MS_KC_ELEMENTWISE, WM_IN(fs->so, fs->fc3),
                       (double)n, 1);
    } else {
        /* Megatron fuses the gate into linear_fc1 (2f/t wide) for SwiGLU. */
        wl_elementwise(m, wl_name(m, fn->act_op, ""), m->swiglu ? "swiglu" : "gelu",
                       MS_KC_ELEMENTWISE, WM_IN(fs->fc1), (double)n, m->swiglu ? 5 : 8);
    }
    fs->act = wl_build_out(m->b, "out", n * m->es, m->dt, MS_TK_ACTIVATION);
    wl_build_seg_end(m->b);
}

/* Grads of fc1's (and w3's) outputs from the grad of the activation. */
void wl_ffn_act_bwd(wm *m, const wm_ffn_names *fn, uint64_t rows, uint64_t width,
                    const wm_ffn_saved *fs, uint32_t d_act, uint32_t *d_fc1, uint32_t *d_fc3)
{
    uint64_t n = rows * width;
    *d_fc3 = WB_NO_TENSOR;
    if (m->llama && m->swiglu) {
        wl_elementwise(m, wl_name(m, fn->mul, ".backward"), "mul_backward", MS_KC_ELEMENTWISE,
                       WM_IN(d_act, fs->so, fs->fc3), (double)n, 2);
        uint32_t d_so = wl_build_out(m->b, "grad_a", n * m->es, m->dt, MS_TK_TEMP);
        *d_fc3 = wl_build_out(m->b, "grad_b", n * m->es, m->dt, MS_TK_TEMP);
        wl_elementwise(m, wl_name(m, fn->act_op, ".backward"), "silu_backward", MS_KC_ELEMENTWISE,
                       WM_IN(d_so, fs->fc1), (double)n, 5);
        *d_fc1 = wl_build_out(m->b, "grad_in", n * m->es, m->dt, MS_TK_TEMP);
        return;
    }
    wl_elementwise(m, wl_name(m, fn->act_op, ".backward"),
                   m->swiglu ? "swiglu_backward" : "gelu_backward", MS_KC_ELEMENTWISE,
                   WM_IN(d_act, fs->fc1), (double)n, m->swiglu ? 6 : 10);
    *d_fc1 = wl_build_out(m->b, "grad_in", wl_bytes(m, fs->fc1), m->dt, MS_TK_TEMP);
}

static void mlp_fwd(wm *m, const wm_layer_params *p, wm_saved *sv)
{
    const wm_names *nm = &m->nm;
    const wm_ffn_names *fn = &m->ffn;
    wm_ffn_saved *fs = &sv->ffn;
    sv->n2 = norm_fwd(m, nm->norm2, nm->norm2_op, sv->res1, &p->norm2);
    if (m->moe) {
        uint32_t y = wl_moe_fwd(m, p, sv);
        sv->out = wl_residual_fwd(m, nm->res2, y, sv->res1, &sv->mask2);
        return;
    }
    uint32_t in = wl_gather_in(m, nm->mlp_in, sv->n2);
    uint64_t up = m->swiglu && !m->llama ? 2 * ffn_width(m) : ffn_width(m);
    fs->fc1 = wl_matmul(m, wl_name(m, fn->fc1_op, ""), in, &p->fc1, m->rows, up, m->h);
    fs->fc3 = WB_NO_TENSOR;
    if (m->llama && m->swiglu)
        fs->fc3 =
            wl_matmul(m, wl_name(m, fn->fc3_op, ""), in, &p->fc3, m->rows, ffn_width(m), m->h);
    wl_ffn_act_fwd(m, fn, m->rows, ffn_width(m), fs);
    fs->act8 = wl_fp8_input(m, fn->fc2, fs->act);
    uint32_t y =
        wl_matmul(m, wl_name(m, fn->fc2_op, ""), fs->act8, &p->fc2, m->rows, m->h, ffn_width(m));
    y = wl_reduce_out(m, nm->fc2, y);
    sv->out = wl_residual_fwd(m, nm->res2, y, sv->res1, &sv->mask2);
}

static uint32_t mlp_bwd(wm *m, const wm_layer_params *p, const wm_saved *sv, uint32_t d_out)
{
    const wm_names *nm = &m->nm;
    const wm_ffn_names *fn = &m->ffn;
    const wm_ffn_saved *fs = &sv->ffn;
    uint32_t g = wl_residual_bwd(m, nm->res2, d_out, sv->mask2);
    uint32_t dx;
    if (m->moe) {
        dx = wl_moe_bwd(m, p, sv, g);
        return wl_norm_bwd(m, nm->norm2_op, sv->res1, &p->norm2, dx, d_out);
    }
    g = wl_gather_out_grad(m, nm->fc2, g);
    uint32_t d_act = wl_matmul_bwd(m, wl_name(m, fn->fc2_op, ".backward"), g, fs->act8, &p->fc2,
                                   m->rows, m->h, ffn_width(m), WB_NO_TENSOR);
    uint32_t d_fc1, d_fc3;
    wl_ffn_act_bwd(m, fn, m->rows, ffn_width(m), fs, d_act, &d_fc1, &d_fc3);
    uint32_t in = wl_regather_in(m, nm->mlp_in, sv->n2);
    uint64_t up = m->swiglu && !m->llama ? 2 * ffn_width(m) : ffn_width(m);
    dx = WB_NO_TENSOR;
    if (d_fc3 != WB_NO_TENSOR)
        dx = wl_matmul_bwd(m, wl_name(m, fn->fc3_op, ".backward"), d_fc3, in, &p->fc3, m->rows,
                           ffn_width(m), m->h, WB_NO_TENSOR);
    dx = wl_matmul_bwd(m, wl_name(m, fn->fc1_op, ".backward"), d_fc1, in, &p->fc1, m->rows, up,
                       m->h, dx);
    dx = wl_reduce_in_grad(m, nm->mlp_in, dx);
    return wl_norm_bwd(m, nm->norm2_op, sv->res1, &p->norm2, dx, d_out);
}

/* ---- the layer ------------------------------------------------------- */

uint32_t wl_layer_forward(wm *m, int local, uint32_t x, wm_saved *sv)
{
    const wm_layer_params *p = &m->lp[local];
    wm_ffn_saved *ex = sv->ex;
    memset(sv, 0xff, sizeof *sv); /* every id WB_NO_TENSOR until made */
    sv->ex = ex;
    sv->x = x;
    wl_build_seg_begin_layer(m->b, NULL);
    sv->n1 = norm_fwd(m, m->nm.norm1, m->nm.norm1_op, x, &p->norm1);
    attention_fwd(m, p, sv);
    mlp_fwd(m, p, sv);
    wl_build_seg_end(m->b);
    return sv->out;
}

uint32_t wl_layer_backward(wm *m, int local, const wm_saved *sv, uint32_t d_out)
{
    const wm_layer_params *p = &m->lp[local];
    uint32_t d_res1 = mlp_bwd(m, p, sv, d_out);
    return attention_bwd(m, p, sv, d_res1);
}
