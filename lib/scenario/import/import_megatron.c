/* Megatron-LM's arguments into a scenario (import.h), for a training script
 * (imp_read_megatron, below) and for NeMo's YAML, whose keys are the same
 * arguments (import_nemo.c).
 *
 * An argument is looked up in order: a rule of its own (the table below:
 * another field, a default it implies, a MindSpeed feature memsim has a
 * policy for, or why it is not expressed), then a scenario field of the same
 * name (the scenario's keys are Megatron's argument names), then it is
 * unknown.  What Megatron derives from what is not given (its defaults, the
 * FFN width, the tokenizer's vocabulary) is written explicitly at the end,
 * each with the rule it follows, so the scenario states the job whole. */
#include "import.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "lib/scenario/scenario_load.h"

#define CITE 480

struct imp_megatron {
    imp_doc *doc;
    imp_flavour flavour;
    ms_status st;
    char err[MS_DIAG_MAX];
    /* What a later argument or the end needs. */
    char tokenizer[64], tokenizer_cite[CITE];
    char bpe_cite[CITE]; /* --vocab-file/--merge-file: GPT-2 BPE */
    char backend[32], backend_cite[CITE];
    bool impl_local;
    char impl_cite[CITE];
    char groups[32], groups_cite[CITE]; /* --num-query-groups, until GQA is known */
    char kv[32], kv_cite[CITE];
    char nopos_cite[CITE];
    int64_t world;
    char world_cite[CITE];
    /* Settings of attention without flash attention: which kind of note
     * they are is known at the end. */
    char unfused[4][CITE];
    const char *unfused_why[4];
    int n_unfused;
};

typedef enum arg_kind {
    A_FIELD = 0, /* the scenario field `what` */
    A_FN,        /* a handler */
    A_POLICY,    /* a MindSpeed feature memsim has the policy `what` for */
    A_NO_EFFECT, /* `what`: why it has no effect on memory or time */
    A_NOT,       /* `what`: what memsim does not model */
    A_UNFUSED,   /* `what`: a setting of attention without flash attention */
} arg_kind;

typedef void (*arg_fn)(imp_megatron *mg, const char *value, const char *cite);

typedef struct arg_rule {
    const char *name; /* Megatron's dest; a trailing '*' matches a prefix */
    arg_kind kind;
    const char *what;
    arg_fn fn;
} arg_rule;

static void fail(imp_megatron *mg, const char *cite, const char *what)
{
    if (mg->st != MS_OK)
        return;
    mg->st = MS_EINVAL;
    snprintf(mg->err, sizeof mg->err, "%s: %s", cite, what);
}

/* value into buf, cut to fit. */
static void keep(char *buf, size_t size, const char *value)
{
    size_t n = value ? strnlen(value, size - 1) : 0;
    if (n > 0)
        memcpy(buf, value, n);
    buf[n] = '\0';
}

/* ---- values into fields by the field's type -------------------------------------- */

static bool parse_bool(const char *v, bool *b)
{
    if (v == NULL || strcasecmp(v, "true") == 0 || strcmp(v, "1") == 0)
        *b = true;
    else if (strcasecmp(v, "false") == 0 || strcmp(v, "0") == 0)
        *b = false;
    else
        return false;
    return true;
}

static void set_field(imp_megatron *mg, const char *path, const char *value, const char *cite)
{
    int id = scn_table_find(scn_schema(), path);
    st_type t = scn_schema()->fields[id].type;
    char *end = NULL;
    bool b;
    if (t == ST_BOOL) {
        if (parse_bool(value, &b))
            imp_set_bool(mg->doc, path, b, cite);
        else
            fail(mg, cite, "expected no value, or true or false");
    } else if (value == NULL) {
        fail(mg, cite, "expected a value after it");
    } else if (t == ST_INT) {
        long long x = strtoll(value, &end, 10);
        if (*value != '\0' && *end == '\0')
            imp_set_int(mg->doc, path, x, cite);
        else
            fail(mg, cite, "expected an integer");
    } else if (t == ST_NUM) {
        double x = strtod(value, &end);
        if (*value != '\0' && *end == '\0')
            imp_set_num(mg->doc, path, x, cite);
        else
            fail(mg, cite, "expected a number");
    } else {
        imp_set_str(mg->doc, path, value, cite);
    }
}

/* ---- arguments with a rule of their own ------------------------------------------- */

static void fn_tokenizer(imp_megatron *mg, const char *v, const char *cite)
{
    keep(mg->tokenizer, sizeof mg->tokenizer, v);
    keep(mg->tokenizer_cite, sizeof mg->tokenizer_cite, cite);
}

