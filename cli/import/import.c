/* memsim import: a training script, a MindFormers or NeMo YAML or a Hugging
 * Face config.json into a scenario file whose fields cite their sources
 * (lib/scenario/import/import.c); and the line memsim run prints when it is given
 * one of those files directly (cli/commands.h). */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/commands.h"
#include "memsim/scenario.h"

static void usage(FILE *out)
{
    fprintf(
        out,
        "usage: memsim import FILE [--out SCENARIO.lua] [--device NAME] [--set KEY=VALUE]...\n"
        "                     [--env NAME=VALUE]... [--format megatron|yaml|hf]\n"
        "\n"
        "Reads what a team already runs and writes a scenario file: a Megatron-LM or\n"
        "MindSpeed-LLM training script or command line (*.sh: variables, arrays and\n"
        "if/else followed as bash would, nothing run), a MindFormers or NeMo YAML\n"
        "(*.yaml), a Hugging Face config.json (the model; the training settings are\n"
        "defaults, each said).  Every field carries a comment naming the argument or\n"
        "key it came from and its line; what memsim does not model is listed on\n"
        "stderr and, with what has no effect on memory or time, at the end of the\n"
        "scenario.  memsim run takes these files directly too.\n"
        "\n"
        "  --out FILE       write the scenario here (default: stdout)\n"
        "  --device NAME    the device file (default: the framework's usual one)\n"
        "  --set KEY=VALUE  a scenario field the file does not give or gets wrong:\n"
        "                   --set model.vocab_size=32000, --set parallel.world_size=64\n"
        "  --env NAME=VALUE a variable the script reads from its environment:\n"
        "                   --env NNODES=4\n"
        "  --format F       megatron, yaml or hf, when the file's name does not say\n"
        "\n"
        "Exit status: 0 done, 1 the file could not be read or imported, 2 usage.\n"
        "\n"
        "Examples:\n"
        "  memsim import tests/data/import/pretrain_llama2_7b_ptd.sh --out llama2.lua\n"
        "  memsim import tests/data/import/llama2_7b_hf_config.json --set model.seq_length=2048\n"
        "  memsim run tests/data/import/pretrain_llama2_7b.yaml\n");
}

typedef struct import_args {
    const char *file, *out, *device;
    const char *sets[CLI_MAX_SETS], *env[CLI_MAX_SETS];
    size_t n_sets, n_env;
    ms_import_format format;
} import_args;

static int add_pair(const char **list, size_t *n, const char *v, const char *flag)
{
    if (*n == CLI_MAX_SETS || strchr(v, '=') == NULL) {
        fprintf(stderr, "memsim import: %s '%s': expected NAME=VALUE (at most %d)\n", flag, v,
                CLI_MAX_SETS);
        return CLI_USAGE;
    }
    list[(*n)++] = v;
    return 0;
}

static int parse_format(const char *v, ms_import_format *f)
{
    static const struct {
        const char *name;
        ms_import_format fmt;
    } names[] = {{"megatron", MS_IMPORT_MEGATRON}, {"yaml", MS_IMPORT_YAML}, {"hf", MS_IMPORT_HF}};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (strcmp(v, names[i].name) == 0) {
            *f = names[i].fmt;
            return 0;
        }
    fprintf(stderr, "memsim import: --format '%s': expected megatron, yaml or hf\n", v);
    return CLI_USAGE;
}

