/* The seeds' configurations with a published figure, and their rows
 * (cli/reproduce/reproduce.h).  Figures are printed as summary.csv prints them and
 * each derived figure is computed from the printed ones, so that a reader
 * can redo every column from the columns beside it. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "reproduce.h"

/* Seed 000: adaptive memory against full recompute, throughput gain. */
static const struct {
    const char *scenario, *published;
} seed000[] = {
    {"gpt-175b-trimmed-tp8", "13.68"},
    {"gpt-175b-trimmed-tp2pp4", "14.17"},
    {"gpt-175b-trimmed-tp2pp4vpp2", "14.65"},
};

/* Seed 002: SmartSwap over 12 steps (WARMUP, SEARCHING_POLICY, STABLE)
 * against the baseline the seed names. */
static const struct {
    const char *label, *baseline_label, *baseline, *scenario, *published;
    const char *sets[RP_MAX_SETS];
} seed002[] = {
    {"TP8 -> TP1 (llama2-smartswap-tp1)",
     "none at TP8",
     "llama2-smartswap-tp8",
     "llama2-smartswap-tp1",
     "25",
     {"steps=12", NULL}},
    {"full recompute off (llama2-smartswap-seq16k)",
     "none with full recompute",
     "llama2-smartswap-seq16k",
     "llama2-smartswap-seq16k",
     "28",
     {"steps=12", "recompute_config.recompute=false"}},
};

/* Seeds 001/004: the fragmentation pools' peak reserved; the 70B rows last
 * (--quick leaves them out). */
static const char *const seed001[] = {
    "llama2-7b",
    "llama2-7b-seq6144",
    "llama2-13b-seq8192",
    "llama2-13b-16dev-seq4096",
    "llama2-13b-16dev-seq6144",
    "llama2-13b-16dev-seq8192",
    "llama2-70b",
    "llama2-70b-seq6144",
    "llama2-70b-seq8192",
};
enum { SEED001_QUICK = 6 };

#define COUNT(a) (sizeof(a) / sizeof((a)[0]))

static void add_run(rp_plan *p, const char *scenario, const char *policy, const char *const *sets)
{
    rp_run *r = &p->runs[p->n_runs++];
    memset(r, 0, sizeof *r);
    r->scenario = scenario;
    r->policy = policy;
    for (int i = 0; sets != NULL && i < RP_MAX_SETS; i++)
        r->sets[i] = sets[i];
}

static size_t seed001_rows(bool quick)
{
    return quick ? SEED001_QUICK : COUNT(seed001);
}

void rp_plan_build(rp_plan *p, bool quick)
{
    p->n_runs = 0;
    p->quick = quick;
    for (size_t i = 0; i < COUNT(seed000); i++) {
        add_run(p, seed000[i].scenario, "full_recompute", NULL);
        add_run(p, seed000[i].scenario, "adaptive_memory", NULL);
    }
    for (size_t i = 0; i < COUNT(seed002); i++) {
        add_run(p, seed002[i].baseline, "none", NULL);
        add_run(p, seed002[i].scenario, "smart_swap", seed002[i].sets);
    }
    for (size_t i = 0; i < seed001_rows(quick); i++) {
        add_run(p, seed001[i], "none", NULL);
        add_run(p, seed001[i], "lifetime_pools", NULL);
    }
    /* What each allocator would reserve on a device that never runs out:
     * where a row runs out of memory its peak reserved is where the job
     * died, not what it needed, and this is the comparison left. */
    static const char *const unlimited[] = {"device_memory=unlimited", NULL};
    for (size_t i = 0; i < seed001_rows(quick); i++) {
        add_run(p, seed001[i], "none", unlimited);
        add_run(p, seed001[i], "lifetime_pools", unlimited);
    }
}

/* ---- cells ----------------------------------------------------------- */

typedef char cell[64];

static double fmt(cell c, const char *format, double v)
{
    snprintf(c, sizeof(cell), format, v);
    return strtod(c, NULL);
}

static void put(rp_table *t, int col, const char *s)
{
    snprintf(t->cell[t->n_rows][col], sizeof(cell), "%s", s);
}

/* (a / b - 1) in percent; the gap to the published gain in points. */
static void put_gain(rp_table *t, int col, double a, double b, const char *published)
{
    cell g, gap;
    double gain = fmt(g, "%.2f", (a / b - 1) * 100);
    fmt(gap, "%.2f", fabs(gain - strtod(published, NULL)));
    put(t, col, g);
    put(t, col + 1, published);
    put(t, col + 2, gap);
}

static const char *const seed000_cols[] = {"scenario",           "full_recompute_ms",
                                           "adaptive_memory_ms", "measured_gain_pct",
                                           "published_gain_pct", "gap_points"};
