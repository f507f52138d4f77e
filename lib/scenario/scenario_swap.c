/* swap_config: MindFormers' fine-grained activation swap (seed 003).
 *
 *   swap              master switch (false: the rest has no effect)
 *   default_prefetch  backward_prefetch of the default policy (1)
 *   layer_swap        { {backward_prefetch = P, layers = {0, 3} | true}, ... }
 *   op_swap           { {op_name = "attention" | {"a", "b"}, backward_prefetch = P,
 *                        layers = {...} | true}, ... }
 * With swap on and neither list given, flash attention is swapped in every
 * layer with default_prefetch (TransformerSwapConfig._initialize_swap:
 * op_swap = {'.*\.flash_attention': [{default_prefetch, layers: True}]}).
 * A single entry may be given without the enclosing list, as MindFormers
 * allows a dict.  op_swap entries are grouped by op_name in order of first
 * appearance (op_swap_to_dict); within a list, an entry with layers = true
 * collapses the list to that one rule and then every entry must have the same
 * backward_prefetch (_validate_layers_consistency). */
#include "scenario_load.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "memory_config.h"

typedef struct wctx {
    const char *file;
    ms_diag *d;
    ms_memory_config *mc;
} wctx;

static const char *const default_op = ".*\\.flash_attention";

static ms_status no_memory(const wctx *c)
{
    return ms_diag_set(c->d, MS_ENOMEM, "%s: out of memory", c->file);
}

static const st_tree *entry_key(const st_tree *e, const char *key)
{
    for (uint32_t k = 0; k < e->n_items; k++)
        if (strcmp(e->keys[k], key) == 0)
            return &e->items[k];
    return NULL;
}

/* Entry keys must be among allowed (a typo is not silently ignored). */
static ms_status entry_keys(const wctx *c, const st_tree *e, const char *where,
                            const char *const *allowed, int n)
{
    char buf[96];
    if (e->type != STT_DICT)
        return ms_diag_set(c->d, MS_EINVAL,
                           "%s: field '%s' must be a table like "
                           "{backward_prefetch = 20, layers = {0, 3}} (got %s)",
                           c->file, where, scn_table_tree_describe(e, buf, sizeof buf));
    for (uint32_t k = 0; k < e->n_items; k++) {
        bool ok = false;
        for (int i = 0; i < n; i++)
            ok |= strcmp(e->keys[k], allowed[i]) == 0;
        if (!ok)
            return ms_diag_set(c->d, MS_EINVAL, "%s: unknown key '%s.%s'", c->file, where,
                               e->keys[k]);
    }
    for (int i = 0; i < n; i++)
        if (entry_key(e, allowed[i]) == NULL)
            return ms_diag_set(c->d, MS_EINVAL, "%s: field '%s.%s' is required", c->file, where,
                               allowed[i]);
    return MS_OK;
}

/* backward_prefetch and layers of one entry. */
static ms_status read_rule(const wctx *c, const st_tree *e, const char *where, mc_swap_rule *r)
{
    char buf[96];
    const st_tree *p = entry_key(e, "backward_prefetch"), *l = entry_key(e, "layers");
    if (p->type != STT_INT || p->i < 0 || p->i > 1000000)
        return ms_diag_set(c->d, MS_EINVAL,
                           "%s: field '%s.backward_prefetch' must be an "
                           "integer >= 0 (got %s)",
                           c->file, where, scn_table_tree_describe(p, buf, sizeof buf));
    r->prefetch = (int)p->i;
    if (l->type == STT_BOOL) {
        r->on.all = l->b;
        return MS_OK;
    }
    bool ints = l->type == STT_LIST;
    for (uint32_t k = 0; ints && k < l->n_items; k++)
        ints = l->items[k].type == STT_INT;
    if (!ints)
        return ms_diag_set(c->d, MS_EINVAL,
                           "%s: field '%s.layers' must be true, false or a list "
                           "of layer indices (got %s)",
                           c->file, where, scn_table_tree_describe(l, buf, sizeof buf));
    r->on.index = calloc(l->n_items ? l->n_items : 1, sizeof *r->on.index);
    if (r->on.index == NULL)
        return no_memory(c);
    for (uint32_t k = 0; k < l->n_items; k++) {
        int64_t x = l->items[k].i;
        if (x < 0 || x >= c->mc->num_layers)
            return ms_diag_set(c->d, MS_ERANGE, "%s: field '%s.layers[%u]' is layer %" PRId64
                               "; the model's layers are 0..%d", c->file, where, k + 1, x,
                               c->mc->num_layers - 1);
        r->on.index[r->on.n_index++] = (int)x;
    }
    return MS_OK;
}

