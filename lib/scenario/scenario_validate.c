/* Defaults and constraints of a scenario (docs/scenario-format.md).
 *
 * Defaults follow the architecture: llama as MindFormers/Meta configure it
 * (RMSNorm, SwiGLU, RoPE, no biases, no dropout, untied output layer), gpt as
 * Megatron-LM's defaults (LayerNorm, GeLU with a 4h MLP, learned absolute
 * positions, biases, dropout 0.1, tied embeddings).  The constraints are
 * Megatron's argument checks: every value names its field, every divisibility
 * error names both fields and their values. */
#include "scenario_load.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

typedef struct vctx {
    const st_value *v;
    const char *file;
    ms_diag *d;
} vctx;

#define REQUIRED INT64_MIN

const char *scn_path_of(int id, char *buf, size_t size)
{
    scn_table_path(scn_schema(), id, buf, size);
    return buf;
}

static const char *path_of(int id, char *buf, size_t size)
{
    return scn_path_of(id, buf, size);
}

/* An integer field in [lo, hi]; def when absent (REQUIRED: an error). */
static ms_status int_field(const vctx *c, int id, int64_t def, int64_t lo, int64_t hi, int *out)
{
    char p[96];
    int64_t x = c->v[id].set ? c->v[id].i : def;
    if (!c->v[id].set && def == REQUIRED)
        return ms_diag_set(c->d, MS_EINVAL, "%s: field '%s' is required", c->file,
                           path_of(id, p, sizeof p));
    if (x < lo)
        return ms_diag_set(c->d, MS_ERANGE, "%s: field '%s' must be %s %" PRId64 " (got %" PRId64
                           ")", c->file, path_of(id, p, sizeof p), lo == 1 ? ">" : ">=",
                           lo == 1 ? (int64_t)0 : lo, x);
    if (x > hi)
        return ms_diag_set(c->d, MS_ERANGE, "%s: field '%s' must be at most %" PRId64 " (got %"
                           PRId64 ")", c->file, path_of(id, p, sizeof p), hi, x);
    *out = (int)x;
    return MS_OK;
}

static bool bool_field(const vctx *c, int id, bool def)
{
    return c->v[id].set ? c->v[id].b : def;
}

/* A string field that must be one of opts; returns its index in *out. */
static ms_status choice(const vctx *c, int id, int def, const char *const *opts, int n, int *out)
{
    char p[96];
    if (!c->v[id].set) {
        if (def < 0)
            return ms_diag_set(c->d, MS_EINVAL, "%s: field '%s' is required", c->file,
                               path_of(id, p, sizeof p));
        *out = def;
        return MS_OK;
    }
    for (int i = 0; i < n; i++)
        if (strcmp(c->v[id].s, opts[i]) == 0) {
            *out = i;
            return MS_OK;
        }
    char list[160] = "";
    for (int i = 0; i < n; i++)
        snprintf(list + strlen(list), sizeof list - strlen(list), "%s\"%s\"", i ? ", " : "",
                 opts[i]);
    return ms_diag_set(c->d, MS_EINVAL, "%s: field '%s' must be one of %s (got \"%.64s\")",
                       c->file, path_of(id, p, sizeof p), list, c->v[id].s);
}

static ms_status fraction(const vctx *c, int id, double def, double *out)
{
    char p[96];
    double x = c->v[id].set ? c->v[id].n : def;
    if (!(x >= 0 && x < 1))
        return ms_diag_set(c->d, MS_ERANGE, "%s: field '%s' must be in [0, 1) (got %g)", c->file,
                           path_of(id, p, sizeof p), x);
    *out = x;
    return MS_OK;
}

static ms_status divides(const vctx *c, int num_id, int64_t num, int den_id, int64_t den,
                         const char *den_text)
{
    if (den > 0 && num % den == 0)
        return MS_OK;
    char p[96], q[96];
    return ms_diag_set(c->d, MS_EINVAL, "%s: %s (%" PRId64 ") must be divisible by %s (%" PRId64
                       ")", c->file, path_of(num_id, p, sizeof p), num,
                       den_text ? den_text : path_of(den_id, q, sizeof q), den);
}

/* Meta's llama rule for the SwiGLU width: 2/3 of 4h, rounded up to a
 * multiple of 256 (4096 -> 11008, 5120 -> 13824); otherwise Megatron's 4h. */
static int64_t default_ffn(bool llama, bool swiglu, int64_t h)
{
    if (!llama || !swiglu)
        return 4 * h;
    int64_t f = 2 * (4 * h) / 3;
    return (f + 255) / 256 * 256;
}

