/* The step program of one pipeline stage: the forwards and backwards of its
 * micro-batches (and model chunks) in the order of Megatron's pipeline
 * schedule (workload_pipeline.c), then the optimizer once.  The first stage
 * owns the embedding (in its first chunk), the last the final norm, the
 * output layer and the vocab-parallel cross entropy (in its last chunk);
 * every other chunk receives its input and sends its output (and the grads
 * back) point to point.
 *
 * Op names follow the frameworks users read profiles of: MindFormers' module
 * paths for llama (layers.N.attention.wq.matmul, layers.N.feed_forward.w1.
 * activation.silu, ...), Megatron-core's for gpt (layers.N.self_attention.
 * linear_qkv, layers.N.mlp.linear_fc1, ...), so policies can select ops by
 * the regexes of MindFormers' select_recompute and swap configurations.
 * A backward op is named after its forward op + ".backward". */
#include "workload_model.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static const wm_names llama_names = {
    .norm1 = "attention_norm", .norm1_op = "attention_norm.norm",
    .attn_in = "attention",
    .q = "attention.wq", .q_op = "attention.wq.matmul",
    .k = "attention.wk", .k_op = "attention.wk.matmul",
    .v = "attention.wv", .v_op = "attention.wv.matmul",
    .rope = "attention.apply_rotary_emb",
    .core = "attention.core",
    .flash = "attention.flash_attention",
    .qk = "attention.batch_matmul_q_k", .softmax = "attention.softmax",
    .attn_dropout = "attention.attention_dropout", .av = "attention.batch_matmul",
    .proj = "attention.wo", .proj_op = "attention.wo.matmul",
    .res1 = "attention_add",
    .norm2 = "ffn_norm", .norm2_op = "ffn_norm.norm",
    .mlp_in = "feed_forward",
    .fc1 = "feed_forward.w1", .fc1_op = "feed_forward.w1.matmul",
    .fc3 = "feed_forward.w3", .fc3_op = "feed_forward.w3.matmul",
    .act_seg = "feed_forward.activation", .act_op = "feed_forward.w1.activation.silu",
    .mul = "feed_forward.mul",
    .fc2 = "feed_forward.w2", .fc2_op = "feed_forward.w2.matmul",
    .res2 = "ffn_add",
    .embed = "tok_embeddings", .embed_op = "tok_embeddings.gather",
    .pos = "position_embeddings", .embed_dropout = "embedding_dropout",
    .final_norm = "norm_out", .final_norm_op = "norm_out.norm",
    .head = "lm_head", .head_op = "lm_head.matmul",
    .loss = "loss.cross_entropy",
};

static const wm_names gpt_names = {
    .norm1 = "input_layernorm", .norm1_op = "input_layernorm",
    .attn_in = "self_attention.linear_qkv",
    .qkv = "self_attention.linear_qkv", .qkv_op = "self_attention.linear_qkv",
    .rope = "self_attention.apply_rotary_pos_emb",
    .core = "self_attention.core_attention",
    .flash = "self_attention.core_attention.flash_attention",
    .qk = "self_attention.core_attention.baddbmm",
    .softmax = "self_attention.core_attention.softmax",
    .attn_dropout = "self_attention.core_attention.dropout",
    .av = "self_attention.core_attention.bmm",
    .proj = "self_attention.linear_proj", .proj_op = "self_attention.linear_proj",
    .res1 = "self_attn_bda",
    .norm2 = "pre_mlp_layernorm", .norm2_op = "pre_mlp_layernorm",
    .mlp_in = "mlp.linear_fc1",
    .fc1 = "mlp.linear_fc1", .fc1_op = "mlp.linear_fc1",
    .act_seg = "mlp.activation", .act_op = "mlp.activation",
    .fc2 = "mlp.linear_fc2", .fc2_op = "mlp.linear_fc2",
    .res2 = "mlp_bda",
    .embed = "embedding.word_embeddings", .embed_op = "embedding.word_embeddings",
    .pos = "embedding.position_embeddings", .embed_dropout = "embedding.embedding_dropout",
    .final_norm = "final_layernorm", .final_norm_op = "final_layernorm",
    .head = "output_layer", .head_op = "output_layer",
    .loss = "loss.vocab_parallel_cross_entropy",
};

