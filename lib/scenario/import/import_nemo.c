/* A NeMo training YAML (NeMo-Framework-Launcher's conf/training/, NeMo's
 * megatron_gpt_config.yaml) into a scenario (import.h).  NeMo's model keys
 * are Megatron-LM's arguments, so each goes through the Megatron reader
 * (import_megatron.c) after the few NeMo spells its own way are renamed;
 * the device count is trainer.devices x trainer.num_nodes, the precision
 * trainer.precision, the distributed optimizer model.optim.name. */
#include "import.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define CITE 480

typedef struct nemo_ctx {
    const imp_source *src;
    const imp_node *root;
    imp_megatron *mg;
    imp_doc *doc;
} nemo_ctx;

static const char *cite_of(const nemo_ctx *c, char *buf, size_t size, const char *path,
                           const imp_node *n)
{
    const char *text = n->type == IMP_SCALAR ? n->text : "(a table)";
    return imp_cite(buf, size, c->src->base, n->line, "%s: %s", path, text);
}

static bool is_null(const imp_node *n)
{
    return n == NULL ||
           (n->type == IMP_SCALAR && !n->quoted &&
            (strcasecmp(n->text, "null") == 0 || n->text[0] == '\0' || strcmp(n->text, "~") == 0));
}

/* NeMo's names for Megatron's arguments, and the values they take. */
static const struct {
    const char *nemo, *megatron, *value_from, *value_to;
} renames[] = {
    {"num_moe_experts", "num_experts", NULL, NULL},
    {"use_flash_attention", "use_flash_attn", NULL, NULL},
    {"ub_tp_comm_overlap", "tp_comm_overlap", NULL, NULL},
    {"activations_checkpoint_granularity", "recompute_granularity", NULL, NULL},
    {"activations_checkpoint_method", "recompute_method", NULL, NULL},
    {"activations_checkpoint_num_layers", "recompute_num_layers", NULL, NULL},
    {"bias", "disable_bias_linear", "false", "true"},
    {"bias", "disable_bias_linear", "true", "false"},
    {"share_embeddings_and_output_weights", "untie_embeddings_and_output_weights", "false", "true"},
    {"share_embeddings_and_output_weights", "untie_embeddings_and_output_weights", "true", "false"},
    {"activation", "swiglu", "swiglu", "true"},
    {"activation", "swiglu", "fast-swiglu", "true"},
    {"activation", "swiglu", "gelu", "false"},
    {"activation", "swiglu", "fast-gelu", "false"},
};

/* NeMo's own keys: kernel fusions and bookkeeping. */
static const char *const fusions[] = {"apply_rope_fusion",
                                      "grad_div_ar_fusion",
                                      "gradient_accumulation_fusion",
                                      "bias_activation_fusion",
                                      "bias_dropout_add_fusion",
                                      "masked_softmax_fusion",
                                      "persist_layer_norm",
                                      NULL};
static const char *const quiet[] = {"mcore_gpt",
                                    "use_scaled_init_method",
                                    "apply_query_key_layer_scaling",
                                    "layernorm_epsilon",
                                    "do_layer_norm_weight_decay",
                                    "pre_process",
                                    "post_process",
                                    "headscale",
                                    "transformer_block_type",
                                    "openai_gelu",
                                    "normalize_attention_scores",
                                    "rotary_percentage",
                                    "attention_type",
                                    "native_amp_init_scale",
                                    "native_amp_growth_interval",
                                    "hysteresis",
                                    "fp32_residual_connection",
                                    "fp16_lm_cross_entropy",
                                    "grad_allreduce_chunk_size_mb",
                                    "seed",
                                    "resume_from_checkpoint",
                                    "use_cpu_initialization",
                                    "onnx_safe",
                                    "apex_transformer_log_level",
                                    "gradient_as_bucket_view",
                                    "sync_batch_comm",
                                    "transformer_engine",
                                    "fp8_margin",
                                    "fp8_interval",
                                    "fp8_amax_history_len",
                                    "fp8_amax_compute_algo",
                                    "use_emha",
                                    "data",
                                    "megatron_amp_O2",
                                    "ffn_dropout",
                                    "rampup_batch_size",
                                    "init_method_std",
                                    "nsys_profile",
                                    "num_micro_batches_with_partial_activation_checkpoints",
                                    "activations_checkpoint_layers_per_pipeline",
                                    "fp8",
                                    "fp8_e4m3",
                                    "fp8_hybrid",
                                    "optim",
                                    "tokenizer",
                                    "deterministic_mode",
                                    NULL};

