/* Memory figures: what a stage's program holds under its schedule, and
 * Megatron-LM's theoretical memory of the first stage, so the two can be
 * compared (docs/memory-formulas.md, tests/unit/test_workload_pipeline.c). */
#include "workload_model.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ---- the program --------------------------------------------------------- */

typedef struct unit_span {
    int64_t first_fwd, last_bwd; /* op indices, -1 if none */
    uint64_t saved;
} unit_span;

static void count_units(const ms_program_view *v, uint32_t *mbs, uint32_t *chunks)
{
    int32_t mb = -1, ch = 0;
    for (uint32_t i = 0; i < v->n_ops; i++) {
        if (v->ops[i].micro_batch > mb)
            mb = v->ops[i].micro_batch;
        if (v->ops[i].chunk > ch)
            ch = v->ops[i].chunk;
    }
    *mbs = (uint32_t)(mb + 1);
    *chunks = (uint32_t)(ch + 1);
}

static void unit_spans(const ms_program_view *v, uint32_t chunks, unit_span *u)
{
    for (uint32_t i = 0; i < v->n_ops; i++) {
        const ms_op *op = &v->ops[i];
        if (op->micro_batch == MS_NONE || op->phase == MS_PHASE_OPTIMIZER)
            continue;
        unit_span *s = &u[(uint32_t)op->micro_batch * chunks + (uint32_t)op->chunk];
        if (op->phase == MS_PHASE_FORWARD && s->first_fwd < 0)
            s->first_fwd = i;
        if (op->phase == MS_PHASE_BACKWARD)
            s->last_bwd = i;
    }
}

static void saved_bytes(const ms_program_view *v, uint32_t chunks, unit_span *u,
                        ms_program_memory *out)
{
    for (uint32_t i = 0; i < v->n_tensors; i++) {
        const ms_tensor *t = &v->tensors[i];
        if (t->persistent) {
            out->persistent_bytes += t->bytes;
            continue;
        }
        if (!t->saved_for_backward || t->producer == MS_NONE)
            continue;
        const ms_op *op = &v->ops[t->producer];
        if (op->micro_batch == MS_NONE)
            continue;
        u[(uint32_t)op->micro_batch * chunks + (uint32_t)op->chunk].saved += t->bytes;
        out->saved_bytes += t->bytes;
        if (op->micro_batch == 0)
            out->saved_bytes_mb0 += t->bytes;
    }
}

/* Sweep the op order: a unit counts from its first forward op through its
 * last backward op. */
static ms_status sweep(const ms_program_view *v, const unit_span *u, size_t n_units,
                       ms_program_memory *out)
{
    int64_t *dn = calloc((size_t)v->n_ops + 1, sizeof *dn);
    int64_t *db = calloc((size_t)v->n_ops + 1, sizeof *db);
    if (dn == NULL || db == NULL) {
        free(dn);
        free(db);
        return MS_ENOMEM;
    }
    for (size_t k = 0; k < n_units; k++) {
        if (u[k].first_fwd < 0)
            continue;
        int64_t end = u[k].last_bwd >= 0 ? u[k].last_bwd + 1 : (int64_t)v->n_ops;
        dn[u[k].first_fwd]++;
        dn[end]--;
        db[u[k].first_fwd] += (int64_t)u[k].saved;
        db[end] -= (int64_t)u[k].saved;
    }
    int64_t n = 0, bytes = 0;
    for (uint32_t i = 0; i < v->n_ops; i++) {
        n += dn[i];
        bytes += db[i];
        if (n > (int64_t)out->max_in_flight)
            out->max_in_flight = (uint32_t)n;
        if (bytes > (int64_t)out->peak_saved_bytes)
            out->peak_saved_bytes = (uint64_t)bytes;
    }
    free(dn);
    free(db);
    return MS_OK;
}

ms_status ms_program_memory_summary(const ms_program_view *v, ms_program_memory *out)
{
    if (v == NULL || out == NULL || (v->n_ops > 0 && v->ops == NULL) ||
        (v->n_tensors > 0 && v->tensors == NULL))
        return MS_EINVAL;
    memset(out, 0, sizeof *out);
    count_units(v, &out->micro_batches, &out->chunks);
    size_t n_units = (size_t)out->micro_batches * out->chunks;
    unit_span *u = malloc((n_units ? n_units : 1) * sizeof *u);
    if (u == NULL)
        return MS_ENOMEM;
    for (size_t k = 0; k < n_units; k++)
        u[k] = (unit_span){.first_fwd = -1, .last_bwd = -1, .saved = 0};
    unit_spans(v, out->chunks, u);
    saved_bytes(v, out->chunks, u, out);
    ms_status st = sweep(v, u, n_units, out);
    free(u);
    return st;
}

/* ---- Megatron-LM's formulas ------------------------------------------------
 *
 * megatron/training/theoretical_memory_usage.py, term by term.  Its args
 * map onto the scenario: kv_channels = h / a (so query_projection_size = h),
 * group_query_attention with num_query_groups, swiglu, num_experts with
 * moe_layer_freq 1 (every layer MoE), no shared experts, no MTP, no MLA;
 * data_parallel_size excludes CP, as in Megatron's arguments. */

