/* memsim run: simulate a scenario under one or more policies and write the
 * reports (cli/commands.h). */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "commands.h"
#include "memsim/report.h"
#include "memsim/run.h"
#include "memsim/scenario.h"

static void usage(FILE *out)
{
    fprintf(
        out,
        "usage: memsim run SCENARIO [--policy FILE|NAME]... [--out DIR] [--set KEY=VALUE]...\n"
        "                  [--memory-clock device|host] [--snapshot FILE.pickle]\n"
        "                  [--no-advice] [-j N] [--backend mock|cuda[:N]|npu[:N]]\n"
        "                  [--stage K] [--verify] [--no-fast-forward] [--quiet]\n"
        "\n"
        "Simulates training steps of a scenario file (scenarios/*.lua) under a memory\n"
        "policy (policies_lua/*.lua, or a path) and writes summary.csv, ops.csv,\n"
        "memory.csv, tensors.csv, segments.csv, trace.json and {memory,timeline}.svg to\n"
        "results/<scenario>-<policy>[--<overrides>]/ (which steps: --set\n"
        "report.detail=all|last|none).  The folder appears whole or not at all.\n"
        "Detail estimated over report.max_bytes (default 512MiB; --set\n"
        "report.max_bytes=2GiB, or unlimited) is cut to the last step, or to summary.csv\n"
        "alone when even that step's is over; the run says so on stderr and in\n"
        "detail_limited.txt in the folder.  A run longer than a second shows its steps on\n"
        "stderr: a bar on a terminal, else a line a step and phase\n"
        "(MEMSIM_PROGRESS_AFTER_MS sets the second).\n"
        "\n"
        "  --policy FILE|NAME    a shipped policy name or a file; several compare policies:\n"
        "                        one summary.csv row each in results/<scenario>-compare/\n"
        "  --set KEY=VALUE       override a scenario field: --set model.seq_length=8192\n"
        "                        (recorded in summary.csv's overrides column)\n"
        "  --out DIR             write the reports here\n"
        "  --memory-clock CLOCK  memory.svg and trace.json's memory counter on device time\n"
        "                        (default: when the device first/last touches each block,\n"
        "                        the timeline's axis) or host issue time (the allocator's)\n"
        "  --snapshot FILE       also write the allocator history as a PyTorch memory\n"
        "                        snapshot (open it at pytorch.org/memory_viz; memsim replay\n"
        "                        reads it)\n"
        "  --no-advice           on OOM, skip simulating the shipped policies and allocator\n"
        "                        settings to say which would have fitted\n"
        "  -j N                  worker processes for that advice (default: the CPUs)\n"
        "  --backend NAME        the device backend: mock (default), cuda[:N] or npu[:N]\n"
        "                        (the real device N, where this build has it)\n"
        "  --stage K             run pipeline stage K alone on one device (a real device\n"
        "                        runs one stage; a model it cannot hold runs fewer layers)\n"
        "  --verify              fill every swapped or recomputed tensor with a pattern and\n"
        "                        check it when it is used again (the mock keeps real bytes)\n"
        "  --no-fast-forward     simulate every step, also one whose start state, plans and\n"
        "                        all equal the step before's (it would repeat it exactly;\n"
        "                        the reports are the same bytes either way: for checking)\n"
        "  --quiet               print nothing but errors (no progress either)\n"
        "\n"
        "Exit status: 0 done, 1 error, 2 usage, 3 the run ran out of memory (the report\n"
        "is printed and written to oom.txt in the output folder).\n"
        "\n"
        "Examples:\n"
        "  memsim run scenarios/llama2-7b.lua\n"
        "  memsim run scenarios/llama2-7b.lua --policy full_recompute --set model.seq_length=8192\n"
        "  memsim run scenarios/llama3-70b.lua --policy smart_swap --set report.detail=last \\\n"
        "      --snapshot 70b.pickle\n");
}

typedef struct run_args {
    const char *scenario;
    const char *policies[CLI_MAX_POLICIES];
    int n_policies;
    const char *sets[CLI_MAX_SETS];
    int n_sets;
    const char *out;
    const char *backend;
    const char *snapshot;
    ms_memory_clock clock;
    bool quiet, advice;
    int jobs;
    bool verify;
    bool no_fast_forward;
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
        return CLI_USAGE;
    }
    *stage = (int)v;
    return 0;
}