static void fn_bpe(imp_megatron *mg, const char *v, const char *cite)
{
    (void)v;
    keep(mg->bpe_cite, sizeof mg->bpe_cite, cite);
}

static void fn_backend(imp_megatron *mg, const char *v, const char *cite)
{
    keep(mg->backend, sizeof mg->backend, v);
    keep(mg->backend_cite, sizeof mg->backend_cite, cite);
}

static void fn_impl(imp_megatron *mg, const char *v, const char *cite)
{
    mg->impl_local = v != NULL && strcmp(v, "local") == 0;
    keep(mg->impl_cite, sizeof mg->impl_cite, cite);
    imp_note(
        mg->doc, IMP_NOT_MODELLED,
        "%s: the implementation's kernel fusions (memsim costs each op of its model on its own)",
        cite);
}

static void fn_groups(imp_megatron *mg, const char *v, const char *cite)
{
    keep(mg->groups, sizeof mg->groups, v);
    keep(mg->groups_cite, sizeof mg->groups_cite, cite);
}

static void fn_kv(imp_megatron *mg, const char *v, const char *cite)
{
    keep(mg->kv, sizeof mg->kv, v);
    keep(mg->kv_cite, sizeof mg->kv_cite, cite);
}

static void fn_nopos(imp_megatron *mg, const char *v, const char *cite)
{
    (void)v;
    keep(mg->nopos_cite, sizeof mg->nopos_cite, cite);
}

static void fn_rotary(imp_megatron *mg, const char *v, const char *cite)
{
    bool b;
    if (parse_bool(v, &b) && b)
        imp_set_str(mg->doc, "model.position_embedding_type", "rope", cite);
}

static void fn_selective(imp_megatron *mg, const char *v, const char *cite)
{
    bool b;
    if (parse_bool(v, &b) && b)
        imp_set_str(mg->doc, "recompute.recompute_granularity", "selective", cite);
}

/* A string field memsim takes only some values of. */
static void choice(imp_megatron *mg, const char *path, const char *v, const char *cite,
                   const char *const *ok)
{
    for (; v != NULL && *ok; ok++)
        if (strcasecmp(v, *ok) == 0) {
            imp_set_str(mg->doc, path, *ok, cite);
            return;
        }
    imp_note(mg->doc, IMP_NOT_MODELLED, "%s: memsim models %s only", cite, path);
}

static void fn_norm(imp_megatron *mg, const char *v, const char *cite)
{
    static const char *const ok[] = {"RMSNorm", "LayerNorm", NULL};
    choice(mg, "model.normalization", v, cite, ok);
}

static void fn_pos(imp_megatron *mg, const char *v, const char *cite)
{
    static const char *const ok[] = {"rope", "learned_absolute", NULL};
    choice(mg, "model.position_embedding_type", v, cite, ok);
}

static void fn_fragmentation(imp_megatron *mg, const char *v, const char *cite)
{
    bool b;
    if (parse_bool(v, &b) && b)
        imp_set_str(mg->doc, "allocator.flavour", "mindspeed", cite);
}

