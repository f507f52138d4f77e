/* Which layers each pipeline stage (and each of its model chunks) holds.
 *
 * Megatron splits the layers evenly: num_layers / pp per stage, cut into
 * chunks of num_layers_per_virtual_pipeline_stage when interleaved.
 * MindFormers (LayerSetting) states the chunks as pp_interleave_num and lets
 * `offset` move layers: chunk c of stage s holds
 * num_layers // (pp * v) + offset[c][s] layers, the offsets summing to
 * num_layers % (pp * v); offset may be one integer, a list per stage (the
 * same for every chunk) or a [v][pp] list, as numpy broadcasts it.  Chunks
 * are numbered chunk-major: chunk 0 of stages 0..pp-1 holds the first layers. */
#include "scenario_load.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "memory_config.h"

typedef struct lctx {
    const st_value *v;
    const char *file;
    ms_diag *d;
    int L, pp, chunks;
} lctx;

static ms_status offset_entry(const lctx *c, const st_tree *t, const char *where, int *out)
{
    char buf[96];
    if (t->type != STT_INT || t->i < -(int64_t)c->L || t->i > c->L)
        return ms_diag_set(c->d, MS_EINVAL,
                           "%s: field 'parallel.offset%s' must be an integer "
                           "between -%d and %d (got %s)",
                           c->file, where, c->L, c->L, scn_table_tree_describe(t, buf, sizeof buf));
    *out = (int)t->i;
    return MS_OK;
}

static ms_status offset_row(const lctx *c, const st_tree *row, int chunk, int *off)
{
    char where[32];
    if (row->type != STT_LIST || (int)row->n_items != c->pp) {
        snprintf(where, sizeof where, chunk >= 0 ? "[%d]" : "", chunk + 1);
        return ms_diag_set(c->d, MS_EINVAL, "%s: field 'parallel.offset%s' must list %d "
                           "offsets, one per pipeline stage (parallel.pipeline_model_parallel_size)",
                           c->file, where, c->pp);
    }
    for (int s = 0; s < c->pp; s++) {
        if (chunk >= 0)
            snprintf(where, sizeof where, "[%d][%d]", chunk + 1, s + 1);
        else
            snprintf(where, sizeof where, "[%d]", s + 1);
        ms_status st = offset_entry(c, &row->items[s], where, &off[s]);
        if (st != MS_OK)
            return st;
    }
    return MS_OK;
}

/* offset[chunks * pp] from an integer, a list per stage or a [v][pp] list. */
static ms_status read_offset(const lctx *c, const st_tree *t, int *off)
{
    int n = c->chunks * c->pp;
    if (t == NULL)
        return MS_OK;
    if (t->type == STT_INT) {
        int x;
        ms_status st = offset_entry(c, t, "", &x);
        for (int i = 0; st == MS_OK && i < n; i++)
            off[i] = x;
        return st;
    }
    bool grid = t->type == STT_LIST && t->n_items > 0 && t->items[0].type == STT_LIST;
    if (!grid) {
        ms_status st = offset_row(c, t, -1, off);
        for (int ch = 1; st == MS_OK && ch < c->chunks; ch++)
            memcpy(off + ch * c->pp, off, (size_t)c->pp * sizeof *off);
        return st;
    }
    if ((int)t->n_items != c->chunks)
        return ms_diag_set(c->d, MS_EINVAL, "%s: field 'parallel.offset' has %u rows; a 2-D "
                           "offset needs one row per model chunk (%d, parallel.pp_interleave_num)",
                           c->file, t->n_items, c->chunks);
    for (int ch = 0; ch < c->chunks; ch++) {
        ms_status st = offset_row(c, &t->items[ch], ch, off + ch * c->pp);
        if (st != MS_OK)
            return st;
    }
    return MS_OK;
}