/* What the first and last stages keep for their backward. */
typedef struct wm_ends {
    uint32_t mask0;        /* embedding dropout mask */
    uint32_t x_last, fn;   /* final norm input and output */
    uint32_t softmax;      /* fp32 softmax of the logits */
} wm_ends;

/* ---- shapes ------------------------------------------------------------ */

static ms_link_kind link_for(const ms_scenario *sc, int64_t span)
{
    return span <= sc->device.devices_per_node ? MS_LINK_INTRA_NODE : MS_LINK_INTER_NODE;
}

int wl_global_layer(const wm *m, int local)
{
    int c = m->chunks - 1;
    while (c > 0 && local < m->chunk_local0[c])
        c--;
    return m->chunk_first[c] + (local - m->chunk_local0[c]);
}

ms_status wl_layout(wm *m, const ms_scenario *sc, int stage)
{
    int chunks = ms_scenario_chunks(sc);
    m->chunks = chunks;
    m->chunk_first = calloc((size_t)chunks, sizeof *m->chunk_first);
    m->chunk_count = calloc((size_t)chunks, sizeof *m->chunk_count);
    m->chunk_local0 = calloc((size_t)chunks, sizeof *m->chunk_local0);
    if (m->chunk_first == NULL || m->chunk_count == NULL || m->chunk_local0 == NULL)
        return MS_ENOMEM;
    m->n_layers = m->max_lv = 0;
    for (int c = 0; c < chunks; c++) {
        ms_status st =
            ms_scenario_chunk_layers(sc, stage, c, &m->chunk_first[c], &m->chunk_count[c]);
        if (st != MS_OK)
            return st;
        if (m->chunk_count[c] < 0 || m->chunk_first[c] < 0 ||
            m->chunk_first[c] + m->chunk_count[c] > sc->model.num_layers)
            return MS_ERANGE;
        m->chunk_local0[c] = m->n_layers;
        m->n_layers += m->chunk_count[c];
        if (m->chunk_count[c] > m->max_lv)
            m->max_lv = m->chunk_count[c];
    }
    return MS_OK;
}

void wl_layout_release(wm *m)
{
    free(m->chunk_first);
    free(m->chunk_count);
    free(m->chunk_local0);
    m->chunk_first = m->chunk_count = m->chunk_local0 = NULL;
}

static void init_parallel(wm *m, const ms_scenario *sc, int stage)
{
    const ms_parallel_config *pc = &sc->parallel;
    int64_t dp = pc->data_parallel_size > 0 ? pc->data_parallel_size : 1;
    m->t = (uint64_t)pc->tensor_model_parallel_size;
    m->c = (uint64_t)(pc->context_parallel_size > 0 ? pc->context_parallel_size : 1);
    /* Grads are averaged over data and context parallel ranks alike, and the
     * distributed optimizer shards over both (Megatron's dp-cp group). */
    m->dp = (uint64_t)dp * m->c;
    m->sp = pc->sequence_parallel;
    m->tp_overlap = pc->tp_comm_overlap;
    m->tp_group = pc->tensor_model_parallel_size;
    m->cp_group = (int)m->c;
    m->dp_group = (int)m->dp;
    /* Megatron's rank order (tp fastest, then cp, dp, pp): a TP group spans
     * t consecutive ranks, a CP group t*cp of them, a DP group t*cp*dp. */
    m->tp_link = link_for(sc, m->tp_group);
    m->cp_link = link_for(sc, (int64_t)m->t * (int64_t)m->c);
    m->dp_link = link_for(sc, (int64_t)m->t * (int64_t)m->c * dp);
    m->stage = stage;
    m->n_stages = pc->pipeline_model_parallel_size;
    m->link_prev = wl_stage_link(sc, stage, (stage + m->n_stages - 1) % m->n_stages);
    m->link_next = wl_stage_link(sc, stage, (stage + 1) % m->n_stages);
    m->first = stage == 0;
    m->last = stage == m->n_stages - 1;
    m->micro_batches = pc->num_micro_batches;
}