static int parse_args(int argc, char **argv, import_args *a)
{
    static const struct option opts[] = {
        {"out", required_argument, NULL, 'o'},
        {"device", required_argument, NULL, 'd'},
        {"set", required_argument, NULL, 's'},
        {"env", required_argument, NULL, 'e'},
        {"format", required_argument, NULL, 'f'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    memset(a, 0, sizeof *a);
    optind = 1;
    int c, rc = 0;
    while (rc == 0 && (c = getopt_long(argc, argv, "o:h", opts, NULL)) != -1) {
        if (c == 'h') {
            usage(stdout);
            return -1;
        }
        rc = c == 'o'   ? (a->out = optarg, 0)
             : c == 'd' ? (a->device = optarg, 0)
             : c == 's' ? add_pair(a->sets, &a->n_sets, optarg, "--set")
             : c == 'e' ? add_pair(a->env, &a->n_env, optarg, "--env")
             : c == 'f' ? parse_format(optarg, &a->format)
                        : (fprintf(stderr, "memsim import --help lists the options\n"), CLI_USAGE);
    }
    if (rc == 0 && optind != argc - 1) {
        fprintf(stderr, "memsim import: expected exactly one FILE\n");
        rc = CLI_USAGE;
    }
    a->file = rc == 0 ? argv[optind] : NULL;
    return rc;
}

/* What memsim does not model, on stderr: a line each, indented. */
static void print_not_modelled(const char *who, const ms_import *im)
{
    const char *lines = ms_import_not_modelled(im);
    size_t n = 0, quiet = 0;
    for (const char *p = lines; *p; p++)
        n += *p == '\n';
    for (const char *p = ms_import_no_effect(im); *p; p++)
        quiet += *p == '\n';
    fprintf(stderr, "%s: read as %s; %zu setting%s memsim does not model%s\n", who,
            ms_import_kind(im), n, n == 1 ? "" : "s", n ? ":" : "");
    for (const char *p = lines; *p;) {
        size_t len = strcspn(p, "\n");
        fprintf(stderr, "  %.*s\n", (int)len, p);
        p += len + (p[len] == '\n');
    }
    if (quiet > 0)
        fprintf(stderr,
                "%s: and %zu with no effect on memory or step time (listed at the end of "
                "the scenario)\n",
                who, quiet);
}

static ms_status write_out(const char *path, const char *text, ms_diag *d)
{
    if (path == NULL) {
        fputs(text, stdout);
        return fflush(stdout) == 0 ? MS_OK : ms_diag_set(d, MS_EIO, "stdout: write failed");
    }
    char tmp[4200];
    if (snprintf(tmp, sizeof tmp, "%s.tmp", path) >= (int)sizeof tmp)
        return ms_diag_set(d, MS_EINVAL, "--out: path too long");
    FILE *f = fopen(tmp, "w");
    if (f == NULL)
        return ms_diag_set(d, MS_EIO, "%s: cannot write: %s", tmp, strerror(errno));
    cli_tmp_file_arm(tmp);
    fputs(text, f);
    ms_status st = cli_file_commit(f, tmp, path, d);
    cli_tmp_file_arm(NULL);
    return st;
}

int cli_import(int argc, char **argv)
{
    import_args a;
    int rc = parse_args(argc, argv, &a);
    if (rc != 0)
        return rc < 0 ? CLI_OK : rc;
    ms_import_options opt = {.format = a.format,
                             .device = a.device,
                             .env = a.env,
                             .n_env = a.n_env,
                             .sets = a.sets,
                             .n_sets = a.n_sets};
    ms_import *im = NULL;
    ms_diag d = {0};
    ms_status st = ms_import_read(a.file, &opt, &im, &d);
    if (st == MS_OK)
        st = write_out(a.out, ms_import_scenario(im), &d);
    if (st == MS_OK)
        print_not_modelled("memsim import", im);
    else
        fprintf(stderr, "memsim import: %s\n", d.msg[0] ? d.msg : ms_strerror(st));
    if (im != NULL)
        ms_import_free(im);
    return st == MS_OK ? CLI_OK : CLI_ERROR;
}

void cli_import_note(const char *path, const char *const *sets, size_t n_sets)
{
    ms_import_format fmt;
    ms_import *im = NULL;
    ms_import_options opt = {.sets = sets, .n_sets = n_sets};
    if (ms_import_detect(path, &fmt, NULL) != MS_OK || fmt == MS_IMPORT_SCENARIO ||
        ms_import_read(path, &opt, &im, NULL) != MS_OK)
        return; /* the run's own load says what is wrong */
    print_not_modelled("memsim run", im);
    ms_import_free(im);
}