/* Chunks per stage from Megatron's or MindFormers' key (they must agree). */
static ms_status chunk_count(lctx *c, const ms_parallel_config *p, bool uneven)
{
    int nlpvs = p->num_layers_per_virtual_pipeline_stage;
    int64_t il = c->v[SC_INTERLEAVE].set ? c->v[SC_INTERLEAVE].i : 0;
    if (c->v[SC_INTERLEAVE].set && (il < 1 || il > c->L))
        return ms_diag_set(c->d, MS_ERANGE, "%s: field 'parallel.pp_interleave_num' must be "
                           "between 1 and model.num_layers (%d) (got %" PRId64 ")", c->file,
                           c->L, il);
    if (nlpvs > 0 && c->pp < 2)
        return ms_diag_set(c->d, MS_EINVAL, "%s: parallel.num_layers_per_virtual_pipeline_stage "
                           "needs parallel.pipeline_model_parallel_size > 1", c->file);
    if (il > 1 && c->pp < 2)
        return ms_diag_set(c->d, MS_EINVAL, "%s: parallel.pp_interleave_num needs "
                           "parallel.pipeline_model_parallel_size > 1", c->file);
    c->chunks = il > 0 ? (int)il : 1;
    if (nlpvs == 0)
        return MS_OK;
    if (uneven)
        return ms_diag_set(c->d, MS_EINVAL, "%s: parallel.offset moves layers between stages; "
                           "state the chunks with parallel.pp_interleave_num, not "
                           "num_layers_per_virtual_pipeline_stage (Megatron's chunks are even)",
                           c->file);
    if (c->L % c->pp != 0)
        return ms_diag_set(c->d, MS_EINVAL, "%s: model.num_layers (%d) must be divisible by "
                           "parallel.pipeline_model_parallel_size (%d)", c->file, c->L, c->pp);
    if ((c->L / c->pp) % nlpvs != 0)
        return ms_diag_set(c->d, MS_EINVAL, "%s: model.num_layers (%d) / "
                           "parallel.pipeline_model_parallel_size (%d) must be divisible by "
                           "parallel.num_layers_per_virtual_pipeline_stage (%d)", c->file, c->L,
                           c->pp, nlpvs);
    int chunks = c->L / c->pp / nlpvs;
    if (il > 0 && il != chunks)
        return ms_diag_set(c->d, MS_EINVAL, "%s: parallel.pp_interleave_num (%" PRId64 ") "
                           "disagrees with num_layers_per_virtual_pipeline_stage (%d): %d layers "
                           "/ (%d stages x %d) = %d chunks", c->file, il, nlpvs, c->L, c->pp,
                           nlpvs, chunks);
    c->chunks = chunks;
    return MS_OK;
}

/* Even stages: the divisibility Megatron demands. */
static ms_status even_counts(const lctx *c)
{
    if (c->L % c->pp != 0)
        return ms_diag_set(c->d, MS_EINVAL, "%s: model.num_layers (%d) must be divisible by "
                           "parallel.pipeline_model_parallel_size (%d)", c->file, c->L, c->pp);
    if (c->L % (c->pp * c->chunks) != 0)
        return ms_diag_set(c->d, MS_EINVAL, "%s: model.num_layers (%d) must be divisible by "
                           "parallel.pipeline_model_parallel_size x parallel.pp_interleave_num "
                           "(%d), or parallel.offset must say where the other layers go",
                           c->file, c->L, c->pp * c->chunks);
    return MS_OK;
}

/* MindFormers' _check_inputs: the offsets place the remainder. */
static ms_status uneven_counts(const lctx *c, const int *off, int *count)
{
    int n = c->pp * c->chunks, base = c->L / n, sum = 0;
    for (int i = 0; i < n; i++)
        sum += off[i];
    if (sum != c->L % n)
        return ms_diag_set(c->d, MS_EINVAL, "%s: parallel.offset sums to %d; it must sum to "
                           "model.num_layers %% (stages x chunks) = %d %% %d = %d (MindFormers)",
                           c->file, sum, c->L, n, c->L % n);
    for (int i = 0; i < n; i++) {
        count[i] = base + off[i];
        if (count[i] < 1)
            return ms_diag_set(c->d, MS_EINVAL, "%s: parallel.offset leaves chunk %d of stage %d "
                               "with %d layers (%d + %d); every chunk needs one", c->file,
                               i / c->pp + 1, i % c->pp + 1, count[i], base, off[i]);
    }
    return MS_OK;
}

static bool any_nonzero(const int *off, int n)
{
    for (int i = 0; i < n; i++)
        if (off[i] != 0)
            return true;
    return false;
}

/* Any non-zero integer in the offset tree (a malformed one is reported by
 * read_offset). */
static bool tree_nonzero(const st_tree *t)
{
    if (t == NULL)
        return false;
    if (t->type == STT_INT)
        return t->i != 0;
    for (uint32_t k = 0; t->type == STT_LIST && k < t->n_items; k++)
        if (tree_nonzero(&t->items[k]))
            return true;
    return false;
}

static ms_status fill(lctx *c, ms_memory_config *mc, const st_tree *offset)
{
    int n = c->pp * c->chunks;
    int *off = calloc((size_t)n, sizeof *off);
    mc->chunk_layers = calloc((size_t)n, sizeof *mc->chunk_layers);
    mc->chunk_first = calloc((size_t)n, sizeof *mc->chunk_first);
    ms_status st = off == NULL || mc->chunk_layers == NULL || mc->chunk_first == NULL
                       ? ms_diag_set(c->d, MS_ENOMEM, "%s: out of memory", c->file)
                       : read_offset(c, offset, off);
    if (st == MS_OK) {
        mc->uneven = any_nonzero(off, n);
        st = mc->uneven ? uneven_counts(c, off, mc->chunk_layers) : even_counts(c);
    }
    for (int i = 0, first = 0; st == MS_OK && i < n; i++) {
        if (!mc->uneven)
            mc->chunk_layers[i] = c->L / n;
        mc->chunk_first[i] = first;
        first += mc->chunk_layers[i];
    }
    free(off);
    return st;
}

