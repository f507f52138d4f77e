/* Recompute settings: Megatron's arguments and MindFormers' recompute_config.
 *
 * Megatron (--recompute-granularity, --recompute-method,
 * --recompute-num-layers) may be written in a top-level `recompute` table or
 * straight into `model`; its checks are Megatron's TransformerConfig checks.
 *
 * MindFormers' recompute_config is normalised as LayerSetting does it
 * (mindformers/models/utils.py, _format_recompute_list and
 * _format_recompute_dict): every form becomes per-(interleave chunk, stage)
 * counts of layers, the first that many layers of each chunk being covered.
 *   true / false            every layer / none
 *   {3, 4, true, ...}       per stage; spread over the chunks one layer at a
 *                           time, chunk 0 first (_alloc_recompute_layer)
 *   {{2, 1}, {1, 0}}        per (chunk, stage), each capped at the chunk's
 *                           layers; a row may be true / false
 *   {"p1", "p2"}            select_*: these patterns on every layer
 *   {["p"] = value}         select_*: a value per pattern (sorted by pattern)
 *   {{["p"] = v}, ...}      select_*: the same, in this order (YAML's order)
 * With swap_config.swap on, MindFormers reads the options as layer indices
 * instead (_format_recompute_list_select_layer_index): true, false or a list
 * of layer indices, for recompute and for each select pattern. */
#include "scenario_load.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "memory_config.h"

typedef struct rctx {
    const st_value *v;
    const char *file;
    ms_diag *d;
    ms_memory_config *mc;
} rctx;

/* MindFormers' default patterns (LayerSetting.__init__). */
static const char *const select_defaults[] = {"feed_forward\\.mul",
                                              "feed_forward\\.w1\\.activation\\.silu"};
static const char *const comm_defaults[] = {".*\\.norm"};

static ms_status no_memory(const rctx *c)
{
    return ms_diag_set(c->d, MS_ENOMEM, "%s: out of memory", c->file);
}

/* ---- one value: which layers ------------------------------------------ */

static ms_status bad_form(const rctx *c, const st_tree *t, const char *field)
{
    char buf[96];
    if (c->mc->index_mode)
        return ms_diag_set(c->d, MS_EINVAL,
                           "%s: field '%s' must be true, false or a list of "
                           "layer indices when swap_config.swap is on (got %s)",
                           c->file, field, scn_table_tree_describe(t, buf, sizeof buf));
    return ms_diag_set(c->d, MS_EINVAL,
                       "%s: field '%s' must be true, false, a list of layer "
                       "counts per pipeline stage or a 2-D list per (interleave chunk, stage) "
                       "(got %s)",
                       c->file, field, scn_table_tree_describe(t, buf, sizeof buf));
}

static int chunk_size(const ms_memory_config *mc, int chunk, int stage)
{
    return mc->chunk_layers[chunk * mc->pp + stage];
}

/* A count or a boolean inside a list (true: all, MindFormers' MAX_INT32). */
static ms_status count_item(const rctx *c, const st_tree *t, const char *field, int64_t *out)
{
    char buf[96];
    if (t->type == STT_BOOL) {
        *out = t->b ? MC_ALL : 0;
        return MS_OK;
    }
    if (t->type == STT_INT && t->i >= 0) {
        *out = t->i;
        return MS_OK;
    }
    return ms_diag_set(c->d, MS_EINVAL,
                       "%s: field '%s' must be a layer count >= 0 or "
                       "true/false (got %s)",
                       c->file, field, scn_table_tree_describe(t, buf, sizeof buf));
}

/* _alloc_recompute_layer: a stage's count goes to its chunks one layer at a
 * time, chunk 0 first, each chunk taking at most its layers. */
static ms_status per_stage(const rctx *c, const st_tree *t, const char *field, int *counts)
{
    const ms_memory_config *mc = c->mc;
    if ((int)t->n_items != mc->pp)
        return ms_diag_set(c->d, MS_EINVAL, "%s: field '%s' lists %u per-stage layer counts; "
                           "it needs %d, one per pipeline stage "
                           "(parallel.pipeline_model_parallel_size)", c->file, field, t->n_items,
                           mc->pp);
    for (int s = 0; s < mc->pp; s++) {
        char sub[600];
        int64_t num = 0, stage_layers = 0;
        snprintf(sub, sizeof sub, "%s[%d]", field, s + 1);
        ms_status st = count_item(c, &t->items[s], sub, &num);
        if (st != MS_OK)
            return st;
        for (int ch = 0; ch < mc->v; ch++)
            stage_layers += chunk_size(mc, ch, s);
        for (num = num < stage_layers ? num : stage_layers; num > 0;)
            for (int ch = 0; ch < mc->v && num > 0; ch++)
                if (counts[ch * mc->pp + s] < chunk_size(mc, ch, s)) {
                    counts[ch * mc->pp + s]++;
                    num--;
                }
    }
    return MS_OK;
}

