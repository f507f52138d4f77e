/* memsim sweep: one scenario over a grid of overrides and policies, run in
 * worker processes (and, built --with-mpi under mpirun, across ranks and
 * nodes), into one sweep.csv that records every override of every
 * configuration and marks the best one that fits (cli/commands.h). */
#include "commands.h"

#include <csv.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "sweep.h"

#define MAX_VARY 16
#define MAX_VALUES 64
#define MAX_CONFIGS 100000

static void usage(FILE *out)
{
    fprintf(out,
            "usage: memsim sweep SCENARIO --vary KEY=V1,V2,... [--vary ...] [--policies A,B,...]\n"
            "                    [--set KEY=VALUE]... [-j N] [--out DIR] [--quiet]\n"
            "\n"
            "Runs the scenario once per combination of the --vary values and policies (the\n"
            "first --vary changes slowest, policies slowest of all), -j N at a time (default:\n"
            "the CPUs), with a progress bar on a terminal.  Writes DIR/sweep.csv (default\n"
            "results/<scenario>-sweep/): one row per configuration with every override, the\n"
            "figures of its largest pipeline stage, and best=true on the configuration that\n"
            "fits with the most tokens per second (ties: the least peak reserved).\n"
            "Built --with-mpi, `mpirun -np K memsim sweep ...` splits the configurations\n"
            "across the K ranks (on any nodes) and rank 0 writes the same sweep.csv.\n"
            "\n"
            "  --vary KEY=V1,V2   a scenario key and its values (as --set takes them)\n"
            "  --policies A,B     shipped policy names or files (default: the scenario's)\n"
            "  --set KEY=VALUE    an override every configuration gets\n"
            "  -j N               worker processes per rank\n"
            "  --out DIR          where sweep.csv goes\n"
            "  --quiet            no table, no progress bar\n"
            "\n"
            "Exit status: 0 done (some configuration fits), 1 error, 2 usage, 3 none fits.\n"
            "\n"
            "Examples:\n"
            "  memsim sweep scenarios/llama2-7b.lua --vary parallel.micro_batch_size=1,2,4 \\\n"
            "      --vary model.seq_length=4096,8192 --policies none,full_recompute -j 4\n"
            "  mpirun -np 8 memsim sweep scenarios/llama3-70b.lua \\\n"
            "      --vary parallel.micro_batch_size=1,2 --policies none,adaptive_memory\n");
}

typedef struct sweep_args {
    const char *scenario;
    char *vary[MAX_VARY]; /* "KEY=V1,V2" (edited in place) */
    int n_vary;
    char *policies; /* "A,B" */
    const char *sets[CLI_MAX_SETS];
    int n_sets;
    const char *out;
    const char *backend;
    int jobs;
    bool quiet;
} sweep_args;

static int parse_args(int argc, char **argv, sweep_args *a)
{
    static const struct option opts[] = {
        {"vary", required_argument, NULL, 'v'},    {"policies", required_argument, NULL, 'p'},
        {"set", required_argument, NULL, 's'},     {"out", required_argument, NULL, 'o'},
        {"backend", required_argument, NULL, 'b'}, {"quiet", no_argument, NULL, 'q'},
        {"help", no_argument, NULL, 'h'},          {NULL, 0, NULL, 0},
    };
    memset(a, 0, sizeof *a);
    a->jobs = cli_cpus();
    optind = 1;
    int c;
    while ((c = getopt_long(argc, argv, "v:p:s:o:b:j:qh", opts, NULL)) != -1) {
        if (c == 'h') {
            usage(stdout);
            return -1;
        }
        if (c == 'v' && a->n_vary < MAX_VARY)
            a->vary[a->n_vary++] = optarg;
        else if (c == 'p')
            a->policies = optarg;
        else if (c == 's' && a->n_sets < CLI_MAX_SETS)
            a->sets[a->n_sets++] = optarg;
        else if (c == 'o')
            a->out = optarg;
        else if (c == 'b')
            a->backend = optarg;
        else if (c == 'q')
            a->quiet = true;
        else if (c == 'j' && (a->jobs = cli_parse_count(optarg)) > 0)
            continue;
        else {
            fprintf(stderr, "memsim sweep: bad or too many options (memsim sweep --help)\n");
            return CLI_USAGE;
        }
    }
    if (optind != argc - 1) {
        fprintf(stderr, "memsim sweep: expected exactly one SCENARIO file\n");
        return CLI_USAGE;
    }
    a->scenario = argv[optind];
    return 0;
}

/* ---- the grid --------------------------------------------------------- */