ms_status scn_layout(const st_value *vals, const char *file, ms_scenario *sc, ms_diag *d)
{
    ms_memory_config *mc = calloc(1, sizeof *mc);
    if (mc == NULL)
        return ms_diag_set(d, MS_ENOMEM, "%s: out of memory", file);
    sc->memory_config = mc;
    snprintf(mc->file, sizeof mc->file, "%s", file);
    lctx c = {vals, file, d, sc->model.num_layers, sc->parallel.pipeline_model_parallel_size, 1};
    const st_tree *offset = vals[SC_OFFSET].tree;
    ms_status st = chunk_count(&c, &sc->parallel, tree_nonzero(offset));
    if (st == MS_OK)
        st = fill(&c, mc, offset);
    if (st != MS_OK)
        return st;
    mc->num_layers = c.L;
    mc->pp = c.pp;
    mc->v = c.chunks;
    /* MindFormers' interleave stated evenly is Megatron's virtual pipeline:
     * say so in the parallel config the workload builder reads. */
    if (!mc->uneven && mc->v > 1)
        sc->parallel.num_layers_per_virtual_pipeline_stage = c.L / (c.pp * mc->v);
    return MS_OK;
}

void scn_layer_place(const ms_memory_config *mc, int layer, int *chunk, int *stage, int *local)
{
    int lo = 0, hi = mc->v * mc->pp - 1;
    while (lo < hi) { /* the last chunk starting at or before layer */
        int mid = (lo + hi + 1) / 2;
        if (mc->chunk_first[mid] <= layer)
            lo = mid;
        else
            hi = mid - 1;
    }
    *chunk = lo / mc->pp;
    *stage = lo % mc->pp;
    *local = layer - mc->chunk_first[lo];
}

bool scn_layers_has(const ms_memory_config *mc, const mc_layers *on, int layer)
{
    if (on->counts != NULL) {
        int c, s, local;
        scn_layer_place(mc, layer, &c, &s, &local);
        return local < on->counts[c * mc->pp + s];
    }
    if (on->all)
        return true;
    for (int i = 0; i < on->n_index; i++)
        if (on->index[i] == layer)
            return true;
    return false;
}

int ms_scenario_chunks(const ms_scenario *sc)
{
    if (sc == NULL)
        return 1;
    const ms_parallel_config *p = &sc->parallel;
    int chunks = 1;
    if (sc->memory_config != NULL)
        chunks = sc->memory_config->v;
    else if (p->num_layers_per_virtual_pipeline_stage > 0 && p->pipeline_model_parallel_size > 0)
        chunks = sc->model.num_layers / p->pipeline_model_parallel_size /
                 p->num_layers_per_virtual_pipeline_stage;
    return chunks < 1 ? 1 : chunks;
}

ms_status ms_scenario_chunk_layers(const ms_scenario *sc, int stage, int chunk, int *first,
                                   int *count)
{
    int chunks;
    if (sc == NULL || first == NULL || count == NULL || (chunks = ms_scenario_chunks(sc)) < 1)
        return MS_EINVAL;
    int pp = sc->parallel.pipeline_model_parallel_size;
    if (pp < 1 || stage < 0 || stage >= pp || chunk < 0 || chunk >= chunks)
        return MS_ERANGE;
    const ms_memory_config *mc = sc->memory_config;
    if (mc != NULL && mc->chunk_layers != NULL) {
        *first = mc->chunk_first[chunk * pp + stage];
        *count = mc->chunk_layers[chunk * pp + stage];
        return MS_OK;
    }
    *count = sc->model.num_layers / (pp * chunks);
    *first = (chunk * pp + stage) * *count;
    return MS_OK;
}

static void layers_release(mc_layers *on)
{
    free(on->counts);
    free(on->index);
}

static void selects_release(mc_select *s, int n)
{
    for (int i = 0; s != NULL && i < n; i++) {
        scn_regex_release(&s[i].re);
        layers_release(&s[i].on);
    }
    free(s);
}

void scn_memory_config_free(ms_memory_config *mc)
{
    if (mc == NULL)
        return;
    free(mc->chunk_layers);
    free(mc->chunk_first);
    layers_release(&mc->full);
    selects_release(mc->select, mc->n_select);
    selects_release(mc->comm, mc->n_comm);
    for (int i = 0; mc->layer_swap != NULL && i < mc->n_layer_swap; i++)
        layers_release(&mc->layer_swap[i].on);
    free(mc->layer_swap);
    for (int i = 0; mc->op_swap != NULL && i < mc->n_op_swap; i++) {
        scn_regex_release(&mc->op_swap[i].re);
        for (int j = 0; j < mc->op_swap[i].n_rules; j++)
            layers_release(&mc->op_swap[i].rules[j].on);
        free(mc->op_swap[i].rules);
    }
    free(mc->op_swap);
    free(mc);
}