static void init_shapes(wm *m, const ms_scenario *sc, int stage)
{
    const ms_model_config *md = &sc->model;
    const ms_parallel_config *pc = &sc->parallel;
    m->sc = sc;
    m->llama = md->arch == MS_ARCH_LLAMA;
    m->nm = m->llama ? llama_names : gpt_names;
    if (m->llama && !md->swiglu)
        m->nm.act_op = "feed_forward.w1.activation.gelu";
    init_parallel(m, sc, stage);
    m->s = (uint64_t)md->seq_length;
    m->sq = m->s / m->c;
    m->mb = (uint64_t)pc->micro_batch_size;
    m->h = (uint64_t)md->hidden_size;
    m->a = (uint64_t)md->num_attention_heads;
    m->g = (uint64_t)md->num_query_groups;
    m->d = m->h / m->a;
    m->f = (uint64_t)md->ffn_hidden_size;
    m->V = (uint64_t)md->padded_vocab_size;
    m->rows = m->sq * m->mb;
    m->rows_act = m->sp ? m->rows / m->t : m->rows;
    m->dt = md->dtype;
    m->es = ms_dtype_size(md->dtype);
    m->flash = md->use_flash_attn;
    m->swiglu = md->swiglu;
    m->rms = md->normalization == MS_NORM_RMSNORM;
    m->rope = md->position_embedding_type == MS_POS_ROPE;
    m->bias = md->add_bias_linear;
    m->fp8 = md->fp8 != MS_FP8_NONE;
    m->attn_drop = md->attention_dropout > 0;
    m->hidden_drop = md->hidden_dropout > 0;
    wl_ffn_names_init(m, &m->ffn, m->llama ? "feed_forward." : "mlp.");
    m->moe = md->num_experts > 0;
    if (m->moe)
        wl_moe_shapes(m);
}

/* ---- first stage: the embedding ------------------------------------------ */

static uint32_t embedding_fwd(wm *m, wm_ends *e)
{
    const wm_names *nm = &m->nm;
    uint64_t full = m->rows * m->h * m->es;
    /* Vocab-parallel lookup: rows outside this rank's shard are zero, the
     * partial embeddings are summed over TP. */
    ms_kernel k = {.name = "embedding", .cls = MS_KC_ELEMENTWISE, .dtype = m->dt,
                   .flops = 0, .bytes = 2.0 * (double)full, .peer = -1};
    wl_build_op_add(m->b, &k, 0, &m->word.w, 1, "%s", nm->embed_op);
    uint32_t x = wl_build_out(m->b, "out", full, m->dt, MS_TK_ACTIVATION);
    if (!m->rope) {
        wl_elementwise(m, nm->pos, "embedding_add", MS_KC_ELEMENTWISE, WM_IN(x, m->pos.w),
                       (double)(m->rows * m->h), 1);
        x = wl_build_out(m->b, "out", full, m->dt, MS_TK_ACTIVATION);
    }
    x = wl_reduce_out(m, nm->embed, x);
    e->mask0 = WB_NO_TENSOR;
    if (m->hidden_drop) {
        wl_elementwise(m, nm->embed_dropout, "dropout", MS_KC_ELEMENTWISE, WM_IN(x),
                       (double)(m->rows_act * m->h), 2);
        e->mask0 = wl_build_out(m->b, "mask", m->rows_act * m->h, MS_DTYPE_INT8, MS_TK_ACTIVATION);
        x = wl_build_out(m->b, "out", wl_act_bytes(m), m->dt, MS_TK_ACTIVATION);
    }
    return x;
}

static void embedding_bwd(wm *m, const wm_ends *e, uint32_t d)
{
    const wm_names *nm = &m->nm;
    if (e->mask0 != WB_NO_TENSOR)
        d = wl_dropout_bwd(m, wl_name(m, nm->embed_dropout, ".backward"), d, e->mask0);
    d = wl_gather_out_grad(m, nm->embed, d);
    double n = (double)(m->rows * m->h);
    if (!m->rope) {
        wl_elementwise(m, wl_name(m, nm->pos, ".backward"), "embedding_backward", MS_KC_ELEMENTWISE,
                       WM_IN(d, m->pos.g), n, 1);
        wl_build_inplace(m->b, m->pos.g);
    }
    /* Scatter-add of the token rows into this rank's shard of the grad. */
    ms_kernel k = {.name = "embedding_backward", .cls = MS_KC_ELEMENTWISE, .dtype = m->dt,
                   .flops = n, .bytes = n * ((double)m->es + 8), .peer = -1};
    wl_build_op_add(m->b, &k, 0, WM_IN(d, m->word.g), "%s", wl_name(m, nm->embed_op, ".backward"));
    wl_build_inplace(m->b, m->word.g);
}

/* ---- last stage: final norm, output layer, cross entropy ------------- */

