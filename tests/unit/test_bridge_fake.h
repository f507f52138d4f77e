/* A host-memory double of the runtime layer (backend_npu/runtime.h) for
 * the PyTorch bridge's tests: device memory is host memory with a
 * capacity, streams and events are handles that are always done, and the
 * double counts what is live so a test can prove everything came back. */
#ifndef MEMSIM_TEST_BRIDGE_FAKE_H
#define MEMSIM_TEST_BRIDGE_FAKE_H

#include <stdint.h>

#include "backend_npu/runtime.h"

typedef struct bridge_fake_state {
    uint64_t capacity;
    uint64_t used;
    int live_allocs;
    int opens, closes;
    int mallocs, frees, syncs;
} bridge_fake_state;

/* The runtime table and its state (one per process, as a driver's). */
const npu_runtime *bridge_fake_runtime(void);
bridge_fake_state *bridge_fake(void);
void bridge_fake_reset(uint64_t capacity);

#endif