/* _validate_layers_consistency: `layers = true` makes the list one rule. */
static ms_status collapse(const wctx *c, mc_swap_rule *rules, int *n, const char *what)
{
    bool any_all = false;
    for (int i = 0; i < *n; i++)
        any_all |= rules[i].on.all;
    if (!any_all)
        return MS_OK;
    for (int i = 1; i < *n; i++)
        if (rules[i].prefetch != rules[0].prefetch)
            return ms_diag_set(c->d, MS_EINVAL, "%s: %s: an entry has layers = true, so every "
                               "entry must have the same backward_prefetch (%d and %d differ)",
                               c->file, what, rules[0].prefetch, rules[i].prefetch);
    for (int i = 1; i < *n; i++)
        free(rules[i].on.index);
    free(rules[0].on.index);
    rules[0].on.index = NULL;
    rules[0].on.n_index = 0;
    rules[0].on.all = true;
    *n = 1;
    return MS_OK;
}

/* The entries of a list field, or a single table given without the list. */
static ms_status entries(const wctx *c, const st_tree *t, const char *field,
                         const st_tree **out, uint32_t *n)
{
    char buf[96];
    if (t->type == STT_DICT) {
        *out = t;
        *n = 1;
        return MS_OK;
    }
    if (t->type != STT_LIST)
        return ms_diag_set(c->d, MS_EINVAL, "%s: field '%s' must be a list of tables (got %s)",
                           c->file, field, scn_table_tree_describe(t, buf, sizeof buf));
    *out = t->items;
    *n = t->n_items;
    return MS_OK;
}

static void where_of(char *buf, size_t size, const char *field, const st_tree *t, uint32_t k)
{
    if (t->type == STT_DICT)
        snprintf(buf, size, "%s", field);
    else
        snprintf(buf, size, "%s[%u]", field, k + 1);
}

static ms_status layer_swap(const wctx *c, const st_tree *t)
{
    static const char *const keys[] = {"backward_prefetch", "layers"};
    const st_tree *e = NULL;
    uint32_t n = 0;
    ms_status st = entries(c, t, "swap_config.layer_swap", &e, &n);
    if (st != MS_OK)
        return st;
    c->mc->layer_swap = calloc(n ? n : 1, sizeof *c->mc->layer_swap);
    if (c->mc->layer_swap == NULL)
        return no_memory(c);
    for (uint32_t k = 0; st == MS_OK && k < n; k++) {
        char where[64];
        where_of(where, sizeof where, "swap_config.layer_swap", t, k);
        st = entry_keys(c, &e[k], where, keys, 2);
        if (st == MS_OK)
            st = read_rule(c, &e[k], where, &c->mc->layer_swap[c->mc->n_layer_swap++]);
    }
    return st == MS_OK ? collapse(c, c->mc->layer_swap, &c->mc->n_layer_swap, "layer_swap") : st;
}

/* The group of op_name, created at the end if new. */
static ms_status op_group(const wctx *c, const char *name, uint32_t cap, const char *where,
                          mc_op_swap **out)
{
    ms_memory_config *mc = c->mc;
    for (int i = 0; i < mc->n_op_swap; i++)
        if (strcmp(mc->op_swap[i].re.text, name) == 0) {
            *out = &mc->op_swap[i];
            return MS_OK;
        }
    mc_op_swap *g = &mc->op_swap[mc->n_op_swap++];
    g->rules = calloc(cap, sizeof *g->rules);
    if (g->rules == NULL)
        return no_memory(c);
    *out = g;
    char field[96];
    snprintf(field, sizeof field, "%s.op_name", where);
    return scn_regex_compile(&g->re, name, field, c->file, c->d);
}

/* op_name: one string or a list of strings, each its own group. */
static ms_status op_entry(const wctx *c, const st_tree *e, const char *where, uint32_t cap)
{
    char buf[96];
    const st_tree *names = entry_key(e, "op_name");
    const st_tree *list = names->type == STT_LIST ? names->items : names;
    uint32_t n = names->type == STT_LIST ? names->n_items : 1;
    for (uint32_t k = 0; k < n; k++) {
        if (list[k].type != STT_STR || list[k].s[0] == '\0')
            return ms_diag_set(c->d, MS_EINVAL,
                               "%s: field '%s.op_name' must be a pattern or a "
                               "list of patterns (got %s)",
                               c->file, where, scn_table_tree_describe(&list[k], buf, sizeof buf));
        mc_op_swap *g = NULL;
        ms_status st = op_group(c, list[k].s, cap, where, &g);
        if (st == MS_OK)
            st = read_rule(c, e, where, &g->rules[g->n_rules++]);
        if (st != MS_OK)
            return st;
    }
    return MS_OK;
}

