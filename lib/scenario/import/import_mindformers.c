/* A MindFormers YAML into a scenario (import.h).  The model is MindFormers'
 * llama (its op names are memsim's llama ones), the parallel layout
 * parallel_config's, the batch as MindFormers' BaseTrainer counts it, the
 * recompute and swap settings copied (a scenario takes MindFormers' own
 * keys), the allocator MindSpore's and the device memory MindSpore's
 * context.max_device_memory.  Every other key is listed as not expressed. */
#include "import.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CITE 480

typedef struct mf_ctx {
    const imp_source *src;
    const imp_node *root;
    imp_doc *doc;
    ms_diag *d;
    ms_status st;
} mf_ctx;

static const char *cite_of(const mf_ctx *c, char *buf, size_t size, const char *path)
{
    const imp_node *n = imp_tree_get(c->root, path);
    const char *text = n && n->type == IMP_SCALAR ? n->text : n ? "(a table)" : "absent";
    return imp_cite(buf, size, c->src->base, n ? n->line : 0, "%s: %s", path, text);
}

static bool get_int(mf_ctx *c, const char *path, int64_t *v)
{
    const imp_node *n = imp_tree_get(c->root, path);
    if (n == NULL || (n->type == IMP_SCALAR && strcmp(n->text, "null") == 0))
        return false;
    if (imp_scalar_int(n, v))
        return true;
    if (c->st == MS_OK)
        c->st = ms_diag_set(c->d, MS_EINVAL, "%s:%d: %s: expected an integer", c->src->path,
                            n->line, path);
    return false;
}

/* An integer key into a field. */
static void int_key(mf_ctx *c, const char *path, const char *field)
{
    int64_t v;
    char cite[CITE];
    if (get_int(c, path, &v))
        imp_set_int(c->doc, field, v, cite_of(c, cite, sizeof cite, path));
}

static void bool_key(mf_ctx *c, const char *path, const char *field)
{
    bool v;
    char cite[CITE];
    const imp_node *n = imp_tree_get(c->root, path);
    if (n == NULL)
        return;
    if (imp_scalar_bool(n, &v))
        imp_set_bool(c->doc, field, v, cite_of(c, cite, sizeof cite, path));
    else if (c->st == MS_OK)
        c->st = ms_diag_set(c->d, MS_EINVAL, "%s:%d: %s: expected true or false", c->src->path,
                            n->line, path);
}

/* A table a scenario takes as MindFormers writes it. */
static void tree_key(mf_ctx *c, const char *path, const char *field)
{
    char cite[CITE], *lua = NULL;
    const imp_node *n = imp_tree_get(c->root, path);
    if (n == NULL || c->st != MS_OK)
        return;
    c->st = imp_tree_lua(n, &lua, c->d);
    if (c->st == MS_OK)
        imp_set(c->doc, field, lua, cite_of(c, cite, sizeof cite, path));
    else
        ms_diag_prefix(c->d, "%s: %s: ", c->src->path, path);
    free(lua);
}

/* recompute_config, swap_config: each key a scenario has, copied. */
static void tree_section(mf_ctx *c, const char *section)
{
    char path[160], cite[CITE];
    const imp_node *n = imp_tree_get(c->root, section);
    for (size_t i = 0; n != NULL && n->type == IMP_MAP && i < n->n && c->st == MS_OK; i++) {
        snprintf(path, sizeof path, "%s.%s", section, n->keys[i]);
        if (imp_is_field(path))
            tree_key(c, path, path);
        else
            imp_note(c->doc, IMP_NOT_MODELLED, "%s: a setting memsim does not take",
                     cite_of(c, cite, sizeof cite, path));
    }
}

/* MindFormers' LlamaFeedForward: 2/3 of 4h (x ffn_dim_multiplier), rounded
 * up to a multiple of multiple_of; or intermediate_size. */
