/* memsim reproduce: every configuration of the seeds' published figures
 * (issue 12), run from the shipped scenarios and policies wherever memsim is
 * installed, into the CSV files of results/reference/ (each measured figure next to the
 * published one) and the seed section of docs/validation.md
 * (cli/reproduce/section.c).
 *
 * The published figures are the seeds' own (../shared/seeds, summarised in
 * ../shared/reference/memory-features.md); nothing here is fitted to them.
 * Every row is computed as results/reproduce.sh computed it before this
 * command replaced it, so the tables read the same. */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli/commands.h"
#include "reproduce.h"

static void usage(FILE *out)
{
    fprintf(out, "usage: memsim reproduce [--out DIR] [--doc FILE] [--quick] [--quiet]\n"
                 "\n"
                 "Runs every seed configuration with a published figure (adaptive memory,\n"
                 "SmartSwap, the memory-fragmentation pools) from the shipped scenarios and\n"
                 "policies, and writes DIR/seed000_adaptive_memory.csv, seed001_fragmentation.csv\n"
                 "and seed002_smart_swap.csv (each measured figure next to the published one)\n"
                 "and DIR/seed-section.md, the comparison table with the notes that explain\n"
                 "every gap (default DIR: results/reference).  Nothing is written unless every\n"
                 "run completed; a run that runs out of memory is a result, not an error.\n"
                 "\n"
                 "  --out DIR    where the tables go\n"
                 "  --doc FILE   also replace the seed section of FILE (docs/validation.md:\n"
                 "               between '<!-- seed section' and '<!-- end of seed section -->',\n"
                 "               appended when it has none)\n"
                 "  --quick      leave out the llama2-70B rows (minutes each)\n"
                 "  --quiet      no progress lines, and the policies' own log lines silenced\n"
                 "\n"
                 "Example (make reproduce runs this from the source tree):\n"
                 "  memsim reproduce --out results/reference --doc docs/validation.md\n");
}

typedef struct rp_args {
    const char *out;
    const char *doc;
    bool quick, quiet;
} rp_args;

static int parse(int argc, char **argv, rp_args *a)
{
    static const struct option opts[] = {
        {"out", required_argument, NULL, 'o'}, {"doc", required_argument, NULL, 'd'},
        {"quick", no_argument, NULL, 'k'},     {"quiet", no_argument, NULL, 'q'},
        {"help", no_argument, NULL, 'h'},      {NULL, 0, NULL, 0},
    };
    optind = 1;
    int c;
    while ((c = getopt_long(argc, argv, "o:d:kqh", opts, NULL)) != -1) {
        switch (c) {
        case 'o': a->out = optarg; break;
        case 'd': a->doc = optarg; break;
        case 'k': a->quick = true; break;
        case 'q': a->quiet = true; break;
        case 'h': usage(stdout); return -1;
        default: usage(stderr); return CLI_USAGE;
        }
    }
    if (optind < argc) {
        fprintf(stderr, "memsim reproduce: unexpected argument '%s'\n", argv[optind]);
        usage(stderr);
        return CLI_USAGE;
    }
    return CLI_OK;
}

/* ---- the shipped files every configuration needs ------------------------ */

static const char *const needed_policies[] = {"full_recompute", "adaptive_memory", "none",
                                              "smart_swap", "lifetime_pools"};

static bool is_file(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 && S_ISREG(st.st_mode);
}

/* dir/name.suffix, or a message naming what is missing. */
static bool shipped_file(const char *sub, const char *name, const char *suffix, char *buf, size_t n)
{
    char dir[4096];
    if (ms_data_path(sub, dir, sizeof dir) != MS_OK) {
        fprintf(stderr,
                "memsim reproduce: cannot find the shipped %s/ folder (looked in "
                "$MEMSIM_DATADIR, the source tree and the installed data); set MEMSIM_DATADIR\n",
                sub);
        return false;
    }
    if ((size_t)snprintf(buf, n, "%s/%s%s", dir, name, suffix) >= n || !is_file(buf)) {
        fprintf(stderr,
                "memsim reproduce: missing %s: a seed configuration needs it (reinstall "
                "memsim, or set MEMSIM_DATADIR to a tree that has it)\n",
                buf);
        return false;
    }
    return true;
}

static bool find_files(rp_plan *p)
{
    for (size_t i = 0; i < p->n_runs; i++)
        if (!shipped_file("scenarios", p->runs[i].scenario, ".lua", p->runs[i].path,
                          sizeof p->runs[i].path))
            return false;
    char path[4096];
    for (size_t i = 0; i < sizeof needed_policies / sizeof needed_policies[0]; i++)
        if (!shipped_file("policies_lua", needed_policies[i], ".lua", path, sizeof path))
            return false;
    return shipped_file("results/reference", "notes", ".md", p->notes, sizeof p->notes);
}