/* A 2-D list: a row per chunk, an entry per stage, capped at the chunk. */
static ms_status per_chunk(const rctx *c, const st_tree *t, const char *field, int *counts)
{
    const ms_memory_config *mc = c->mc;
    if ((int)t->n_items != mc->v)
        return ms_diag_set(c->d, MS_EINVAL, "%s: field '%s' is a 2-D list of %u rows; it needs "
                           "[%d][%d]: a row per interleave chunk (parallel.pp_interleave_num), an "
                           "entry per pipeline stage", c->file, field, t->n_items, mc->v, mc->pp);
    for (int ch = 0; ch < mc->v; ch++) {
        const st_tree *row = &t->items[ch];
        char sub[600];
        snprintf(sub, sizeof sub, "%s[%d]", field, ch + 1);
        if (row->type == STT_BOOL) {
            for (int s = 0; s < mc->pp; s++)
                counts[ch * mc->pp + s] = row->b ? chunk_size(mc, ch, s) : 0;
            continue;
        }
        if (row->type != STT_LIST || (int)row->n_items != mc->pp)
            return ms_diag_set(c->d, MS_EINVAL, "%s: field '%s' must list %d layer counts, one "
                               "per pipeline stage (a 2-D list is [%d][%d])", c->file, sub,
                               mc->pp, mc->v, mc->pp);
        for (int s = 0; s < mc->pp; s++) {
            char item[640];
            int64_t num = 0;
            snprintf(item, sizeof item, "%s[%d]", sub, s + 1);
            ms_status st = count_item(c, &row->items[s], item, &num);
            if (st != MS_OK)
                return st;
            counts[ch * mc->pp + s] = (int)(num < chunk_size(mc, ch, s) ? num : chunk_size(mc, ch, s));
        }
    }
    return MS_OK;
}

static bool all_of(const st_tree *t, st_tree_type a, st_tree_type b)
{
    for (uint32_t k = 0; k < t->n_items; k++)
        if (t->items[k].type != a && t->items[k].type != b)
            return false;
    return true;
}

/* _format_recompute_list. */
static ms_status counts_of(const rctx *c, const st_tree *t, const char *field, bool strings_ok,
                           mc_layers *on)
{
    const ms_memory_config *mc = c->mc;
    int n = mc->v * mc->pp;
    on->counts = calloc((size_t)n, sizeof *on->counts);
    if (on->counts == NULL)
        return no_memory(c);
    bool all = t != NULL && t->type == STT_BOOL && t->b;
    if (t != NULL && t->type == STT_LIST && t->n_items > 0 && all_of(t, STT_STR, STT_STR)) {
        if (!strings_ok)
            return bad_form(c, t, field);
        all = true; /* patterns given as a list: on every layer */
    }
    if (all) {
        memcpy(on->counts, mc->chunk_layers, (size_t)n * sizeof *on->counts);
        return MS_OK;
    }
    if (t == NULL || t->type == STT_BOOL || (t->type == STT_LIST && t->n_items == 0))
        return MS_OK;
    if (t->type != STT_LIST)
        return bad_form(c, t, field);
    if (all_of(t, STT_INT, STT_BOOL))
        return per_stage(c, t, field, on->counts);
    if (all_of(t, STT_LIST, STT_BOOL))
        return per_chunk(c, t, field, on->counts);
    return bad_form(c, t, field);
}

/* _format_recompute_list_select_layer_index. */
static ms_status index_of(const rctx *c, const st_tree *t, const char *field, mc_layers *on)
{
    if (t == NULL || t->type == STT_BOOL) {
        on->all = t != NULL && t->b;
        return MS_OK;
    }
    if (t->type != STT_LIST || !all_of(t, STT_INT, STT_INT))
        return bad_form(c, t, field);
    on->index = calloc(t->n_items ? t->n_items : 1, sizeof *on->index);
    if (on->index == NULL)
        return no_memory(c);
    for (uint32_t k = 0; k < t->n_items; k++) {
        int64_t x = t->items[k].i;
        if (x < 0 || x >= c->mc->num_layers)
            return ms_diag_set(c->d, MS_ERANGE, "%s: field '%s[%u]' is layer %" PRId64 "; the "
                               "model's layers are 0..%d", c->file, field, k + 1, x,
                               c->mc->num_layers - 1);
        on->index[on->n_index++] = (int)x;
    }
    return MS_OK;
}