typedef struct mg_args {
    double h, a, g, f, fe, E, V, L, p, t, dp, s, b, m, v;
    bool swiglu, rms, untie, distopt, moe;
} mg_args;

static void mg_from(const ms_scenario *sc, mg_args *x)
{
    const ms_model_config *md = &sc->model;
    const ms_parallel_config *pc = &sc->parallel;
    x->h = md->hidden_size;
    x->a = md->num_attention_heads;
    x->g = md->num_query_groups;
    x->f = md->ffn_hidden_size;
    x->moe = md->num_experts > 0;
    x->E = x->moe ? md->num_experts : 1;
    x->fe = x->moe ? (double)wl_expert_ffn(md) : 0;
    x->V = md->padded_vocab_size;
    x->L = md->num_layers;
    x->p = pc->pipeline_model_parallel_size;
    x->t = pc->tensor_model_parallel_size;
    x->dp = pc->data_parallel_size > 0 ? pc->data_parallel_size : 1;
    x->s = md->seq_length;
    x->b = pc->micro_batch_size;
    x->m = pc->num_micro_batches;
    int chunks = 1;
    chunks = ms_scenario_chunks(sc);
    x->v = chunks > 1 ? chunks : 0;
    x->swiglu = md->swiglu;
    x->rms = md->normalization == MS_NORM_RMSNORM;
    x->untie = md->untie_embeddings;
    x->distopt = pc->use_distributed_optimizer;
}

/* compute_weight_and_optimizer_memory */
static void mg_weights(const mg_args *x, ms_megatron_memory *out)
{
    double kv_channels = x->h / x->a, ratio = kv_channels * x->a / x->h;
    double gated = x->swiglu ? 1.5 : 1.0, norm = x->rms ? 1 : 2;
    double self_attn = 2 * x->h * x->h * ((1 + x->g / x->a) * ratio);
    double dense = 2 * x->h * (x->f * gated + norm) + self_attn;
    double moe = 2 * x->h * (x->fe * x->E * gated + norm) + self_attn;
    double n_moe = x->moe ? x->L : 0, n_dense = x->L - n_moe;
    double embedding = x->h * x->V;
    double block = dense * n_dense + moe * n_moe + norm * x->h;
    double shard = (block / x->p + embedding) / x->t;
    if (x->untie && x->p == 1)
        shard += embedding / x->t;
    out->params_on_first_stage = shard;
    out->weight_and_optimizer = shard * (x->distopt ? 6 + 12 / x->dp : 18);
}

/* The pipeline factor both activation formulas apply. */
static double mg_pipeline(const mg_args *x, double *in_flight)
{
    if (x->v > 0) {
        double penalty = 1 + (x->p - 1) / (x->p * x->v);
        *in_flight = penalty * x->p;
        return penalty;
    }
    if (x->p > 1) {
        *in_flight = fmin(x->m, x->p);
        return fmin(1, x->m / x->p);
    }
    *in_flight = 1;
    return 1;
}

/* compute_activation_memory (Korthikanti et al. Table 2 with SP and
 * selective recompute: 34 s b h per layer for f = 4h) and
 * compute_activation_memory_without_sp. */
static void mg_activations(const mg_args *x, ms_megatron_memory *out)
{
    double sbh = x->s * x->b * x->h, in_flight = 1;
    double factor = mg_pipeline(x, &in_flight);
    double act = sbh * (18 + 4 * (x->f / x->h)) * x->L;
    act += 8 * x->s * x->b * x->p; /* input to embedding */
    act += sbh * x->p;             /* embedding dropout mask */
    act *= factor;
    if (x->p == 1)
        act += sbh * 4 * (1 + x->V / x->h); /* output layer input and CE loss */
    out->activation = act / x->t;
    double no_sp = sbh * (10 + 24 / x->t) * x->L + 8 * x->s * x->b * x->p + sbh * x->p;
    no_sp *= factor;
    if (x->p == 1)
        no_sp += (x->s * x->b * x->V / x->t + sbh) * 2;
    out->activation_without_sp = no_sp * 1.05;
    out->in_flight = in_flight;
}

ms_status ms_megatron_theoretical_memory(const ms_scenario *sc, ms_megatron_memory *out)
{
    if (sc == NULL || out == NULL)
        return MS_EINVAL;
    const ms_model_config *md = &sc->model;
    const ms_parallel_config *pc = &sc->parallel;
    if (md->hidden_size <= 0 || md->num_attention_heads <= 0 || md->num_layers <= 0 ||
        pc->pipeline_model_parallel_size <= 0 || pc->tensor_model_parallel_size <= 0 ||
        pc->micro_batch_size <= 0 || pc->num_micro_batches <= 0 ||
        pc->num_layers_per_virtual_pipeline_stage < 0 ||
        (md->num_experts > 0 && wl_expert_ffn(md) == 0))
        return MS_EINVAL;
    memset(out, 0, sizeof *out);
    mg_args x;
    mg_from(sc, &x);
    mg_weights(&x, out);
    mg_activations(&x, out);
    return MS_OK;
}
