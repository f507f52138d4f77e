/* The hold model on the engine's heap: every event does nothing but schedule
 * its successor, so the rate is the heap's push and pop and the callback
 * dispatch, with no device model, allocator or host behind it.  That is the
 * ceiling a simulated op's handful of events can approach (issue 13 asks for
 * simulated ops/s of at least 20% of it, measured in the same run). */
#include "heap_rate.h"

#include <stdint.h>
#include <time.h>

#include "sim/sim.h"

typedef struct hold {
    uint64_t rng; /* xorshift64: deterministic delays, no libc state */
    size_t left;
} hold;

static int64_t next_delay(hold *h)
{
    h->rng ^= h->rng << 13;
    h->rng ^= h->rng >> 7;
    h->rng ^= h->rng << 17;
    return 1 + (int64_t)(h->rng & 1023);
}

static void on_event(ms_sim *sim, void *arg)
{
    hold *h = arg;
    if (h->left == 0)
        return;
    h->left--;
    int64_t now = 0;
    sim_now(sim, &now);
    sim_schedule(sim, now + next_delay(h), on_event, h);
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* One round: fill the queue to depth, then time `events` pops and pushes. */
static double one_round(size_t depth, size_t events)
{
    ms_sim *sim = NULL;
    if (sim_create(&sim) != MS_OK)
        return -1;
    hold h = {.rng = 0x9E3779B97F4A7C15ull, .left = events};
    for (size_t i = 0; i < depth; i++)
        sim_schedule(sim, next_delay(&h), on_event, &h);
    double t0 = now_s();
    sim_run(sim);
    double t = now_s() - t0;
    sim_destroy(sim);
    return t > 0 ? (double)(events + depth) / t : -1;
}

double bench_heap_rate(size_t depth, size_t events, int rounds)
{
    double best = -1;
    for (int r = 0; r < rounds; r++) {
        double rate = one_round(depth, events);
        if (rate > best)
            best = rate;
    }
    return best;
}
