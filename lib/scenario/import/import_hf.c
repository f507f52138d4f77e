/* A Hugging Face config.json into a scenario (import.h): the model's shape
 * from the config, as the config classes of transformers read it (LlamaConfig
 * and the models built like it: mistral, mixtral, qwen2; GPT2Config).  A
 * config.json says nothing of training, so the sequence length and the
 * parallel layout are memsim import's defaults, each said to be, for --set
 * (memsim import or run) to change. */
#include "import.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CITE 480

typedef struct hf_ctx {
    const imp_source *src;
    const imp_node *root;
    imp_doc *doc;
    ms_diag *d;
    ms_status st;
    bool gpt2; /* GPT2Config's n_* names, LayerNorm, GeLU, learned positions */
} hf_ctx;

static const char *cite_key(const hf_ctx *c, char *buf, size_t size, const char *key)
{
    const imp_node *n = imp_tree_get(c->root, key);
    if (n == NULL)
        return imp_cite(buf, size, c->src->base, 0, "%s absent", key);
    return imp_cite(buf, size, c->src->base, n->line, "%s: %s", key,
                    n->type == IMP_SCALAR ? n->text : "(a table)");
}

/* The first of the names the config has (GPT2Config spells them n_*). */
static const char *which(const hf_ctx *c, const char *a, const char *b)
{
    return imp_tree_get(c->root, a) != NULL || b == NULL ? a : b;
}

static bool int_of(hf_ctx *c, const char *key, int64_t *v)
{
    const imp_node *n = imp_tree_get(c->root, key);
    if (n == NULL || (n->type == IMP_SCALAR && !n->quoted && strcmp(n->text, "null") == 0))
        return false;
    if (imp_scalar_int(n, v))
        return true;
    if (c->st == MS_OK)
        c->st = ms_diag_set(c->d, MS_EINVAL, "%s:%d: %s: expected an integer", c->src->path,
                            n->line, key);
    return false;
}

static void int_key(hf_ctx *c, const char *key, const char *field)
{
    int64_t v;
    char cite[CITE];
    if (int_of(c, key, &v))
        imp_set_int(c->doc, field, v, cite_key(c, cite, sizeof cite, key));
}

static bool bool_of(const hf_ctx *c, const char *key, bool def)
{
    bool v = def;
    imp_scalar_bool(imp_tree_get(c->root, key), &v);
    return v;
}

static void shape(hf_ctx *c)
{
    char cite[CITE];
    const imp_node *t = imp_tree_get(c->root, "model_type");
    imp_set_str(c->doc, "model.arch", c->gpt2 ? "gpt" : "llama",
                t ? cite_key(c, cite, sizeof cite, "model_type")
                  : "no model_type: a llama-style decoder");
    int_key(c, which(c, "num_hidden_layers", "n_layer"), "model.num_layers");
    int_key(c, which(c, "hidden_size", "n_embd"), "model.hidden_size");
    int_key(c, which(c, "num_attention_heads", "n_head"), "model.num_attention_heads");
    int_key(c, "num_key_value_heads", "model.num_query_groups");
    int_key(c, which(c, "max_position_embeddings", "n_positions"), "model.max_position_embeddings");
    int64_t h = 0, f;
    if (int_of(c, which(c, "intermediate_size", "n_inner"), &f))
        int_key(c, which(c, "intermediate_size", "n_inner"), "model.ffn_hidden_size");
    else if (c->gpt2 && imp_get_int(c->doc, "model.hidden_size", &h))
        imp_set_int(c->doc, "model.ffn_hidden_size", 4 * h, "n_inner absent: GPT-2's 4 x n_embd");
    int_key(c, "vocab_size", "model.vocab_size");
    imp_set_int(c->doc, "model.make_vocab_size_divisible_by", 1,
                "the model's own vocabulary, padded only to a multiple of TP "
                "(--make-vocab-size-divisible-by 1, as MindSpeed-LLM's llama2 scripts)");
}

static void weights(hf_ctx *c);

