/* The step program of one pipeline stage: for each micro-batch its forward
 * then its backward, then the optimizer once (the order of a single stage;
 * the 1F1B interleaving across stages is the pipeline schedule's business).
 * The first stage owns the embedding, the last the final norm, the output
 * layer and the vocab-parallel cross entropy; stages in between receive
 * their input and send their output (and the grads back) point to point.
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

static ms_link_kind link_for(const ms_scenario *sc, int span)
{
    return span <= sc->device.devices_per_node ? MS_LINK_INTRA_NODE : MS_LINK_INTER_NODE;
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
    m->s = (uint64_t)md->seq_length;
    m->mb = (uint64_t)pc->micro_batch_size;
    m->h = (uint64_t)md->hidden_size;
    m->a = (uint64_t)md->num_attention_heads;
    m->g = (uint64_t)md->num_query_groups;
    m->d = m->h / m->a;
    m->f = (uint64_t)md->ffn_hidden_size;
    m->V = (uint64_t)md->padded_vocab_size;
    m->t = (uint64_t)pc->tensor_model_parallel_size;
    m->dp = (uint64_t)(pc->data_parallel_size > 0 ? pc->data_parallel_size : 1);
    m->sp = pc->sequence_parallel;
    m->rows = m->s * m->mb;
    m->rows_act = m->sp ? m->rows / m->t : m->rows;
    m->dt = md->dtype;
    m->es = ms_dtype_size(md->dtype);
    m->flash = md->use_flash_attn;
    m->swiglu = md->swiglu;
    m->rms = md->normalization == MS_NORM_RMSNORM;
    m->rope = md->position_embedding_type == MS_POS_ROPE;
    m->bias = md->add_bias_linear;
    m->attn_drop = md->attention_dropout > 0;
    m->hidden_drop = md->hidden_dropout > 0;
    m->tp_group = pc->tensor_model_parallel_size;
    m->dp_group = (int)m->dp;
    /* Megatron's rank order (tp fastest, then cp, dp, pp): a TP group spans
     * t consecutive ranks, a DP group t*cp*dp of them. */
    m->tp_link = link_for(sc, m->tp_group);
    m->dp_link = link_for(sc, m->tp_group * pc->context_parallel_size * m->dp_group);
    m->stage = stage;
    m->n_stages = pc->pipeline_model_parallel_size;
    m->n_layers = md->num_layers / m->n_stages;
    m->layer0 = stage * m->n_layers;
    m->first = stage == 0;
    m->last = stage == m->n_stages - 1;
    m->micro_batches = pc->num_micro_batches;
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
    wb_op_add(m->b, &k, 0, &m->word.w, 1, "%s", nm->embed_op);
    uint32_t x = wb_out(m->b, "out", full, m->dt, MS_TK_ACTIVATION);
    if (!m->rope) {
        wm_elementwise(m, nm->pos, "embedding_add", MS_KC_ELEMENTWISE, WM_IN(x, m->pos.w),
                       (double)(m->rows * m->h), 1);
        x = wb_out(m->b, "out", full, m->dt, MS_TK_ACTIVATION);
    }
    x = wm_reduce_out(m, nm->embed, x);
    e->mask0 = WB_NO_TENSOR;
    if (m->hidden_drop) {
        wm_elementwise(m, nm->embed_dropout, "dropout", MS_KC_ELEMENTWISE, WM_IN(x),
                       (double)(m->rows_act * m->h), 2);
        e->mask0 = wb_out(m->b, "mask", m->rows_act * m->h, MS_DTYPE_INT8, MS_TK_ACTIVATION);
        x = wb_out(m->b, "out", wm_act_bytes(m), m->dt, MS_TK_ACTIVATION);
    }
    return x;
}

static void embedding_bwd(wm *m, const wm_ends *e, uint32_t d)
{
    const wm_names *nm = &m->nm;
    if (e->mask0 != WB_NO_TENSOR)
        d = wm_dropout_bwd(m, wm_name(m, nm->embed_dropout, ".backward"), d, e->mask0);
    d = wm_gather_out_grad(m, nm->embed, d);
    double n = (double)(m->rows * m->h);
    if (!m->rope) {
        wm_elementwise(m, wm_name(m, nm->pos, ".backward"), "embedding_backward",
                       MS_KC_ELEMENTWISE, WM_IN(d, m->pos.g), n, 1);
        wb_inplace(m->b, m->pos.g);
    }
    /* Scatter-add of the token rows into this rank's shard of the grad. */
    ms_kernel k = {.name = "embedding_backward", .cls = MS_KC_ELEMENTWISE, .dtype = m->dt,
                   .flops = n, .bytes = n * ((double)m->es + 8), .peer = -1};
    wb_op_add(m->b, &k, 0, WM_IN(d, m->word.g), "%s", wm_name(m, nm->embed_op, ".backward"));
    wb_inplace(m->b, m->word.g);
}

/* ---- last stage: final norm, output layer, cross entropy ------------- */