static void ffn_width(mf_ctx *c)
{
    int64_t h, m = 256;
    char cite[CITE], why[CITE + 64];
    if (imp_tree_get(c->root, "model.model_config.intermediate_size") != NULL) {
        int_key(c, "model.model_config.intermediate_size", "model.ffn_hidden_size");
        return;
    }
    if (!imp_get_int(c->doc, "model.hidden_size", &h))
        return;
    get_int(c, "model.model_config.multiple_of", &m);
    double mult = 1;
    const imp_node *fm = imp_tree_get(c->root, "model.model_config.ffn_dim_multiplier");
    if (fm != NULL && !imp_scalar_num(fm, &mult))
        mult = 1;
    int64_t f = (int64_t)(mult * (double)(2 * (4 * h) / 3));
    m = m > 0 ? m : 1;
    snprintf(why, sizeof why,
             "MindFormers' LlamaFeedForward: 2/3 x 4 x hidden%s, rounded up "
             "to %s",
             fm ? " x ffn_dim_multiplier" : "",
             cite_of(c, cite, sizeof cite, "model.model_config.multiple_of"));
    imp_set_int(c->doc, "model.ffn_hidden_size", (f + m - 1) / m * m, why);
}

static void dtype(mf_ctx *c)
{
    static const char *const names[][2] = {
        {"float16", "fp16"}, {"bfloat16", "bf16"}, {"float32", "fp32"}};
    char cite[CITE];
    const imp_node *n = imp_tree_get(c->root, "model.model_config.compute_dtype");
    for (size_t i = 0; n != NULL && i < 3; i++)
        if (strcmp(n->text ? n->text : "", names[i][0]) == 0) {
            imp_set_str(c->doc, "model.dtype", names[i][1],
                        cite_of(c, cite, sizeof cite, "model.model_config.compute_dtype"));
            break;
        }
    /* MindSpore's gradients take their parameters' dtype. */
    const imp_node *p = imp_tree_get(c->root, "model.model_config.param_init_type");
    if (p == NULL || p->type != IMP_SCALAR)
        return;
    char why[CITE + 80];
    snprintf(why, sizeof why, "%s: the gradients' dtype",
             cite_of(c, cite, sizeof cite, "model.model_config.param_init_type"));
    imp_set_bool(c->doc, "parallel.grad_reduce_in_fp32", strcmp(p->text, "float32") == 0, why);
    imp_note(c->doc, IMP_NOT_MODELLED,
             "%s: MindSpore's parameters (memsim keeps 16-bit weights "
             "beside fp32 master weights and Adam moments)",
             cite);
}

/* BaseTrainer: with pipeline stages micro_batch_num micro-batches (no
 * gradient accumulation), else gradient_accumulation_steps; each of
 * batch_size x micro_batch_interleave_num samples. */
static void batch(mf_ctx *c, int64_t dp, int64_t pp)
{
    int64_t bs = 1, mbn = 1, gas = 1, inter = 1;
    char a[CITE], b[CITE], why[2 * CITE + 96];
    get_int(c, "runner_config.batch_size", &bs);
    get_int(c, "parallel_config.micro_batch_num", &mbn);
    get_int(c, "runner_config.gradient_accumulation_steps", &gas);
    get_int(c, "micro_batch_interleave_num", &inter);
    const char *nk =
        pp > 1 ? "parallel_config.micro_batch_num" : "runner_config.gradient_accumulation_steps";
    int64_t n = pp > 1 ? mbn : gas;
    imp_set_int(c->doc, "parallel.micro_batch_size", bs * inter,
                cite_of(c, a, sizeof a, "runner_config.batch_size"));
    snprintf(why, sizeof why, "%s x data_parallel x %s (MindFormers' BaseTrainer%s)",
             cite_of(c, a, sizeof a, "runner_config.batch_size"), cite_of(c, b, sizeof b, nk),
             pp > 1 ? " with pipeline stages" : "");
    imp_set_int(c->doc, "parallel.global_batch_size", bs * inter * dp * (n > 0 ? n : 1), why);
    if (inter > 1)
        imp_note(c->doc, IMP_NOT_MODELLED,
                 "%s: MindSpore's interleaved copies of a micro-batch "
                 "(memsim runs it whole)",
                 cite_of(c, a, sizeof a, "micro_batch_interleave_num"));
    if (pp > 1 ? gas > 1 : mbn > 1)
        imp_note(c->doc, IMP_NO_EFFECT, "%s: MindFormers does not use it %s",
                 cite_of(c, a, sizeof a,
                         pp > 1 ? "runner_config.gradient_accumulation_steps"
                                : "parallel_config.micro_batch_num"),
                 pp > 1 ? "with pipeline stages" : "without pipeline stages");
}

