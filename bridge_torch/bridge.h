/* bridge_torch/: memsim inside a PyTorch (or torch_npu) training job.
 *
 * libmemsim_alloc.so is a pluggable allocator
 * (torch.cuda.memory.CUDAPluggableAllocator, torch_npu's
 * NPUPluggableAllocator): every tensor's device memory comes from memsim's
 * caching allocator (lib/alloc) over real device segments that the runtime
 * layer (backend_npu/runtime.h) hands out, a Lua policy's `pool` hook picks
 * the pool, and every allocator event goes to a CSV trace that
 * `memsim replay` reads back.  This header is the part the plugin and the
 * tests share: one allocator per device over any runtime table (the tests
 * pass a host-memory double). */
#ifndef MEMSIM_BRIDGE_H
#define MEMSIM_BRIDGE_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "backend_npu/runtime.h"
#include "memsim/allocator.h"
#include "memsim/policy.h"

/* ---- torch_step.c ------------------------------------------------------ */

/* Load a policy (a path or a shipped name); lib_dir NULL: the shipped
 * policies_lua, where require() may read. */
ms_status bridge_policy_load(const char *policy, const char *lib_dir, ms_policy **out, ms_diag *d);

/* ---- bridge_device.c: backend.h's memory calls on a runtime ------------ */

/* An ms_backend for the allocator alone: device memory, the caller's own
 * streams (PyTorch's, wrapped as they appear) and synchronisation.  Events
 * (record_stream: the pluggable interface has none) and virtual memory
 * (expandable segments) answer MS_EUNSUPPORTED. */
ms_status bridge_device_open(const npu_runtime *rt, int ordinal, ms_backend **out, ms_diag *d);
/* The ms_stream standing for the runtime's stream handle (NULL: the legacy
 * default stream, id 0; others get 1, 2, ... as they first appear). */
ms_status bridge_device_stream(ms_backend *be, void *handle, ms_stream **out);
/* The runtime's message for the last failed call. */
const char *bridge_device_error(const ms_backend *be);

/* ---- bridge_trace.c: the CSV trace memsim replay reads ----------------- */

typedef struct bridge_trace {
    FILE *f;
    int64_t t0_ns;
    bool write_failed;
} bridge_trace;

ms_status bridge_trace_open(bridge_trace *t, const char *path, ms_diag *d);
/* One row action,addr,size,stream,time_us[,device_free] (lib/replay's CSV
 * form); an ms_alloc_observer. */
void bridge_trace_event(void *trace, const ms_alloc_event *ev);
ms_status bridge_trace_close(bridge_trace *t, const char *path, ms_diag *d);

/* ---- bridge_alloc.c: one device's allocator ---------------------------- */

typedef struct bridge_options {
    const char *trace_path; /* NULL: no trace */
    const char *policy;     /* NULL: no policy (every request in "default") */
    const char *policy_dir; /* require() directory; NULL: the installed policies_lua */
    const char *alloc_conf; /* PYTORCH_CUDA_ALLOC_CONF form; NULL: defaults */
    ms_alloc_flavour flavour;
} bridge_options;

/* What the pool hook is told about the next requests (the plugin's
 * caller knows what it is allocating: memsim_torch sets it). */
typedef struct bridge_context {
    ms_tensor_kind kind; /* default: activation */
    bool persistent;
    bool forward; /* borrowing from lendable pools is off in forward */
} bridge_context;

typedef struct bridge_alloc bridge_alloc;

ms_status bridge_alloc_open(const npu_runtime *rt, int ordinal, const bridge_options *o,
                            bridge_alloc **out, ms_diag *d);
/* size 0 gives address 0.  Out of memory: MS_ENOMEM with the allocator's
 * CUDA (or NPU) message in d, and an oom row in the trace. */
ms_status bridge_alloc_malloc(bridge_alloc *b, uint64_t size, void *stream, uint64_t *addr,
                              ms_diag *d);
ms_status bridge_alloc_free(bridge_alloc *b, uint64_t addr, ms_diag *d);
ms_status bridge_alloc_set_context(bridge_alloc *b, const bridge_context *c);
ms_status bridge_alloc_empty_cache(bridge_alloc *b);
ms_alloc_stats bridge_alloc_stats(const bridge_alloc *b);
/* Release the device memory and finish the trace; a write error of the
 * trace is reported here. */
ms_status bridge_alloc_close(bridge_alloc *b, ms_diag *d);

#endif