static void head_fwd(wm *m, uint32_t x, wm_ends *e)
{
    const wm_names *nm = &m->nm;
    uint64_t vt = m->V / m->t;
    e->x_last = x;
    e->fn = wl_norm(m, nm->final_norm_op, x, &m->final_norm);
    uint32_t in = wl_gather_in(m, nm->head, e->fn);
    uint32_t logits = wl_matmul(m, nm->head_op, in, &m->head, m->rows, vt, m->h);
    /* Megatron computes the loss on fp32 logits: the fp32 softmax is what
     * vocab_parallel_cross_entropy keeps for backward. */
    wl_elementwise(m, nm->loss, "cross_entropy", MS_KC_ELEMENTWISE, WM_IN(logits),
                   (double)(m->rows * vt), 5);
    e->softmax = wl_build_out(m->b, "softmax", m->rows * vt * 4, MS_DTYPE_FP32, MS_TK_ACTIVATION);
    uint32_t loss = wl_build_out(m->b, "loss", m->rows * 4, MS_DTYPE_FP32, MS_TK_ACTIVATION);
    /* The max, the sum of exps and the target logit, each over TP. */
    if (m->t > 1)
        wl_collective_inplace(m, wl_name(m, nm->loss, ".all_reduce"), MS_COMM_ALLREDUCE,
                              wl_tp_group(m), m->tp_link, &loss, 1, 3.0 * (double)(m->rows * 4));
}

static uint32_t head_bwd(wm *m, const wm_ends *e)
{
    const wm_names *nm = &m->nm;
    uint64_t vt = m->V / m->t;
    wl_elementwise(m, wl_name(m, nm->loss, ".backward"), "cross_entropy_backward",
                   MS_KC_ELEMENTWISE, WM_IN(e->softmax), (double)(m->rows * vt), 2);
    uint32_t d_logits = wl_build_out(m->b, "grad_in", m->rows * vt * m->es, m->dt, MS_TK_TEMP);
    uint32_t in = m->sp && m->t > 1 ? wl_gather(m, wl_name(m, nm->head, ".backward.all_gather"),
                                                e->fn, MS_TK_COMM_BUFFER)
                                    : e->fn;
    uint32_t dx = wl_matmul_bwd(m, wl_name(m, nm->head_op, ".backward"), d_logits, in, &m->head,
                                m->rows, vt, m->h, WB_NO_TENSOR);
    dx = wl_reduce_in_grad(m, nm->head, dx);
    return wl_norm_bwd(m, nm->final_norm_op, e->x_last, &m->final_norm, dx, WB_NO_TENSOR);
}

/* ---- the step ---------------------------------------------------------- */

static bool embeds(const wm *m, int chunk)
{
    return m->first && chunk == 0;
}

static bool heads(const wm *m, int chunk)
{
    return m->last && chunk == m->chunks - 1;
}

/* The first micro-batch's forward is where overlapped parameter gathers
 * run (wl_param_refresh). */
static bool gathers_params(const wm *m, const wm_step *st)
{
    return st->micro_batch == 0 && m->sc->parallel.overlap_param_gather;
}

static void refresh_layer(wm *m, int local)
{
    wl_param_refresh(m, m->g_layer[local]);
    for (int e = 0; m->moe && e < (int)m->n_local; e++)
        wl_param_refresh(m, m->g_layer[local] + 1 + e);
}

static void forward_unit(wm *m, const wm_step *st, wm_saved *sv, wm_ends *e)
{
    wb *b = m->b;
    bool refresh = gathers_params(m, st);
    *e = (wm_ends){WB_NO_TENSOR, WB_NO_TENSOR, WB_NO_TENSOR, WB_NO_TENSOR};
    b->micro_batch = st->micro_batch;
    b->chunk = st->chunk;
    b->phase = MS_PHASE_FORWARD;
    b->layer = MS_NONE;
    if (refresh && embeds(m, st->chunk))
        wl_param_refresh(m, m->g_embed);
    uint32_t x = embeds(m, st->chunk) ? embedding_fwd(m, e) : wl_p2p(m, false, true, WB_NO_TENSOR);
    for (int i = 0; i < m->chunk_count[st->chunk]; i++) {
        int local = m->chunk_local0[st->chunk] + i;
        b->layer = m->chunk_first[st->chunk] + i;
        if (refresh)
            refresh_layer(m, local);
        x = wl_layer_forward(m, local, x, &sv[i]);
    }
    b->layer = MS_NONE;
    if (refresh && heads(m, st->chunk)) {
        wl_param_refresh(m, m->g_final);
        wl_param_refresh(m, m->g_head);
    }
    if (heads(m, st->chunk))
        head_fwd(m, x, e);
    else
        wl_p2p(m, true, true, x);
}

