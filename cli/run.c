/* memsim run: simulate a scenario under one or more policies and write the
 * reports (cli/commands.h). */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "commands.h"
#include "memsim/report.h"
#include "memsim/run.h"
#include "memsim/scenario.h"

#define MAX_POLICIES 16
#define MAX_SETS 64

static void usage(FILE *out)
{
    fprintf(out,
            "usage: memsim run SCENARIO [--policy FILE|NAME]... [--out DIR] [--set KEY=VALUE]...\n"
            "                  [--backend mock|cuda[:N]|npu[:N]] [--stage K] [--verify] [--quiet]\n"
            "\n"
            "Simulates training steps of a scenario file (scenarios/*.lua) under a memory\n"
            "policy (policies_lua/*.lua, or a path) and writes summary.csv, ops.csv,\n"
            "memory.csv, tensors.csv, segments.csv, trace.json and {memory,timeline}.svg to\n"
            "results/<scenario>-<policy>/ (which steps: --set report.detail=all|last|none).\n"
            "\n"
            "  --policy FILE|NAME  a shipped policy name or a file; several compare policies:\n"
            "                      one summary.csv row each in results/<scenario>-compare/\n"
            "  --set KEY=VALUE     override a scenario field: --set model.seq_length=8192\n"
            "  --out DIR           write the reports here\n"
            "  --backend NAME      the device backend: mock (default), cuda[:N] or npu[:N] (the\n"
            "                      real device N, where this build has it)\n"
            "  --stage K           run pipeline stage K alone on one device (a real device\n"
            "                      runs one stage; a model it cannot hold runs fewer layers)\n"
            "  --verify            fill every swapped or recomputed tensor with a pattern and\n"
            "                      check it when it is used again (the mock keeps real bytes)\n"
            "  --quiet             print nothing but errors\n");
}

typedef struct run_args {
    const char *scenario;
    const char *policies[MAX_POLICIES];
    int n_policies;
    const char *sets[MAX_SETS];
    int n_sets;
    const char *out;
    const char *backend;
    bool quiet;
    bool verify;
    bool single_stage;
    int stage;
} run_args;

static int parse_stage(const char *text, int *stage)
{
    char *end = NULL;
    long v = strtol(text, &end, 10);
    if (text[0] == '\0' || *end != '\0' || v < 0 || v > 100000) {
        fprintf(stderr, "memsim run: --stage '%s': expected a pipeline stage number from 0\n",
                text);
        return 2;
    }
    *stage = (int)v;
    return 0;
}

static int parse_run_args(int argc, char **argv, run_args *a)
{
    static const struct option opts[] = {
        {"policy", required_argument, NULL, 'p'},
        {"out", required_argument, NULL, 'o'},
        {"set", required_argument, NULL, 's'},
        {"backend", required_argument, NULL, 'b'},
        {"quiet", no_argument, NULL, 'q'},
        {"help", no_argument, NULL, 'h'},
        {"stage", required_argument, NULL, 'k'},
        {"verify", no_argument, NULL, 'v'},
        {NULL, 0, NULL, 0},
    };
    memset(a, 0, sizeof *a);
    optind = 1;
    int c;
    while ((c = getopt_long(argc, argv, "p:o:s:b:qhk:v", opts, NULL)) != -1) {
        switch (c) {
        case 'p':
            if (a->n_policies == MAX_POLICIES) {
                fprintf(stderr, "memsim run: at most %d --policy flags\n", MAX_POLICIES);
                return 2;
            }
            a->policies[a->n_policies++] = optarg;
            break;
        case 's':
            if (a->n_sets == MAX_SETS) {
                fprintf(stderr, "memsim run: at most %d --set flags\n", MAX_SETS);
                return 2;
            }
            a->sets[a->n_sets++] = optarg;
            break;
        case 'o': a->out = optarg; break;
        case 'b': a->backend = optarg; break;
        case 'q': a->quiet = true; break;
        case 'v': a->verify = true; break;
        case 'k':
            if (parse_stage(optarg, &a->stage) != 0)
                return 2;
            a->single_stage = true;
            break;
        case 'h': usage(stdout); return -1;
        default: usage(stderr); return 2;
        }
    }
    if (optind != argc - 1) {
        fprintf(stderr, "memsim run: expected exactly one SCENARIO file\n");
        usage(stderr);
        return 2;
    }
    a->scenario = argv[optind];
    return 0;
}

#define GiB(x) ((double)(x) / 1073741824.0)

/* What the run adds to the summaries (ms_run_notes): the data check, a
 * scaled model, and a real device's own account of its memory. */