static ms_status model_sizes(const vctx *c, ms_model_config *m)
{
    ms_status st;
    bool llama = m->arch == MS_ARCH_LLAMA;
    m->swiglu = bool_field(c, SC_SWIGLU, llama);
    if ((st = int_field(c, SC_LAYERS, REQUIRED, 1, 100000, &m->num_layers)) != MS_OK ||
        (st = int_field(c, SC_HIDDEN, REQUIRED, 1, 1 << 20, &m->hidden_size)) != MS_OK ||
        (st = int_field(c, SC_HEADS, REQUIRED, 1, 1 << 16, &m->num_attention_heads)) != MS_OK ||
        (st = int_field(c, SC_GROUPS, m->num_attention_heads, 1, 1 << 16,
                        &m->num_query_groups)) != MS_OK ||
        (st = int_field(c, SC_FFN, default_ffn(llama, m->swiglu, m->hidden_size), 1, 1 << 24,
                        &m->ffn_hidden_size)) != MS_OK ||
        (st = int_field(c, SC_SEQ, REQUIRED, 1, 1 << 24, &m->seq_length)) != MS_OK ||
        (st = int_field(c, SC_VOCAB, REQUIRED, 1, 1 << 26, &m->padded_vocab_size)) != MS_OK ||
        (st = int_field(c, SC_MAXPOS, m->seq_length, 1, 1 << 24,
                        &m->max_position_embeddings)) != MS_OK)
        return st;
    if ((st = divides(c, SC_HIDDEN, m->hidden_size, SC_HEADS, m->num_attention_heads, NULL)) !=
        MS_OK)
        return st;
    return divides(c, SC_HEADS, m->num_attention_heads, SC_GROUPS, m->num_query_groups, NULL);
}

static ms_status model_kinds(const vctx *c, ms_model_config *m)
{
    static const char *const norms[] = {"RMSNorm", "LayerNorm"};
    static const char *const pos[] = {"rope", "learned_absolute"};
    static const char *const dtypes[] = {"bf16", "fp16", "fp32"};
    static const ms_dtype dtype_of[] = {MS_DTYPE_BF16, MS_DTYPE_FP16, MS_DTYPE_FP32};
    static const char *const fp8s[] = {"none", "e4m3", "hybrid"};
    bool llama = m->arch == MS_ARCH_LLAMA;
    int norm, pe, dt, fp8;
    ms_status st;
    if ((st = choice(c, SC_NORM, llama ? 0 : 1, norms, 2, &norm)) != MS_OK ||
        (st = choice(c, SC_POS, llama ? 0 : 1, pos, 2, &pe)) != MS_OK ||
        (st = choice(c, SC_DTYPE, 0, dtypes, 3, &dt)) != MS_OK ||
        (st = choice(c, SC_FP8, 0, fp8s, 3, &fp8)) != MS_OK ||
        (st = fraction(c, SC_HDROP, llama ? 0 : 0.1, &m->hidden_dropout)) != MS_OK ||
        (st = fraction(c, SC_ADROP, llama ? 0 : 0.1, &m->attention_dropout)) != MS_OK)
        return st;
    m->normalization = norm == 0 ? MS_NORM_RMSNORM : MS_NORM_LAYERNORM;
    m->position_embedding_type = pe == 0 ? MS_POS_ROPE : MS_POS_LEARNED_ABSOLUTE;
    m->dtype = dtype_of[dt];
    m->fp8 = (ms_fp8_format)fp8;
    m->untie_embeddings = bool_field(c, SC_UNTIE, llama);
    m->use_flash_attn = bool_field(c, SC_FLASH, false);
    m->add_bias_linear = bool_field(c, SC_BIAS, !llama);
    return MS_OK;
}