static int parse_option(run_args *a, int c)
{
    switch (c) {
    case 'p':
        if (a->n_policies == CLI_MAX_POLICIES) {
            fprintf(stderr, "memsim run: at most %d --policy flags\n", CLI_MAX_POLICIES);
            return CLI_USAGE;
        }
        a->policies[a->n_policies++] = optarg;
        return 0;
    case 's':
        if (a->n_sets == CLI_MAX_SETS) {
            fprintf(stderr, "memsim run: at most %d --set flags\n", CLI_MAX_SETS);
            return CLI_USAGE;
        }
        a->sets[a->n_sets++] = optarg;
        return 0;
    case 'c':
        if (strcmp(optarg, "device") != 0 && strcmp(optarg, "host") != 0) {
            fprintf(stderr, "memsim run: --memory-clock '%s': expected device or host\n", optarg);
            return CLI_USAGE;
        }
        a->clock = optarg[0] == 'h' ? MS_CLOCK_HOST : MS_CLOCK_DEVICE;
        return 0;
    case 'j':
        if ((a->jobs = cli_parse_count(optarg)) == 0) {
            fprintf(stderr, "memsim run: -j '%s': expected a number of processes\n", optarg);
            return CLI_USAGE;
        }
        return 0;
    case 'o': a->out = optarg; return 0;
    case 'b': a->backend = optarg; return 0;
    case 'S': a->snapshot = optarg; return 0;
    case 'n': a->advice = false; return 0;
    case 'q': a->quiet = true; return 0;
    case 'v': a->verify = true; return 0;
    case 'F': a->no_fast_forward = true; return 0;
    case 'k':
        if (parse_stage(optarg, &a->stage) != 0)
            return CLI_USAGE;
        a->single_stage = true;
        return 0;
    default: usage(stderr); return CLI_USAGE;
    }
}