static void backward_unit(wm *m, const wm_step *st, const wm_saved *sv, const wm_ends *e)
{
    wb *b = m->b;
    /* The last micro-batch's backward is where an overlapped DP reduction
     * of each group starts (else the optimizer's start: wl_optimizer). */
    bool reduce_here =
        st->micro_batch == m->micro_batches - 1 && m->sc->parallel.overlap_grad_reduce;
    b->micro_batch = st->micro_batch;
    b->chunk = st->chunk;
    b->phase = MS_PHASE_BACKWARD;
    b->layer = MS_NONE;
    bool head = heads(m, st->chunk);
    uint32_t d = head ? head_bwd(m, e) : wl_p2p(m, false, false, WB_NO_TENSOR);
    if (reduce_here && head) {
        wl_grad_reduce(m, m->g_head);
        wl_grad_reduce(m, m->g_final);
    }
    for (int i = m->chunk_count[st->chunk] - 1; i >= 0; i--) {
        int local = m->chunk_local0[st->chunk] + i;
        b->layer = m->chunk_first[st->chunk] + i;
        d = wl_layer_backward(m, local, &sv[i], d);
        if (reduce_here)
            wl_layer_grad_reduce(m, local);
    }
    b->layer = MS_NONE;
    if (embeds(m, st->chunk)) {
        embedding_bwd(m, e, d);
        if (reduce_here)
            wl_grad_reduce(m, m->g_embed);
    } else {
        wl_p2p(m, true, false, d);
    }
}

/* ---- later micro-batches as copies of the first (wl_build_repeat) ---- */

/* The first forward and backward of each chunk, once made, and where each
 * unit's forward lies (a copied backward reads its own forward's tensors). */
typedef struct wm_repeats {
    bool on;
    wb_unit *fwd, *bwd;   /* per chunk; micro_batch: the one copied, or below */
    wb_unit *fwd_at;      /* per unit: its forward's marks */
} wm_repeats;

enum { FIRST_NOT_YET = -1, FIRST_NOT_REPEATABLE = -2 };

static void repeats_free(wm_repeats *r)
{
    free(r->fwd);
    free(r->bwd);
    free(r->fwd_at);
}

static ms_status repeats_alloc(const wm *m, bool on, wm_repeats *r)
{
    size_t units = (size_t)m->micro_batches * (size_t)m->chunks;
    *r = (wm_repeats){.on = on};
    r->fwd = calloc((size_t)m->chunks, sizeof *r->fwd);
    r->bwd = calloc((size_t)m->chunks, sizeof *r->bwd);
    r->fwd_at = calloc(units, sizeof *r->fwd_at);
    if (r->fwd == NULL || r->bwd == NULL || r->fwd_at == NULL) {
        repeats_free(r);
        return MS_ENOMEM;
    }
    for (int c = 0; c < m->chunks; c++)
        r->fwd[c].micro_batch = r->bwd[c].micro_batch = FIRST_NOT_YET;
    return MS_OK;
}

/* A copied forward keeps for its backward what the first kept, its own. */
typedef struct wm_move {
    uint32_t lo, hi, by;
} wm_move;

static uint32_t moved(const wm_move *mv, uint32_t t)
{
    return t >= mv->lo && t < mv->hi ? t + mv->by : t;
}

static void move_ffn(wm_ffn_saved *d, const wm_ffn_saved *s, const wm_move *mv)
{
    *d = (wm_ffn_saved){moved(mv, s->fc1), moved(mv, s->fc3), moved(mv, s->so), moved(mv, s->act),
                        moved(mv, s->act8)};
}