static ms_status parallel_sizes(const vctx *c, ms_parallel_config *p)
{
    ms_status st;
    if ((st = int_field(c, SC_TP, 1, 1, 1 << 20, &p->tensor_model_parallel_size)) != MS_OK ||
        (st = int_field(c, SC_PP, 1, 1, 1 << 20, &p->pipeline_model_parallel_size)) != MS_OK ||
        (st = int_field(c, SC_CP, 1, 1, 1 << 20, &p->context_parallel_size)) != MS_OK ||
        (st = int_field(c, SC_VPP, 0, 0, 1 << 20, &p->num_layers_per_virtual_pipeline_stage)) !=
            MS_OK)
        return st;
    int64_t model = (int64_t)p->tensor_model_parallel_size * p->pipeline_model_parallel_size *
                    p->context_parallel_size;
    if (model > (1 << 24))
        return ms_diag_set(c->d, MS_ERANGE, "%s: tensor x pipeline x context parallel sizes "
                           "(%" PRId64 ") are beyond %d devices", c->file, model, 1 << 24);
    if ((st = int_field(c, SC_WORLD, model, 1, 1 << 24, &p->world_size)) != MS_OK ||
        (st = divides(c, SC_WORLD, p->world_size, -1, model,
                      "tensor x pipeline x context parallel sizes")) != MS_OK)
        return st;
    p->data_parallel_size = (int)(p->world_size / model);
    if ((st = int_field(c, SC_MBS, 1, 1, 1 << 20, &p->micro_batch_size)) != MS_OK ||
        (st = int_field(c, SC_GBS, (int64_t)p->micro_batch_size * p->data_parallel_size, 1,
                        1 << 30, &p->global_batch_size)) != MS_OK ||
        (st = divides(c, SC_GBS, p->global_batch_size, -1,
                      (int64_t)p->micro_batch_size * p->data_parallel_size,
                      "micro_batch_size x data-parallel size")) != MS_OK)
        return st;
    p->num_micro_batches =
        p->global_batch_size / (p->micro_batch_size * p->data_parallel_size);
    p->sequence_parallel = bool_field(c, SC_SP, false);
    p->use_distributed_optimizer = bool_field(c, SC_DISTOPT, false);
    p->overlap_grad_reduce = bool_field(c, SC_OVERLAP_GRAD, true);
    p->batch_p2p_sync = bool_field(c, SC_P2P_SYNC, false);
    p->scatter_gather_tensors_in_pipeline = bool_field(c, SC_P2P_SPLIT, false);
    p->grads_in_model_dtype = !bool_field(c, SC_GRAD_FP32, true);
    p->overlap_param_gather = bool_field(c, SC_PARAM_GATHER, false);
    p->tp_comm_overlap = bool_field(c, SC_TP_OVERLAP, false);
    return MS_OK;
}

/* What the model must divide into over the parallel layout (Megatron). */
static ms_status layout(const vctx *c, const ms_model_config *m, const ms_parallel_config *p)
{
    int t = p->tensor_model_parallel_size;
    ms_status st;
    if ((st = divides(c, SC_HEADS, m->num_attention_heads, SC_TP, t, NULL)) != MS_OK ||
        (st = divides(c, SC_GROUPS, m->num_query_groups, SC_TP, t, NULL)) != MS_OK ||
        (st = divides(c, SC_FFN, m->ffn_hidden_size, SC_TP, t, NULL)) != MS_OK ||
        (st = divides(c, SC_VOCAB, m->padded_vocab_size, SC_TP, t, NULL)) != MS_OK ||
        (st = divides(c, SC_SEQ, m->seq_length, SC_CP, p->context_parallel_size, NULL)) != MS_OK)
        return st;
    /* Layers over stages: scn_layout (parallel.offset may make them uneven). */
    if (p->sequence_parallel &&
        (st = divides(c, SC_SEQ, m->seq_length, -1, (int64_t)t * p->context_parallel_size,
                      "tensor x context parallel sizes (sequence parallelism)")) != MS_OK)
        return st;
    return MS_OK;
}

/* Mixture of experts, as Megatron-core checks it.  Experts are sharded over
 * the expert-parallel group, which Megatron carves out of the ranks of one
 * stage that share a tensor-parallel rank (data x context parallel), with
 * each expert's MLP split over TP (expert tensor parallelism = TP). */