static uint32_t op_name_count(const st_tree *e, uint32_t n)
{
    uint32_t total = 0;
    for (uint32_t k = 0; k < n; k++) {
        const st_tree *names = entry_key(&e[k], "op_name");
        total += names != NULL && names->type == STT_LIST ? names->n_items : 1;
    }
    return total;
}

static ms_status op_swap(const wctx *c, const st_tree *t)
{
    static const char *const keys[] = {"op_name", "backward_prefetch", "layers"};
    const st_tree *e = NULL;
    uint32_t n = 0;
    ms_status st = entries(c, t, "swap_config.op_swap", &e, &n);
    for (uint32_t k = 0; st == MS_OK && k < n; k++) {
        char where[64];
        where_of(where, sizeof where, "swap_config.op_swap", t, k);
        st = entry_keys(c, &e[k], where, keys, 3);
    }
    if (st != MS_OK)
        return st;
    uint32_t cap = op_name_count(e, n);
    c->mc->op_swap = calloc(cap ? cap : 1, sizeof *c->mc->op_swap);
    if (c->mc->op_swap == NULL)
        return no_memory(c);
    for (uint32_t k = 0; st == MS_OK && k < n; k++) {
        char where[64];
        where_of(where, sizeof where, "swap_config.op_swap", t, k);
        st = op_entry(c, &e[k], where, cap);
    }
    for (int i = 0; st == MS_OK && i < c->mc->n_op_swap; i++) {
        char what[600];
        snprintf(what, sizeof what, "op_swap '%s'", c->mc->op_swap[i].re.text);
        st = collapse(c, c->mc->op_swap[i].rules, &c->mc->op_swap[i].n_rules, what);
    }
    return st;
}

static ms_status default_policy(const wctx *c)
{
    ms_memory_config *mc = c->mc;
    mc->swap_default = true;
    mc->op_swap = calloc(1, sizeof *mc->op_swap);
    if (mc->op_swap == NULL)
        return no_memory(c);
    mc->n_op_swap = 1;
    mc->op_swap[0].rules = calloc(1, sizeof *mc->op_swap[0].rules);
    if (mc->op_swap[0].rules == NULL)
        return no_memory(c);
    mc->op_swap[0].n_rules = 1;
    mc->op_swap[0].rules[0].prefetch = mc->default_prefetch;
    mc->op_swap[0].rules[0].on.all = true;
    return scn_regex_compile(&mc->op_swap[0].re, default_op, "swap_config", c->file, c->d);
}

ms_status scn_swap(const st_value *vals, const char *file, ms_scenario *sc, ms_diag *d)
{
    wctx c = {file, d, sc->memory_config};
    ms_memory_config *mc = c.mc;
    int64_t pf = vals[SC_SW_PREFETCH].set ? vals[SC_SW_PREFETCH].i : 1;
    if (pf < 0 || pf > 1000000)
        return ms_diag_set(d, MS_ERANGE, "%s: field 'swap_config.default_prefetch' must be "
                           "between 0 and 1000000 (got %" PRId64 ")", file, pf);
    mc->default_prefetch = (int)pf;
    mc->swap = vals[SC_SW_SWAP].set && vals[SC_SW_SWAP].b;
    /* The lists are checked even with swap off, so a typo does not wait
     * for the day swap is turned on. */
    const st_tree *ls = vals[SC_SW_LAYER].tree, *os = vals[SC_SW_OP].tree;
    ms_status st = MS_OK;
    if (ls != NULL)
        st = layer_swap(&c, ls);
    if (st == MS_OK && os != NULL)
        st = op_swap(&c, os);
    if (st == MS_OK && mc->swap && ls == NULL && os == NULL)
        st = default_policy(&c);
    if (st == MS_OK && mc->n_select + mc->n_comm + mc->n_op_swap > MC_MAX_PATTERNS)
        st = ms_diag_set(d, MS_ERANGE, "%s: recompute_config and swap_config state %d patterns; "
                         "memsim takes at most %d", file, mc->n_select + mc->n_comm +
                         mc->n_op_swap, MC_MAX_PATTERNS);
    return st;
}