static void parallel(mf_ctx *c)
{
    int64_t dp = 1, tp = 1, pp = 1, cp = 1;
    char cite[4 * CITE];
    get_int(c, "parallel_config.data_parallel", &dp);
    get_int(c, "parallel_config.model_parallel", &tp);
    get_int(c, "parallel_config.pipeline_stage", &pp);
    get_int(c, "parallel_config.context_parallel", &cp);
    int_key(c, "parallel_config.model_parallel", "parallel.tensor_model_parallel_size");
    int_key(c, "parallel_config.pipeline_stage", "parallel.pipeline_model_parallel_size");
    int_key(c, "parallel_config.context_parallel", "parallel.context_parallel_size");
    int_key(c, "parallel_config.expert_parallel", "parallel.expert_model_parallel_size");
    bool_key(c, "parallel_config.use_seq_parallel", "parallel.sequence_parallel");
    bool_key(c, "parallel.enable_parallel_optimizer", "parallel.use_distributed_optimizer");
    int_key(c, "model.model_config.pp_interleave_num", "parallel.pp_interleave_num");
    tree_key(c, "model.model_config.offset", "parallel.offset");
    snprintf(cite, sizeof cite,
             "data_parallel x model_parallel x pipeline_stage x "
             "context_parallel (parallel_config, %s:%d)",
             c->src->base,
             imp_tree_get(c->root, "parallel_config")
                 ? imp_tree_get(c->root, "parallel_config")->line
                 : 0);
    imp_set_int(c->doc, "parallel.world_size", dp * tp * pp * cp, cite);
    batch(c, dp, pp);
}

static void model(mf_ctx *c)
{
    char cite[CITE];
    const imp_node *type = imp_tree_get(c->root, "model.model_config.type");
    imp_set_str(c->doc, "model.arch", "llama",
                type ? cite_of(c, cite, sizeof cite, "model.model_config.type")
                     : "MindFormers' llama (its op names)");
    int_key(c, "model.model_config.num_layers", "model.num_layers");
    int_key(c, "model.model_config.hidden_size", "model.hidden_size");
    int_key(c, "model.model_config.num_heads", "model.num_attention_heads");
    int_key(c, "model.model_config.n_kv_heads", "model.num_query_groups");
    int_key(c, "model.model_config.seq_length", "model.seq_length");
    bool_key(c, "model.model_config.use_flash_attention", "model.use_flash_attn");
    int64_t v;
    if (get_int(c, "model.model_config.vocab_size", &v))
        imp_set_int(c->doc, "model.padded_vocab_size", v,
                    cite_of(c, cite, sizeof cite, "model.model_config.vocab_size"));
    ffn_width(c);
    dtype(c);
}