static void head_fwd(wm *m, uint32_t x, wm_ends *e)
{
    const wm_names *nm = &m->nm;
    uint64_t vt = m->V / m->t;
    e->x_last = x;
    e->fn = wm_norm(m, nm->final_norm_op, x, &m->final_norm);
    uint32_t in = wm_gather_in(m, nm->head, e->fn);
    uint32_t logits = wm_matmul(m, nm->head_op, in, &m->head, m->rows, vt, m->h);
    /* Megatron computes the loss on fp32 logits: the fp32 softmax is what
     * vocab_parallel_cross_entropy keeps for backward. */
    wm_elementwise(m, nm->loss, "cross_entropy", MS_KC_ELEMENTWISE, WM_IN(logits),
                   (double)(m->rows * vt), 5);
    e->softmax = wb_out(m->b, "softmax", m->rows * vt * 4, MS_DTYPE_FP32, MS_TK_ACTIVATION);
    uint32_t loss = wb_out(m->b, "loss", m->rows * 4, MS_DTYPE_FP32, MS_TK_ACTIVATION);
    /* The max, the sum of exps and the target logit, each over TP. */
    if (m->t > 1)
        wm_collective_inplace(m, wm_name(m, nm->loss, ".all_reduce"), MS_COMM_ALLREDUCE,
                              m->tp_group, m->tp_link, &loss, 1, 3.0 * (double)(m->rows * 4));
}

static uint32_t head_bwd(wm *m, const wm_ends *e)
{
    const wm_names *nm = &m->nm;
    uint64_t vt = m->V / m->t;
    wm_elementwise(m, wm_name(m, nm->loss, ".backward"), "cross_entropy_backward",
                   MS_KC_ELEMENTWISE, WM_IN(e->softmax), (double)(m->rows * vt), 2);
    uint32_t d_logits = wb_out(m->b, "grad_in", m->rows * vt * m->es, m->dt, MS_TK_TEMP);
    uint32_t in = m->sp && m->t > 1
                      ? wm_gather(m, wm_name(m, nm->head, ".backward.all_gather"), e->fn,
                                  MS_TK_COMM_BUFFER)
                      : e->fn;
    uint32_t dx = wm_matmul_bwd(m, wm_name(m, nm->head_op, ".backward"), d_logits, in, &m->head,
                                m->rows, vt, m->h, WB_NO_TENSOR);
    dx = wm_reduce_in_grad(m, nm->head, dx);
    return wm_norm_bwd(m, nm->final_norm_op, e->x_last, &m->final_norm, dx, WB_NO_TENSOR);
}

/* ---- stages in between ----------------------------------------------- */

static uint32_t p2p(wm *m, bool send, bool forward, uint32_t t)
{
    int mbi = m->b->micro_batch;
    int peer = m->stage + (send == forward ? 1 : -1);
    ms_kernel k = {.name = send ? "send" : "recv", .cls = MS_KC_COMM, .dtype = m->dt,
                   .bytes = -1, .comm = send ? MS_COMM_SEND : MS_COMM_RECV, .group_size = 2,
                   .link = link_for(m->sc, m->tp_group * m->sc->parallel.context_parallel_size *
                                               m->dp_group * m->n_stages),
                   .comm_bytes = (double)wm_act_bytes(m), .peer = peer,
                   .tag = 2 * mbi + (forward ? 0 : 1)};
    const char *name = forward ? (send ? "pipeline.send_forward" : "pipeline.recv_forward")
                               : (send ? "pipeline.send_backward" : "pipeline.recv_backward");
    if (send) {
        wb_op_add(m->b, &k, 0, &t, 1, "%s", name);
        return t;
    }
    wb_op_add(m->b, &k, 0, NULL, 0, "%s", name);
    return wb_out(m->b, "out", wm_act_bytes(m), m->dt, forward ? MS_TK_ACTIVATION : MS_TK_TEMP);
}

/* ---- the step ---------------------------------------------------------- */

static void micro_batch(wm *m, int mbi, wm_saved *sv)
{
    wb *b = m->b;
    wm_ends e = {WB_NO_TENSOR, WB_NO_TENSOR, WB_NO_TENSOR, WB_NO_TENSOR};
    bool final_mb = mbi == m->micro_batches - 1;
    b->micro_batch = mbi;
    b->phase = MS_PHASE_FORWARD;
    b->layer = MS_NONE;
    uint32_t x = m->first ? embedding_fwd(m, &e) : p2p(m, false, true, WB_NO_TENSOR);
    for (int l = 0; l < m->n_layers; l++) {
        b->layer = m->layer0 + l;
        x = wm_layer_forward(m, l, x, &sv[l]);
    }
    b->layer = MS_NONE;
    if (m->last)
        head_fwd(m, x, &e);
    else
        p2p(m, true, true, x);
    b->phase = MS_PHASE_BACKWARD;
    uint32_t d = m->last ? head_bwd(m, &e) : p2p(m, false, false, WB_NO_TENSOR);
    if (final_mb) {
        wm_grad_reduce(m, m->g_head);
        wm_grad_reduce(m, m->g_final);
    }
    for (int l = m->n_layers - 1; l >= 0; l--) {
        b->layer = m->layer0 + l;
        d = wm_layer_backward(m, l, &sv[l], d);
        if (final_mb)
            wm_grad_reduce(m, m->g_layer0 + l);
    }
    b->layer = MS_NONE;
    if (m->first) {
        embedding_bwd(m, &e, d);
        if (final_mb)
            wm_grad_reduce(m, m->g_embed);
    } else {
        p2p(m, true, false, d);
    }
}

