/* The decisions a scenario declares: its recompute and swap settings
 * (Megatron's recompute arguments, MindFormers' recompute_config and
 * swap_config) as a built-in policy layer.  For each stage's program this
 * checks that every pattern reaches an op of the layers it is on, turns the
 * settings into decisions, and prints the per-layer lines MindFormers logs;
 * the Lua policy sees the decisions as profile.declared and may replace them.
 *
 * What a setting does to the program:
 *  - full recompute of a layer (Megatron full, MindFormers recompute):
 *    MS_DEC_RECOMPUTE of the layer's segment, per micro-batch.  Megatron's
 *    uniform method with recompute_num_layers N > 1 checkpoints groups of N
 *    layers keeping only each group's input; memsim recomputes each layer of
 *    the group, keeping each layer's input (N - 1 more layer inputs per
 *    group, 2 s b h / t bytes each with SP).
 *  - Megatron selective: the attention core segment of every layer.
 *  - MindFormers select_recompute / select_comm_recompute: the patterns on a
 *    layer mark the forward ops they match; every segment of the layer all
 *    of whose ops are marked is recomputed (the layer itself if all are).
 *    memsim's recompute units are the layer, its two norms, the attention
 *    core and the MLP activation (silu + mul), so the default patterns
 *    (feed_forward.mul + feed_forward.w1.activation.silu) recompute the MLP
 *    activation, '.*\.norm' the norms; what MindSpore would recompute outside
 *    a unit (one matmul's output) stays saved.
 *  - swap: the saved-for-backward activations produced by a swapped layer's
 *    forward ops (layer_swap) or by the ops an op_swap pattern matches, out
 *    after their last forward use and back for their first backward use,
 *    the copy back starting backward_prefetch ops early.  Recompute wins
 *    (seed 003, "mixing"): a tensor produced inside a recomputed segment, or
 *    read in forward by one, is not swapped. */
#include "declared.h"
#include "lib/scenario/memory_config.h"

#include <stdlib.h>
#include <string.h>

/* The op's path inside its layer: "layers.3.attention.wq.matmul" ->
 * "attention.wq.matmul"; NULL outside the transformer layers. */
static const char *layer_rest(const ms_op *op)
{
    const char *p = op->name;
    if (op->layer < 0 || strncmp(p, "layers.", 7) != 0)
        return NULL;
    p += 7;
    if (*p < '0' || *p > '9')
        return NULL;
    while (*p >= '0' && *p <= '9')
        p++;
    return *p == '.' ? p + 1 : NULL;
}

static ms_status unknown_target(const ms_memory_config *mc, const char *field, const char *pat,
                                bool is_default, ms_diag *d)
{
    if (is_default)
        return ms_diag_set(d, MS_EINVAL, "%s: %s: unknown regex target: the default pattern '%s' "
                           "matches no op of the model's layers (gpt models name ops "
                           "Megatron-style, e.g. 'mlp.activation'; flash attention needs "
                           "model.use_flash_attn); give the patterns explicitly", mc->file,
                           field, pat);
    return ms_diag_set(d, MS_EINVAL, "%s: %s: unknown regex target '%s': no op of the model's "
                       "layers matches it (module levels are separated by '\\.', ops are named "
                       "like 'attention.wq.matmul', 'feed_forward.w1.activation.silu'; see "
                       "docs/scenario-format.md)", mc->file, field, pat);
}

/* ---- the per-layer lines, as MindFormers logs them ------------------------ */

/* A line's entries go to a memory stream first: MindFormers prints a line
 * only when something matched. */
typedef struct line {
    FILE *f;
    char *buf;
    size_t len;
    int entries;
} line;

static ms_status line_open(line *ln)
{
    memset(ln, 0, sizeof *ln);
    ln->f = open_memstream(&ln->buf, &ln->len);
    return ln->f != NULL ? MS_OK : MS_ENOMEM;
}