/* A key NeMo spells its own way, to Megatron's argument; false if none. */
static bool renamed(nemo_ctx *c, const char *key, const char *value, const char *cite)
{
    for (size_t i = 0; i < sizeof renames / sizeof renames[0]; i++) {
        if (strcmp(renames[i].nemo, key) != 0)
            continue;
        if (renames[i].value_from == NULL || strcasecmp(renames[i].value_from, value) == 0) {
            imp_megatron_arg(c->mg, renames[i].megatron,
                             renames[i].value_from ? renames[i].value_to : value, cite);
            return true;
        }
    }
    return false;
}

/* What model.KEY cannot say: why, or NULL when it goes to the reader. */
static const char *unsaid(const nemo_ctx *c, const char *key, const imp_node *v,
                          imp_note_kind *kind)
{
    *kind = IMP_NOT_MODELLED;
    if (strncmp(key, "activations_checkpoint_", 23) == 0 && strcmp(key + 23, "granularity") != 0 &&
        is_null(imp_tree_get(c->root, "model.activations_checkpoint_granularity"))) {
        *kind = IMP_NO_EFFECT;
        return "no activations_checkpoint_granularity";
    }
    if (imp_listed(fusions, key))
        return "a kernel fusion";
    if (v->type != IMP_SCALAR)
        return "not a key memsim import knows";
    return NULL;
}

static void model_key(nemo_ctx *c, const char *key, const imp_node *v)
{
    char path[160], cite[CITE];
    imp_note_kind kind;
    snprintf(path, sizeof path, "model.%s", key);
    cite_of(c, cite, sizeof cite, path, v);
    if (is_null(v) || imp_listed(quiet, key))
        return; /* null: not given; quiet ones are noted by the caller */
    const char *why = unsaid(c, key, v, &kind);
    if (why != NULL)
        imp_note(c->doc, kind, "%s: %s", cite, why);
    else if (renamed(c, key, v->text, cite))
        return;
    else if (strcmp(key, "activation") == 0 || strcmp(key, "bias") == 0)
        imp_note(c->doc, IMP_NOT_MODELLED, "%s: a value memsim does not model", cite);
    else
        imp_megatron_arg(c->mg, key, v->text, cite);
}

static void quiet_notes(nemo_ctx *c, const imp_node *model)
{
    char path[160], cite[CITE];
    for (size_t i = 0; i < model->n; i++)
        if (imp_listed(quiet, model->keys[i]) && !is_null(&model->items[i]) &&
            strcmp(model->keys[i], "optim") != 0 && strcmp(model->keys[i], "tokenizer") != 0) {
            snprintf(path, sizeof path, "model.%s", model->keys[i]);
            imp_note(c->doc, IMP_NO_EFFECT, "%s",
                     cite_of(c, cite, sizeof cite, path, &model->items[i]));
        }
}

static const imp_node *get(const nemo_ctx *c, const char *path, char *cite, size_t size)
{
    const imp_node *n = imp_tree_get(c->root, path);
    if (n != NULL && !is_null(n))
        cite_of(c, cite, size, path, n);
    return is_null(n) ? NULL : n;
}

