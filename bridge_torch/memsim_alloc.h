/* libmemsim_alloc.so: PyTorch's pluggable-allocator pair backed by memsim's
 * caching allocator, and the calls memsim_torch makes through ctypes
 * (docs/torch.md).  cudaStream_t and aclrtStream are pointers: void * here,
 * so that nothing needs the runtime's headers. */
#ifndef MEMSIM_ALLOC_PLUGIN_H
#define MEMSIM_ALLOC_PLUGIN_H

#include <stddef.h>
#include <sys/types.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The pair: NULL when the request cannot be served (the reason, for an
 * out-of-memory PyTorch's own "CUDA out of memory. Tried to allocate ..."
 * text, from memsim_alloc_last_error). */
void *memsim_alloc(ssize_t size, int device, void *stream);
void memsim_free(void *ptr, ssize_t size, int device, void *stream);

/* The last error into buf (truncated to n); returns its full length. */
int memsim_alloc_last_error(char *buf, size_t n);
/* What the next requests are for, as the policy's pool hook sees them:
 * kind is a memsim tensor kind ("weight", "grad", "optimizer_state",
 * "activation", "temp", "comm_buffer"); forward turns borrowing from
 * lendable pools off.  0, or -1 for an unknown kind. */
int memsim_alloc_set_context(const char *kind, int persistent, int forward);
/* memory_stats() of a device: current allocated, reserved, peak allocated,
 * peak reserved bytes, and the number of requests that ran out of memory
 * (num_ooms).  0, or -1 when the device has no allocator yet. */
int memsim_alloc_stats(int device, unsigned long long out[5]);
/* Release cached blocks (torch.cuda.empty_cache for this allocator). */
int memsim_alloc_empty_cache(void);
/* Open devices on this runtime table (an npu_runtime of memsim's
 * backend_npu/runtime.h: the tests' host-memory double, or an embedder's
 * own runtime) instead of the one memsim was built with.  Only before the
 * first allocation: 0, or -1 once a device is open. */
int memsim_alloc_set_runtime(const void *runtime);
/* Release everything and finish the traces (the end of the job). */
int memsim_alloc_shutdown(void);

#ifdef __cplusplus
}
#endif
#endif