static ms_status parse_axes(sweep_args *a, cli_grid *g, ms_diag *d)
{
    for (int k = 0; k < a->n_vary; k++) {
        char *eq = strchr(a->vary[k], '=');
        if (eq == NULL || eq == a->vary[k])
            return ms_diag_set(d, MS_EINVAL, "--vary '%s': expected KEY=V1,V2,...", a->vary[k]);
        *eq = '\0';
        cli_axis *ax = &g->axis[g->n_axes++];
        ax->key = a->vary[k];
        ax->n = cli_split_list(eq + 1, ax->value, MAX_VALUES);
        if (ax->n <= 0)
            return ms_diag_set(d, MS_EINVAL, "--vary %s: expected 1 to %d values, none empty",
                               ax->key, MAX_VALUES);
    }
    g->n_policies = 1;
    g->policy[0] = NULL;
    if (a->policies != NULL) {
        g->n_policies = cli_split_list(a->policies, g->policy, CLI_MAX_POLICIES);
        if (g->n_policies <= 0)
            return ms_diag_set(d, MS_EINVAL, "--policies: expected 1 to %d names, none empty",
                               CLI_MAX_POLICIES);
    }
    return MS_OK;
}

ms_status cli_grid_build(cli_grid *g, const char *const *sets, size_t n_sets, ms_diag *d)
{
    size_t n = (size_t)g->n_policies;
    for (int k = 0; k < g->n_axes; k++)
        n *= (size_t)g->axis[k].n;
    if (n > MAX_CONFIGS || n_sets + (size_t)g->n_axes > CLI_MAX_SETS)
        return ms_diag_set(d, MS_EINVAL, "%zu configurations: at most %d", n, MAX_CONFIGS);
    g->cfg = calloc(n, sizeof *g->cfg);
    g->set_buf = calloc(n * (size_t)(g->n_axes ? g->n_axes : 1), sizeof *g->set_buf);
    if (g->cfg == NULL || g->set_buf == NULL)
        return ms_diag_set(d, MS_ENOMEM, "out of memory");
    g->n = n;
    for (size_t i = 0; i < n; i++) {
        cli_config *c = &g->cfg[i];
        size_t rest = i, per_policy = n / (size_t)g->n_policies;
        c->policy = g->policy[rest / per_policy];
        rest %= per_policy;
        memcpy(c->sets, sets, n_sets * sizeof *sets);
        c->n_sets = n_sets;
        /* The last axis changes fastest. */
        size_t stride = per_policy;
        for (int k = 0; k < g->n_axes; k++) {
            stride /= (size_t)g->axis[k].n;
            size_t v = rest / stride;
            rest %= stride;
            char *buf = g->set_buf[i * (size_t)g->n_axes + (size_t)k];
            snprintf(buf, sizeof g->set_buf[0], "%s=%s", g->axis[k].key, g->axis[k].value[v]);
            c->sets[c->n_sets++] = buf;
        }
    }
    return MS_OK;
}

void cli_grid_free(cli_grid *g)
{
    free(g->cfg);
    free(g->set_buf);
    g->cfg = NULL;
    g->set_buf = NULL;
}

/* ---- sweep.csv -------------------------------------------------------- */

/* A file written under a temporary name takes its own name only whole: a
 * failed write or close leaves nothing behind. */
ms_status cli_file_commit(FILE *f, const char *tmp, const char *path, ms_diag *d)
{
    bool bad = ferror(f) != 0;
    bad |= fclose(f) != 0;
    if (bad || rename(tmp, path) != 0) {
        remove(tmp);
        return ms_diag_set(d, MS_EIO, "%s: write failed", path);
    }
    return MS_OK;
}

