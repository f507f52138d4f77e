/* A fake device for the allocator's tests and benchmark: device memory is a
 * bump allocator with a capacity, virtual reservations cost nothing, mapping
 * costs capacity page by page, and an event completes only once the test
 * finishes the work of its stream (fake_finish) or something synchronizes.
 * Every call is counted so tests can check what reached the device. */
#ifndef MEMSIM_TEST_ALLOCATOR_FAKE_H
#define MEMSIM_TEST_ALLOCATOR_FAKE_H

#include <stdint.h>

#include "memsim/backend.h"

#define FAKE_DEV_BASE (UINT64_C(1) << 32) /* first device malloc returns this */
#define FAKE_VA_BASE (UINT64_C(1) << 44)  /* first va_reserve returns this */
#define MiB (UINT64_C(1) << 20)
#define KiB (UINT64_C(1) << 10)

typedef struct fake_counts {
    int malloc_calls; /* including failed ones */
    int free_calls;
    int map_calls;
    int unmap_calls;
    int va_reserve_calls;
    int va_release_calls;
    int device_syncs;
    int stream_syncs;
    int event_syncs;
    int event_records;
    int events_live;
    uint64_t used; /* device bytes in use (malloc + mapped) */
} fake_counts;

/* A backend whose device has capacity bytes; device is its index. */
ms_backend *fake_open(uint64_t capacity, int device);
void fake_close(ms_backend *be);
ms_stream *fake_stream(ms_backend *be); /* streams get ids 0, 1, 2, ... */
void fake_finish(ms_backend *be, ms_stream *s); /* all work on s completes */
const fake_counts *fake_get_counts(const ms_backend *be);

/* splitmix64: deterministic pseudo-random numbers for generated request
 * streams, independent of the C library. */
static inline uint64_t fake_rand(uint64_t *state)
{
    uint64_t z = (*state += UINT64_C(0x9E3779B97F4A7C15));
    z = (z ^ (z >> 30)) * UINT64_C(0xBF58476D1CE4E5B9);
    z = (z ^ (z >> 27)) * UINT64_C(0x94D049BB133111EB);
    return z ^ (z >> 31);
}

#endif