static int parse_run_args(int argc, char **argv, run_args *a)
{
    static const struct option opts[] = {
        {"policy", required_argument, NULL, 'p'},
        {"out", required_argument, NULL, 'o'},
        {"set", required_argument, NULL, 's'},
        {"backend", required_argument, NULL, 'b'},
        {"memory-clock", required_argument, NULL, 'c'},
        {"snapshot", required_argument, NULL, 'S'},
        {"no-advice", no_argument, NULL, 'n'},
        {"quiet", no_argument, NULL, 'q'},
        {"help", no_argument, NULL, 'h'},
        {"stage", required_argument, NULL, 'k'},
        {"verify", no_argument, NULL, 'v'},
        {"no-fast-forward", no_argument, NULL, 'F'},
        {NULL, 0, NULL, 0},
    };
    memset(a, 0, sizeof *a);
    a->advice = true;
    a->jobs = cli_cpus();
    optind = 1;
    int c;
    while ((c = getopt_long(argc, argv, "p:o:s:b:j:qhk:v", opts, NULL)) != -1) {
        if (c == 'h') {
            usage(stdout);
            return -1;
        }
        int rc = parse_option(a, c);
        if (rc != 0)
            return rc;
    }
    if (optind != argc - 1) {
        fprintf(stderr, "memsim run: expected exactly one SCENARIO file\n");
        usage(stderr);
        return CLI_USAGE;
    }
    if (a->snapshot != NULL && a->n_policies > 1) {
        fprintf(stderr, "memsim run: --snapshot takes the run of one policy\n");
        return CLI_USAGE;
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
    fprintf(stderr, "memsim: %s%s%s\n", what, what[0] ? ": " : "",
            d->msg[0] ? d->msg : ms_strerror(st));
    return CLI_ERROR;
}

/* What one policy's run leaves: its rows (for a compare's summary.csv) and
 * the state of the output directory. */
typedef struct run_state {
    ms_report_dir *rd;
    char final[4096];
    ms_run_summary *rows;
    size_t n_rows;
    bool oom;
} run_state;

static ms_status open_output(const run_args *a, const cli_outcome *o, int n, run_state *rs,
                             ms_diag *d)
{
    if (a->out != NULL)
        snprintf(rs->final, sizeof rs->final, "%s", a->out);
    else
        cli_default_dir(o->sc->name, n == 1 ? o->rows[0].policy : "compare", a->sets,
                        (size_t)a->n_sets, rs->final, sizeof rs->final);
    return cli_output_open(rs->final, &rs->rd, d);
}

/* The OOM report, on stdout (unless quiet) and in DIR/oom.txt. */
static ms_status report_oom(const run_args *a, const cli_job *job, const cli_outcome *o,
                            const char *dir, ms_diag *d)
{
    char path[8500];
    snprintf(path, sizeof path, "%s/oom.txt", dir);
    FILE *f = fopen(path, "w");
    if (f == NULL)
        return ms_diag_set(d, MS_EIO, "%s: cannot write", path);
    ms_status st = cli_oom_report(f, job, o, a->advice, a->jobs, d);
    bool bad = ferror(f) != 0;
    bad |= fclose(f) != 0;
    if (st == MS_OK && bad)
        st = ms_diag_set(d, MS_EIO, "%s: write failed", path);
    if (st == MS_OK && !a->quiet) {
        FILE *in = fopen(path, "r");
        char buf[4096];
        size_t got;
        while (in != NULL && (got = fread(buf, 1, sizeof buf, in)) > 0)
            fwrite(buf, 1, got, stdout);
        if (in != NULL)
            fclose(in);
    }
    return st;
}

/* ---- detail over report.max_bytes (ms_run_detail) ----------------------- */

#define DETAIL_NOTE "detail_limited.txt"

static void put_bytes(char *buf, size_t n, uint64_t b)
{
    if (b >= (1ull << 30))
        snprintf(buf, n, "%.2f GiB", (double)b / (double)(1ull << 30));
    else if (b >= (1ull << 20))
        snprintf(buf, n, "%.1f MiB", (double)b / (double)(1ull << 20));
    else
        snprintf(buf, n, "%.1f KiB", (double)b / 1024.0);
}

/* A report.max_bytes that holds b: whole GiB, MiB or KiB, rounded up. */
static void put_limit_for(char *buf, size_t n, uint64_t b)
{
    static const struct {
        uint64_t unit;
        const char *name;
    } units[] = {{1ull << 30, "GiB"}, {1ull << 20, "MiB"}, {1ull << 10, "KiB"}};
    size_t u = 0;
    while (u + 1 < sizeof units / sizeof units[0] && b < units[u].unit)
        u++;
    snprintf(buf, n, "%llu%s", (unsigned long long)((b + units[u].unit - 1) / units[u].unit),
             units[u].name);
}

static const char *detail_name(ms_report_detail d)
{
    return d == MS_DETAIL_ALL ? "all" : d == MS_DETAIL_LAST ? "last" : "none";
}

/* What the limit cut, what was written instead, and how to get it all. */
static void detail_note(FILE *out, const char *prefix, const ms_run_detail *dt)
{
    char asked[32], limit[32], last[32], raise[32], raise_last[32];
    put_bytes(asked, sizeof asked, dt->requested_bytes);
    put_bytes(limit, sizeof limit, dt->max_bytes);
    put_bytes(last, sizeof last, dt->last_bytes);
    put_limit_for(raise, sizeof raise, dt->requested_bytes);
    put_limit_for(raise_last, sizeof raise_last, dt->last_bytes);
    fprintf(out,
            "%sreport.detail = \"%s\" asks for about %s of detail (ops.csv, memory.csv, "
            "tensors.csv, segments.csv, trace.json and the plots, estimated from the run "
            "record), over report.max_bytes = %s: ",
            prefix, detail_name(dt->requested), asked, limit);
    if (dt->kept == MS_DETAIL_LAST)
        fprintf(out, "the detail is of the last step only (step %d, about %s).", dt->last_step,
                last);
    else if (dt->requested == MS_DETAIL_ALL)
        fprintf(out,
                "even the last step's (step %d) alone would be about %s, so only summary.csv "
                "is written.",
                dt->last_step, last);
    else
        fprintf(out, "only summary.csv is written.");
    fprintf(out, " --set report.max_bytes=%s (or =unlimited) writes it all", raise);
    if (dt->requested == MS_DETAIL_ALL && dt->kept == MS_DETAIL_NONE)
        fprintf(out, "; =%s the last step's", raise_last);
    fprintf(out, ".\n");
}

/* Said on stderr and kept in the folder, so its reader knows the detail
 * files are not all that was asked for. */
static ms_status note_detail_limit(const run_args *a, const ms_run_detail *dt, const char *dir,
                                   ms_diag *d)
{
    if (!dt->limited)
        return MS_OK;
    char path[8500];
    snprintf(path, sizeof path, "%s/" DETAIL_NOTE, dir);
    FILE *f = fopen(path, "w");
    if (f == NULL)
        return ms_diag_set(d, MS_EIO, "%s: cannot write: %s", path, strerror(errno));
    detail_note(f, "", dt);
    bool bad = ferror(f) != 0;
    bad |= fclose(f) != 0;
    if (bad)
        return ms_diag_set(d, MS_EIO, "%s: write failed", path);
    if (!a->quiet)
        detail_note(stderr, "memsim: ", dt);
    return MS_OK;
}

/* --snapshot FILE is written as FILE.tmp and renamed (lib/report/
 * report_snapshot.c); a signal meanwhile removes the .tmp, as it does the
 * staging folder. */
static ms_status write_snapshot(const char *path, const ms_run_record *rec,
                                const ms_program_view *views, size_t nv,
                                const ms_snapshot_export *ex, ms_diag *d)
{
    char tmp[4200];
    if (snprintf(tmp, sizeof tmp, "%s.tmp", path) >= (int)sizeof tmp)
        return ms_diag_set(d, MS_EINVAL, "--snapshot: path too long");
    cli_tmp_file_arm(tmp);
    ms_status st = ms_report_write_snapshot(path, rec, views, nv, ex, d);
    cli_tmp_file_arm(NULL);
    return st;
}

static ms_status write_policy(const run_args *a, const cli_job *job, const cli_outcome *o, int i,
                              int n, run_state *rs, ms_diag *d)
{
    char dir[8400];
    if (n == 1)
        snprintf(dir, sizeof dir, "%s", ms_report_dir_path(rs->rd));
    else
        snprintf(dir, sizeof dir, "%s/%s", ms_report_dir_path(rs->rd), o->rows[0].policy);
    size_t nv = 0;
    const ms_program_view *views = ms_run_program_views(o->run, &nv);
    const ms_run_record *rec = ms_run_record_get(o->run);
    const ms_run_detail *dt = &ms_run_notes_get(o->run)->detail;
    ms_report_options ro = {.memory_clock = a->clock};
    ms_status st = ms_report_write_run(dir, o->rows, o->n_rows,
                                       dt->kept != MS_DETAIL_NONE ? rec : NULL, views, nv, &ro, d);
    if (st == MS_OK)
        st = note_detail_limit(a, dt, dir, d);
    if (st == MS_OK && a->snapshot != NULL) {
        ms_snapshot_export ex = {
            .alloc_conf = o->sc->allocator_conf,
            .flavour = strcmp(o->sc->allocator_flavour, "npu") == 0 ? MS_ALLOC_NPU : MS_ALLOC_CUDA};
        if (rec == NULL)
            st = ms_diag_set(d, MS_EINVAL,
                             "--snapshot needs the run record: the scenario sets "
                             "report.detail = \"none\" (--set report.detail=last)");
        else
            st = write_snapshot(a->snapshot, rec, views, nv, &ex, d);
    }
    if (st == MS_OK && !a->quiet) {
        for (size_t k = 0; k < o->n_rows; k++)
            ms_report_print_summary(stdout, &o->rows[k]);
        print_notes(stdout, ms_run_notes_get(o->run), a->verify);
    }
    if (st == MS_OK && cli_outcome_oom(o)) {
        rs->oom = true;
        st = report_oom(a, job, o, dir, d);
    }
    ms_run_summary *grown = realloc(rs->rows, (rs->n_rows + o->n_rows) * sizeof *rs->rows);
    if (st == MS_OK && grown == NULL)
        st = ms_diag_set(d, MS_ENOMEM, "out of memory");
    if (grown != NULL) {
        rs->rows = grown;
        memcpy(rs->rows + rs->n_rows, o->rows, o->n_rows * sizeof *o->rows);
        rs->n_rows += o->n_rows;
    }
    (void)i;
    return st;
}

static void print_written(const run_args *a, const run_state *rs, const cli_outcome *last, int n)
{
    if (a->quiet)
        return;
    const ms_run_detail *dt = &ms_run_notes_get(last->run)->detail;
    if (n > 1)
        printf("compared        %d policies in %s/summary.csv (details in one folder each)\n", n,
               rs->final);
    else if (dt->kept != MS_DETAIL_NONE)
        printf("wrote           %s/{summary,ops,memory,tensors,segments}.csv, trace.json, "
               "{memory,timeline}.svg%s\n",
               rs->final,
               !dt->limited && dt->kept == MS_DETAIL_LAST ? " (last step)"
               : dt->limited ? " (last step: report.max_bytes, see " DETAIL_NOTE ")"
                             : "");
    else if (dt->limited)
        printf("wrote           %s/summary.csv (the detail is over report.max_bytes: see "
               "%s/" DETAIL_NOTE ")\n",
               rs->final, rs->final);
    else
        printf("wrote           %s/summary.csv (report.detail = \"none\")\n", rs->final);
    if (a->snapshot != NULL)
        printf("wrote           %s (PyTorch memory snapshot)\n", a->snapshot);
    if (rs->oom)
        printf("out of memory   see %s/oom.txt\n", rs->final);
}

/* The progress label: the scenario file's base name, and the policy. */
static void progress_label(const char *scenario, const char *policy, char *buf, size_t n)
{
    const char *base = strrchr(scenario, '/');
    base = base ? base + 1 : scenario;
    size_t len = strlen(base);
    if (len > 4 && strcmp(base + len - 4, ".lua") == 0)
        len -= 4;
    if (len > 100)
        len = 100;
    snprintf(buf, n, "%.*s%s%s", (int)len, base, policy ? " under " : "", policy ? policy : "");
}

int cli_run(int argc, char **argv)
{
    run_args a;
    int rc = parse_run_args(argc, argv, &a);
    if (rc != 0)
        return rc < 0 ? CLI_OK : rc;
    int n = a.n_policies ? a.n_policies : 1;
    if (!a.quiet) /* a script or config given directly: what it leaves out */
        cli_import_note(a.scenario, a.sets, (size_t)a.n_sets);
    run_state rs = {0};
    cli_outcome last = {0};
    ms_diag d = {0};
    ms_status st = MS_OK;
    for (int i = 0; i < n && st == MS_OK; i++) {
        /* The first run prints the normalised recompute/swap settings, as
         * MindFormers logs them. */
        cli_job job = {.scenario = a.scenario,
                       .policy = a.n_policies ? a.policies[i] : NULL,
                       .sets = a.sets,
                       .n_sets = (size_t)a.n_sets,
                       .backend = a.backend,
                       .record = true,
                       .settings_out = a.quiet || i > 0 ? NULL : stdout,
                       .single_stage = a.single_stage,
                       .stage = a.stage,
                       .verify = a.verify,
                       .no_fast_forward = a.no_fast_forward};
        cli_outcome_free(&last);
        char label[256];
        progress_label(a.scenario, job.policy, label, sizeof label);
        cli_progress *progress = a.quiet ? NULL : cli_progress_start(label);
        job.progress = progress ? cli_progress_update : NULL;
        job.progress_user = progress;
        st = cli_execute(&job, &last, &d);
        cli_progress_stop(progress);
        if (st == MS_OK && rs.rd == NULL)
            st = open_output(&a, &last, n, &rs, &d);
        if (st == MS_OK)
            st = write_policy(&a, &job, &last, i, n, &rs, &d);
    }
    if (st == MS_OK && n > 1) {
        char path[8400];
        snprintf(path, sizeof path, "%s/summary.csv", ms_report_dir_path(rs.rd));
        st = ms_report_write_summary_csv(path, rs.rows, rs.n_rows, &d);
    }
    if (rs.rd != NULL) {
        ms_status closed = cli_output_close(rs.rd, st == MS_OK, &d);
        if (st == MS_OK)
            st = closed;
    }
    if (st == MS_OK)
        print_written(&a, &rs, &last, n);
    else
        rc = fail("", st, &d);
    if (st == MS_OK && rs.oom)
        fprintf(stderr,
                "memsim: the run ran out of memory (exit status 3): %s/oom.txt says "
                "where and what would have fitted\n",
                rs.final);
    cli_outcome_free(&last);
    free(rs.rows);
    return st != MS_OK ? rc : rs.oom ? CLI_OOM : CLI_OK;
}