static ms_status layers_of(const rctx *c, const st_tree *t, const char *field, bool strings_ok,
                           mc_layers *on)
{
    return c->mc->index_mode ? index_of(c, t, field, on) : counts_of(c, t, field, strings_ok, on);
}

/* ---- pattern dictionaries ---------------------------------------------- */

/* The ordered form: a list of one-entry tables { {["p"] = v}, ... }. */
static bool ordered_dict(const st_tree *t)
{
    if (t == NULL || t->type != STT_LIST || t->n_items == 0)
        return false;
    for (uint32_t k = 0; k < t->n_items; k++)
        if (t->items[k].type != STT_DICT || t->items[k].n_items != 1)
            return false;
    return true;
}

static ms_status add_select(const rctx *c, mc_select *arr, int *n, const char *pattern,
                            const st_tree *value, bool strings_ok, bool is_default,
                            const char *field)
{
    char sub[600];
    for (int i = 0; i < *n; i++)
        if (strcmp(arr[i].re.text, pattern) == 0)
            return ms_diag_set(c->d, MS_EINVAL, "%s: field '%s' names pattern '%s' twice",
                               c->file, field, pattern);
    mc_select *s = &arr[(*n)++];
    s->is_default = is_default;
    if (is_default || strings_ok)
        snprintf(sub, sizeof sub, "%s", field);
    else
        snprintf(sub, sizeof sub, "%s['%s']", field, pattern);
    ms_status st = scn_regex_compile(&s->re, pattern, field, c->file, c->d);
    if (st == MS_OK)
        st = layers_of(c, value, sub, strings_ok, &s->on);
    return st;
}

/* _format_recompute_dict: patterns from a list of strings or a dict, else
 * the defaults, with the whole value applying to each. */
static ms_status select_of(const rctx *c, const st_tree *t, const char *field,
                           const char *const *defaults, int n_defaults, mc_select **out, int *n)
{
    bool strings = t != NULL && t->type == STT_LIST && all_of(t, STT_STR, STT_STR);
    bool ordered = ordered_dict(t), dict = t != NULL && t->type == STT_DICT;
    int cap = strings || ordered || dict ? (int)t->n_items : n_defaults;
    *out = calloc(cap > 0 ? (size_t)cap : 1, sizeof **out);
    if (*out == NULL)
        return no_memory(c);
    if (strings && t->n_items > 0 && c->mc->index_mode)
        return ms_diag_set(c->d, MS_EINVAL, "%s: field '%s': with swap_config.swap on, give "
                           "each pattern true, false or a list of layer indices, e.g. "
                           "{[\"feed_forward\"] = {0, 3}} (MindFormers' swap mode)", c->file,
                           field);
    ms_status st = MS_OK;
    for (int i = 0; st == MS_OK && i < cap; i++) {
        if (strings)
            st = add_select(c, *out, n, t->items[i].s, t, true, false, field);
        else if (dict)
            st = add_select(c, *out, n, t->keys[i], &t->items[i], false, false, field);
        else if (ordered)
            st = add_select(c, *out, n, t->items[i].keys[0], &t->items[i].items[0], false, false,
                            field);
        else
            st = add_select(c, *out, n, defaults[i], t, false, true, field);
    }
    return st;
}

/* ---- Megatron ----------------------------------------------------------- */

/* A Megatron key from the `recompute` table or from `model`, not both. */
static ms_status megatron_key(const rctx *c, int sec_id, int model_id, const st_value **out)
{
    char a[96], b[96];
    if (c->v[sec_id].set && c->v[model_id].set)
        return ms_diag_set(c->d, MS_EINVAL, "%s: give %s or %s, not both", c->file,
                           scn_path_of(sec_id, a, sizeof a), scn_path_of(model_id, b, sizeof b));
    *out = c->v[sec_id].set ? &c->v[sec_id] : c->v[model_id].set ? &c->v[model_id] : NULL;
    return MS_OK;
}

static ms_status megatron_choice(const rctx *c, const st_value *v, const char *key,
                                 const char *a, const char *b, int *out)
{
    *out = 0;
    if (v == NULL)
        return MS_OK;
    if (strcmp(v->s, a) == 0 || strcmp(v->s, b) == 0) {
        *out = strcmp(v->s, a) == 0 ? 1 : 2;
        return MS_OK;
    }
    return ms_diag_set(c->d, MS_EINVAL, "%s: field '%s' must be one of \"%s\", \"%s\" (got "
                       "\"%.64s\")", c->file, key, a, b, v->s);
}