/* Print "<head><entries>\n" if there are entries; frees the line. */
static ms_status line_close(line *ln, const char *head, FILE *out)
{
    bool bad = fclose(ln->f) != 0;
    if (!bad && ln->entries > 0)
        fprintf(out, "%s%s\n", head, ln->buf);
    free(ln->buf);
    return bad ? MS_ENOMEM : MS_OK;
}

typedef struct layer_ops {
    uint32_t from, to; /* ops [from, to) of one layer in the names program */
} layer_ops;

/* Was the module rest[0..len) matched by an earlier forward op of the layer? */
static bool seen_before(const mc_regex *re, const ms_program_view *v, layer_ops r, uint32_t i,
                        const char *rest, size_t len)
{
    for (uint32_t j = r.from; j < i; j++) {
        const char *r2 = v->ops[j].phase == MS_PHASE_FORWARD ? layer_rest(&v->ops[j]) : NULL;
        size_t l2;
        if (r2 != NULL && scn_regex_match(re, r2, &l2) && l2 == len && strncmp(r2, rest, len) == 0)
            return true;
    }
    return false;
}

/* The modules re matches in the layer, in op order, each once.  A swap
 * entry carries its value: MindFormers logs a one-level match as
 * ".attention, value=20" and a deeper one as "attention.flash_attention,
 * value=10" (set_pattern_swap); a recompute entry is the path alone. */
static void add_matches(line *ln, const mc_regex *re, const ms_program_view *v, layer_ops r,
                        int prefetch)
{
    for (uint32_t i = r.from; i < r.to; i++) {
        const char *rest = v->ops[i].phase == MS_PHASE_FORWARD ? layer_rest(&v->ops[i]) : NULL;
        size_t len;
        if (rest == NULL || !scn_regex_match(re, rest, &len) || seen_before(re, v, r, i, rest, len))
            continue;
        fprintf(ln->f, "%s%s%.*s", ln->entries++ ? ", " : "", prefetch >= 0 && re->n == 1 ? "." : "",
                (int)len, rest);
        if (prefetch >= 0)
            fprintf(ln->f, ", value=%d", prefetch);
    }
}

static ms_status select_line(const ms_memory_config *mc, const char *what, const mc_select *s,
                             int n, int layer, const ms_program_view *v, layer_ops r, FILE *out)
{
    line ln;
    char head[96];
    if (line_open(&ln) != MS_OK)
        return MS_ENOMEM;
    for (int i = 0; i < n; i++)
        if (scn_layers_has(mc, &s[i].on, layer))
            add_matches(&ln, &s[i].re, v, r, -1);
    snprintf(head, sizeof head, "Set select %srecompute at layer %d: ", what, layer);
    return line_close(&ln, head, out);
}

static ms_status swap_lines(const ms_memory_config *mc, int layer, const ms_program_view *v,
                            layer_ops r, FILE *out)
{
    const mc_swap_rule *lr = scn_rule_for(mc, mc->layer_swap, mc->n_layer_swap, layer);
    if (lr != NULL)
        fprintf(out, "Set layer swap at layer %d and value is: %d\n", layer, lr->prefetch);
    line ln;
    char head[64];
    if (line_open(&ln) != MS_OK)
        return MS_ENOMEM;
    for (int i = 0; i < mc->n_op_swap; i++) {
        const mc_op_swap *g = &mc->op_swap[i];
        const mc_swap_rule *rule = scn_rule_for(mc, g->rules, g->n_rules, layer);
        if (rule != NULL)
            add_matches(&ln, &g->re, v, r, rule->prefetch);
    }
    snprintf(head, sizeof head, "Set op_swap at layer %d: ", layer);
    return line_close(&ln, head, out);
}

