/* memsim calibrate: measure a device through backend.h and write its device
 * file (cli/commands.h; include/memsim/calibrate.h). */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "commands.h"
#include "memsim/calibrate.h"
#include "memsim/scenario.h"

static void usage(FILE *out)
{
    fprintf(out,
            "usage: memsim calibrate --backend cuda|npu|mock[:N] --device FILE [--out FILE]\n"
            "                        [--name NAME] [--quick] [--quiet]\n"
            "\n"
            "Measures a device through the backend (GEMM efficiency over a grid of shapes and\n"
            "dtypes, fused attention, memory-bound kernels by size, host-device copies by size\n"
            "alone and beside compute, collectives by size on each link, launch and kernel\n"
            "overheads), fits the device file's parameters with GSL and writes the file with\n"
            "its provenance and fit residuals.\n"
            "\n"
            "  --backend NAME[:N]  the backend and device ordinal (cuda:1); mock measures the\n"
            "                      mock's own model and gives it back (a round trip)\n"
            "  --device FILE       the device's data sheet: peak FLOP/s, HBM and link\n"
            "                      bandwidths, nodes; on the mock also the model it runs\n"
            "  --out FILE          where to write (default: the device's name + .lua)\n"
            "  --name NAME         the calibrated device's name (default: the base's)\n"
            "  --quick             fewer shapes and repeats\n");
}

typedef struct cal_args {
    const char *backend, *device, *out, *name;
    bool quick, quiet;
} cal_args;

static int parse(int argc, char **argv, cal_args *a)
{
    static const struct option opts[] = {
        {"backend", required_argument, NULL, 'b'}, {"device", required_argument, NULL, 'd'},
        {"out", required_argument, NULL, 'o'},     {"name", required_argument, NULL, 'n'},
        {"quick", no_argument, NULL, 'k'},         {"quiet", no_argument, NULL, 'q'},
        {"help", no_argument, NULL, 'h'},          {NULL, 0, NULL, 0},
    };
    memset(a, 0, sizeof *a);
    optind = 1;
    int c;
    while ((c = getopt_long(argc, argv, "b:d:o:n:kqh", opts, NULL)) != -1) {
        switch (c) {
        case 'b': a->backend = optarg; break;
        case 'd': a->device = optarg; break;
        case 'o': a->out = optarg; break;
        case 'n': a->name = optarg; break;
        case 'k': a->quick = true; break;
        case 'q': a->quiet = true; break;
        case 'h': usage(stdout); return -1;
        default: usage(stderr); return 2;
        }
    }
    if (optind != argc || a->backend == NULL || a->device == NULL) {
        fprintf(stderr,
                "memsim calibrate: --backend and --device are required, and nothing else\n");
        usage(stderr);
        return 2;
    }
    return 0;
}

static void provenance(const cal_args *a, int argc, char **argv, const ms_device_spec *base,
                       ms_device_provenance *p)
{
    memset(p, 0, sizeof *p);
    snprintf(p->source, sizeof p->source, "memsim calibrate on backend %s, data sheet %s",
             a->backend, a->device);
    time_t now = time(NULL);
    struct tm tm;
    if (gmtime_r(&now, &tm) != NULL)
        strftime(p->date, sizeof p->date, "%Y-%m-%dT%H:%M:%SZ", &tm);
    /* The runtime's device name and driver come from a real backend; the
     * mock is its own model. */
    snprintf(p->device, sizeof p->device, "%s (%s)", base->name, a->backend);
    snprintf(p->driver, sizeof p->driver, "%s",
             strncmp(a->backend, "mock", 4) == 0 ? "memsim mock (simulated)"
                                                 : "see the backend's log");
    size_t len = 0;
    for (int i = 0; i < argc && len < sizeof p->command; i++)
        len += (size_t)snprintf(p->command + len, sizeof p->command - len, "%s%s",
                                i ? " " : "memsim ", argv[i]);
}

int cli_calibrate(int argc, char **argv)
{
    cal_args a;
    int rc = parse(argc, argv, &a);
    if (rc != 0)
        return rc < 0 ? 0 : rc;
    ms_diag d = {0};
    ms_device_spec base, out;
    ms_status st = ms_device_load(a.device, &base, &d);
    if (st != MS_OK) {
        fprintf(stderr, "memsim calibrate: %s\n", d.msg);
        return 1;
    }
    const char *colon = strchr(a.backend, ':');
    ms_calibrate_options opt = {.backend = a.backend,
                                .ordinal = colon ? atoi(colon + 1) : 0,
                                .base = &base,
                                .quick = a.quick,
                                .log = a.quiet ? NULL : stdout};
    ms_fit_residuals res;
    st = ms_calibrate(&opt, &out, &res, &d);
    if (st != MS_OK) {
        fprintf(stderr, "memsim calibrate: %s\n", d.msg[0] ? d.msg : ms_strerror(st));
        return 1;
    }
    if (a.name != NULL)
        snprintf(out.name, sizeof out.name, "%s", a.name);
    char path[4200];
    if (a.out != NULL)
        snprintf(path, sizeof path, "%s", a.out);
    else
        snprintf(path, sizeof path, "%s.lua", out.name);
    ms_device_provenance prov;
    provenance(&a, argc, argv, &base, &prov);
    st = ms_device_write(path, &out, &prov, &res, &d);
    if (st != MS_OK) {
        fprintf(stderr, "memsim calibrate: %s\n", d.msg);
        return 1;
    }
    if (!a.quiet)
        printf("wrote           %s\n", path);
    return 0;
}