/* Megatron's TransformerConfig checks: full needs a method and 1..layers
 * per stage; selective takes neither. */
static ms_status megatron_checks(const rctx *c, const st_value *n)
{
    ms_memory_config *mc = c->mc;
    int per_stage = mc->num_layers / mc->pp;
    if (mc->granularity == MC_GRAN_NONE && (mc->method != MC_METHOD_NONE || n != NULL))
        return ms_diag_set(c->d, MS_EINVAL, "%s: recompute_method and recompute_num_layers need "
                           "recompute_granularity = \"full\"", c->file);
    if (mc->granularity == MC_GRAN_SELECTIVE && (mc->method != MC_METHOD_NONE || n != NULL))
        return ms_diag_set(c->d, MS_EINVAL, "%s: recompute_granularity \"selective\" takes no "
                           "recompute_method or recompute_num_layers (Megatron)", c->file);
    if (mc->granularity != MC_GRAN_FULL)
        return MS_OK;
    if (mc->method == MC_METHOD_NONE)
        return ms_diag_set(c->d, MS_EINVAL, "%s: recompute_granularity \"full\" needs "
                           "recompute_method \"uniform\" or \"block\" (Megatron)", c->file);
    if (n == NULL || n->i < 1 || n->i > per_stage)
        return ms_diag_set(c->d, MS_EINVAL, "%s: recompute_granularity \"full\" needs "
                           "recompute_num_layers between 1 and the layers per pipeline stage "
                           "(%d) (Megatron)", c->file, per_stage);
    mc->recompute_num_layers = (int)n->i;
    return MS_OK;
}

static ms_status megatron(const rctx *c)
{
    const st_value *g, *m, *n;
    int gran, method;
    ms_status st;
    if ((st = megatron_key(c, SC_GRAN, SC_M_GRAN, &g)) != MS_OK ||
        (st = megatron_key(c, SC_METHOD, SC_M_METHOD, &m)) != MS_OK ||
        (st = megatron_key(c, SC_NLAYERS, SC_M_NLAYERS, &n)) != MS_OK ||
        (st = megatron_choice(c, g, "recompute_granularity", "full", "selective", &gran)) !=
            MS_OK ||
        (st = megatron_choice(c, m, "recompute_method", "uniform", "block", &method)) != MS_OK)
        return st;
    c->mc->granularity = (mc_granularity)gran;
    c->mc->method = (mc_method)method;
    return megatron_checks(c, n);
}

/* ---- MindFormers --------------------------------------------------------- */

static bool mindformers_given(const st_value *v)
{
    for (int id = SC_RC_RECOMPUTE; id <= SC_RC_SLICE; id++)
        if (v[id].set)
            return true;
    return false;
}

static ms_status mindformers(const rctx *c)
{
    ms_memory_config *mc = c->mc;
    const st_value *v = c->v;
    ms_status st;
    mc->mp_comm_recompute = v[SC_RC_MPCOMM].set ? v[SC_RC_MPCOMM].b : true;
    mc->parallel_optimizer_comm_recompute = v[SC_RC_POCOMM].set && v[SC_RC_POCOMM].b;
    mc->recompute_slice_activation = v[SC_RC_SLICE].set && v[SC_RC_SLICE].b;
    if ((st = layers_of(c, v[SC_RC_RECOMPUTE].tree, "recompute_config.recompute", false,
                        &mc->full)) != MS_OK ||
        (st = select_of(c, v[SC_RC_SELECT].tree, "recompute_config.select_recompute",
                        select_defaults, 2, &mc->select, &mc->n_select)) != MS_OK)
        return st;
    return select_of(c, v[SC_RC_COMM].tree, "recompute_config.select_comm_recompute",
                     comm_defaults, 1, &mc->comm, &mc->n_comm);
}

ms_status scn_recompute(const st_value *vals, const char *file, ms_scenario *sc, ms_diag *d)
{
    rctx c = {vals, file, d, sc->memory_config};
    bool swap = vals[SC_SW_SWAP].set && vals[SC_SW_SWAP].b;
    ms_status st = megatron(&c);
    if (st != MS_OK)
        return st;
    if (c.mc->granularity != MC_GRAN_NONE && mindformers_given(vals))
        return ms_diag_set(d, MS_EINVAL, "%s: recompute is set twice, in Megatron's words "
                           "(recompute_granularity) and in MindFormers' (recompute_config); "
                           "keep one", file);
    /* MindFormers' LayerSetting runs on its defaults whenever swap is on. */
    c.mc->mf = mindformers_given(vals) || swap;
    c.mc->index_mode = swap;
    return c.mc->mf ? mindformers(&c) : MS_OK;
}