/* One layer's lines, in LayerSetting's order: recompute, then swap. */
static ms_status layer_lines(const ms_memory_config *mc, int layer, const ms_program_view *v,
                             layer_ops r, FILE *out)
{
    ms_status st = MS_OK;
    if (scn_layer_full(mc, layer)) {
        fprintf(out, "Set full recompute at layer %d\n", layer);
    } else if (mc->granularity == MC_GRAN_SELECTIVE) {
        fprintf(out, "Set selective recompute (core attention) at layer %d\n", layer);
    } else if (mc->mf) {
        st = select_line(mc, "", mc->select, mc->n_select, layer, v, r, out);
        if (st == MS_OK)
            st = select_line(mc, "comm ", mc->comm, mc->n_comm, layer, v, r, out);
    }
    if (st == MS_OK && mc->swap)
        st = swap_lines(mc, layer, v, r, out);
    return st;
}

/* The forward ops of a layer's first micro-batch on the stage that holds
 * it: one contiguous run of the stage's program. */
static layer_ops first_run(const ms_program_view *v, int layer)
{
    layer_ops r = {0, 0};
    while (r.from < v->n_ops && (v->ops[r.from].layer != layer ||
                                 v->ops[r.from].phase != MS_PHASE_FORWARD))
        r.from++;
    for (r.to = r.from; r.to < v->n_ops && v->ops[r.to].layer == layer &&
                        v->ops[r.to].phase == MS_PHASE_FORWARD &&
                        v->ops[r.to].micro_batch == v->ops[r.from].micro_batch;)
        r.to++;
    return r;
}

ms_status pol_declared_print(const ms_scenario *sc, const ms_program_view *views, int n_views,
                             FILE *out, ms_diag *d)
{
    if (sc == NULL || views == NULL || out == NULL)
        return ms_diag_set(d, MS_EINVAL, "pol_declared_print: NULL argument");
    if (!scn_settings_active(sc))
        return MS_OK;
    const ms_memory_config *mc = sc->memory_config;
    scn_settings_print(sc, out);
    ms_status st = MS_OK;
    for (int layer = 0; st == MS_OK && layer < mc->num_layers; layer++) {
        int chunk, stage, local;
        scn_layer_place(mc, layer, &chunk, &stage, &local);
        if (stage < 0 || stage >= n_views)
            return ms_diag_set(d, MS_EINVAL, "%s: layer %d is on stage %d; %d programs given",
                               mc->file, layer, stage, n_views);
        st = layer_lines(mc, layer, &views[stage], first_run(&views[stage], layer), out);
        if (st == MS_ENOMEM)
            ms_diag_set(d, st, "printing the recompute and swap settings: out of memory");
    }
    return st;
}

/* ---- decisions ------------------------------------------------------------- */

/* Bits of an op's match mask: select patterns, then select_comm, then the
 * op_swap groups (at most MC_MAX_PATTERNS in all, checked at load). */
typedef struct plan_ctx {
    const ms_memory_config *mc;
    const ms_program_view *v;
    ms_diag *d;
    bool *recompute;       /* per segment */
    int32_t *child, *sibling; /* segment tree: first child, next sibling */
    uint64_t *mask;        /* per op */
    int32_t *ref;          /* per layer: the layer segment whose masks were computed */
    int32_t *swap;         /* per tensor: prefetch of a swap candidate, -1 none */
    int n_sel, n_comm, n_grp;
} plan_ctx;

static const mc_regex *pattern_bit(const plan_ctx *c, int bit)
{
    const ms_memory_config *mc = c->mc;
    if (bit < c->n_sel)
        return &mc->select[bit].re;
    if (bit < c->n_sel + c->n_comm)
        return &mc->comm[bit - c->n_sel].re;
    return &mc->op_swap[bit - c->n_sel - c->n_comm].re;
}

static uint64_t op_mask(const plan_ctx *c, const ms_op *op)
{
    const char *rest = layer_rest(op);
    uint64_t m = 0;
    for (int b = 0; rest != NULL && b < c->n_sel + c->n_comm + c->n_grp; b++)
        if (scn_regex_match(pattern_bit(c, b), rest, NULL))
            m |= (uint64_t)1 << b;
    return m;
}

/* Masks of a layer segment's ops; every micro-batch of a layer has the same
 * op names, so the first one's masks are copied when the names agree. */
