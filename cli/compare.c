/* memsim compare: one scenario under several policies, side by side: one
 * table on the terminal and one compare.csv (the columns of sweep.csv),
 * the policies run in parallel (cli/commands.h). */
#include "commands.h"

#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sweep.h"

static void usage(FILE *out)
{
    fprintf(out,
            "usage: memsim compare SCENARIO --policies A,B,... [--set KEY=VALUE]... [-j N]\n"
            "                      [--out DIR] [--quiet]\n"
            "\n"
            "Runs the scenario under each policy (shipped names or files), -j N at a time\n"
            "(default: the CPUs), prints one table (peak reserved, step time, tokens/s, which\n"
            "fits best) and writes DIR/compare.csv (default results/<scenario>-policies/),\n"
            "with the columns of sweep.csv.  For every report of every policy, use\n"
            "memsim run SCENARIO --policy A --policy B.\n"
            "\n"
            "Exit status: 0 done (some policy fits), 1 error, 2 usage, 3 none fits.\n"
            "\n"
            "Example:\n"
            "  memsim compare scenarios/llama2-smartswap-tp1.lua --policies "
            "none,smart_swap,full_recompute\n");
}

static void scenario_base(const char *path, char *out, size_t n)
{
    const char *slash = strrchr(path, '/');
    snprintf(out, n, "%s", slash ? slash + 1 : path);
    char *dot = strstr(out, ".lua");
    if (dot != NULL)
        *dot = '\0';
}

int cli_compare(int argc, char **argv)
{
    static const struct option opts[] = {
        {"policies", required_argument, NULL, 'p'},
        {"set", required_argument, NULL, 's'},
        {"out", required_argument, NULL, 'o'},
        {"backend", required_argument, NULL, 'b'},
        {"quiet", no_argument, NULL, 'q'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    char *policies = NULL;
    const char *sets[CLI_MAX_SETS], *out = NULL, *backend = NULL;
    int n_sets = 0, jobs = cli_cpus(), c;
    bool quiet = false;
    optind = 1;
    while ((c = getopt_long(argc, argv, "p:s:o:b:j:qh", opts, NULL)) != -1) {
        if (c == 'h') {
            usage(stdout);
            return CLI_OK;
        }
        if (c == 'p')
            policies = optarg;
        else if (c == 's' && n_sets < CLI_MAX_SETS)
            sets[n_sets++] = optarg;
        else if (c == 'o')
            out = optarg;
        else if (c == 'b')
            backend = optarg;
        else if (c == 'q')
            quiet = true;
        else if (c == 'j' && (jobs = cli_parse_count(optarg)) > 0)
            continue;
        else {
            usage(stderr);
            return CLI_USAGE;
        }
    }
    if (optind != argc - 1 || policies == NULL) {
        fprintf(stderr, "memsim compare: expected one SCENARIO and --policies A,B,...\n");
        return CLI_USAGE;
    }
    cli_grid g = {0};
    g.n_policies = cli_split_list(policies, g.policy, CLI_MAX_POLICIES);
    ms_diag d = {0};
    if (g.n_policies <= 0) {
        fprintf(stderr, "memsim compare: --policies: expected 1 to %d names, none empty\n",
                CLI_MAX_POLICIES);
        return CLI_USAGE;
    }
    if (cli_grid_build(&g, sets, (size_t)n_sets, &d) != MS_OK) {
        fprintf(stderr, "memsim compare: %s\n", d.msg);
        return CLI_USAGE;
    }
    char dir[4096], base[256];
    scenario_base(argv[optind], base, sizeof base);
    if (out != NULL)
        snprintf(dir, sizeof dir, "%s", out);
    else
        cli_default_dir(base, "policies", sets, (size_t)n_sets, dir, sizeof dir);
    cli_grid_job job = {.command = "compare",
                        .scenario = argv[optind],
                        .backend = backend,
                        .grid = &g,
                        .jobs = jobs,
                        .quiet = quiet,
                        .out = dir,
                        .csv_name = "compare.csv",
                        .finish = cli_grid_finish};
    int rc = cli_grid_run(&job);
    cli_grid_free(&g);
    return rc;
}
