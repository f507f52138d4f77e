/* memsim replay: replay a PyTorch memory snapshot (or CSV trace) through
 * the caching-allocator model, report how closely the model reproduces the
 * recorded segment traffic, peak and OOM, and compare other allocator
 * settings on the same trace (docs/replay.md). */
#include "commands.h"

#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "memsim/trace.h"

#define MAX_WHATIF 16

typedef struct replay_args {
    const char *trace;
    const char *whatif[MAX_WHATIF]; /* --allocator-conf first, then --compare */
    int n_whatif;
    const char *csv;
    int device;
    uint64_t capacity;
    ms_alloc_flavour flavour;
    bool flavour_given;
} replay_args;

static void usage(FILE *out)
{
    fprintf(out,
            "usage: memsim replay TRACE [--allocator-conf STR] [--compare STR]... [--csv OUT.csv]\n"
            "                     [--device N] [--capacity BYTES] [--flavour cuda|npu]\n"
            "\n"
            "Replays a torch.cuda.memory._snapshot() pickle (or a CSV trace:\n"
            "action,addr,size,stream,time_us[,device_free]) through memsim's caching-allocator\n"
            "model with the recorded allocator settings, and reports per device how many\n"
            "recorded segment_alloc/free/map/unmap events the model predicted at the same\n"
            "event with the same size, the peak reserved memory (recorded vs predicted), and\n"
            "whether a recorded OOM is reproduced at the same event.\n"
            "\n"
            "  --allocator-conf STR  also replay under these PYTORCH_CUDA_ALLOC_CONF settings\n"
            "                        (e.g. expandable_segments:True) and print peak reserved,\n"
            "                        fragmentation and OOM beside the recorded settings\n"
            "  --compare STR         one more such setting (repeatable)\n"
            "  --csv OUT.csv         write the memory time series of every replay\n"
            "  --device N            replay only device N (default: every device with events)\n"
            "  --capacity BYTES      device memory the allocator may use (suffix K/M/G/T for\n"
            "                        KiB..TiB); default: derived from the trace's oom event\n"
            "  --flavour cuda|npu    CUDACachingAllocator (default, unless a memsim snapshot\n"
            "                        names its own) or NPUCachingAllocator\n"
            "\n"
            "Exit status: 0 done, 1 error (the file is no snapshot, or cannot be replayed),\n"
            "2 usage.\n"
            "\n"
            "Examples:\n"
            "  memsim replay snapshot.pickle --compare expandable_segments:True\n"
            "  memsim replay snapshot.pickle --capacity 80G --csv series.csv\n"
            "  memsim run scenarios/llama2-7b.lua --set steps=1 --snapshot s.pickle && "
            "memsim replay s.pickle\n");
}

static int parse_size(const char *s, uint64_t *out)
{
    char *end;
    errno = 0;
    if (s[0] < '0' || s[0] > '9')
        return -1;
    unsigned long long v = strtoull(s, &end, 10);
    int shift = 0;
    if (*end == 'K' || *end == 'k')
        shift = 10;
    else if (*end == 'M' || *end == 'm')
        shift = 20;
    else if (*end == 'G' || *end == 'g')
        shift = 30;
    else if (*end == 'T' || *end == 't')
        shift = 40;
    if (shift)
        end++;
    if (errno != 0 || *end != '\0' || v == 0 || (shift && v > (~0ULL >> shift)))
        return -1;
    *out = (uint64_t)v << shift;
    return 0;
}

static int add_whatif(replay_args *a, const char *conf)
{
    if (a->n_whatif == MAX_WHATIF) {
        fprintf(stderr, "memsim replay: at most %d settings to compare\n", MAX_WHATIF);
        return 2;
    }
    a->whatif[a->n_whatif++] = conf;
    return 0;
}