static const arg_rule rules[] = {
    {"encoder_seq_length", A_FIELD, "model.seq_length", NULL},
    {"recompute_granularity", A_FIELD, "recompute.recompute_granularity", NULL},
    {"recompute_method", A_FIELD, "recompute.recompute_method", NULL},
    {"recompute_num_layers", A_FIELD, "recompute.recompute_num_layers", NULL},
    {"num_virtual_stages_per_pipeline_rank", A_FIELD, "parallel.pp_interleave_num", NULL},
    {"virtual_pipeline_model_parallel_size", A_FIELD, "parallel.pp_interleave_num", NULL},
    {"recompute_activations", A_FN, NULL, fn_selective},
    {"use_rotary_position_embeddings", A_FN, NULL, fn_rotary},
    {"no_position_embedding", A_FN, NULL, fn_nopos},
    {"num_query_groups", A_FN, NULL, fn_groups},
    {"kv_channels", A_FN, NULL, fn_kv},
    {"tokenizer_type", A_FN, NULL, fn_tokenizer},
    {"vocab_file", A_FN, NULL, fn_bpe},
    {"merge_file", A_FN, NULL, fn_bpe},
    {"attention_backend", A_FN, NULL, fn_backend},
    {"transformer_impl", A_FN, NULL, fn_impl},
    {"normalization", A_FN, NULL, fn_norm},
    {"position_embedding_type", A_FN, NULL, fn_pos},
    {"memory_fragmentation", A_FN, NULL, fn_fragmentation},
    {"swap_attention", A_POLICY, "swap_attention", NULL},
    {"smart_swap", A_POLICY, "smart_swap", NULL},
    {"adaptive_memory_optimization", A_POLICY, "adaptive_memory", NULL},
    {"step_batch_size_schedule", A_NOT,
     "a batch-size ramp-up: the scenario runs the final global batch size", NULL},
    {"rampup_batch_size", A_NOT,
     "a batch-size ramp-up: the scenario runs the final global batch size", NULL},
    {"no_gradient_accumulation_fusion", A_NOT,
     "weight grads into a temporary, then added to the main grad (memsim accumulates in the GEMM)",
     NULL},
    {"use_fused_swiglu", A_NOT, "SwiGLU as one kernel (memsim: SiLU and the product)", NULL},
    {"use_mc2", A_NOT, "MC2, the matmul fused with its TP collective", NULL},
    {"no_masked_softmax_fusion", A_UNFUSED,
     "the softmax kernels of attention without flash attention", NULL},
    {"attention_softmax_in_fp32", A_UNFUSED,
     "the softmax dtype of attention without flash attention", NULL},
    {"cross_entropy_loss_fusion", A_NOT, "the fused cross entropy's kernels and memory", NULL},
    {"empty_unused_memory_level", A_NOT, "torch.cuda.empty_cache() calls in each step", NULL},
    {"fp8_param_gather", A_NOT, "FP8 parameter all-gathers", NULL},
    {"fp8_amax_*", A_NOT, "Transformer Engine's amax history (a few small kernels a step)", NULL},
    {"moe_grouped_gemm", A_NOT, "the experts' grouped GEMM", NULL},
    {"moe_token_dispatcher_type", A_NOT, "the MoE token dispatcher", NULL},
    {"moe_router_load_balancing_type", A_NOT, "the router's load balancing", NULL},
    {"moe_aux_loss_coeff", A_NOT, "the router's auxiliary loss", NULL},
    {"reuse_fp32_param", A_NOT, "MindSpeed's reuse of fp32 parameter memory", NULL},
    {"recompute_activation_function*", A_NOT, "MindSpeed's recompute of the MLP activation", NULL},
    {"qk_layernorm", A_NOT, "norms of the queries and keys", NULL},
    {"use_fused_rmsnorm", A_NO_EFFECT, "memsim costs a norm as one kernel", NULL},
    {"use_fused_rotary_pos_emb", A_NO_EFFECT, "memsim costs the rotary embedding as one kernel",
     NULL},
    {"apply_layernorm_1p", A_NO_EFFECT, "a norm's weight offset", NULL},
    {"use_mcore_models", A_NO_EFFECT, "memsim's gpt model is Megatron-core's", NULL},
    {"rotary_*", A_NO_EFFECT, "rotary embedding's frequencies", NULL},
    {"norm_epsilon", A_NO_EFFECT, "a norm's epsilon", NULL},
    {"lr*", A_NO_EFFECT, "the learning rate", NULL},
    {"min_lr", A_NO_EFFECT, "the learning rate", NULL},
    {"decoupled_*", A_NO_EFFECT, "the learning rate", NULL},
    {"weight_decay*", A_NO_EFFECT, "an optimizer hyperparameter", NULL},
    {"adam_*", A_NO_EFFECT, "an optimizer hyperparameter", NULL},
    {"clip_grad", A_NO_EFFECT, "an optimizer hyperparameter", NULL},
    {"init_method_std", A_NO_EFFECT, "initialisation", NULL},
    {"seed", A_NO_EFFECT, "the random seed", NULL},
    {"*loss_scale*", A_NO_EFFECT, "loss scaling", NULL},
    {"hysteresis", A_NO_EFFECT, "loss scaling", NULL},
    {"data_*", A_NO_EFFECT, "the data", NULL},
    {"split", A_NO_EFFECT, "the data", NULL},
    {"mock_data", A_NO_EFFECT, "the data", NULL},
    {"num_workers", A_NO_EFFECT, "the data loader", NULL},
    {"no_mmap_bin_files", A_NO_EFFECT, "the data loader", NULL},
    {"no_create_attention_mask_in_dataloader", A_NO_EFFECT, "the data loader", NULL},
    {"tokenizer_model", A_NO_EFFECT, "the tokenizer's file", NULL},
    {"tiktoken_*", A_NO_EFFECT, "the tokenizer", NULL},
    {"save*", A_NO_EFFECT, "checkpoints", NULL},
    {"load", A_NO_EFFECT, "checkpoints", NULL},
    {"no_load_*", A_NO_EFFECT, "checkpoints", NULL},
    {"ckpt_*", A_NO_EFFECT, "checkpoints", NULL},
    {"log_*", A_NO_EFFECT, "logging", NULL},
    {"eval_*", A_NO_EFFECT, "evaluation", NULL},
    {"tensorboard_*", A_NO_EFFECT, "logging", NULL},
    {"wandb_*", A_NO_EFFECT, "logging", NULL},
    {"timing_log_level", A_NO_EFFECT, "logging", NULL},
    {"profile*", A_NO_EFFECT, "profiling", NULL},
    {"train_iters", A_NO_EFFECT, "how long training runs (memsim simulates `steps`)", NULL},
    {"train_samples", A_NO_EFFECT, "how long training runs (memsim simulates `steps`)", NULL},
    {"exit_*", A_NO_EFFECT, "how long training runs", NULL},
    {"distributed_backend", A_NO_EFFECT, "the collective library", NULL},
    {"distributed_timeout_minutes", A_NO_EFFECT, "a timeout", NULL},
    {"manual_gc*", A_NO_EFFECT, "Python's garbage collection", NULL},
    {"calculate_per_token_loss", A_NO_EFFECT, "the loss's normalisation", NULL},
    {"use_cpu_initialization", A_NO_EFFECT, "initialisation", NULL},
};

