/* Analytic figures of a transformer: parameter counts and model FLOPs.
 *
 * The FLOPs count only the matmuls (and the two attention batched matmuls),
 * forward + backward = 3 x forward, as Narayanan et al. 2021 do: for GPT
 * (MHA, 4h GeLU MLP) it is exactly 72 B s l h^2 (1 + s/(6h) + V/(12 l h)).
 * Causal masking is ignored, as in that formula.  A MoE layer counts its
 * router and the top-k experts each token goes to (not the padding a
 * capacity factor adds, nor the experts a token skips).  The workload
 * builder gives every matmul op the same count, so a program's model_flops
 * x TP sums to this figure. */
#include "workload_model.h"

uint64_t wl_expert_ffn(const ms_model_config *m)
{
    return (uint64_t)(m->moe_ffn_hidden_size > 0 ? m->moe_ffn_hidden_size : m->ffn_hidden_size);
}

/* fc1 (with the SwiGLU gate) and fc2 of an MLP of width f. */
static void mlp_count(const ms_model_config *m, uint64_t f, uint64_t *fc1, uint64_t *fc2)
{
    uint64_t h = (uint64_t)m->hidden_size, up = m->swiglu ? 2 * f : f;
    *fc1 = h * up + (m->add_bias_linear ? up : 0);
    *fc2 = f * h + (m->add_bias_linear ? h : 0);
}

void wl_count(const ms_model_config *m, wm_counts *c)
{
    uint64_t h = (uint64_t)m->hidden_size, f = (uint64_t)m->ffn_hidden_size;
    uint64_t kvw = (uint64_t)m->num_query_groups * (h / (uint64_t)m->num_attention_heads);
    bool bias = m->add_bias_linear;
    c->norm = m->normalization == MS_NORM_LAYERNORM ? 2 * h : h;
    c->q = h * h + (bias ? h : 0);
    c->kv = h * kvw + (bias ? kvw : 0);
    c->proj = h * h + (bias ? h : 0);
    uint64_t attn = 2 * c->norm + c->q + 2 * c->kv + c->proj;
    c->fc1 = c->fc2 = c->router = c->efc1 = c->efc2 = 0;
    if (m->num_experts > 0) {
        /* Megatron's TopKRouter: an h x E linear without bias. */
        uint64_t E = (uint64_t)m->num_experts, k = (uint64_t)m->moe_router_topk;
        c->router = h * E;
        mlp_count(m, wl_expert_ffn(m), &c->efc1, &c->efc2);
        c->layer = attn + c->router + E * (c->efc1 + c->efc2);
        c->layer_active = attn + c->router + k * (c->efc1 + c->efc2);
    } else {
        mlp_count(m, f, &c->fc1, &c->fc2);
        c->layer = c->layer_active = attn + c->fc1 + c->fc2;
    }
    c->word = (uint64_t)m->padded_vocab_size * h;
    /* Megatron's table has --max-position-embeddings rows, whatever the
     * sequence length a run uses. */
    uint64_t rows =
        (uint64_t)(m->max_position_embeddings > 0 ? m->max_position_embeddings : m->seq_length);
    c->pos = m->position_embedding_type == MS_POS_LEARNED_ABSOLUTE ? rows * h : 0;
    c->head = m->untie_embeddings ? c->word : 0;
}

static bool usable(const ms_model_config *m)
{
    return m->num_layers > 0 && m->hidden_size > 0 && m->ffn_hidden_size > 0 &&
           m->num_attention_heads > 0 && m->num_query_groups > 0 && m->seq_length > 0 &&
           m->padded_vocab_size > 0 && m->hidden_size % m->num_attention_heads == 0 &&
           m->num_experts >= 0 &&
           (m->num_experts == 0 ||
            (m->moe_router_topk >= 1 && m->moe_router_topk <= m->num_experts));
}

ms_status ms_model_param_count(const ms_model_config *m, uint64_t *params)
{
    if (m == NULL || params == NULL || !usable(m))
        return MS_EINVAL;
    wm_counts c;
    wl_count(m, &c);
    *params = c.word + c.pos + (uint64_t)m->num_layers * c.layer + c.norm + c.head;
    return MS_OK;
}

ms_status ms_model_active_param_count(const ms_model_config *m, uint64_t *params)
{
    if (m == NULL || params == NULL || !usable(m))
        return MS_EINVAL;
    wm_counts c;
    wl_count(m, &c);
    *params = c.word + c.pos + (uint64_t)m->num_layers * c.layer_active + c.norm + c.head;
    return MS_OK;
}

ms_status ms_model_step_flops(const ms_model_config *m, uint64_t batch, double *flops)
{
    if (m == NULL || flops == NULL || batch == 0 || !usable(m))
        return MS_EINVAL;
    double B = (double)batch, s = m->seq_length, h = m->hidden_size, f = m->ffn_hidden_size;
    double kvw = (double)m->num_query_groups * (h / m->num_attention_heads);
    double tokens = B * s;
    /* Forward of one layer: Q and output projections, K and V projections,
     * scores and attention over values, the MLP's matmuls (3 with SwiGLU). */
    double mlp = 2 * tokens * h * f * (m->swiglu ? 3 : 2);
    if (m->num_experts > 0)
        mlp = 2 * tokens * h * m->num_experts +
              m->moe_router_topk * 2 * tokens * h * (double)wl_expert_ffn(m) * (m->swiglu ? 3 : 2);
    double layer = 2 * tokens * (2 * h * h + 2 * h * kvw) + 4 * B * s * s * h + mlp;
    double logits = 2 * tokens * h * m->padded_vocab_size;
    *flops = 3 * (m->num_layers * layer + logits);
    return MS_OK;
}