static void segment_masks(plan_ctx *c, const ms_segment *s)
{
    int32_t r = c->ref[s->layer];
    const ms_segment *ref = r >= 0 ? &c->v->segments[r] : NULL;
    uint32_t n = s->last_op - s->first_op + 1;
    for (uint32_t k = 0; k < n; k++) {
        const ms_op *op = &c->v->ops[s->first_op + k];
        bool same = ref != NULL && ref->last_op - ref->first_op + 1 == n &&
                    strcmp(c->v->ops[ref->first_op + k].name, op->name) == 0;
        c->mask[op->id] = same ? c->mask[ref->first_op + k] : op_mask(c, op);
    }
    if (r < 0)
        c->ref[s->layer] = (int32_t)s->id;
}

/* The patterns on for a layer: recompute bits (none if the layer is fully
 * recomputed) and op_swap group bits with their prefetch. */
static uint64_t layer_bits(const plan_ctx *c, int layer, uint64_t *swap_bits, int *prefetch)
{
    const ms_memory_config *mc = c->mc;
    uint64_t on = 0;
    *swap_bits = 0;
    for (int i = 0; mc->mf && !scn_layer_full(mc, layer) && i < c->n_sel + c->n_comm; i++) {
        const mc_select *s = i < c->n_sel ? &mc->select[i] : &mc->comm[i - c->n_sel];
        if (scn_layers_has(mc, &s->on, layer))
            on |= (uint64_t)1 << i;
    }
    for (int g = 0; mc->swap && g < c->n_grp; g++) {
        const mc_swap_rule *r =
            scn_rule_for(mc, mc->op_swap[g].rules, mc->op_swap[g].n_rules, layer);
        prefetch[g] = r != NULL ? r->prefetch : -1;
        if (r != NULL)
            *swap_bits |= (uint64_t)1 << (c->n_sel + c->n_comm + g);
    }
    return on;
}

/* Each pattern on for the layer must match one of its ops. */
static ms_status check_layer_targets(const plan_ctx *c, const ms_segment *s, uint64_t on)
{
    uint64_t seen = 0;
    for (uint32_t i = s->first_op; i <= s->last_op; i++)
        seen |= c->mask[i];
    for (int b = 0; b < c->n_sel + c->n_comm + c->n_grp; b++) {
        if (!(on >> b & 1) || (seen >> b & 1))
            continue;
        bool sel = b < c->n_sel, comm = !sel && b < c->n_sel + c->n_comm;
        const char *field = sel ? "recompute_config.select_recompute"
                          : comm ? "recompute_config.select_comm_recompute"
                          : c->mc->swap_default ? "swap_config.swap" : "swap_config.op_swap";
        bool def = sel ? c->mc->select[b].is_default
                 : comm ? c->mc->comm[b - c->n_sel].is_default : c->mc->swap_default;
        return unknown_target(c->mc, field, pattern_bit(c, b)->text, def, c->d);
    }
    return MS_OK;
}

static bool all_marked(const plan_ctx *c, const ms_segment *s, uint64_t on)
{
    for (uint32_t i = s->first_op; i <= s->last_op; i++)
        if (!(c->mask[i] & on))
            return false;
    return true;
}

/* The outermost segments all of whose ops the patterns match. */
static void mark_covered(plan_ctx *c, int32_t seg, uint64_t on)
{
    if (all_marked(c, &c->v->segments[seg], on)) {
        c->recompute[seg] = true;
        return;
    }
    for (int32_t ch = c->child[seg]; ch >= 0; ch = c->sibling[ch])
        mark_covered(c, ch, on);
}

/* Megatron's selective recompute: core attention (Korthikanti et al. 2022). */
static void mark_core_attention(plan_ctx *c, int32_t seg)
{
    for (int32_t ch = c->child[seg]; ch >= 0; ch = c->sibling[ch]) {
        const char *name = c->v->segments[ch].name;
        size_t n = strlen(name);
        if ((n >= 15 && strcmp(name + n - 15, ".attention.core") == 0) ||
            (n >= 15 && strcmp(name + n - 15, ".core_attention") == 0))
            c->recompute[ch] = true;
        else
            mark_core_attention(c, ch);
    }
}

