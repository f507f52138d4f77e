/* memsim validate: the model beside public measurements (cli/commands.h;
 * include/memsim/calibrate.h, docs/validation.md). */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "commands.h"
#include "memsim/calibrate.h"

#define MAX_TABLES 32
#define MAX_FIT 32

static void usage(FILE *out)
{
    fprintf(out, "usage: memsim validate TABLE.csv... [--fit PARAM[,PARAM...]] [--out FILE.csv]\n"
                 "                       [--write-devices DIR] [--list-params] [--quiet]\n"
                 "\n"
                 "Runs every row of the tables (a scenario and the figures measured on it: step\n"
                 "time, TFLOP/s per device, peak memory) and prints predicted vs measured, the\n"
                 "error of each row, and mean and max |error| per table and split.\n"
                 "\n"
                 "  --fit PARAMS          fit these device parameters (gemm.fp16,\n"
                 "                        overlap.compute_slowdown, a table's level such as\n"
                 "                        hbm_efficiency.level, or DEVICE:param) on the rows\n"
                 "                        marked train, then report every row with them\n"
                 "  --out FILE            the per-row table as CSV\n"
                 "  --write-devices DIR   write the fitted device files to DIR/NAME.lua\n"
                 "  --list-params         the parameters --fit accepts\n"
                 "  --quiet               no progress lines\n");
}

typedef struct val_args {
    const char *tables[MAX_TABLES];
    int n_tables;
    char *fit[MAX_FIT];
    int n_fit;
    char *fit_buf;
    const char *out, *devices;
    bool quiet, list;
} val_args;

static int split_fit(val_args *a, const char *arg)
{
    free(a->fit_buf);
    a->fit_buf = strdup(arg);
    a->n_fit = 0;
    if (a->fit_buf == NULL)
        return 1;
    for (char *save = NULL, *t = strtok_r(a->fit_buf, ",", &save); t != NULL;
         t = strtok_r(NULL, ",", &save)) {
        if (a->n_fit == MAX_FIT) {
            fprintf(stderr, "memsim validate: at most %d --fit parameters\n", MAX_FIT);
            return 2;
        }
        a->fit[a->n_fit++] = t;
    }
    return 0;
}

static int parse(int argc, char **argv, val_args *a)
{
    static const struct option opts[] = {
        {"fit", required_argument, NULL, 'f'},
        {"out", required_argument, NULL, 'o'},
        {"write-devices", required_argument, NULL, 'w'},
        {"list-params", no_argument, NULL, 'l'},
        {"quiet", no_argument, NULL, 'q'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    optind = 1;
    int c, rc;
    while ((c = getopt_long(argc, argv, "f:o:w:lqh", opts, NULL)) != -1) {
        switch (c) {
        case 'f':
            if ((rc = split_fit(a, optarg)) != 0)
                return rc;
            break;
        case 'o': a->out = optarg; break;
        case 'w': a->devices = optarg; break;
        case 'l': a->list = true; break;
        case 'q': a->quiet = true; break;
        case 'h': usage(stdout); return -1;
        default: usage(stderr); return 2;
        }
    }
    for (int i = optind; i < argc; i++) {
        if (a->n_tables == MAX_TABLES) {
            fprintf(stderr, "memsim validate: at most %d tables\n", MAX_TABLES);
            return 2;
        }
        a->tables[a->n_tables++] = argv[i];
    }
    if (a->n_tables == 0 && !a->list) {
        fprintf(stderr, "memsim validate: expected at least one TABLE.csv\n");
        usage(stderr);
        return 2;
    }
    if (a->devices != NULL && a->n_fit == 0) {
        fprintf(stderr, "memsim validate: --write-devices needs --fit\n");
        return 2;
    }
    return 0;
}

static void command_line(int argc, char **argv, char *buf, size_t size)
{
    size_t len = 0;
    buf[0] = '\0';
    for (int i = 0; i < argc && len < size; i++)
        len += (size_t)snprintf(buf + len, size - len, "%s%s", i ? " " : "memsim ", argv[i]);
}

static int validate(val_args *a, int argc, char **argv)
{
    ms_diag d = {0};
    ms_validation *v = NULL;
    FILE *log = a->quiet ? NULL : stderr;
    ms_status st = ms_validation_load(a->tables, (size_t)a->n_tables, &v, &d);
    if (st == MS_OK && a->n_fit > 0)
        st = ms_validation_fit(v, (const char *const *)a->fit, (size_t)a->n_fit, log, &d);
    ms_status run = st == MS_OK ? ms_validation_run(v, log, &d) : st;
    if (v != NULL && st == MS_OK)
        ms_validation_print(v, stdout);
    if (st == MS_OK && a->out != NULL)
        st = ms_validation_write_csv(v, a->out, &d);
    if (st == MS_OK && a->devices != NULL) {
        char cmd[1024];
        command_line(argc, argv, cmd, sizeof cmd);
        st = ms_validation_write_devices(v, a->devices, cmd, &d);
    }
    if (st == MS_OK)
        st = run;
    if (v != NULL)
        ms_validation_free(v);
    if (st != MS_OK) {
        fprintf(stderr, "memsim validate: %s\n", d.msg[0] ? d.msg : ms_strerror(st));
        return 1;
    }
    return 0;
}

int cli_validate(int argc, char **argv)
{
    val_args a;
    memset(&a, 0, sizeof a);
    int rc = parse(argc, argv, &a);
    if (rc == 0 && a.list) {
        ms_device_param_list(stdout);
        if (a.n_tables == 0) {
            free(a.fit_buf);
            return 0;
        }
    }
    if (rc == 0)
        rc = validate(&a, argc, argv);
    free(a.fit_buf);
    return rc < 0 ? 0 : rc;
}
