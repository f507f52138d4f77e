/* The bare event rate of memsim's discrete-event engine (sim/engine.c): the
 * reference issue 13 measures simulation speed against. */
#ifndef MEMSIM_BENCH_HEAP_RATE_H
#define MEMSIM_BENCH_HEAP_RATE_H

#include <stddef.h>

/* Events per second of the engine's binary heap alone, best of `rounds`:
 * `depth` events pending at all times, each run re-schedules itself a
 * pseudo-random 1-1024 ns later (the classic "hold" model), `events` run per
 * round.  Returns a negative number when the engine cannot be created. */
double bench_heap_rate(size_t depth, size_t events, int rounds);

#endif