/* trainer.precision, model.fp8*, model.optim, model.tokenizer. */
static void settings(nemo_ctx *c)
{
    char cite[CITE];
    const imp_node *n = get(c, "trainer.precision", cite, sizeof cite);
    if (n != NULL && strncmp(n->text, "bf16", 4) == 0)
        imp_megatron_arg(c->mg, "bf16", NULL, cite);
    else if (n != NULL && strncmp(n->text, "16", 2) == 0)
        imp_megatron_arg(c->mg, "fp16", NULL, cite);
    bool b = false;
    n = get(c, "model.fp8", cite, sizeof cite);
    if (n != NULL && imp_scalar_bool(n, &b) && b) {
        const imp_node *h = imp_tree_get(c->root, "model.fp8_hybrid");
        bool hybrid = false;
        imp_scalar_bool(h, &hybrid);
        imp_megatron_arg(c->mg, "fp8_format", hybrid ? "hybrid" : "e4m3", cite);
    }
    n = get(c, "model.optim.name", cite, sizeof cite);
    if (n != NULL)
        imp_megatron_arg(c->mg, "use_distributed_optimizer",
                         strstr(n->text, "distributed") != NULL ? "true" : "false", cite);
    if ((n = get(c, "model.optim.overlap_grad_sync", cite, sizeof cite)) != NULL)
        imp_megatron_arg(c->mg, "overlap_grad_reduce", n->text, cite);
    if ((n = get(c, "model.optim.overlap_param_sync", cite, sizeof cite)) != NULL)
        imp_megatron_arg(c->mg, "overlap_param_gather", n->text, cite);
    if ((n = get(c, "model.optim.grad_sync_dtype", cite, sizeof cite)) != NULL)
        imp_megatron_arg(c->mg, "grad_reduce_in_bf16",
                         strcmp(n->text, "bf16") == 0 ? "true" : "false", cite);
    const imp_node *lib = get(c, "model.tokenizer.library", cite, sizeof cite);
    const imp_node *type = imp_tree_get(c->root, "model.tokenizer.type");
    if (lib != NULL && strcmp(lib->text, "megatron") == 0 && !is_null(type))
        imp_megatron_arg(c->mg, "tokenizer_type", type->text, cite);
    else if (lib != NULL)
        imp_megatron_arg(c->mg, "tokenizer_type", lib->text, cite);
}

static void world(nemo_ctx *c)
{
    char a[CITE], b[CITE], cite[2 * CITE + 8];
    int64_t devices = 1, nodes = 1;
    const imp_node *dv = get(c, "trainer.devices", a, sizeof a);
    const imp_node *nn = get(c, "trainer.num_nodes", b, sizeof b);
    if (dv == NULL || !imp_scalar_int(dv, &devices) || (nn != NULL && !imp_scalar_int(nn, &nodes)))
        return;
    snprintf(cite, sizeof cite, "%s x %s", a, nn ? b : "1 node");
    imp_megatron_world(c->mg, devices * nodes, cite);
}

ms_status imp_read_nemo(const imp_source *src, const imp_node *root, imp_doc *doc, ms_diag *d)
{
    const imp_node *model = imp_tree_get(root, "model");
    if (model == NULL || model->type != IMP_MAP)
        return ms_diag_set(d, MS_EINVAL, "%s: expected a model section (a NeMo config)", src->path);
    imp_megatron *mg = imp_megatron_new(doc, IMP_NEMO);
    if (mg == NULL)
        return ms_diag_set(d, MS_ENOMEM, "%s: out of memory", src->path);
    nemo_ctx c = {src, root, mg, doc};
    imp_header(doc, "%s: a NeMo training configuration (Megatron-core GPT).", src->base);
    for (size_t i = 0; i < model->n; i++)
        model_key(&c, model->keys[i], &model->items[i]);
    quiet_notes(&c, model);
    settings(&c);
    world(&c);
    imp_set_str(doc, "device", "h100-80gb",
                "not in the file (memsim import --device NAME for another)");
    imp_megatron_finish(mg);
    ms_status st = imp_megatron_status(mg, d);
    imp_megatron_free(mg);
    return st;
}