static void move_saved(const wm *m, wm_saved *d, const wm_saved *s, const wm_move *mv)
{
    wm_ffn_saved *ex = d->ex;
    *d = (wm_saved){
        .x = moved(mv, s->x), .n1 = moved(mv, s->n1), .qkv = moved(mv, s->qkv),
        .q = moved(mv, s->q), .k = moved(mv, s->k), .v = moved(mv, s->v),
        .qr = moved(mv, s->qr), .kr = moved(mv, s->kr), .probs = moved(mv, s->probs),
        .mask_a = moved(mv, s->mask_a), .probs_d = moved(mv, s->probs_d),
        .ctx = moved(mv, s->ctx), .ctx8 = moved(mv, s->ctx8), .lse = moved(mv, s->lse),
        .mask1 = moved(mv, s->mask1),
        .res1 = moved(mv, s->res1), .n2 = moved(mv, s->n2), .mask2 = moved(mv, s->mask2),
        .out = moved(mv, s->out), .rprobs = moved(mv, s->rprobs), .rmap = moved(mv, s->rmap),
        .xin = moved(mv, s->xin), .comb = moved(mv, s->comb), .ex = ex};
    move_ffn(&d->ffn, &s->ffn, mv);
    for (uint64_t e = 0; m->moe && e < m->n_local; e++)
        move_ffn(&ex[e], &s->ex[e], mv);
}

static void move_ends(wm_ends *d, const wm_ends *s, const wm_move *mv)
{
    *d = (wm_ends){moved(mv, s->mask0), moved(mv, s->x_last), moved(mv, s->fn),
                   moved(mv, s->softmax)};
}

/* Per (micro-batch, chunk): what its forward keeps for its backward. */
typedef struct wm_units {
    wm_saved *sv;     /* units x max_lv */
    wm_ends *ends;    /* units */
    wm_ffn_saved *ex; /* units x max_lv x local experts */
} wm_units;

static void units_free(wm_units *u)
{
    free(u->sv);
    free(u->ends);
    free(u->ex);
}

static ms_status units_alloc(const wm *m, wm_units *u)
{
    size_t units = (size_t)m->micro_batches * (size_t)m->chunks;
    size_t layers = units * (size_t)(m->max_lv > 0 ? m->max_lv : 1);
    memset(u, 0, sizeof *u);
    u->sv = calloc(layers, sizeof *u->sv);
    u->ends = calloc(units, sizeof *u->ends);
    if (m->moe)
        u->ex = calloc(layers * m->n_local, sizeof *u->ex);
    if (u->sv == NULL || u->ends == NULL || (m->moe && u->ex == NULL)) {
        units_free(u);
        return MS_ENOMEM;
    }
    for (size_t i = 0; m->moe && i < layers; i++)
        u->sv[i].ex = u->ex + i * m->n_local;
    return MS_OK;
}

static size_t unit_of(const wm *m, int mb, int chunk)
{
    return (size_t)mb * (size_t)m->chunks + (size_t)chunk;
}

static wm_saved *saved_of(const wm *m, const wm_units *u, size_t unit)
{
    return u->sv + unit * (size_t)(m->max_lv > 0 ? m->max_lv : 1);
}

/* The first of its kind becomes the one copied, if it can be. */
static void keep_first(const wm *m, wb_unit *first, const wb_unit *made)
{
    if (first->micro_batch != FIRST_NOT_YET)
        return;
    *first = *made;
    if (!wl_build_unit_repeatable(m->b, first))
        first->micro_batch = FIRST_NOT_REPEATABLE;
}

static void forward_step(wm *m, const wm_step *st, wm_units *u, wm_repeats *r)
{
    size_t unit = unit_of(m, st->micro_batch, st->chunk);
    wb_unit *first = &r->fwd[st->chunk], *at = &r->fwd_at[unit];
    at->micro_batch = st->micro_batch;
    wl_build_mark(m->b, &at->from);
    if (r->on && first->micro_batch >= 0) {
        wl_build_repeat(m->b, first, st->micro_batch, 0,
                        wl_p2p_tag_shift(m, first->micro_batch, st->micro_batch));
        wl_build_mark(m->b, &at->to);
        size_t from = unit_of(m, first->micro_batch, st->chunk);
        wm_move mv = {first->from.tensor, first->to.tensor, at->from.tensor - first->from.tensor};
        for (int i = 0; i < m->chunk_count[st->chunk]; i++)
            move_saved(m, &saved_of(m, u, unit)[i], &saved_of(m, u, from)[i], &mv);
        move_ends(&u->ends[unit], &u->ends[from], &mv);
        return;
    }
    forward_unit(m, st, saved_of(m, u, unit), &u->ends[unit]);
    wl_build_mark(m->b, &at->to);
    if (!gathers_params(m, st)) /* other ops: never copied from */
        keep_first(m, first, at);
}

