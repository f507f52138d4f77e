/* How fast memsim simulates a training step: wall time per simulated step
 * of every pipeline stage together, and simulated ops per second.
 *
 *   bench/bench_run SCENARIO [KEY=VALUE]... [--repeat N] [--no-heap]
 *
 * Each repetition loads nothing again: the scenario is parsed once, then the
 * whole run (program build, devices, steps) is timed with CLOCK_MONOTONIC. */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "memsim/run.h"
#include "memsim/scenario.h"
#include "heap_rate.h"

/* The hold model's queue depth: what the engine holds while it simulates
 * llama2-70B's four stages (3.9 pending events on average, 12 at most,
 * counted 2026-11-23; bench/README.md), so the yardstick is the heap at the
 * depth the runs really see, its fastest. */
enum { HEAP_DEPTH = 16, HEAP_EVENTS = 10000000 };

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: bench_run SCENARIO [KEY=VALUE]... [--repeat N] [--no-heap]\n");
        return 2;
    }
    const char *sets[64] = {0};
    size_t n_sets = 0;
    int repeat = 5;
    bool heap_too = true;
    for (int i = 2; i < argc; i++) {
        if (strcmp(argv[i], "--repeat") == 0 && i + 1 < argc)
            repeat = atoi(argv[++i]);
        else if (strcmp(argv[i], "--no-heap") == 0)
            heap_too = false; /* e.g. under callgrind, to count the run alone */
        else if (n_sets < 64)
            sets[n_sets++] = argv[i];
    }
    ms_diag d = {0};
    const ms_scenario *sc = NULL;
    if (ms_scenario_load(argv[1], sets, n_sets, &sc, &d) != MS_OK) {
        fprintf(stderr, "bench_run: %s\n", d.msg);
        return 1;
    }
    double best = 1e30;
    size_t ops = 0;
    int stages = 0, steps = 0;
    for (int r = 0; r < repeat; r++) {
        ms_run_options opt = {.record = false};
        ms_run *run = NULL;
        double t0 = now_s();
        ms_status st = ms_run_execute(sc, &opt, &run, &d);
        double t = now_s() - t0;
        if (st != MS_OK) {
            fprintf(stderr, "bench_run: %s\n", d.msg);
            ms_scenario_free(sc);
            return 1;
        }
        const ms_program_view *views;
        size_t n;
        views = ms_run_program_views(run, &n);
        const ms_run_summary *s;
        size_t ns;
        s = ms_run_summaries(run, &ns);
        ops = 0;
        for (size_t i = 0; i < n; i++)
            ops += views[i].n_ops;
        stages = (int)n;
        steps = sc->steps;
        if (s[0].oom)
            fprintf(stderr, "bench_run: note: the run ran out of memory at step %d\n",
                    s[0].oom_step);
        if (t < best)
            best = t;
        ms_run_free(run);
    }
    printf("scenario %s: %d stages, %zu ops per step, %d steps\n", sc->name, stages, ops, steps);
    double ops_rate = (double)ops * steps / best;
    printf("best of %d: %.1f ms per run, %.1f ms per simulated step, %.2f M simulated ops/s\n",
           repeat, best * 1e3, best * 1e3 / steps, ops_rate / 1e6);
    /* Issue 13's yardstick, taken in the same process right after the runs
     * so that both see the same machine load. */
    double heap = heap_too ? bench_heap_rate(HEAP_DEPTH, HEAP_EVENTS, 3) : -1;
    if (heap > 0)
        printf("bare engine heap (depth %d, best of 3): %.1f M events/s; simulated ops/s are "
               "%.1f%% of it\n",
               HEAP_DEPTH, heap / 1e6, 100.0 * ops_rate / heap);
    ms_scenario_free(sc);
    return 0;
}