static const char *const seed002_cols[] = {
    "case",           "baseline",          "baseline_ms",        "smart_swap_ms",
    "smart_swap_oom", "measured_gain_pct", "published_gain_pct", "gap_points"};
static const char *const seed001_cols[] = {"scenario",
                                           "none_peak_reserved_gb",
                                           "pools_peak_reserved_gb",
                                           "none_reserved_minus_allocated_gb",
                                           "pools_reserved_minus_allocated_gb",
                                           "none_oom",
                                           "pools_oom",
                                           "measured_saving_gb",
                                           "none_demand_reserved_gb",
                                           "pools_demand_reserved_gb",
                                           "demand_saving_gb",
                                           "published_saving_gb"};

static void table_init(rp_table *t, const char *file, const char *const *cols, int n)
{
    memset(t, 0, sizeof *t);
    t->file = file;
    t->cols = cols;
    t->n_cols = n;
}

static void fill_seed000(const rp_run *r, rp_table *t)
{
    table_init(t, "seed000_adaptive_memory.csv", seed000_cols, COUNT(seed000_cols));
    for (size_t i = 0; i < COUNT(seed000); i++, r += 2, t->n_rows++) {
        cell a, b;
        double full = fmt(a, "%.3f", r[0].fig.step_ms), ad = fmt(b, "%.3f", r[1].fig.step_ms);
        put(t, 0, seed000[i].scenario);
        put(t, 1, a);
        put(t, 2, b);
        put_gain(t, 3, full, ad, seed000[i].published);
    }
}

static void fill_seed002(const rp_run *r, rp_table *t)
{
    table_init(t, "seed002_smart_swap.csv", seed002_cols, COUNT(seed002_cols));
    for (size_t i = 0; i < COUNT(seed002); i++, r += 2, t->n_rows++) {
        cell a, b;
        double base = fmt(a, "%.3f", r[0].fig.step_ms), ss = fmt(b, "%.3f", r[1].fig.step_ms);
        put(t, 0, seed002[i].label);
        put(t, 1, seed002[i].baseline_label);
        put(t, 2, a);
        put(t, 3, b);
        put(t, 4, r[1].fig.oom ? "true" : "false");
        put_gain(t, 5, base, ss, seed002[i].published);
    }
}

static void put_gb(rp_table *t, int col, double bytes)
{
    cell c;
    fmt(c, "%.3f", bytes / 1e9);
    put(t, col, c);
}

/* a - b in GB from the two as put_gb prints them; an out-of-memory error
 * on either side is no saving. */
static void put_saving(rp_table *t, int col, const rp_figures *a, const rp_figures *b)
{
    cell x, y;
    double ga = fmt(x, "%.3f", (double)a->peak_reserved / 1e9);
    double gb = fmt(y, "%.3f", (double)b->peak_reserved / 1e9);
    if (a->oom || b->oom)
        put(t, col, "n/a (out of memory)");
    else
        put_gb(t, col, (ga - gb) * 1e9);
}

/* r: the rows' (none, pools) pairs on the device as shipped, then the same
 * pairs on a device that never runs out (what each would reserve). */
static void fill_seed001(const rp_run *r, size_t rows, rp_table *t)
{
    table_init(t, "seed001_fragmentation.csv", seed001_cols, COUNT(seed001_cols));
    for (size_t i = 0; i < rows; i++, t->n_rows++) {
        const rp_figures *none = &r[2 * i].fig, *pools = &r[2 * i + 1].fig;
        const rp_figures *none_u = &r[2 * (rows + i)].fig, *pools_u = &r[2 * (rows + i) + 1].fig;
        put(t, 0, seed001[i]);
        put_gb(t, 1, (double)none->peak_reserved);
        put_gb(t, 2, (double)pools->peak_reserved);
        put_gb(t, 3, (double)none->gap_at_peak);
        put_gb(t, 4, (double)pools->gap_at_peak);
        put(t, 5, none->oom ? "true" : "false");
        put(t, 6, pools->oom ? "true" : "false");
        put_saving(t, 7, none, pools);
        put_gb(t, 8, (double)none_u->peak_reserved);
        put_gb(t, 9, (double)pools_u->peak_reserved);
        put_saving(t, 10, none_u, pools_u);
        put(t, 11, "0.31-2.19");
    }
}

void rp_tables_fill(const rp_plan *p, rp_table t[RP_TABLES])
{
    const rp_run *r = p->runs;
    fill_seed000(r, &t[0]);
    r += 2 * COUNT(seed000);
    fill_seed002(r, &t[1]);
    r += 2 * COUNT(seed002);
    fill_seed001(r, seed001_rows(p->quick), &t[2]);
}
