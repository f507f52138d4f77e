/* The scenario's sizes as the workload builder needs them.  The loader
 * checks what it reads from a file; a scenario filled in by a program (or
 * changed after loading) gets the same checks here, each error naming the
 * field and the constraint, as Megatron's argument validation does. */
#include "workload_model.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>

typedef struct check {
    ms_diag *d;
    ms_status st;
} check;

static bool bad(check *c, ms_status st, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static bool bad(check *c, ms_status st, const char *fmt, ...)
{
    if (c->st != MS_OK)
        return true;
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    c->st = ms_diag_set(c->d, st, "workload: %s", msg);
    return true;
}

/* a % b == 0, else an error "A (a) must be divisible by B (b)". */
static bool divides(check *c, const char *an, int64_t a, const char *bn, int64_t b)
{
    if (c->st != MS_OK)
        return false;
    if (b > 0 && a % b == 0)
        return true;
    return !bad(c, MS_EINVAL, "%s (%lld) must be divisible by %s (%lld)", an, (long long)a, bn,
                (long long)b);
}

static bool positive(check *c, const char *name, int64_t v)
{
    if (c->st != MS_OK)
        return false;
    if (v > 0)
        return true;
    return !bad(c, MS_EINVAL, "%s must be > 0 (got %lld)", name, (long long)v);
}

static void check_sizes(check *c, const ms_scenario *sc)
{
    const ms_model_config *md = &sc->model;
    const ms_parallel_config *pc = &sc->parallel;
    positive(c, "model.num_layers", md->num_layers);
    positive(c, "model.hidden_size", md->hidden_size);
    positive(c, "model.ffn_hidden_size", md->ffn_hidden_size);
    positive(c, "model.num_attention_heads", md->num_attention_heads);
    positive(c, "model.num_query_groups", md->num_query_groups);
    positive(c, "model.seq_length", md->seq_length);
    positive(c, "model.padded_vocab_size", md->padded_vocab_size);
    positive(c, "parallel.tensor_model_parallel_size", pc->tensor_model_parallel_size);
    positive(c, "parallel.pipeline_model_parallel_size", pc->pipeline_model_parallel_size);
    positive(c, "parallel.context_parallel_size", pc->context_parallel_size);
    positive(c, "parallel.micro_batch_size", pc->micro_batch_size);
    positive(c, "parallel.num_micro_batches (global / (micro x DP))", pc->num_micro_batches);
    if (c->st == MS_OK && ms_dtype_size(md->dtype) == 0)
        bad(c, MS_EINVAL, "model.dtype: unknown dtype %d", (int)md->dtype);
    if (c->st == MS_OK && (pc->num_layers_per_virtual_pipeline_stage < 0 ||
                           pc->data_parallel_size < 0 || pc->expert_model_parallel_size < 0))
        bad(c, MS_EINVAL, "parallel sizes must be >= 0");
}

static void check_tensor_parallel(check *c, const ms_scenario *sc)
{
    const ms_model_config *md = &sc->model;
    const ms_parallel_config *pc = &sc->parallel;
    int64_t t = pc->tensor_model_parallel_size, cp = pc->context_parallel_size;
    divides(c, "model.hidden_size", md->hidden_size, "model.num_attention_heads",
            md->num_attention_heads);
    divides(c, "model.num_attention_heads", md->num_attention_heads,
            "parallel.tensor_model_parallel_size", t);
    divides(c, "model.num_query_groups", md->num_query_groups,
            "parallel.tensor_model_parallel_size", t);
    divides(c, "model.num_attention_heads", md->num_attention_heads, "model.num_query_groups",
            md->num_query_groups);
    if (md->num_experts <= 0)
        divides(c, "model.ffn_hidden_size", md->ffn_hidden_size,
                "parallel.tensor_model_parallel_size", t);
    divides(c, "model.padded_vocab_size", md->padded_vocab_size,
            "parallel.tensor_model_parallel_size", t);
    divides(c, "model.seq_length", md->seq_length, "parallel.context_parallel_size", cp);
    if (pc->sequence_parallel)
        divides(c, "model.seq_length", md->seq_length,
                "parallel.tensor_model_parallel_size x context_parallel_size (sequence "
                "parallelism)", t * cp);
    /* Megatron-core's context parallelism runs in TransformerEngine's fused
     * (flash) attention; there is no unfused ring attention to model. */
    if (c->st == MS_OK && cp > 1 && !md->use_flash_attn)
        bad(c, MS_EINVAL, "parallel.context_parallel_size %lld needs model.use_flash_attn = "
            "true (ring attention is flash attention)", (long long)cp);
}

static void check_pipeline(check *c, const ms_scenario *sc, int stage)
{
    const ms_model_config *md = &sc->model;
    const ms_parallel_config *pc = &sc->parallel;
    int64_t pp = pc->pipeline_model_parallel_size, vpp = pc->num_layers_per_virtual_pipeline_stage;
    int chunks = 1;
    if (c->st == MS_OK && (stage < 0 || stage >= pp))
        bad(c, MS_EINVAL, "stage %d outside 0..%lld (parallel.pipeline_model_parallel_size)",
            stage, (long long)pp - 1);
    /* A loaded scenario's layout (MindFormers' offset and pp_interleave_num
     * included) was checked by the loader; one filled in by hand is
     * Megatron's even split, checked here. */
    if (sc->memory_config == NULL && vpp == 0)
        divides(c, "model.num_layers", md->num_layers, "parallel.pipeline_model_parallel_size", pp);
    if (sc->memory_config == NULL && vpp > 0) {
        if (c->st == MS_OK && pp < 2)
            bad(c, MS_EINVAL, "parallel.num_layers_per_virtual_pipeline_stage (%lld) needs "
                "parallel.pipeline_model_parallel_size > 1 (got %lld)", (long long)vpp,
                (long long)pp);
        if (c->st == MS_OK && md->num_layers % (pp * vpp) != 0)
            bad(c, MS_EINVAL, "model.num_layers (%d) must be divisible by "
                "parallel.pipeline_model_parallel_size x num_layers_per_virtual_pipeline_stage "
                "(%lld x %lld = %lld)", md->num_layers, (long long)pp, (long long)vpp,
                (long long)(pp * vpp));
    }
    chunks = ms_scenario_chunks(sc);
    /* forward_backward_pipelining_with_interleaving's own check. */
    if (c->st == MS_OK && chunks > 1 && pc->num_micro_batches % pp != 0)
        bad(c, MS_EINVAL, "the interleaved schedule needs the number of micro-batches "
            "(parallel.global_batch_size / (micro_batch_size x DP) = %d) divisible by "
            "parallel.pipeline_model_parallel_size (%lld)", pc->num_micro_batches,
            (long long)pp);
}

static void check_experts(check *c, const ms_scenario *sc)
{
    const ms_model_config *md = &sc->model;
    const ms_parallel_config *pc = &sc->parallel;
    int64_t ep = pc->expert_model_parallel_size > 0 ? pc->expert_model_parallel_size : 1;
    int64_t dpcp = (int64_t)(pc->data_parallel_size > 0 ? pc->data_parallel_size : 1) *
                   pc->context_parallel_size;
    if (md->num_experts <= 0) {
        if (c->st == MS_OK && (md->num_experts < 0 || ep > 1))
            bad(c, MS_EINVAL, "parallel.expert_model_parallel_size (%lld) needs "
                "model.num_experts > 0 (got %d)", (long long)ep, md->num_experts);
        return;
    }
    if (c->st == MS_OK && (md->moe_router_topk < 1 || md->moe_router_topk > md->num_experts))
        bad(c, MS_EINVAL, "model.moe_router_topk (%d) must be in 1..model.num_experts (%d)",
            md->moe_router_topk, md->num_experts);
    divides(c, "model.num_experts", md->num_experts, "parallel.expert_model_parallel_size", ep);
    divides(c, "parallel.data_parallel_size x context_parallel_size", dpcp,
            "parallel.expert_model_parallel_size", ep);
    divides(c, "model.moe_ffn_hidden_size", (int64_t)wl_expert_ffn(md),
            "parallel.tensor_model_parallel_size", pc->tensor_model_parallel_size);
    if (c->st == MS_OK && !(md->moe_capacity_factor >= 0 && isfinite(md->moe_capacity_factor)))
        bad(c, MS_ERANGE, "model.moe_capacity_factor must be >= 0 (0: no token dropping)");
    /* Megatron: "During training, performance may degrade if MoE and tensor
     * parallelism are enabled without also enabling sequence parallelism." */
    if (c->st == MS_OK && pc->tensor_model_parallel_size > 1 && !pc->sequence_parallel)
        bad(c, MS_EINVAL, "model.num_experts > 0 with parallel.tensor_model_parallel_size %d "
            "needs parallel.sequence_parallel = true (as Megatron requires)",
            pc->tensor_model_parallel_size);
}

/* Megatron: "--overlap-param-gather only supported with distributed optimizer". */
static void check_param_gather(check *c, const ms_scenario *sc)
{
    if (sc->parallel.overlap_param_gather && !sc->parallel.use_distributed_optimizer)
        bad(c, MS_EINVAL, "parallel.overlap_param_gather needs "
                          "parallel.use_distributed_optimizer (Megatron's rule)");
}

/* Megatron: tensor-parallel communication overlap needs sequence
 * parallelism; TE's grouped expert GEMMs do not take part (not modelled). */
static void check_tp_overlap(check *c, const ms_scenario *sc)
{
    const ms_parallel_config *pc = &sc->parallel;
    if (!pc->tp_comm_overlap || c->st != MS_OK)
        return;
    if (!pc->sequence_parallel || pc->tensor_model_parallel_size < 2)
        bad(c, MS_EINVAL, "parallel.tp_comm_overlap needs parallel.sequence_parallel and "
                          "parallel.tensor_model_parallel_size > 1 (Megatron's rule)");
    else if (sc->model.num_experts > 0)
        bad(c, MS_EUNSUPPORTED, "parallel.tp_comm_overlap with model.num_experts > 0 is not "
                                "modelled (dense layers only)");
}

/* FP8 GEMMs need a device that runs them; TE's fp8 experts (GroupedLinear)
 * are not modelled, and FP8 mixed precision starts from 16-bit weights. */
static void check_fp8(check *c, const ms_scenario *sc)
{
    const ms_model_config *md = &sc->model;
    if (md->fp8 == MS_FP8_NONE || c->st != MS_OK)
        return;
    if (!(sc->device.peak_flops[MS_DTYPE_FP8] > 0))
        bad(c, MS_EUNSUPPORTED,
            "model.fp8: device '%s' states no FP8 peak (peak_tflops.fp8 in its device file)",
            sc->device.name);
    else if (md->num_experts > 0)
        bad(c, MS_EUNSUPPORTED, "model.fp8 with model.num_experts > 0: FP8 experts are not "
                                "modelled (dense layers only)");
    else if (md->dtype == MS_DTYPE_FP32)
        bad(c, MS_EINVAL, "model.fp8 needs model.dtype \"bf16\" or \"fp16\" (got \"fp32\")");
}

/* Guard the builder's integer sizes: the largest tensor (scores or fp32
 * logits), the number of ops and the p2p tags must stay inside their types. */
static void check_limits(check *c, const ms_scenario *sc)
{
    const ms_model_config *md = &sc->model;
    const ms_parallel_config *pc = &sc->parallel;
    double s = md->seq_length, b = pc->micro_batch_size;
    double big = fmax(b * md->num_attention_heads * s * s * 4,
                      fmax(b * s * md->padded_vocab_size * 4, b * s * md->ffn_hidden_size * 8));
    if (c->st == MS_OK && big > 0x1p60)
        bad(c, MS_ERANGE, "a %.3g-byte tensor is beyond what memsim models", big);
    double experts = md->num_experts > 0 ? (double)md->num_experts /
                     (pc->expert_model_parallel_size > 0 ? pc->expert_model_parallel_size : 1)
                                         : 0;
    double per_layer = 80 + 20 * experts + 6.0 * pc->context_parallel_size;
    double ops = (double)pc->num_micro_batches *
                 ((double)md->num_layers / pc->pipeline_model_parallel_size * per_layer + 40);
    if (c->st == MS_OK && ops > WB_MAX_OPS)
        bad(c, MS_ERANGE, "about %.3g ops in one step (%d micro-batches x %d layers); the limit "
            "is %u", ops, pc->num_micro_batches, md->num_layers, WB_MAX_OPS);
    double tags = 2.0 * pc->num_micro_batches * md->num_layers;
    if (c->st == MS_OK && tags > 0x1p30)
        bad(c, MS_ERANGE, "%d micro-batches x %d layers: too many pipeline transfers to tag",
            pc->num_micro_batches, md->num_layers);
}

ms_status wl_check_scenario(const ms_scenario *sc, int stage, ms_diag *d)
{
    check c = {.d = d, .st = MS_OK};
    check_sizes(&c, sc);
    check_tensor_parallel(&c, sc);
    check_pipeline(&c, sc, stage);
    check_experts(&c, sc);
    check_fp8(&c, sc);
    check_param_gather(&c, sc);
    check_tp_overlap(&c, sc);
    check_limits(&c, sc);
    return c.st;
}