static ms_status moe(const vctx *c, ms_model_config *m, ms_parallel_config *p)
{
    char q[96];
    ms_status st;
    int experts, ep;
    if ((st = int_field(c, SC_EXPERTS, 0, 0, 1 << 16, &experts)) != MS_OK ||
        (st = int_field(c, SC_EP, 1, 1, 1 << 20, &ep)) != MS_OK)
        return st;
    if (c->v[SC_MOE_CAP].set && c->v[SC_MOE_CAP_ALIAS].set)
        return ms_diag_set(c->d, MS_EINVAL, "%s: give one of model.moe_expert_capacity_factor "
                           "and model.moe_capacity_factor (the same setting)", c->file);
    int cap_id = c->v[SC_MOE_CAP_ALIAS].set ? SC_MOE_CAP_ALIAS : SC_MOE_CAP;
    m->num_experts = experts;
    p->expert_model_parallel_size = ep;
    m->moe_router_topk = 0;
    m->moe_ffn_hidden_size = 0;
    m->moe_capacity_factor = 0;
    if (experts == 0) {
        static const int moe_only[] = {SC_TOPK, SC_MOE_FFN, SC_MOE_CAP, SC_MOE_CAP_ALIAS, SC_EP};
        for (size_t i = 0; i < sizeof moe_only / sizeof moe_only[0]; i++)
            if (c->v[moe_only[i]].set && (moe_only[i] != SC_EP || ep > 1))
                return ms_diag_set(c->d, MS_EINVAL, "%s: %s needs model.num_experts > 0",
                                   c->file, path_of(moe_only[i], q, sizeof q));
        return MS_OK;
    }
    if ((st = int_field(c, SC_TOPK, experts < 2 ? experts : 2, 1, 1 << 16,
                        &m->moe_router_topk)) != MS_OK ||
        (st = int_field(c, SC_MOE_FFN, m->ffn_hidden_size, 1, 1 << 24,
                        &m->moe_ffn_hidden_size)) != MS_OK)
        return st;
    if (m->moe_router_topk > experts)
        return ms_diag_set(c->d, MS_EINVAL, "%s: model.moe_router_topk (%d) must be at most "
                           "model.num_experts (%d)", c->file, m->moe_router_topk, experts);
    double cap = c->v[cap_id].set ? c->v[cap_id].n : 0;
    if (cap < 0)
        return ms_diag_set(c->d, MS_ERANGE, "%s: field '%s' must be >= 0 (got %g; 0: no token "
                           "dropping)", c->file, path_of(cap_id, q, sizeof q), cap);
    m->moe_capacity_factor = cap;
    if ((st = divides(c, SC_EXPERTS, experts, SC_EP, ep, NULL)) != MS_OK ||
        (st = divides(c, SC_MOE_FFN, m->moe_ffn_hidden_size, SC_TP,
                      p->tensor_model_parallel_size, NULL)) != MS_OK)
        return st;
    int64_t dcp = (int64_t)p->data_parallel_size * p->context_parallel_size;
    if (dcp % ep != 0)
        return ms_diag_set(c->d, MS_EINVAL, "%s: parallel.expert_model_parallel_size (%d) must "
                           "divide data-parallel x context-parallel size (%" PRId64 "): the "
                           "expert-parallel group is made of the ranks of one stage that share "
                           "a tensor-parallel rank (Megatron-core)", c->file, ep, dcp);
    return MS_OK;
}

static ms_status copy_str(const vctx *c, int id, const char *def, char *out, size_t size)
{
    char p[96];
    const char *s = c->v[id].set ? c->v[id].s : def;
    if (s == NULL)
        return ms_diag_set(c->d, MS_EINVAL, "%s: field '%s' is required", c->file,
                           path_of(id, p, sizeof p));
    if (strlen(s) >= size)
        return ms_diag_set(c->d, MS_ERANGE, "%s: field '%s' must be at most %zu bytes", c->file,
                           path_of(id, p, sizeof p), size - 1);
    snprintf(out, size, "%s", s);
    return MS_OK;
}

/* A device is a file name under a devices/ directory, never a path. */
static ms_status device_name(const vctx *c, ms_scenario *sc)
{
    ms_status st = copy_str(c, SC_DEVICE, NULL, sc->device_name, sizeof sc->device_name);
    if (st != MS_OK)
        return st;
    const char *s = sc->device_name;
    bool ok = s[0] != '\0' && s[0] != '.';
    for (const char *q = s; ok && *q; q++)
        ok = (*q >= 'a' && *q <= 'z') || (*q >= 'A' && *q <= 'Z') || (*q >= '0' && *q <= '9') ||
             *q == '-' || *q == '_' || *q == '.';
    if (!ok)
        return ms_diag_set(c->d, MS_EINVAL, "%s: field 'device' must be a device name like "
                           "\"ascend-910b\" (letters, digits, '-', '_', '.'), got \"%s\"",
                           c->file, s);
    return MS_OK;
}

/* At most what the mock's address window for device memory holds, as
 * ctx:simulate's capacity; 0 or "unlimited" (as report.max_bytes reads
 * them) is all of it: a device that never runs out. */