static void backward_step(wm *m, const wm_step *st, wm_units *u, wm_repeats *r)
{
    size_t unit = unit_of(m, st->micro_batch, st->chunk);
    const wb_unit *fwd = &r->fwd_at[unit];
    wb_unit *first = &r->bwd[st->chunk];
    /* The last micro-batch's backward starts the overlapped DP reduction:
     * other ops, never copied nor copied from. */
    bool reduce_here =
        st->micro_batch == m->micro_batches - 1 && m->sc->parallel.overlap_grad_reduce;
    if (r->on && !reduce_here && first->micro_batch >= 0 &&
        fwd->to.tensor - fwd->from.tensor == first->pair_hi - first->pair_lo) {
        wl_build_repeat(m->b, first, st->micro_batch, fwd->from.tensor,
                        wl_p2p_tag_shift(m, first->micro_batch, st->micro_batch));
        return;
    }
    wb_unit made = {.pair_lo = fwd->from.tensor, .pair_hi = fwd->to.tensor,
                    .micro_batch = st->micro_batch};
    wl_build_mark(m->b, &made.from);
    backward_unit(m, st, saved_of(m, u, unit), &u->ends[unit]);
    wl_build_mark(m->b, &made.to);
    if (!reduce_here)
        keep_first(m, first, &made);
}

static ms_status build_steps(wm *m, bool repeat)
{
    size_t units = (size_t)m->micro_batches * (size_t)m->chunks;
    wm_units u;
    wm_repeats r;
    wm_step *steps = malloc(2 * units * sizeof *steps);
    ms_status st = steps == NULL ? MS_ENOMEM : units_alloc(m, &u);
    if (st == MS_OK && (st = repeats_alloc(m, repeat, &r)) != MS_OK)
        units_free(&u);
    if (st != MS_OK) {
        free(steps);
        return st;
    }
    wl_schedule(m->n_stages, m->stage, m->micro_batches, m->chunks, steps);
    for (size_t k = 0; k < 2 * units && m->b->err == MS_OK; k++) {
        if (steps[k].forward)
            forward_step(m, &steps[k], &u, &r);
        else
            backward_step(m, &steps[k], &u, &r);
    }
    m->b->chunk = 0;
    free(steps);
    units_free(&u);
    repeats_free(&r);
    return m->b->err;
}

/* About 40 ops a layer and micro-batch, forward and backward, and some 10
 * more a local expert (counted on the shipped scenarios), plus a few per
 * parameter group for the grad reductions and the optimizer. */
static size_t ops_estimate(const wm *m)
{
    size_t experts = m->moe ? (size_t)m->n_local : 0;
    size_t units = (size_t)m->micro_batches * (size_t)m->n_layers;
    return units * (48 + 12 * experts) + 8 * (size_t)m->n_layers * (1 + experts) + 256;
}

ms_status ms_program_build(const ms_scenario *sc, int stage, ms_program **out, ms_diag *d)
{
    return wl_program_build(sc, stage, true, out, d);
}

ms_status wl_program_build(const ms_scenario *sc, int stage, bool repeat, ms_program **out,
                           ms_diag *d)
{
    if (out != NULL)
        *out = NULL;
    if (sc == NULL || out == NULL)
        return ms_diag_set(d, MS_EINVAL, "ms_program_build: NULL argument");
    ms_status st = wl_check_scenario(sc, stage, d);
    if (st != MS_OK)
        return st;
    wb b;
    wl_build_init(&b);
    wm m;
    memset(&m, 0, sizeof m);
    m.b = &b;
    init_shapes(&m, sc, stage);
    st = wl_layout(&m, sc, stage);
    if (st == MS_OK) {
        wl_build_reserve(&b, ops_estimate(&m));
        st = wl_params_create(&m);
    }
    if (st == MS_OK)
        st = build_steps(&m, repeat);
    if (st == MS_OK) {
        wl_optimizer(&m);
        st = wl_build_finish(&b, stage, out);
    }
    wl_params_release(&m);
    wl_layout_release(&m);
    wl_build_release(&b);
    if (st != MS_OK)
        return ms_diag_set(d, st, "workload: building the step program of stage %d failed: %s",
                           stage, ms_strerror(st));
    return MS_OK;
}