static void memory(mf_ctx *c)
{
    char cite[CITE], size[64];
    const imp_node *n = imp_tree_get(c->root, "context.max_device_memory");
    imp_set_str(c->doc, "allocator.flavour", "mindspore",
                "MindSpore's memory pool (a MindFormers job)");
    imp_set_str(c->doc, "device", "ascend-910b",
                "not in the file: MindFormers trains on Ascend "
                "NPUs (memsim import --device NAME for another)");
    if (n == NULL || n->type != IMP_SCALAR)
        return;
    size_t len = strlen(n->text);
    if (len < 3 || len > 40 || strcmp(n->text + len - 2, "GB") != 0) {
        imp_note(c->doc, IMP_NOT_MODELLED, "%s: expected a size like \"58GB\"",
                 cite_of(c, cite, sizeof cite, "context.max_device_memory"));
        return;
    }
    /* MindSpore's GB are 2^30 bytes (kGBToByte = 1024 << 20). */
    snprintf(size, sizeof size, "%.*sGiB", (int)(len - 2), n->text);
    char why[CITE + 64];
    snprintf(why, sizeof why, "%s (MindSpore's GB: 2^30 bytes)",
             cite_of(c, cite, sizeof cite, "context.max_device_memory"));
    imp_set_str(c->doc, "device_memory", size, why);
}

/* ---- what is not expressed ------------------------------------------------------ */

static const char *const used[] = {"model.model_config.num_layers",
                                   "model.model_config.hidden_size",
                                   "model.model_config.num_heads",
                                   "model.model_config.n_kv_heads",
                                   "model.model_config.seq_length",
                                   "model.model_config.use_flash_attention",
                                   "model.model_config.vocab_size",
                                   "model.model_config.intermediate_size",
                                   "model.model_config.multiple_of",
                                   "model.model_config.ffn_dim_multiplier",
                                   "model.model_config.compute_dtype",
                                   "model.model_config.param_init_type",
                                   "model.model_config.type",
                                   "model.model_config.offset",
                                   "model.model_config.pp_interleave_num",
                                   "parallel_config.data_parallel",
                                   "parallel_config.model_parallel",
                                   "parallel_config.pipeline_stage",
                                   "parallel_config.context_parallel",
                                   "parallel_config.expert_parallel",
                                   "parallel_config.use_seq_parallel",
                                   "parallel_config.micro_batch_num",
                                   "parallel.enable_parallel_optimizer",
                                   "runner_config.batch_size",
                                   "runner_config.gradient_accumulation_steps",
                                   "micro_batch_interleave_num",
                                   "context.max_device_memory",
                                   "recompute_config",
                                   "swap_config",
                                   NULL};

/* Keys that say nothing about memory or time: data, checkpoints, logs, the
 * optimizer's hyperparameters, inference settings. */
static const char *const quiet[] = {"seed",
                                    "output_dir",
                                    "load_checkpoint",
                                    "src_strategy_path_or_dir",
                                    "auto_trans_ckpt",
                                    "only_save_strategy",
                                    "resume_training",
                                    "run_mode",
                                    "trainer",
                                    "lr_schedule",
                                    "train_dataset",
                                    "train_dataset_task",
                                    "do_eval",
                                    "eval_dataset",
                                    "eval_dataset_task",
                                    "callbacks",
                                    "processor",
                                    "metric",
                                    "auto_tune",
                                    "filepath_prefix",
                                    "autotune_per_step",
                                    "profile",
                                    "profile_start_step",
                                    "profile_stop_step",
                                    "init_start_profile",
                                    "profile_communication",
                                    "profile_memory",
                                    "layer_scale",
                                    "layer_decay",
                                    "lr_scale_factor",
                                    "remote_save_url",
                                    "use_parallel",
                                    "runner_wrapper",
                                    "runner_config.epochs",
                                    "runner_config.sink_mode",
                                    "runner_config.sink_size",
                                    "context.mode",
                                    "context.device_target",
                                    "context.max_call_depth",
                                    "context.save_graphs",
                                    "context.save_graphs_path",
                                    "context.device_id",
                                    "model.arch",
                                    "model.model_config.batch_size",
                                    "model.model_config.rms_norm_eps",
                                    "model.model_config.bos_token_id",
                                    "model.model_config.eos_token_id",
                                    "model.model_config.pad_token_id",
                                    "model.model_config.ignore_token_id",
                                    "model.model_config.use_past",
                                    "model.model_config.scaling_factor",
                                    "model.model_config.extend_method",
                                    "model.model_config.checkpoint_name_or_path",
                                    "model.model_config.repetition_penalty",
                                    "model.model_config.max_decode_length",
                                    "model.model_config.top_k",
                                    "model.model_config.top_p",
                                    "model.model_config.do_sample",
                                    "parallel.parallel_mode",
                                    "parallel.gradients_mean",
                                    "parallel.full_batch",
                                    "parallel.search_mode",
                                    "parallel.strategy_ckpt_save_file",
                                    "parallel.parallel_optimizer_config",
                                    "parallel_config.gradient_aggregation_group",
                                    NULL};