void cli_csv_field(FILE *f, bool *first, const char *s)
{
    if (!*first)
        fputc(',', f);
    *first = false;
    bool plain = s[0] != '\0';
    for (const char *p = s; *p && plain; p++)
        plain = (*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') ||
                strchr("._-+:/=", *p) != NULL;
    if (plain)
        fputs(s, f);
    else if (s[0] != '\0')
        csv_fwrite(f, s, strlen(s));
}

static void field_num(FILE *f, bool *first, const char *fmt, double v)
{
    char buf[64];
    snprintf(buf, sizeof buf, fmt, v);
    if (!*first)
        fputc(',', f);
    *first = false;
    fputs(buf, f);
}

static void field_u64(FILE *f, bool *first, uint64_t v)
{
    if (!*first)
        fputc(',', f);
    *first = false;
    fprintf(f, "%llu", (unsigned long long)v);
}

static const char *const tail_cols[] = {
    "overrides",
    "status",
    "fits",
    "best",
    "stages",
    "oom_stage",
    "oom_step",
    "capacity_bytes",
    "peak_allocated_bytes",
    "peak_reserved_bytes",
    "peak_activation_bytes",
    "reserved_minus_allocated_at_peak_bytes",
    "step_time_ms",
    "tokens_per_s",
    "mfu",
    "bubble_fraction",
    "swapped_bytes_per_step",
    "recomputed_ops_per_step",
    "num_ooms",
    "num_alloc_retries",
    "error",
};

static const char *status_of(const cli_result *r)
{
    return r->status != MS_OK ? "error" : r->oom ? "oom" : "ok";
}

static void put_row(FILE *f, const cli_grid *g, size_t i, const cli_result *r, long best)
{
    const cli_config *c = &g->cfg[i];
    bool first = true;
    char overrides[4096];
    field_u64(f, &first, i);
    cli_csv_field(f, &first, r->policy[0] ? r->policy : c->policy ? c->policy : "");
    for (int k = 0; k < g->n_axes; k++)
        cli_csv_field(f, &first,
                      strchr(c->sets[c->n_sets - (size_t)g->n_axes + (size_t)k], '=') + 1);
    cli_join_sets(c->sets, c->n_sets, overrides, sizeof overrides);
    cli_csv_field(f, &first, overrides);
    cli_csv_field(f, &first, status_of(r));
    cli_csv_field(f, &first, r->status == MS_OK && !r->oom ? "true" : "false");
    cli_csv_field(f, &first, (long)i == best ? "true" : "false");
    field_num(f, &first, "%.0f", r->stages);
    field_num(f, &first, "%.0f", r->status == MS_OK ? r->oom_stage : -1);
    field_num(f, &first, "%.0f", r->status == MS_OK ? r->oom_step : -1);
    field_u64(f, &first, r->capacity);
    field_u64(f, &first, r->peak_allocated);
    field_u64(f, &first, r->peak_reserved);
    field_u64(f, &first, r->peak_activation);
    field_u64(f, &first, r->fragmentation);
    field_num(f, &first, "%.3f", r->step_time_ms);
    field_num(f, &first, "%.1f", r->tokens_per_s);
    field_num(f, &first, "%.4f", r->mfu);
    field_num(f, &first, "%.4f", r->bubble_fraction);
    field_u64(f, &first, r->swapped_bytes);
    field_u64(f, &first, r->recomputed_ops);
    field_num(f, &first, "%.0f", (double)r->num_ooms);
    field_num(f, &first, "%.0f", (double)r->num_alloc_retries);
    cli_csv_field(f, &first, r->status == MS_OK ? "" : r->error);
    fputc('\n', f);
}

ms_status cli_grid_write_csv(const char *path, const cli_grid *g, const cli_result *res, ms_diag *d)
{
    char tmp[8400];
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    FILE *f = fopen(tmp, "w");
    if (f == NULL)
        return ms_diag_set(d, MS_EIO, "%s: cannot write", tmp);
    bool first = true;
    cli_csv_field(f, &first, "config");
    cli_csv_field(f, &first, "policy");
    for (int k = 0; k < g->n_axes; k++)
        cli_csv_field(f, &first, g->axis[k].key);
    for (size_t k = 0; k < sizeof tail_cols / sizeof tail_cols[0]; k++)
        cli_csv_field(f, &first, tail_cols[k]);
    fputc('\n', f);
    long best = cli_best_fit(res, g->n);
    for (size_t i = 0; i < g->n; i++)
        put_row(f, g, i, &res[i], best);
    return cli_file_commit(f, tmp, path, d);
}

void cli_grid_print(FILE *out, const cli_grid *g, const cli_result *res)
{
    long best = cli_best_fit(res, g->n);
    fprintf(out, "%4s  %-18s", "#", "policy");
    for (int k = 0; k < g->n_axes; k++)
        fprintf(out, "  %-14.14s", g->axis[k].key);
    fprintf(out, "  %-6s %14s %12s %14s\n", "status", "peak reserved", "step (ms)", "tokens/s");
    for (size_t i = 0; i < g->n; i++) {
        const cli_result *r = &res[i];
        const cli_config *c = &g->cfg[i];
        fprintf(out, "%4zu  %-18.18s", i, r->policy[0] ? r->policy : c->policy ? c->policy : "");
        for (int k = 0; k < g->n_axes; k++)
            fprintf(out, "  %-14.14s",
                    strchr(c->sets[c->n_sets - (size_t)g->n_axes + (size_t)k], '=') + 1);
        char peak[32] = "-", step[32] = "-", tok[32] = "-";
        if (r->status == MS_OK) {
            ms_alloc_format_size(r->peak_reserved, peak, sizeof peak);
            if (!r->oom) {
                snprintf(step, sizeof step, "%.1f", r->step_time_ms);
                snprintf(tok, sizeof tok, "%.0f", r->tokens_per_s);
            }
        }
        fprintf(out, "  %-6s %14s %12s %14s%s\n", status_of(r), peak, step, tok,
                (long)i == best ? "  <- best that fits" : "");
        if (r->status != MS_OK)
            fprintf(out, "      %s\n", r->error);
    }
    if (best < 0)
        fprintf(out, "no configuration fits\n");
}

/* ---- the command ------------------------------------------------------ */

int cli_grid_run(const cli_grid_job *job)
{
    ms_diag d = {0};
    cli_mpi mpi;
    ms_status st = cli_mpi_init(&mpi, &d);
    if (st != MS_OK) {
        fprintf(stderr, "memsim %s: %s\n", job->command, d.msg);
        return CLI_ERROR;
    }
    const cli_grid *g = job->grid;
    cli_result *res = calloc(g->n ? g->n : 1, sizeof *res);
    bool *mine = calloc(g->n ? g->n : 1, sizeof *mine);
    if (res == NULL || mine == NULL)
        st = ms_diag_set(&d, MS_ENOMEM, "out of memory");
    /* Rank r runs configurations r, r + K, r + 2K, ...: a fixed split, so
     * every rank knows whose results it will receive. */
    for (size_t i = 0; st == MS_OK && i < g->n; i++)
        mine[i] = (int)(i % (size_t)mpi.size) == mpi.rank;
    bool show = !job->quiet && mpi.rank == 0 && isatty(STDERR_FILENO);
    if (st == MS_OK)
        st = cli_run_configs(job->scenario, job->backend, g->cfg, g->n, mine, job->jobs, show, res,
                             &d);
    st = cli_mpi_gather(&mpi, st, res, g->n, &d);
    int rc = CLI_OK;
    if (st == MS_OK && mpi.rank == 0)
        rc = job->finish(job, res);
    else if (st != MS_OK)
        rc = CLI_ERROR;
    if (st != MS_OK && mpi.rank == 0)
        fprintf(stderr, "memsim %s: %s\n", job->command, d.msg);
    rc = cli_mpi_finish(&mpi, rc);
    free(res);
    free(mine);
    return rc;
}

int cli_grid_finish(const cli_grid_job *job, const cli_result *res)
{
    ms_diag d = {0};
    ms_report_dir *rd = NULL;
    ms_status st = cli_output_open(job->out, &rd, &d);
    if (st == MS_OK) {
        char path[8400];
        snprintf(path, sizeof path, "%s/%s", ms_report_dir_path(rd), job->csv_name);
        st = cli_grid_write_csv(path, job->grid, res, &d);
        ms_status closed = cli_output_close(rd, st == MS_OK, &d);
        if (st == MS_OK)
            st = closed;
    }
    if (st != MS_OK) {
        fprintf(stderr, "memsim %s: %s\n", job->command, d.msg);
        return CLI_ERROR;
    }
    if (!job->quiet) {
        cli_grid_print(stdout, job->grid, res);
        printf("wrote           %s/%s\n", job->out, job->csv_name);
    }
    return cli_best_fit(res, job->grid->n) >= 0 ? CLI_OK : CLI_OOM;
}

int cli_sweep(int argc, char **argv)
{
    sweep_args a;
    int rc = parse_args(argc, argv, &a);
    if (rc != 0)
        return rc < 0 ? CLI_OK : rc;
    cli_grid g = {0};
    ms_diag d = {0};
    ms_status st = parse_axes(&a, &g, &d);
    if (st == MS_OK && g.n_axes == 0 && g.n_policies < 2)
        st = ms_diag_set(&d, MS_EINVAL, "nothing to sweep: give --vary or several --policies");
    if (st == MS_OK)
        st = cli_grid_build(&g, a.sets, (size_t)a.n_sets, &d);
    if (st != MS_OK) {
        fprintf(stderr, "memsim sweep: %s\n", d.msg);
        cli_grid_free(&g);
        return CLI_USAGE;
    }
    char out[4096], base[256];
    const char *slash = strrchr(a.scenario, '/');
    snprintf(base, sizeof base, "%s", slash ? slash + 1 : a.scenario);
    char *dot = strstr(base, ".lua");
    if (dot != NULL)
        *dot = '\0';
    if (a.out != NULL)
        snprintf(out, sizeof out, "%s", a.out);
    else
        cli_default_dir(base, "sweep", a.sets, (size_t)a.n_sets, out, sizeof out);
    cli_grid_job job = {.command = "sweep",
                        .scenario = a.scenario,
                        .backend = a.backend,
                        .grid = &g,
                        .jobs = a.jobs,
                        .quiet = a.quiet,
                        .out = out,
                        .csv_name = "sweep.csv",
                        .finish = cli_grid_finish};
    rc = cli_grid_run(&job);
    cli_grid_free(&g);
    return rc;
}