static ms_status check_shapes(const ms_scenario *sc, int stage, ms_diag *d)
{
    const ms_model_config *md = &sc->model;
    const ms_parallel_config *pc = &sc->parallel;
    int t = pc->tensor_model_parallel_size, pp = pc->pipeline_model_parallel_size;
    if (md->num_layers <= 0 || md->hidden_size <= 0 || md->ffn_hidden_size <= 0 ||
        md->num_attention_heads <= 0 || md->num_query_groups <= 0 || md->seq_length <= 0 ||
        md->padded_vocab_size <= 0 || t <= 0 || pp <= 0 || pc->micro_batch_size <= 0 ||
        pc->num_micro_batches <= 0 || ms_dtype_size(md->dtype) == 0)
        return ms_diag_set(d, MS_EINVAL, "workload: model and parallel sizes must be > 0");
    if (stage < 0 || stage >= pp)
        return ms_diag_set(d, MS_EINVAL, "workload: stage %d outside 0..%d", stage, pp - 1);
    if (md->hidden_size % md->num_attention_heads || md->num_attention_heads % t ||
        md->num_query_groups % t || md->num_attention_heads % md->num_query_groups ||
        md->ffn_hidden_size % t || md->padded_vocab_size % t || md->num_layers % pp ||
        (pc->sequence_parallel && md->seq_length % t))
        return ms_diag_set(d, MS_EINVAL, "workload: shapes do not divide over TP %d / PP %d "
                           "(load the scenario with ms_scenario_load to see which)", t, pp);
    if (pc->context_parallel_size > 1)
        return ms_diag_set(d, MS_EUNSUPPORTED,
                           "workload: context_parallel_size %d: context parallelism is not "
                           "built yet", pc->context_parallel_size);
    if (pc->num_layers_per_virtual_pipeline_stage > 0)
        return ms_diag_set(d, MS_EUNSUPPORTED, "workload: interleaved pipeline stages "
                           "(num_layers_per_virtual_pipeline_stage) are not built yet");
    return MS_OK;
}

/* Guard the builder's integer sizes: the largest tensor (scores or fp32
 * logits) and the number of ops must stay well inside their types. */
static ms_status check_limits(const ms_scenario *sc, ms_diag *d)
{
    const ms_model_config *md = &sc->model;
    const ms_parallel_config *pc = &sc->parallel;
    double s = md->seq_length, b = pc->micro_batch_size;
    double big = fmax(b * md->num_attention_heads * s * s * 4,
                      fmax(b * s * md->padded_vocab_size * 4, b * s * md->ffn_hidden_size * 8));
    if (big > 0x1p60)
        return ms_diag_set(d, MS_ERANGE, "workload: a %.3g-byte tensor is beyond what memsim "
                           "models", big);
    double ops = (double)pc->num_micro_batches *
                 ((double)md->num_layers / pc->pipeline_model_parallel_size * 80 + 40);
    if (ops > WB_MAX_OPS)
        return ms_diag_set(d, MS_ERANGE, "workload: about %.3g ops in one step (%d micro-batches "
                           "x %d layers); the limit is %u", ops, pc->num_micro_batches,
                           md->num_layers, WB_MAX_OPS);
    return MS_OK;
}

ms_status ms_program_build(const ms_scenario *sc, int stage, ms_program **out, ms_diag *d)
{
    if (out != NULL)
        *out = NULL;
    if (sc == NULL || out == NULL)
        return ms_diag_set(d, MS_EINVAL, "ms_program_build: NULL argument");
    ms_status st = check_shapes(sc, stage, d);
    if (st == MS_OK)
        st = check_limits(sc, d);
    if (st != MS_OK)
        return st;
    wb b;
    wb_init(&b);
    wm m;
    memset(&m, 0, sizeof m);
    m.b = &b;
    init_shapes(&m, sc, stage);
    wm_saved *sv = calloc((size_t)m.n_layers + 1, sizeof *sv);
    st = sv == NULL ? MS_ENOMEM : wm_params_create(&m);
    for (int mbi = 0; st == MS_OK && mbi < m.micro_batches; mbi++) {
        micro_batch(&m, mbi, sv);
        st = b.err;
    }
    if (st == MS_OK) {
        wm_optimizer(&m);
        st = wb_finish(&b, stage, out);
    }
    free(sv);
    wm_params_release(&m);
    wb_release(&b);
    if (st != MS_OK)
        return ms_diag_set(d, st, "workload: building the step program of stage %d failed: %s",
                           stage, ms_strerror(st));
    return MS_OK;
}