static int parse_option(replay_args *a, int c, const char **conf)
{
    char *end;
    switch (c) {
    case 'a':
        if (*conf != NULL) {
            fprintf(stderr, "memsim replay: --allocator-conf given twice (use --compare)\n");
            return 2;
        }
        *conf = optarg;
        return 0;
    case 'c': return add_whatif(a, optarg);
    case 'o': a->csv = optarg; return 0;
    case 'd': {
        errno = 0;
        long dev = strtol(optarg, &end, 10);
        if (errno != 0 || *end != '\0' || optarg[0] == '\0' || dev < 0 || dev > 4095) {
            fprintf(stderr, "memsim replay: --device '%s': expected a device index\n", optarg);
            return 2;
        }
        a->device = (int)dev;
        return 0;
    }
    case 'm':
        if (parse_size(optarg, &a->capacity) != 0) {
            fprintf(stderr, "memsim replay: --capacity '%s': expected bytes (e.g. 80G)\n",
                    optarg);
            return 2;
        }
        return 0;
    case 'f':
        a->flavour_given = true;
        if (strcmp(optarg, "cuda") == 0) {
            a->flavour = MS_ALLOC_CUDA;
        } else if (strcmp(optarg, "npu") == 0) {
            a->flavour = MS_ALLOC_NPU;
        } else {
            fprintf(stderr, "memsim replay: --flavour '%s': expected cuda or npu\n", optarg);
            return 2;
        }
        return 0;
    default:
        fprintf(stderr, "memsim replay: see memsim replay --help\n");
        return 2;
    }
}