static void kinds(hf_ctx *c)
{
    char cite[CITE];
    bool rms = imp_tree_get(c->root, "rms_norm_eps") != NULL;
    imp_set_str(c->doc, "model.normalization", rms ? "RMSNorm" : "LayerNorm",
                cite_key(c, cite, sizeof cite, rms ? "rms_norm_eps" : "layer_norm_epsilon"));
    const imp_node *act = imp_tree_get(c->root, which(c, "hidden_act", "activation_function"));
    bool silu = act != NULL && act->type == IMP_SCALAR && strcmp(act->text, "silu") == 0;
    imp_set_bool(c->doc, "model.swiglu", silu && !c->gpt2,
                 cite_key(c, cite, sizeof cite, which(c, "hidden_act", "activation_function")));
    imp_set_str(c->doc, "model.position_embedding_type", c->gpt2 ? "learned_absolute" : "rope",
                c->gpt2 ? "GPT-2's learned positions" : "rotary positions (rope_theta)");
    double drop = 0;
    if (imp_scalar_num(imp_tree_get(c->root, "attention_dropout"), &drop))
        imp_set_num(c->doc, "model.attention_dropout", drop,
                    cite_key(c, cite, sizeof cite, "attention_dropout"));
    weights(c);
}

/* Tied embeddings and biases: LlamaConfig and its kin default to untied
 * embeddings and no biases, GPT2Config to tied ones and biases. */
static void weights(hf_ctx *c)
{
    char cite[CITE];
    bool tied = bool_of(c, "tie_word_embeddings", c->gpt2);
    imp_set_bool(c->doc, "model.untie_embeddings_and_output_weights", !tied,
                 imp_tree_get(c->root, "tie_word_embeddings")
                     ? cite_key(c, cite, sizeof cite, "tie_word_embeddings")
                 : c->gpt2 ? "tie_word_embeddings absent: GPT2Config ties them"
                           : "tie_word_embeddings absent: LlamaConfig does not tie them");
    bool attn = bool_of(c, "attention_bias", false), mlp = bool_of(c, "mlp_bias", false);
    bool bias = c->gpt2 || (attn && mlp);
    imp_set_bool(c->doc, "model.disable_bias_linear", !bias,
                 c->gpt2 ? "GPT-2's linear layers have biases"
                         : "attention_bias and mlp_bias (false when absent)");
    if (!c->gpt2 && bias != (attn || mlp))
        imp_note(c->doc, IMP_NOT_MODELLED,
                 "attention_bias / mlp_bias: biases on some linear "
                 "layers only");
    const imp_node *t = imp_tree_get(c->root, "model_type");
    if (t != NULL && t->type == IMP_SCALAR && strncmp(t->text, "qwen2", 5) == 0)
        imp_note(c->doc, IMP_NOT_MODELLED, "%s: Qwen2's biases on Q, K and V",
                 cite_key(c, cite, sizeof cite, "model_type"));
}

static void experts(hf_ctx *c)
{
    const char *e = which(c, "num_local_experts", "num_experts");
    int64_t n;
    if (!int_of(c, e, &n) || n == 0)
        return;
    int_key(c, e, "model.num_experts");
    int_key(c, "num_experts_per_tok", "model.moe_router_topk");
    int_key(c, "moe_intermediate_size", "model.moe_ffn_hidden_size");
}

/* A config.json has no training settings: these are memsim import's. */
static void training_defaults(hf_ctx *c)
{
    int64_t maxpos = 4096;
    imp_get_int(c->doc, "model.max_position_embeddings", &maxpos);
    static const char why[] = "not in config.json: memsim import's default (--set %s=N)";
    char cite[CITE];
    snprintf(cite, sizeof cite, why, "model.seq_length");
    imp_set_int(c->doc, "model.seq_length", maxpos < 4096 ? maxpos : 4096, cite);
    imp_set_bool(c->doc, "model.use_flash_attn", true,
                 "not in config.json: memsim import's "
                 "default, flash attention");
    snprintf(cite, sizeof cite, why, "parallel.world_size");
    imp_set_int(c->doc, "parallel.world_size", 8, cite);
    snprintf(cite, sizeof cite, why, "parallel.tensor_model_parallel_size");
    imp_set_int(c->doc, "parallel.tensor_model_parallel_size", 8, cite);
    imp_set_bool(c->doc, "parallel.sequence_parallel", true,
                 "not in config.json: memsim import's default, with TP");
    imp_set_bool(c->doc, "parallel.use_distributed_optimizer", true,
                 "not in config.json: memsim import's default");
    snprintf(cite, sizeof cite, why, "parallel.micro_batch_size");
    imp_set_int(c->doc, "parallel.micro_batch_size", 1, cite);
    imp_set_str(c->doc, "device", "h100-80gb",
                "not in config.json (memsim import --device NAME for another)");
}

