/* memsim: the command line.  Each subcommand is a file of its own
 * (commands.h); this one dispatches. */
#include "config.h"

#include <stdio.h>
#include <string.h>

#include "commands.h"

static void usage(FILE *out)
{
    fprintf(out,
            "usage: memsim run SCENARIO [--policy FILE|NAME]... [--set KEY=VALUE]... [--out DIR]\n"
            "       memsim compare SCENARIO --policies A,B,... [--set KEY=VALUE]... [-j N]\n"
            "       memsim sweep SCENARIO --vary KEY=V1,V2,... [--policies A,B] [-j N]\n"
            "       memsim replay TRACE [--allocator-conf STR] [--capacity BYTES] ...\n"
            "       memsim list [scenarios|devices|policies|keys]\n"
            "       memsim calibrate --backend cuda|npu|mock --device FILE [--out FILE]\n"
            "       memsim validate TABLE.csv... [--fit PARAMS] [--out FILE]\n"
            "       memsim profile-torch PROFILE.csv --policy P [--out FILE]\n"
            "       memsim reproduce [--out DIR] [--doc FILE] [--quick] [--quiet]\n"
            "       memsim import SCRIPT.sh|CONFIG.yaml|config.json [--out FILE] [--set K=V]...\n"
            "       memsim --help | --version\n"
            "\n"
            "run      simulate training steps of a scenario file (scenarios/*.lua) under a\n"
            "         memory policy and write the reports (CSV, Perfetto trace, SVG plots)\n"
            "compare  several policies on one scenario: one table, one CSV\n"
            "sweep    a grid of overrides (and policies), in parallel or over MPI, into one\n"
            "         sweep.csv that marks the best configuration that fits\n"
            "replay   replay a PyTorch memory snapshot through the allocator model\n"
            "list     the shipped scenarios, devices and policies\n"
            "calibrate  measure a device through a backend and fit its device file\n"
            "validate   put the model beside public measurements (validation/*.csv)\n"
            "profile-torch  a policy's plan on a step measured in PyTorch (docs/torch.md)\n"
            "reproduce  every seed configuration with a published figure, into\n"
            "         results/reference/*.csv and the seed comparison table\n"
            "import   a Megatron-LM/MindSpeed script, a MindFormers or NeMo YAML or a\n"
            "         Hugging Face config.json into a scenario citing each field's source\n"
            "\n"
            "memsim COMMAND --help shows each command's options and examples; man memsim\n"
            "has them all.\n"
            "\n"
            "Exit status: 0 done, 1 error, 2 usage error, 3 out of memory (run: the run ran\n"
            "out; compare and sweep: no configuration fits).\n");
}

int main(int argc, char **argv)
{
    static const struct {
        const char *name;
        int (*fn)(int, char **);
    } commands[] = {
        {"run", cli_run},       {"compare", cli_compare}, {"sweep", cli_sweep},
        {"replay", cli_replay}, {"list", cli_list},       {"calibrate", cli_calibrate},
        {"validate", cli_validate}, {"profile-torch", cli_profile_torch},
        {"reproduce", cli_reproduce}, {"import", cli_import},
    };
    if (argc < 2) {
        usage(stderr);
        return CLI_USAGE;
    }
    if (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0 ||
        strcmp(argv[1], "help") == 0) {
        usage(stdout);
        return CLI_OK;
    }
    if (strcmp(argv[1], "--version") == 0) {
        printf("memsim %s\n", PACKAGE_VERSION);
        return CLI_OK;
    }
    const char *names[sizeof commands / sizeof commands[0]];
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++) {
        if (strcmp(argv[1], commands[i].name) == 0)
            return commands[i].fn(argc - 1, argv + 1);
        names[i] = commands[i].name;
    }
    const char *near = cli_closest(argv[1], names, sizeof names / sizeof names[0]);
    fprintf(stderr, "memsim: unknown command '%s'%s%s%s\n", argv[1], near ? "; did you mean '" : "",
            near ? near : "", near ? "'?" : "");
    usage(stderr);
    return CLI_USAGE;
}