static bool name_matches(const char *pattern, const char *name)
{
    size_t n = strlen(pattern);
    if (n >= 2 && pattern[0] == '*' && pattern[n - 1] == '*') { /* *infix* */
        char mid[64];
        snprintf(mid, sizeof mid, "%.*s", (int)(n - 2), pattern + 1);
        return strstr(name, mid) != NULL;
    }
    if (n > 0 && pattern[n - 1] == '*')
        return strncmp(pattern, name, n - 1) == 0;
    return strcmp(pattern, name) == 0;
}

static const arg_rule *rule_of(const char *name, bool prefixes)
{
    for (size_t i = 0; i < sizeof rules / sizeof rules[0]; i++)
        if ((strchr(rules[i].name, '*') != NULL) == prefixes && name_matches(rules[i].name, name))
            return &rules[i];
    return NULL;
}

/* A field of the same name in model, parallel or recompute. */
static const char *field_of(const char *name, char *buf, size_t size)
{
    static const char *const sections[] = {"model", "parallel", "recompute"};
    for (size_t i = 0; i < 3; i++) {
        snprintf(buf, size, "%s.%s", sections[i], name);
        if (scn_table_find(scn_schema(), buf) >= 0)
            return buf;
    }
    return NULL;
}

static void apply_rule(imp_megatron *mg, const arg_rule *r, const char *value, const char *cite)
{
    bool b;
    switch (r->kind) {
    case A_FIELD: set_field(mg, r->what, value, cite); return;
    case A_FN: r->fn(mg, value, cite); return;
    case A_POLICY:
        if (parse_bool(value, &b) && b)
            imp_set_str(mg->doc, "policy", r->what, cite);
        return;
    case A_UNFUSED:
        if (mg->n_unfused < 4) {
            keep(mg->unfused[mg->n_unfused], CITE, cite);
            mg->unfused_why[mg->n_unfused++] = r->what;
        }
        return;
    case A_NO_EFFECT:
    case A_NOT:
        imp_note(mg->doc, r->kind == A_NOT ? IMP_NOT_MODELLED : IMP_NO_EFFECT, "%s: %s", cite,
                 r->what);
        return;
    }
}

void imp_megatron_arg(imp_megatron *mg, const char *name, const char *value, const char *cite)
{
    char path[128];
    if (mg == NULL || mg->st != MS_OK)
        return;
    const arg_rule *r = rule_of(name, false);
    const char *field = r == NULL ? field_of(name, path, sizeof path) : NULL;
    if (r == NULL && field == NULL)
        r = rule_of(name, true);
    if (r != NULL)
        apply_rule(mg, r, value, cite);
    else if (field != NULL)
        set_field(mg, field, value, cite);
    else
        imp_note(mg->doc, IMP_NOT_MODELLED, "%s: not an argument memsim import knows", cite);
}

void imp_megatron_world(imp_megatron *mg, int64_t devices, const char *cite)
{
    mg->world = devices;
    keep(mg->world_cite, sizeof mg->world_cite, cite);
}