static int parse_args(int argc, char **argv, replay_args *a)
{
    static const struct option opts[] = {
        {"allocator-conf", required_argument, NULL, 'a'},
        {"compare", required_argument, NULL, 'c'},
        {"csv", required_argument, NULL, 'o'},
        {"device", required_argument, NULL, 'd'},
        {"capacity", required_argument, NULL, 'm'},
        {"flavour", required_argument, NULL, 'f'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    memset(a, 0, sizeof *a);
    a->device = -1;
    const char *conf = NULL;
    optind = 1;
    int c;
    while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        if (c == 'h') {
            usage(stdout);
            return -1;
        }
        int rc = parse_option(a, c, &conf);
        if (rc != 0)
            return rc;
    }
    if (conf != NULL) {
        /* --allocator-conf is the first setting compared. */
        if (add_whatif(a, conf) != 0)
            return 2;
        memmove(a->whatif + 1, a->whatif, (size_t)(a->n_whatif - 1) * sizeof *a->whatif);
        a->whatif[0] = conf;
    }
    if (optind != argc - 1) {
        fprintf(stderr, "memsim replay: expected one trace file (see memsim replay --help)\n");
        return 2;
    }
    a->trace = argv[optind];
    /* Settings are checked before the (possibly long) replay starts. */
    for (int k = 0; k < a->n_whatif; k++) {
        ms_alloc_config cfg;
        ms_diag d = {0};
        if (ms_alloc_config_default(a->flavour, &cfg) != MS_OK ||
            ms_alloc_config_parse(a->whatif[k], &cfg, &d) != MS_OK) {
            fprintf(stderr, "memsim replay: '%s': %s\n", a->whatif[k], d.msg);
            return 2;
        }
    }
    return 0;
}

/* Sizes as the caching allocator prints them: bytes up to 1024, else
 * KiB / MiB / GiB with two decimals. */
static const char *human(uint64_t b, char buf[32])
{
    if (b <= 1024)
        snprintf(buf, 32, "%llu bytes", (unsigned long long)b);
    else if (b < (1ULL << 20))
        snprintf(buf, 32, "%.2f KiB", (double)b / 1024.0);
    else if (b < (1ULL << 30))
        snprintf(buf, 32, "%.2f MiB", (double)b / (1 << 20));
    else
        snprintf(buf, 32, "%.2f GiB", (double)b / (1 << 30));
    return buf;
}

static void print_settings(const ms_snapshot *s)
{
    const ms_snapshot_settings *set = NULL;
    set = ms_snapshot_settings_get(s);
    if (!set->recorded) {
        printf("allocator settings: none recorded (the allocator's defaults)\n");
        return;
    }
    printf("allocator settings: PYTORCH_CUDA_ALLOC_CONF='%s' expandable_segments=%s "
           "max_split_size=",
           set->alloc_conf, set->expandable_segments ? "True" : "False");
    if (set->max_split_size < 0)
        printf("unlimited");
    else
        printf("%lld", (long long)set->max_split_size);
    printf(" garbage_collection_threshold=%g roundup_power2_divisions=",
           set->garbage_collection_threshold);
    bool any = false;
    for (int i = 0; i < MS_ALLOC_BANDS; i++) {
        if (set->roundup_power2_divisions[i] == 0)
            continue;
        printf("%s%luMiB:%u", any ? "," : "[", 1UL << i, set->roundup_power2_divisions[i]);
        any = true;
    }
    printf("%s\n", any ? "]" : "none");
}

static void print_counts(const ms_replay_device_result *r)
{
    static const char *const names[4] = {"segment_alloc", "segment_free", "segment_map",
                                         "segment_unmap"};
    uint64_t rec = 0, pred = 0, matched = 0;
    printf("  %-16s %10s %10s %10s\n", "segment events", "recorded", "predicted", "matched");
    for (int k = 0; k < 4; k++) {
        printf("  %-16s %10llu %10llu %10llu\n", names[k], (unsigned long long)r->seg[k].recorded,
               (unsigned long long)r->seg[k].predicted, (unsigned long long)r->seg[k].matched);
        rec += r->seg[k].recorded;
        pred += r->seg[k].predicted;
        matched += r->seg[k].matched;
    }
    printf("  agreement: %.2f%% (%llu of %llu recorded segment events predicted at the same "
           "event with the same size; %llu predicted that were not recorded)\n",
           r->agreement_pct, (unsigned long long)matched, (unsigned long long)rec,
           (unsigned long long)(pred - matched));
}

static void print_oom(const ms_replay_device_result *r)
{
    if (r->oom_recorded && r->oom_same_event)
        printf("  oom: recorded at event %zu, predicted at event %zu: reproduced\n",
               r->oom_recorded_index, r->oom_predicted_index);
    else if (r->oom_recorded && r->oom_predicted)
        printf("  oom: recorded at event %zu, predicted at event %zu: NOT at the same event\n",
               r->oom_recorded_index, r->oom_predicted_index);
    else if (r->oom_recorded)
        printf("  oom: recorded at event %zu, not reproduced\n", r->oom_recorded_index);
    else if (r->oom_predicted)
        printf("  oom: none recorded, predicted at event %zu\n", r->oom_predicted_index);
    else
        printf("  oom: none recorded, none predicted\n");
}

static void print_device(const ms_replay_device_result *r)
{
    char b1[32], b2[32];
    printf("\ndevice %d: %zu events, %zu replayed; starting state %s reserved, %s allocated\n",
           r->device, r->n_events, r->n_replayed, human(r->start_reserved, b1),
           human(r->start_allocated, b2));
    if (r->capacity_known)
        printf("  capacity: %llu bytes (%s)\n", (unsigned long long)r->capacity,
               human(r->capacity, b1));
    else
        printf("  capacity: unknown (no oom with device_free); replayed with %s\n",
               human(r->capacity, b1));
    print_counts(r);
    printf("  allocs at the recorded address: %llu of %llu (%.2f%%)\n",
           (unsigned long long)r->allocs_same_addr, (unsigned long long)r->allocs,
           r->allocs ? 100.0 * (double)r->allocs_same_addr / (double)r->allocs : 100.0);
    printf("  peak reserved: recorded %llu (%s), predicted %llu (%s): %s\n",
           (unsigned long long)r->peak_reserved_recorded, human(r->peak_reserved_recorded, b1),
           (unsigned long long)r->peak_reserved_predicted, human(r->peak_reserved_predicted, b2),
           r->peak_reserved_recorded == r->peak_reserved_predicted ? "equal" : "DIFFERENT");
    printf("  fragmentation at the predicted peak (reserved - allocated): %s\n",
           human(r->fragmentation_at_peak, b1));
    print_oom(r);
    if (r->release_points > 0)
        printf("  cache releases taken from the trace (empty_cache): %zu\n", r->release_points);
    printf("  first divergence: %s\n", r->first.found ? r->first.what : "none");
    if (r->first_placement.found)
        printf("  first alloc elsewhere: %s\n", r->first_placement.what);
}

static void whatif_row(const char *name, const ms_replay_result *runs, int n_runs, size_t dev,
                       int which)
{
    char b[32], cell[48];
    printf("  %-26s", name);
    for (int k = 0; k < n_runs; k++) {
        const ms_replay_device_result *r = &runs[k].dev[dev];
        uint64_t seg = 0;
        for (int j = 0; j < 4; j++)
            seg += r->seg[j].predicted;
        if (which == 4)
            snprintf(cell, sizeof cell, "%s%s", human(r->capacity, b),
                     r->capacity_known ? "" : " (assumed)");
        else if (which == 0)
            snprintf(cell, sizeof cell, "%s", human(r->peak_reserved_predicted, b));
        else if (which == 1)
            snprintf(cell, sizeof cell, "%s", human(r->fragmentation_at_peak, b));
        else if (which == 2)
            snprintf(cell, sizeof cell, "%llu", (unsigned long long)seg);
        else if (r->oom_predicted)
            snprintf(cell, sizeof cell, "at event %zu", r->oom_predicted_index);
        else
            snprintf(cell, sizeof cell, "%s", r->oom_recorded ? "none (avoided)" : "none");
        printf(" %-26s", cell);
    }
    printf("\n");
}

static void print_whatif(const ms_replay_result *runs, int n_runs, const replay_args *a)
{
    for (size_t i = 0; i < runs[0].n_devices; i++) {
        printf("\ndevice %d under other settings:\n  %-26s %-26s", runs[0].dev[i].device,
               "settings", "recorded");
        for (int k = 1; k < n_runs; k++)
            printf(" %-26s", a->whatif[k - 1]);
        printf("\n");
        whatif_row("peak reserved", runs, n_runs, i, 0);
        whatif_row("fragmentation at peak", runs, n_runs, i, 1);
        whatif_row("segment events", runs, n_runs, i, 2);
        whatif_row("oom", runs, n_runs, i, 3);
        whatif_row("capacity", runs, n_runs, i, 4);
        bool assumed = false;
        for (int k = 0; k < n_runs; k++)
            assumed |= !runs[k].dev[i].capacity_known;
        if (assumed)
            printf("  (assumed: the trace has no oom that tells the device's capacity, so the "
                   "replays ran with the capacity shown; an OOM there proves nothing about the "
                   "real device: pass --capacity BYTES)\n");
    }
}

/* The CSV is written to OUT.tmp and renamed once every replay is done, so
 * a failed run never leaves a file that looks whole. */
static int run_all(const replay_args *a, const ms_snapshot *s, ms_replay_result *runs,
                   int *n_done)
{
    char tmp[4096];
    if (a->csv != NULL && snprintf(tmp, sizeof tmp, "%s.tmp", a->csv) >= (int)sizeof tmp) {
        fprintf(stderr, "memsim replay: --csv: path too long\n");
        return 1;
    }
    if (a->csv != NULL)
        cli_tmp_file_arm(tmp); /* a long replay interrupted leaves no OUT.tmp */
    for (int k = 0; k <= a->n_whatif; k++) {
        ms_replay_options o;
        ms_diag d = {0};
        ms_replay_options_default(&o);
        o.flavour = a->flavour;
        o.device = a->device;
        o.capacity = a->capacity;
        o.csv_path = a->csv ? tmp : NULL;
        o.csv_append = k > 0;
        o.alloc_conf = k > 0 ? a->whatif[k - 1] : NULL;
        ms_status st = ms_replay_run(s, &o, &runs[k], &d);
        if (st != MS_OK) {
            fprintf(stderr, "memsim replay: %s: %s\n", a->trace,
                    d.msg[0] ? d.msg : ms_strerror(st));
            if (a->csv != NULL)
                cli_tmp_file_finish(tmp, a->csv, false);
            return 1;
        }
        *n_done = k + 1;
    }
    if (a->csv != NULL && cli_tmp_file_finish(tmp, a->csv, true) != 0) {
        fprintf(stderr, "memsim replay: %s: cannot write: %s\n", a->csv, strerror(errno));
        return 1;
    }
    return 0;
}

int cli_replay(int argc, char **argv)
{
    replay_args a;
    int rc = parse_args(argc, argv, &a);
    if (rc != 0)
        return rc < 0 ? 0 : rc;
    ms_snapshot *s = NULL;
    ms_diag d = {0};
    if (ms_snapshot_load(a.trace, &s, &d) != MS_OK) {
        fprintf(stderr, "memsim replay: %s\n", d.msg);
        return 1;
    }
    /* Without --flavour, the allocator the snapshot says wrote it. */
    const ms_snapshot_settings *set = ms_snapshot_settings_get(s);
    if (!a.flavour_given && set->has_flavour)
        a.flavour = set->flavour;
    ms_replay_result runs[MAX_WHATIF + 1];
    memset(runs, 0, sizeof runs);
    int n_runs = 0;
    rc = run_all(&a, s, runs, &n_runs);
    if (rc == 0) {
        printf("memsim replay: %s\n", a.trace);
        print_settings(s);
        for (size_t i = 0; i < runs[0].n_devices; i++)
            print_device(&runs[0].dev[i]);
        if (n_runs > 1)
            print_whatif(runs, n_runs, &a);
        if (runs[0].n_devices == 0)
            printf("no device has trace events: nothing to replay\n");
    }
    for (int k = 0; k < n_runs; k++)
        ms_replay_result_free(&runs[k]);
    ms_snapshot_free(s);
    return rc;
}
