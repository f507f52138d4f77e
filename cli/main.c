/* memsim: the command line.  Each subcommand is a file of its own
 * (commands.h); this one dispatches. */
#include "config.h"

#include <stdio.h>
#include <string.h>

#include "commands.h"

static void usage(FILE *out)
{
    fprintf(out,
            "usage: memsim run SCENARIO [--policy FILE|NAME]... [--out DIR] [--set KEY=VALUE]...\n"
            "                  [--backend mock] [--quiet]\n"
            "       memsim replay TRACE [--allocator-conf STR] [--csv OUT] ...\n"
            "       memsim --help | --version\n"
            "\n"
            "run      simulate training steps of a scenario file (scenarios/*.lua) under a\n"
            "         memory policy (policies_lua/*.lua, or a path); writes summary.csv,\n"
            "         ops.csv, memory.csv, tensors.csv, segments.csv, trace.json and\n"
            "         {memory,timeline}.svg to results/<scenario>-<policy>/ (which steps:\n"
            "         --set report.detail=all|last|none).\n"
            "         Several --policy flags compare policies: one summary.csv row each\n"
            "         in results/<scenario>-compare/, details in one folder per policy.\n"
            "         --set overrides a scenario field: --set model.seq_length=8192\n"
            "replay   replay a PyTorch memory snapshot through the allocator model\n"
            "         (memsim replay --help for its options)\n"
            "profile-torch PROFILE.csv --policy P\n"
            "         a policy's plan on a step measured in PyTorch (docs/torch.md)\n");
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        usage(stderr);
        return 2;
    }
    if (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0 ||
        strcmp(argv[1], "help") == 0) {
        usage(stdout);
        return 0;
    }
    if (strcmp(argv[1], "--version") == 0) {
        printf("memsim %s\n", PACKAGE_VERSION);
        return 0;
    }
    if (strcmp(argv[1], "run") == 0)
        return cli_run(argc - 1, argv + 1);
    if (strcmp(argv[1], "replay") == 0)
        return cli_replay(argc - 1, argv + 1);
    if (strcmp(argv[1], "profile-torch") == 0)
        return cli_profile_torch(argc - 1, argv + 1);
    fprintf(stderr, "memsim: unknown command '%s'\n", argv[1]);
    usage(stderr);
    return 2;
}