imp_megatron *imp_megatron_new(imp_doc *doc, imp_flavour flavour)
{
    imp_megatron *mg = calloc(1, sizeof *mg);
    if (mg != NULL) {
        mg->doc = doc;
        mg->flavour = flavour;
    }
    return mg;
}

void imp_megatron_free(imp_megatron *mg)
{
    free(mg);
}

ms_status imp_megatron_status(const imp_megatron *mg, ms_diag *d)
{
    return mg->st == MS_OK ? MS_OK : ms_diag_set(d, mg->st, "%s", mg->err);
}

/* ---- what Megatron derives ---------------------------------------------------------- */

#define DEFAULT(path, setter, value, why)                                                          \
    do {                                                                                           \
        if (imp_get(mg->doc, path) == NULL)                                                        \
            setter(mg->doc, path, value, why);                                                     \
    } while (0)

/* Megatron's own defaults for what the arguments left out (arguments.py). */
static void megatron_defaults(imp_megatron *mg)
{
    DEFAULT("model.arch", imp_set_str, "gpt",
            "Megatron-core's GPTModel (fused QKV; Megatron-core op names)");
    DEFAULT("model.normalization", imp_set_str, "LayerNorm", "Megatron's default --normalization");
    DEFAULT("model.swiglu", imp_set_bool, false, "Megatron's default (no --swiglu)");
    DEFAULT("model.position_embedding_type", imp_set_str, "learned_absolute",
            "Megatron's default --position-embedding-type");
    DEFAULT("model.disable_bias_linear", imp_set_bool, false,
            "Megatron's default (no --disable-bias-linear)");
    DEFAULT("model.untie_embeddings_and_output_weights", imp_set_bool, false,
            "Megatron's default (no --untie-embeddings-and-output-weights)");
    DEFAULT("model.hidden_dropout", imp_set_num, 0.1, "Megatron's default --hidden-dropout");
    DEFAULT("model.attention_dropout", imp_set_num, 0.1, "Megatron's default --attention-dropout");
    if (imp_get(mg->doc, "model.bf16") == NULL && imp_get(mg->doc, "model.fp16") == NULL)
        imp_set_bool(mg->doc, "model.bf16", false, "no --bf16 or --fp16: Megatron trains in fp32");
    DEFAULT("parallel.sequence_parallel", imp_set_bool, false,
            "Megatron's default (no --sequence-parallel)");
    DEFAULT("parallel.use_distributed_optimizer", imp_set_bool, false,
            "Megatron's default (no --use-distributed-optimizer)");
    DEFAULT("parallel.overlap_grad_reduce", imp_set_bool, false,
            "Megatron's default (no --overlap-grad-reduce)");
}

/* --swiglu without --ffn-hidden-size: int(4h x 2/3 / 64) x 64; else 4h. */
static void ffn_width(imp_megatron *mg)
{
    int64_t h;
    bool swiglu = false;
    if (imp_get(mg->doc, "model.ffn_hidden_size") != NULL ||
        !imp_get_int(mg->doc, "model.hidden_size", &h))
        return;
    imp_get_bool(mg->doc, "model.swiglu", &swiglu);
    if (swiglu)
        imp_set_int(mg->doc, "model.ffn_hidden_size", (4 * h * 2 / 3) / 64 * 64,
                    "Megatron's default with --swiglu: int(4 x hidden x 2/3 / 64) x 64");
    else
        imp_set_int(mg->doc, "model.ffn_hidden_size", 4 * h, "Megatron's default: 4 x hidden");
}

/* --num-query-groups counts with --group-query-attention only; memsim
 * models --kv-channels = hidden / heads only. */
static void attention_shape(imp_megatron *mg)
{
    bool gqa = false;
    int64_t h, a;
    imp_get_bool(mg->doc, "model.group_query_attention", &gqa);
    if (mg->groups[0] && gqa)
        set_field(mg, "model.num_query_groups", mg->groups, mg->groups_cite);
    else if (mg->groups[0])
        imp_note(mg->doc, IMP_NO_EFFECT,
                 "%s: without --group-query-attention Megatron does not use it", mg->groups_cite);
    if (!mg->kv[0])
        return;
    if (imp_get_int(mg->doc, "model.hidden_size", &h) &&
        imp_get_int(mg->doc, "model.num_attention_heads", &a) && a > 0 &&
        strtoll(mg->kv, NULL, 10) * a == h)
        set_field(mg, "model.kv_channels", mg->kv, mg->kv_cite);
    else
        imp_note(mg->doc, IMP_NOT_MODELLED, "%s: a head size other than hidden / heads",
                 mg->kv_cite);
}