static const char *const known[] = {"model_type",
                                    "num_hidden_layers",
                                    "n_layer",
                                    "hidden_size",
                                    "n_embd",
                                    "num_attention_heads",
                                    "n_head",
                                    "num_key_value_heads",
                                    "max_position_embeddings",
                                    "n_positions",
                                    "intermediate_size",
                                    "n_inner",
                                    "vocab_size",
                                    "rms_norm_eps",
                                    "layer_norm_epsilon",
                                    "hidden_act",
                                    "activation_function",
                                    "tie_word_embeddings",
                                    "attention_bias",
                                    "mlp_bias",
                                    "attention_dropout",
                                    "num_local_experts",
                                    "num_experts",
                                    "num_experts_per_tok",
                                    "moe_intermediate_size",
                                    NULL};
static const char *const quiet[] = {"_name_or_path",
                                    "architectures",
                                    "bos_token_id",
                                    "eos_token_id",
                                    "pad_token_id",
                                    "initializer_range",
                                    "pretraining_tp",
                                    "rope_theta",
                                    "rope_scaling",
                                    "use_cache",
                                    "transformers_version",
                                    "output_router_logits",
                                    "router_jitter_noise",
                                    "max_window_layers",
                                    "use_sliding_window",
                                    "torch_dtype",
                                    NULL};

static void leftovers(hf_ctx *c)
{
    char cite[CITE];
    for (size_t i = 0; i < c->root->n; i++) {
        const char *k = c->root->keys[i];
        const imp_node *v = &c->root->items[i];
        bool null = v->type == IMP_SCALAR && !v->quoted && strcmp(v->text, "null") == 0;
        if (imp_listed(known, k) || (null && strcmp(k, "sliding_window") == 0))
            continue;
        cite_key(c, cite, sizeof cite, k);
        if (strcmp(k, "torch_dtype") == 0)
            imp_note(c->doc, IMP_NO_EFFECT,
                     "%s: the checkpoint's storage dtype; the scenario "
                     "trains in model.dtype (bf16 unless --set)",
                     cite);
        else if (strcmp(k, "sliding_window") == 0 && bool_of(c, "use_sliding_window", true))
            imp_note(c->doc, IMP_NOT_MODELLED,
                     "%s: sliding-window attention (memsim attends "
                     "the whole sequence)",
                     cite);
        else if (strcmp(k, "router_aux_loss_coef") == 0)
            imp_note(c->doc, IMP_NOT_MODELLED, "%s: the router's auxiliary loss", cite);
        else if (strcmp(k, "head_dim") == 0)
            imp_note(c->doc, IMP_NOT_MODELLED, "%s: memsim's head size is hidden / heads", cite);
        else
            imp_note(c->doc,
                     imp_listed(quiet, k) || strcmp(k, "sliding_window") == 0 ? IMP_NO_EFFECT
                                                                              : IMP_NOT_MODELLED,
                     "%s%s", cite,
                     imp_listed(quiet, k) || strcmp(k, "sliding_window") == 0
                         ? ""
                         : ": not a key memsim import knows");
    }
}

ms_status imp_read_hf(const imp_source *src, const imp_node *root, imp_doc *doc, ms_diag *d)
{
    const imp_node *t = imp_tree_get(root, "model_type");
    hf_ctx c = {src, root,  doc,
                d,   MS_OK, t != NULL && t->type == IMP_SCALAR && strcmp(t->text, "gpt2") == 0};
    if (imp_tree_get(root, which(&c, "num_hidden_layers", "n_layer")) == NULL)
        return ms_diag_set(d, MS_EINVAL,
                           "%s: expected a Hugging Face model config "
                           "(num_hidden_layers, hidden_size, num_attention_heads, vocab_size)",
                           src->path);
    imp_header(doc,
               "%s: a Hugging Face model config; the training settings are memsim "
               "import's defaults, each said below.",
               src->base);
    shape(&c);
    kinds(&c);
    experts(&c);
    training_defaults(&c);
    leftovers(&c);
    return c.st;
}