/* Swap candidates among the tensors the layer segment's ops produce. */
static void swap_candidates(plan_ctx *c, const ms_segment *s, uint64_t swap_bits,
                            const int *prefetch)
{
    const ms_memory_config *mc = c->mc;
    const mc_swap_rule *lr = scn_rule_for(mc, mc->layer_swap, mc->n_layer_swap, s->layer);
    for (uint32_t i = s->first_op; i <= s->last_op; i++) {
        int pf = lr != NULL ? lr->prefetch : -1;
        for (int g = 0; g < c->n_grp; g++) /* op-level settings override the layer's; last wins */
            if ((c->mask[i] & swap_bits) >> (c->n_sel + c->n_comm + g) & 1)
                pf = prefetch[g];
        const ms_op *op = &c->v->ops[i];
        for (uint32_t k = 0; pf >= 0 && k < op->n_outputs; k++) {
            const ms_tensor *t = &c->v->tensors[op->outputs[k]];
            if (t->producer == (int32_t)op->id && t->saved_for_backward && !t->persistent)
                c->swap[t->id] = pf;
        }
    }
}

static ms_status layout_agrees(const plan_ctx *c, const ms_segment *s)
{
    int ch, st, local;
    if (s->layer >= c->mc->num_layers)
        return ms_diag_set(c->d, MS_EINVAL, "%s: the program has layer %d; the scenario has %d",
                           c->mc->file, s->layer, c->mc->num_layers);
    scn_layer_place(c->mc, s->layer, &ch, &st, &local);
    if (st == c->v->stage)
        return MS_OK;
    return ms_diag_set(c->d, MS_EUNSUPPORTED, "%s: the program of stage %d holds layer %d, which "
                       "the scenario's pipeline layout (parallel.offset, pp_interleave_num) puts "
                       "on stage %d; uneven stages are not built yet", c->mc->file, c->v->stage,
                       s->layer, st);
}

/* Recompute marks and swap candidates of one layer segment. */
static ms_status plan_segment(plan_ctx *c, const ms_segment *s, bool *checked)
{
    const ms_memory_config *mc = c->mc;
    ms_status st = layout_agrees(c, s);
    if (st != MS_OK)
        return st;
    if (scn_layer_full(mc, s->layer)) {
        c->recompute[s->id] = true;
    } else if (mc->granularity == MC_GRAN_SELECTIVE) {
        mark_core_attention(c, (int32_t)s->id);
    }
    int prefetch[MC_MAX_PATTERNS];
    uint64_t swap_bits, on = layer_bits(c, s->layer, &swap_bits, prefetch);
    bool layer_swap = mc->swap && scn_rule_for(mc, mc->layer_swap, mc->n_layer_swap, s->layer);
    if (on == 0 && swap_bits == 0 && !layer_swap)
        return MS_OK;
    segment_masks(c, s);
    if (!checked[s->layer]) {
        checked[s->layer] = true;
        if ((st = check_layer_targets(c, s, on | swap_bits)) != MS_OK)
            return st;
    }
    if (on != 0)
        mark_covered(c, (int32_t)s->id, on);
    if (swap_bits != 0 || layer_swap)
        swap_candidates(c, s, swap_bits, prefetch);
    return MS_OK;
}

static bool op_recomputed(const plan_ctx *c, uint32_t op)
{
    for (int32_t s = c->v->ops[op].segment; s >= 0; s = c->v->segments[s].parent)
        if (c->recompute[s])
            return true;
    return false;
}

/* Recompute wins: not produced, nor read in forward, by a recomputed op. */
static bool swap_effective(const plan_ctx *c, const ms_tensor *t)
{
    if (t->producer >= 0 && op_recomputed(c, (uint32_t)t->producer))
        return false;
    for (uint32_t k = 0; k < t->n_uses; k++)
        if (c->v->ops[t->uses[k]].phase == MS_PHASE_FORWARD && op_recomputed(c, t->uses[k]))
            return false;
    return true;
}