/* Flash attention: --use-flash-attn, or --attention-backend flash, fused or
 * auto, or Megatron-core's default (Transformer Engine, backend auto);
 * unfused with --attention-backend unfused|local or --transformer-impl local. */
static void attention_kernel(imp_megatron *mg)
{
    if (imp_get(mg->doc, "model.use_flash_attn") != NULL)
        return;
    if (mg->backend[0]) {
        bool fused = strcmp(mg->backend, "unfused") != 0 && strcmp(mg->backend, "local") != 0;
        imp_set_bool(mg->doc, "model.use_flash_attn", fused, mg->backend_cite);
    } else if (mg->impl_local) {
        imp_set_bool(mg->doc, "model.use_flash_attn", false, mg->impl_cite);
    } else if (mg->flavour != IMP_NEMO) {
        imp_set_bool(mg->doc, "model.use_flash_attn", true,
                     "Megatron-core's default: --transformer-impl transformer_engine, "
                     "--attention-backend auto");
    }
}

static const struct {
    const char *type;
    int64_t vocab;
    const char *why;
} tokenizers[] = {
    {"GPT2BPETokenizer", 50257, "GPT-2's BPE vocabulary"},
    {"Llama2Tokenizer", 32000, "Llama 2's tokenizer.model"},
    {"Llama3Tokenizer", 128256, "Llama 3's tokenizer"},
};

/* The vocabulary is the tokenizer's unless --vocab-size gives it. */
static bool tokenizer_vocab(imp_megatron *mg)
{
    char cite[CITE + 160];
    const char *type = mg->tokenizer[0] ? mg->tokenizer : mg->bpe_cite[0] ? "GPT2BPETokenizer" : "";
    for (size_t i = 0; i < sizeof tokenizers / sizeof tokenizers[0]; i++) {
        if (strcmp(type, tokenizers[i].type) != 0)
            continue;
        snprintf(cite, sizeof cite, "%s: %s has %" PRId64 " tokens",
                 mg->tokenizer[0] ? mg->tokenizer_cite : mg->bpe_cite, tokenizers[i].why,
                 tokenizers[i].vocab);
        imp_set_int(mg->doc, "model.vocab_size", tokenizers[i].vocab, cite);
        return true;
    }
    fail(mg, type[0] ? mg->tokenizer_cite : "the arguments",
         "the vocabulary size is not given (Megatron reads it from the tokenizer's files, which "
         "memsim import does not): add --set model.vocab_size=N");
    return false;
}

static void vocabulary(imp_megatron *mg)
{
    if (imp_get(mg->doc, "model.vocab_size") == NULL && !tokenizer_vocab(mg))
        return;
    DEFAULT("model.make_vocab_size_divisible_by", imp_set_int, 128,
            "Megatron's default --make-vocab-size-divisible-by (padded to it x TP)");
}

static void world(imp_megatron *mg)
{
    if (imp_get(mg->doc, "parallel.world_size") != NULL)
        return;
    if (mg->world > 0)
        imp_set_int(mg->doc, "parallel.world_size", mg->world, mg->world_cite);
    else
        imp_note(mg->doc, IMP_NOT_MODELLED,
                 "the number of devices was not found: the scenario has no data parallelism (world "
                 "size = TP x PP x CP)");
}

/* Megatron turns sequence parallelism off without tensor parallelism. */
static void sequence_parallel(imp_megatron *mg)
{
    int64_t tp = 1;
    bool sp = false;
    char cite[CITE + 64];
    imp_get_int(mg->doc, "parallel.tensor_model_parallel_size", &tp);
    if (tp > 1 || !imp_get_bool(mg->doc, "parallel.sequence_parallel", &sp) || !sp)
        return;
    snprintf(cite, sizeof cite, "%s, off with TP 1 as Megatron turns it",
             imp_cite_of(mg->doc, "parallel.sequence_parallel"));
    imp_set_bool(mg->doc, "parallel.sequence_parallel", false, cite);
}

static void unfused_notes(imp_megatron *mg)
{
    bool flash = false;
    imp_get_bool(mg->doc, "model.use_flash_attn", &flash);
    for (int i = 0; i < mg->n_unfused; i++)
        imp_note(mg->doc, flash ? IMP_NO_EFFECT : IMP_NOT_MODELLED, "%s: %s", mg->unfused[i],
                 mg->unfused_why[i]);
}