static void print_notes(FILE *out, const ms_run_notes *n, bool verify)
{
    if (n == NULL)
        return;
    if (n->scaled)
        fprintf(out,
                "scaled          %d of %d layers: the device cannot hold the scenario's "
                "model\n",
                n->layers, n->scenario_layers);
    if (verify)
        fprintf(out,
                "verified        %llu tensors (%.2f GiB) in the last step, bytes as "
                "written\n",
                (unsigned long long)n->verified_tensors, GiB(n->verified_bytes));
    if (n->device_memory_checked) {
        uint64_t used = n->device_free_before > n->device_free_after
                            ? n->device_free_before - n->device_free_after
                            : 0;
        fprintf(out,
                "device memory   %.2f GiB taken during the run (mem-get-info: %.2f of "
                "%.2f GiB free before, %.2f after); the allocator reserves %.2f GiB\n",
                GiB(used), GiB(n->device_free_before), GiB(n->device_total),
                GiB(n->device_free_after), GiB(n->reserved_after));
    }
}

static int fail(const char *what, ms_status st, const ms_diag *d)
{
    fprintf(stderr, "memsim: %s: %s\n", what, d->msg[0] ? d->msg : ms_strerror(st));
    return 1;
}

int cli_run(int argc, char **argv)
{
    run_args a;
    int rc = parse_run_args(argc, argv, &a);
    if (rc != 0)
        return rc < 0 ? 0 : rc;
    ms_diag d = {0};
    const ms_scenario *sc = NULL;
    ms_status st = ms_scenario_load(a.scenario, a.sets, (size_t)a.n_sets, &sc, &d);
    if (st != MS_OK)
        return fail("scenario", st, &d);
    int n = a.n_policies ? a.n_policies : 1;
    ms_run_summary *sums = NULL;
    char dir[4096];
    rc = 0;
    size_t n_rows = 0;
    for (int i = 0; i < n && rc == 0; i++) {
        /* The first run prints the normalised recompute/swap settings, as
         * MindFormers logs them. */
        ms_run_options opt = {.policy = a.n_policies ? a.policies[i] : NULL,
                              .backend = a.backend,
                              .record = true,
                              .settings_out = a.quiet || i > 0 ? NULL : stdout,
                              .single_stage = a.single_stage,
                              .stage = a.stage,
                              .verify = a.verify,
                              .overrides = a.sets,
                              .n_overrides = (size_t)a.n_sets};
        ms_run *run = NULL;
        st = ms_run_execute(sc, &opt, &run, &d);
        if (st != MS_OK) {
            rc = fail("run", st, &d);
            break;
        }
        const ms_run_summary *s;
        const ms_run_record *rec;
        const ms_program_view *views;
        size_t n_stages, n_views;
        s = ms_run_summaries(run, &n_stages);
        rec = ms_run_record_get(run);
        views = ms_run_program_views(run, &n_views);
        ms_run_summary *grown = realloc(sums, (n_rows + n_stages) * sizeof *sums);
        if (grown == NULL) {
            ms_run_free(run);
            rc = fail("run", MS_ENOMEM, &d);
            break;
        }
        sums = grown;
        memcpy(sums + n_rows, s, n_stages * sizeof *s);
        n_rows += n_stages;
        if (n == 1 && a.out)
            snprintf(dir, sizeof dir, "%s", a.out);
        else if (n == 1)
            snprintf(dir, sizeof dir, "results/%s-%s", sc->name, s->policy);
        else if (a.out)
            snprintf(dir, sizeof dir, "%s/%s", a.out, s->policy);
        else
            snprintf(dir, sizeof dir, "results/%s-compare/%s", sc->name, s->policy);
        st = ms_report_write_csv(dir, s, n_stages, rec, views, n_views, &d);
        if (st != MS_OK)
            rc = fail("report", st, &d);
        else if (!a.quiet) {
            for (size_t k = 0; k < n_stages; k++)
                ms_report_print_summary(stdout, &s[k]);
            print_notes(stdout, ms_run_notes_get(run), a.verify);
            if (rec != NULL)
                printf("wrote           %s/{summary,ops,memory,tensors,segments}.csv, trace.json, "
                       "{memory,timeline}.svg%s\n",
                       dir, sc->report_detail == MS_DETAIL_LAST ? " (last step)" : "");
            else
                printf("wrote           %s/summary.csv (report.detail = \"none\")\n", dir);
        }
        ms_run_free(run);
    }
    if (rc == 0 && n > 1) {
        if (a.out)
            snprintf(dir, sizeof dir, "%s/summary.csv", a.out);
        else
            snprintf(dir, sizeof dir, "results/%s-compare/summary.csv", sc->name);
        st = ms_report_write_summary_csv(dir, sums, n_rows, &d);
        if (st != MS_OK)
            rc = fail("report", st, &d);
        else if (!a.quiet)
            printf("compared        %d policies in %s\n", n, dir);
    }
    free(sums);
    ms_scenario_free(sc);
    return rc;
}