static ms_status emit(const plan_ctx *c, ms_plan *plan)
{
    ms_status st = MS_OK;
    for (uint32_t s = 0; st == MS_OK && s < c->v->n_segments; s++) {
        ms_decision dec = {.kind = MS_DEC_RECOMPUTE, .segment = s, .out_after = MS_NONE,
                           .in_before = MS_NONE};
        if (c->recompute[s])
            st = ms_plan_add(plan, &dec);
    }
    for (uint32_t t = 0; st == MS_OK && t < c->v->n_tensors; t++) {
        ms_decision dec = {.kind = MS_DEC_SWAP, .tensor = t, .out_after = MS_NONE,
                           .in_before = MS_NONE, .prefetch = c->swap[t]};
        if (c->swap[t] >= 0 && swap_effective(c, &c->v->tensors[t]))
            st = ms_plan_add(plan, &dec);
    }
    return st;
}

static ms_status plan_alloc(plan_ctx *c, bool **checked)
{
    const ms_program_view *v = c->v;
    size_t ns = v->n_segments ? v->n_segments : 1;
    c->recompute = calloc(ns, sizeof *c->recompute);
    c->child = malloc(ns * sizeof *c->child);
    c->sibling = malloc(ns * sizeof *c->sibling);
    c->mask = calloc(v->n_ops ? v->n_ops : 1, sizeof *c->mask);
    c->ref = malloc((size_t)c->mc->num_layers * sizeof *c->ref);
    c->swap = malloc((v->n_tensors ? v->n_tensors : 1) * sizeof *c->swap);
    *checked = calloc((size_t)c->mc->num_layers, sizeof **checked);
    if (!c->recompute || !c->child || !c->sibling || !c->mask || !c->ref || !c->swap || !*checked)
        return MS_ENOMEM;
    for (uint32_t s = 0; s < v->n_segments; s++)
        c->child[s] = c->sibling[s] = -1;
    for (uint32_t s = v->n_segments; s-- > 0;) { /* children in id order */
        int32_t p = v->segments[s].parent;
        if (p >= 0 && (uint32_t)p < v->n_segments) {
            c->sibling[s] = c->child[p];
            c->child[p] = (int32_t)s;
        }
    }
    for (int l = 0; l < c->mc->num_layers; l++)
        c->ref[l] = -1;
    for (uint32_t t = 0; t < v->n_tensors; t++)
        c->swap[t] = -1;
    return MS_OK;
}

static void plan_release(plan_ctx *c, bool *checked)
{
    free(c->recompute);
    free(c->child);
    free(c->sibling);
    free(c->mask);
    free(c->ref);
    free(c->swap);
    free(checked);
}

ms_status pol_declared_plan(const ms_scenario *sc, const ms_program_view *program, ms_plan *plan,
                            ms_diag *d)
{
    if (sc == NULL || program == NULL || plan == NULL)
        return ms_diag_set(d, MS_EINVAL, "pol_declared_plan: NULL argument");
    if (!scn_settings_active(sc))
        return MS_OK;
    const ms_memory_config *mc = sc->memory_config;
    plan_ctx c = {.mc = mc, .v = program, .d = d, .n_sel = mc->mf ? mc->n_select : 0,
                  .n_comm = mc->mf ? mc->n_comm : 0, .n_grp = mc->swap ? mc->n_op_swap : 0};
    bool *checked = NULL;
    ms_status st = plan_alloc(&c, &checked);
    if (st == MS_ENOMEM)
        ms_diag_set(d, st, "declared decisions: out of memory");
    for (uint32_t s = 0; st == MS_OK && s < program->n_segments; s++) {
        const ms_segment *seg = &program->segments[s];
        if (seg->parent < 0 && seg->layer >= 0)
            st = plan_segment(&c, seg, checked);
    }
    if (st == MS_OK && (st = emit(&c, plan)) != MS_OK)
        ms_diag_set(d, st, "declared decisions: adding them: %s", ms_strerror(st));
    plan_release(&c, checked);
    return st;
}