/* ---- the runs ------------------------------------------------------------ */

/* As summary.csv has them: the slowest stage's step time, the largest
 * peak, and whether any stage ran out of memory. */
static void figures_of(const cli_outcome *o, rp_figures *f)
{
    memset(f, 0, sizeof *f);
    for (size_t i = 0; i < o->n_rows; i++) {
        const ms_run_summary *s = &o->rows[i];
        if (i == 0 || s->step_time_ms > f->step_ms)
            f->step_ms = s->step_time_ms;
        if (s->peak_reserved > f->peak_reserved)
            f->peak_reserved = s->peak_reserved;
        if (s->reserved_minus_allocated_at_peak > f->gap_at_peak)
            f->gap_at_peak = s->reserved_minus_allocated_at_peak;
        f->oom |= s->oom;
    }
}

static bool run_all(rp_plan *p, bool quiet)
{
    for (size_t i = 0; i < p->n_runs; i++) {
        rp_run *r = &p->runs[i];
        if (!quiet)
            fprintf(stderr, "memsim reproduce: [%zu/%zu] %s under %s\n", i + 1, p->n_runs,
                    r->scenario, r->policy);
        const char *sets[RP_MAX_SETS + 1] = {"report.detail=none"};
        size_t n = 1;
        for (; n <= RP_MAX_SETS && r->sets[n - 1] != NULL; n++)
            sets[n] = r->sets[n - 1];
        cli_job job = {.scenario = r->path,
                       .policy = r->policy,
                       .sets = sets,
                       .n_sets = n,
                       .quiet_policy = quiet};
        cli_outcome o;
        ms_diag d = {0};
        if (cli_execute(&job, &o, &d) != MS_OK) {
            fprintf(stderr, "memsim reproduce: %s under %s: %s\n", r->scenario, r->policy,
                    d.msg[0] ? d.msg : "failed");
            return false;
        }
        figures_of(&o, &r->fig);
        cli_outcome_free(&o);
    }
    return true;
}

/* ---- writing ------------------------------------------------------------- */

static bool make_dirs(const char *dir)
{
    char buf[4096];
    if (snprintf(buf, sizeof buf, "%s", dir) >= (int)sizeof buf)
        return false;
    for (char *p = buf + 1;; p++) {
        bool end = *p == '\0';
        if (*p == '/' || end) {
            *p = '\0';
            if (mkdir(buf, 0777) != 0 && errno != EEXIST)
                return false;
            if (end)
                break;
            *p = '/';
        }
    }
    return true;
}

static bool write_outputs(const rp_args *a, rp_table *t, size_t n_tables, const rp_plan *p)
{
    if (!make_dirs(a->out)) {
        fprintf(stderr, "memsim reproduce: cannot create %s: %s\n", a->out, strerror(errno));
        return false;
    }
    ms_diag d = {0};
    ms_status st = MS_OK;
    for (size_t i = 0; st == MS_OK && i < n_tables; i++)
        st = rp_table_write_csv(&t[i], a->out, &d);
    char section[4096];
    snprintf(section, sizeof section, "%s/seed-section.md", a->out);
    if (st == MS_OK)
        st = rp_section_write(section, t, n_tables, p->notes, &d);
    if (st == MS_OK && a->doc != NULL)
        st = rp_section_splice(a->doc, section, &d);
    if (st != MS_OK) {
        fprintf(stderr, "memsim reproduce: %s\n", d.msg[0] ? d.msg : ms_strerror(st));
        return false;
    }
    printf("wrote           %s/seed000_adaptive_memory.csv, seed001_fragmentation.csv,\n"
           "                seed002_smart_swap.csv and seed-section.md%s%s\n",
           a->out, a->doc ? "; the seed section of " : "", a->doc ? a->doc : "");
    return true;
}

int cli_reproduce(int argc, char **argv)
{
    rp_args a = {.out = "results/reference"};
    int rc = parse(argc, argv, &a);
    if (rc != CLI_OK)
        return rc < 0 ? CLI_OK : rc;
    rp_plan *p = calloc(1, sizeof *p);
    rp_table *t = calloc(RP_TABLES, sizeof *t);
    bool ok = p != NULL && t != NULL;
    if (!ok)
        fprintf(stderr, "memsim reproduce: out of memory\n");
    if (ok) {
        rp_plan_build(p, a.quick);
        ok = find_files(p) && run_all(p, a.quiet);
    }
    if (ok) {
        rp_tables_fill(p, t);
        ok = write_outputs(&a, t, RP_TABLES, p);
    }
    free(p);
    free(t);
    return ok ? CLI_OK : CLI_ERROR;
}