void imp_megatron_finish(imp_megatron *mg)
{
    if (mg->st != MS_OK)
        return;
    sequence_parallel(mg);
    megatron_defaults(mg);
    ffn_width(mg);
    attention_shape(mg);
    attention_kernel(mg);
    unfused_notes(mg);
    world(mg);
    if (mg->nopos_cite[0]) {
        const char *pos = imp_get(mg->doc, "model.position_embedding_type");
        bool learned = pos != NULL && strstr(pos, "learned") != NULL;
        imp_note(mg->doc, learned ? IMP_NOT_MODELLED : IMP_NO_EFFECT, "%s: %s", mg->nopos_cite,
                 learned ? "a model without position embeddings" : "rope has no position table");
    }
    vocabulary(mg);
}

/* ---- a training script ---------------------------------------------------------------- */

/* MindSpeed-LLM's scripts set NPU variables and talk to HCCL. */
static imp_flavour flavour_of(const imp_source *src)
{
    static const char *const marks[] = {"NPU", "HCCL", "ascend", "Ascend", "ASCEND", NULL};
    bool npu = false;
    for (const char *const *m = marks; *m && !npu; m++)
        npu = strstr(src->text, *m) != NULL;
    return npu ? IMP_MINDSPEED : IMP_MEGATRON;
}

static bool ends_with(const char *s, const char *tail)
{
    size_t n = strlen(s), m = strlen(tail);
    return n >= m && strcmp(s + n - m, tail) == 0;
}

/* "--x 8 (file:12)", with where the value was set when that differs. */
static const char *arg_cite(char *buf, size_t size, const imp_source *src, const imp_word *opt,
                            const char *value, const imp_word *vw)
{
    int n = snprintf(buf, size, "%.*s%s%s (%s:%d", (int)strcspn(opt->text, "="), opt->text,
                     value ? " " : "", value ? value : "", src->base, opt->line);
    if (vw != NULL && vw->line <= 0 && n > 0 && (size_t)n < size)
        n += snprintf(buf + n, size - (size_t)n, "; the value from --env");
    else if (vw != NULL && vw->line != opt->line && n > 0 && (size_t)n < size)
        n += snprintf(buf + n, size - (size_t)n, "; the value from line %d", vw->line);
    if (n > 0 && (size_t)n < size)
        snprintf(buf + n, size - (size_t)n, ")");
    return buf;
}

/* The value of --name in words[from, to) ("--name v" or "--name=v"). */
static const char *option(const imp_command *c, size_t from, size_t to, const char *const *names,
                          const imp_word **at)
{
    for (size_t i = from; i < to; i++)
        for (const char *const *nm = names; *nm; nm++) {
            size_t n = strlen(*nm);
            if (strncmp(c->words[i].text, *nm, n) != 0)
                continue;
            *at = &c->words[i];
            if (c->words[i].text[n] == '=')
                return c->words[i].text + n + 1;
            if (c->words[i].text[n] == '\0' && i + 1 < to)
                return c->words[i + 1].text;
        }
    return NULL;
}

/* The word after the option word w ("--nnodes 4"), NULL for "--nnodes=4". */
static const imp_word *value_word(const imp_command *c, const imp_word *w)
{
    size_t i = (size_t)(w - c->words);
    return strchr(w->text, '=') == NULL && i + 1 < c->n ? &c->words[i + 1] : NULL;
}

/* torchrun / torch.distributed.launch / deepspeed: devices per node x nodes. */
static void launcher(imp_megatron *mg, const imp_source *src, const imp_command *c, size_t k)
{
    static const char *const procs[] = {"--nproc_per_node", "--nproc-per-node", "--num_gpus", NULL};
    static const char *const nodes[] = {"--nnodes", "--num_nodes", NULL};
    const imp_word *pw = NULL, *nw = NULL;
    const char *p = option(c, 1, k, procs, &pw), *n = option(c, 1, k, nodes, &nw);
    char *e1 = NULL, *e2 = NULL, cite[CITE], a[CITE / 2], b[CITE / 2];
    long long per = p ? strtoll(p, &e1, 10) : 1, count = n ? strtoll(n, &e2, 10) : 1;
    if ((p && (*p == '\0' || *e1 != '\0')) || (n && (*n == '\0' || *e2 != '\0')) || per < 1 ||
        count < 1) {
        imp_note(mg->doc, IMP_NOT_MODELLED,
                 "line %d: the launcher's device count (%s x %s) is not a number", c->line,
                 p ? p : "1", n ? n : "1");
        return;
    }
    snprintf(a, sizeof a, "%s",
             p ? arg_cite(cite, sizeof cite, src, pw, p, value_word(c, pw))
               : "1 process a node (the launcher's default)");
    snprintf(b, sizeof b, "%s",
             n ? arg_cite(cite, sizeof cite, src, nw, n, value_word(c, nw)) : "1 node");
    char whole[CITE + 8];
    snprintf(whole, sizeof whole, "%s x %s", a, b);
    imp_megatron_world(mg, per * count, whole);
}