/* Keys memsim cannot say, with why. */
static const char *const unmodelled[][2] = {
    {"parallel_config.vocab_emb_dp", "the embedding replicated over model_parallel (memsim "
                                     "splits it over TP)"},
    {"model.model_config.layernorm_compute_type", "the dtype of the norms' compute"},
    {"model.model_config.softmax_compute_type", "the dtype of the softmax's compute"},
    {"model.model_config.rotary_dtype", "the dtype of the rotary embedding"},
    {"model.model_config.qkv_has_bias", "biases on Q, K and V only"},
    {"parallel.enable_alltoall", "MindSpore's all-to-all communication"},
    {"optimizer", "the optimizer (memsim models Adam with fp32 moments and master weights)"},
};

/* vocab_emb_dp matters only with model_parallel, enable_alltoall when on. */
static bool moot(const mf_ctx *c, const char *path)
{
    int64_t tp = 1;
    bool on = false;
    const imp_node *v = imp_tree_get(c->root, path);
    imp_scalar_int(imp_tree_get(c->root, "parallel_config.model_parallel"), &tp);
    imp_scalar_bool(v, &on);
    if (strcmp(path, "parallel_config.vocab_emb_dp") == 0)
        return !on || tp <= 1;
    return strcmp(path, "parallel.enable_alltoall") == 0 && !on;
}

static const char *unmodelled_why(const char *path)
{
    for (size_t i = 0; i < sizeof unmodelled / sizeof unmodelled[0]; i++)
        if (strcmp(unmodelled[i][0], path) == 0)
            return unmodelled[i][1];
    return NULL;
}

/* Every leaf key (a section's keys one level down for the sections memsim
 * reads) neither used nor quiet is a note. */
static void leftovers(mf_ctx *c, const imp_node *n, const char *prefix, int depth)
{
    char path[256], cite[CITE];
    for (size_t i = 0; n->type == IMP_MAP && i < n->n; i++) {
        snprintf(path, sizeof path, "%s%s%s", prefix, prefix[0] ? "." : "", n->keys[i]);
        const imp_node *v = &n->items[i];
        if (imp_listed(used, path))
            continue;
        const char *why = unmodelled_why(path);
        bool q = imp_listed(quiet, path) || moot(c, path);
        if (v->type == IMP_MAP && depth < 2 && !q && why == NULL) {
            leftovers(c, v, path, depth + 1);
            continue;
        }
        imp_note(c->doc, q ? IMP_NO_EFFECT : IMP_NOT_MODELLED, "%s%s%s",
                 cite_of(c, cite, sizeof cite, path), q ? "" : ": ",
                 q     ? ""
                 : why ? why
                       : "not a key memsim import knows");
    }
}

ms_status imp_read_mindformers(const imp_source *src, const imp_node *root, imp_doc *doc,
                               ms_diag *d)
{
    mf_ctx c = {src, root, doc, d, MS_OK};
    imp_header(doc, "%s: a MindFormers configuration.", src->base);
    model(&c);
    parallel(&c);
    memory(&c);
    tree_section(&c, "recompute_config");
    tree_section(&c, "swap_config");
    if (c.st == MS_OK)
        leftovers(&c, root, "", 0);
    if (c.st == MS_OK && imp_get(doc, "model.num_layers") == NULL)
        return ms_diag_set(d, MS_EINVAL,
                           "%s: expected model.model_config with num_layers, "
                           "hidden_size, num_heads and seq_length (a MindFormers model)",
                           src->path);
    return c.st;
}