static ms_status device_memory(const vctx *c, ms_scenario *sc)
{
    const st_value *v = &c->v[SC_DEVMEM];
    if (v->set && (uint64_t)v->i > MS_MAX_DEVICE_MEMORY)
        return ms_diag_set(c->d, MS_ERANGE,
                           "%s: field 'device_memory' must be at most 8 TiB (2^43 bytes; 0 or "
                           "\"unlimited\": all of it), got %" PRId64 " bytes",
                           c->file, v->i);
    sc->device_memory = !v->set ? 0 : v->i > 0 ? (uint64_t)v->i : MS_MAX_DEVICE_MEMORY;
    return MS_OK;
}

static ms_status run_fields(const vctx *c, ms_scenario *sc)
{
    /* PyTorch's, torch_npu's, MindSpeed's memory-fragmentation allocator
     * (MEMORY_FRAGMENTATION=1), MindSpore's dynamic memory pool. */
    static const char *const flavours[] = {"cuda", "npu", "mindspeed", "mindspore"};
    static const char *const details[] = {"all", "last", "none"};
    char base[128];
    scn_base_name(c->file, base, sizeof base);
    ms_status st;
    int steps, flavour, detail;
    if ((st = copy_str(c, SC_NAME, base, sc->name, sizeof sc->name)) != MS_OK ||
        (st = copy_str(c, SC_POLICY, "none", sc->policy, sizeof sc->policy)) != MS_OK ||
        (st = copy_str(c, SC_ACONF, "", sc->allocator_conf, sizeof sc->allocator_conf)) != MS_OK ||
        (st = int_field(c, SC_STEPS, 3, 1, 1000000, &steps)) != MS_OK ||
        (st = choice(c, SC_DETAIL, 0, details, 3, &detail)) != MS_OK ||
        (st = device_name(c, sc)) != MS_OK)
        return st;
    char p[96];
    if (sc->name[0] == '\0' || sc->policy[0] == '\0')
        return ms_diag_set(c->d, MS_EINVAL, "%s: field '%s' must not be empty", c->file,
                           path_of(sc->name[0] ? SC_POLICY : SC_NAME, p, sizeof p));
    int64_t seed = c->v[SC_SEED].set ? c->v[SC_SEED].i : 1;
    if (seed < 0)
        return ms_diag_set(c->d, MS_ERANGE, "%s: field 'seed' must be >= 0 (got %" PRId64 ")",
                           c->file, seed);
    sc->steps = steps;
    sc->report_detail = (ms_report_detail)detail;
    sc->report_max_bytes =
        c->v[SC_MAXBYTES].set ? (uint64_t)c->v[SC_MAXBYTES].i : MS_REPORT_MAX_BYTES_DEFAULT;
    sc->seed = (uint64_t)seed;
    if ((st = device_memory(c, sc)) != MS_OK)
        return st;
    /* TORCH_NCCL_AVOID_RECORD_STREAMS=1, as Megatron-LM and NeMo launch. */
    sc->avoid_record_streams = bool_field(c, SC_AVOIDRS, true);
    sc->allocator_flavour[0] = '\0'; /* absent: chosen from the device */
    if (c->v[SC_AFLAVOUR].set) {
        if ((st = choice(c, SC_AFLAVOUR, 0, flavours, 4, &flavour)) != MS_OK)
            return st;
        snprintf(sc->allocator_flavour, sizeof sc->allocator_flavour, "%s", flavours[flavour]);
    }
    return MS_OK;
}

ms_status scn_validate(const st_value *vals, const char *file, ms_scenario *sc, ms_diag *d)
{
    static const char *const arches[] = {"llama", "gpt"};
    vctx c = {vals, file, d};
    int arch;
    ms_status st = run_fields(&c, sc);
    if (st == MS_OK)
        st = choice(&c, SC_ARCH, -1, arches, 2, &arch);
    if (st != MS_OK)
        return st;
    sc->model.arch = arch == 0 ? MS_ARCH_LLAMA : MS_ARCH_GPT;
    if ((st = model_sizes(&c, &sc->model)) != MS_OK ||
        (st = model_kinds(&c, &sc->model)) != MS_OK ||
        (st = parallel_sizes(&c, &sc->parallel)) != MS_OK ||
        (st = layout(&c, &sc->model, &sc->parallel)) != MS_OK ||
        (st = moe(&c, &sc->model, &sc->parallel)) != MS_OK ||
        (st = scn_layout(vals, file, sc, d)) != MS_OK ||
        (st = scn_recompute(vals, file, sc, d)) != MS_OK)
        return st;
    return scn_swap(vals, file, sc, d);
}
