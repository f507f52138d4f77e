/* How fast memsim simulates a training step: wall time per simulated step
 * of every pipeline stage together, and simulated ops per second.
 *
 *   bench/bench_run SCENARIO [KEY=VALUE]... [--repeat N] [--no-heap]
 *                   [--no-fast-forward | --both]
 *
 * Each repetition loads nothing again: the scenario is parsed once, then the
 * whole run (program build, devices, steps) is timed with CLOCK_MONOTONIC,
 * and so is its planning (the policy's plan calls, from the run's progress).
 * Steps that repeat the step before exactly are not simulated again (lib/run
 * fast_forward.c) unless --no-fast-forward; --both times the run each way,
 * alternating within every repetition, so the ratio is of one machine state. */
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

typedef struct timing {
    double best, best_planning, best_setup;
    size_t ops;
    int stages, steps, repeated;
} timing;

/* The run's phases as they change (ms_run_options.progress), measured
 * directly rather than as the difference of two runs: the setup (the step
 * programs built, the devices, allocators and executors opened: what a run
 * pays before its first plan, whatever a fast-forward could skip) and the
 * time spent planning, every step's plan calls with their ctx:simulate
 * searches. */
typedef struct phase_clock {
    ms_run_phase phase;
    double at, planning, setup;
} phase_clock;

static void on_progress(void *user, const ms_run_progress *p)
{
    phase_clock *c = user;
    double t = now_s();
    if (c->phase == MS_RUN_PLANNING)
        c->planning += t - c->at;
    else if (c->phase == MS_RUN_SETUP)
        c->setup += t - c->at;
    c->phase = p->phase;
    c->at = t;
}

static int time_once(const ms_scenario *sc, bool fast_forward, timing *t)
{
    phase_clock clock = {.phase = MS_RUN_SETUP};
    ms_run_options opt = {.record = false,
                          .no_fast_forward = !fast_forward,
                          .progress = on_progress,
                          .progress_user = &clock};
    ms_run *run = NULL;
    ms_diag d = {0};
    double t0 = now_s();
    clock.at = t0;
    ms_status st = ms_run_execute(sc, &opt, &run, &d);
    double dt = now_s() - t0;
    on_progress(&clock, &(ms_run_progress){.phase = MS_RUN_DONE});
    if (clock.planning < t->best_planning)
        t->best_planning = clock.planning;
    if (clock.setup < t->best_setup)
        t->best_setup = clock.setup;
    if (st != MS_OK) {
        fprintf(stderr, "bench_run: %s\n", d.msg);
        return 1;
    }
    size_t n, ns;
    const ms_program_view *views = ms_run_program_views(run, &n);
    const ms_run_summary *s = ms_run_summaries(run, &ns);
    t->ops = 0;
    for (size_t i = 0; i < n; i++)
        t->ops += views[i].n_ops;
    t->stages = (int)n;
    t->steps = sc->steps;
    t->repeated = ms_run_notes_get(run)->fast_forwarded_steps;
    if (s[0].oom)
        fprintf(stderr, "bench_run: note: the run ran out of memory at step %d\n", s[0].oom_step);
    if (dt < t->best)
        t->best = dt;
    ms_run_free(run);
    return 0;
}

/* Ops per second over every step the run covered, simulated or repeated. */
static double print_timing(const char *mode, int repeat, const timing *t)
{
    double ops_rate = (double)t->ops * t->steps / t->best;
    printf("%s, best of %d: %.1f ms per run, %.1f ms per step (%d of %d steps fast-forwarded), "
           "%.2f M ops/s\n",
           mode, repeat, t->best * 1e3, t->best * 1e3 / t->steps, t->repeated, t->steps,
           ops_rate / 1e6);
    printf("%s, best of %d: %.1f ms planning (every step's plan calls, ctx:simulate searches "
           "included)\n",
           mode, repeat, t->best_planning * 1e3);
    printf("%s, best of %d: %.1f ms setup (step programs built, devices, allocators and "
           "executors opened)\n",
           mode, repeat, t->best_setup * 1e3);
    return ops_rate;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: bench_run SCENARIO [KEY=VALUE]... [--repeat N] [--no-heap] "
                        "[--no-fast-forward | --both]\n");
        return 2;
    }
    const char *sets[64] = {0};
    size_t n_sets = 0;
    int repeat = 5;
    bool heap_too = true, with_ff = true, without_ff = false;
    for (int i = 2; i < argc; i++) {
        if (strcmp(argv[i], "--repeat") == 0 && i + 1 < argc)
            repeat = atoi(argv[++i]);
        else if (strcmp(argv[i], "--no-heap") == 0)
            heap_too = false; /* e.g. under callgrind, to count the run alone */
        else if (strcmp(argv[i], "--no-fast-forward") == 0)
            with_ff = false, without_ff = true;
        else if (strcmp(argv[i], "--both") == 0)
            with_ff = without_ff = true;
        else if (n_sets < 64)
            sets[n_sets++] = argv[i];
    }
    ms_diag d = {0};
    const ms_scenario *sc = NULL;
    if (ms_scenario_load(argv[1], sets, n_sets, &sc, &d) != MS_OK) {
        fprintf(stderr, "bench_run: %s\n", d.msg);
        return 1;
    }
    timing on = {.best = 1e30, .best_planning = 1e30, .best_setup = 1e30};
    timing off = on;
    for (int r = 0; r < repeat; r++)
        if ((with_ff && time_once(sc, true, &on) != 0) ||
            (without_ff && time_once(sc, false, &off) != 0)) {
            ms_scenario_free(sc);
            return 1;
        }
    const timing *any = with_ff ? &on : &off;
    printf("scenario %s: %d stages, %zu ops per step, %d steps\n", sc->name, any->stages, any->ops,
           any->steps);
    double ops_rate = with_ff ? print_timing("fast-forward", repeat, &on) : 0;
    if (without_ff)
        ops_rate = print_timing("every step simulated", repeat, &off);
    if (with_ff && without_ff)
        printf("fast-forward takes %.3f of the time of simulating every step\n",
               on.best / off.best);
    /* Issue 13's yardstick, taken in the same process right after the runs
     * so that both see the same machine load; against the last mode printed. */
    double heap = heap_too ? bench_heap_rate(HEAP_DEPTH, HEAP_EVENTS, 3) : -1;
    if (heap > 0)
        printf("bare engine heap (depth %d, best of 3): %.1f M events/s; ops/s are "
               "%.1f%% of it\n",
               HEAP_DEPTH, heap / 1e6, 100.0 * ops_rate / heap);
    ms_scenario_free(sc);
    return 0;
}