static bool takes_value(const imp_word *w)
{
    return strncmp(w->text, "--", 2) != 0;
}

/* --name[=value] [value...]: each into the scenario. */
static void arguments(imp_megatron *mg, const imp_source *src, const imp_command *c, size_t i)
{
    char name[128], cite[CITE];
    while (i < c->n) {
        const imp_word *w = &c->words[i++];
        if (strncmp(w->text, "--", 2) != 0 || w->text[2] == '\0')
            continue; /* a stray word: a value already taken, or a positional */
        const char *eq = strchr(w->text, '=');
        size_t len = eq ? (size_t)(eq - w->text) - 2 : strlen(w->text) - 2;
        snprintf(name, sizeof name, "%.*s", (int)len, w->text + 2);
        for (char *q = name; *q; q++)
            *q = *q == '-' ? '_' : *q;
        const imp_word *vw = !eq && i < c->n && takes_value(&c->words[i]) ? &c->words[i] : NULL;
        const char *value = eq ? eq + 1 : vw ? vw->text : NULL;
        imp_word shown = *w;
        char opt[160];
        snprintf(opt, sizeof opt, "--%.*s", (int)len, w->text + 2);
        shown.text = opt;
        arg_cite(cite, sizeof cite, src, &shown, value, vw);
        if (w->unknown || (vw && vw->unknown))
            imp_note(mg->doc, IMP_NOT_MODELLED,
                     "%s: its value comes from a command memsim import does not run", cite);
        else
            imp_megatron_arg(mg, name, value, cite);
    }
}

/* The training script's word (*.py), or c->n for a bare argument list. */
static size_t script_word(const imp_command *c)
{
    for (size_t k = 0; k < c->n; k++)
        if (ends_with(c->words[k].text, ".py"))
            return k;
    return c->n;
}

static void environment(imp_doc *doc, const imp_source *src, const imp_command *c, imp_flavour fl)
{
    char cite[CITE];
    int conf = fl == IMP_MINDSPEED ? IMP_ENV_NPU_ALLOC : IMP_ENV_CUDA_ALLOC;
    const imp_word *w = &c->env[conf];
    if (w->text != NULL)
        imp_set_str(
            doc, "allocator.conf", w->text,
            imp_cite(cite, sizeof cite, src->base, w->line, "%s=%s", imp_env_names[conf], w->text));
    w = &c->env[IMP_ENV_AVOID_RS];
    if (w->text != NULL)
        imp_set_bool(doc, "allocator.avoid_record_streams", strcmp(w->text, "0") != 0,
                     imp_cite(cite, sizeof cite, src->base, w->line, "%s=%s",
                              imp_env_names[IMP_ENV_AVOID_RS], w->text));
}

ms_status imp_read_megatron(const imp_source *src, imp_doc *doc, ms_diag *d)
{
    imp_command c;
    ms_status st = imp_shell_command(src, doc, &c, d);
    if (st != MS_OK)
        return st;
    imp_flavour fl = flavour_of(src);
    const char *who = fl == IMP_MINDSPEED ? "MindSpeed-LLM" : "Megatron-LM";
    snprintf(src->kind, src->kind_size, "a %s training script", who);
    imp_header(doc, "%s: a %s training script; its command is at line %d.", src->base, who, c.line);
    imp_megatron *mg = imp_megatron_new(doc, fl);
    if (mg == NULL) {
        imp_command_free(&c);
        return ms_diag_set(d, MS_ENOMEM, "%s: out of memory", src->path);
    }
    size_t k = script_word(&c);
    if (k < c.n)
        launcher(mg, src, &c, k);
    arguments(mg, src, &c, k < c.n ? k + 1 : 0);
    environment(doc, src, &c, fl);
    imp_set_str(doc, "device", fl == IMP_MINDSPEED ? "ascend-910b" : "h100-80gb",
                fl == IMP_MINDSPEED
                    ? "not in the script: MindSpeed-LLM trains on Ascend NPUs (memsim import "
                      "--device NAME for another)"
                    : "not in the script (memsim import --device NAME for another)");
    imp_megatron_finish(mg);
    st = imp_megatron_status(mg, d);
    imp_megatron_free(mg);
    imp_command_free(&c);
    return st;
}
