/* backend_npu/: the thin runtime layer under backend.h on a real device.
 *
 * One table of functions per device runtime, chosen by configure as Redis's
 * ae.c picks ae_epoll.c or ae_kqueue.c: cuda.c (the CUDA runtime and cuBLAS,
 * found by default, loaded with dlopen on first use) and acl.c (Ascend ACL and aclnn, --with-ascend).  What sits
 * on top is runtime-neutral: device.c implements backend.h's ops, proxy.c
 * turns abstract kernels into work of the same shape, pinned.c caches pinned
 * host memory, group.c opens a device group.  Addresses are the runtime's
 * own pointers as integers: device pointers for device memory, host
 * pointers for pinned memory (which is what lets the executor's data check
 * read and write them).
 *
 * Every call returns MS_OK, MS_ENOMEM (out of device or pinned memory),
 * MS_EAGAIN (event_query/elapsed: not done yet), MS_EINVAL (a handle the
 * runtime rejects) or MS_EIO (anything else the runtime reports), with the
 * runtime's own message in last_error(). */
#ifndef MEMSIM_NPU_RUNTIME_H
#define MEMSIM_NPU_RUNTIME_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "memsim/backend.h"

/* One batched GEMM, C[i] = A[i] . B[i] for i < batch, each operand packed
 * (row-major m x k, k x n, m x n, batches one after another), in device
 * memory.  scratch: device memory the runtime's GEMM library may use as its
 * workspace (cuBLAS, aclnn), so that it allocates none of its own. */
typedef struct npu_gemm {
    ms_dtype dtype; /* fp32, fp16, bf16; fp8: E4M3 operands, a bf16 result */
    int64_t m, n, k, batch;
    uint64_t a, b, c;
    uint64_t scratch, scratch_bytes;
} npu_gemm;

typedef struct npu_runtime {
    const char *name;        /* the registry's: "cuda", "npu" */
    const char *device_noun; /* "CUDA device", "Ascend NPU" */
    /* A runtime loaded at run time (cuda.c: dlopen of libcudart and cuBLAS)
     * names itself ("CUDA runtime") and loads in load(), which group.c
     * calls before anything else: MS_ENOENT with the library and the
     * loader's reason in why when it cannot.  NULL: linked in (acl.c). */
    const char *runtime_noun;
    ms_status (*load)(char *why, size_t n_why);
    /* Devices this process can use; 0 (MS_OK) with the runtime's reason in
     * why (no driver, no device) when there are none. */
    ms_status (*device_count)(int *n, char *why, size_t n_why);
    ms_status (*open)(int ordinal, void **ctx, ms_diag *d);
    void (*close)(void *ctx);
    const char *(*last_error)(void *ctx);
    ms_status (*device_name)(void *ctx, char *buf, size_t n);
    ms_status (*mem_get_info)(void *ctx, uint64_t *free_bytes, uint64_t *total_bytes);
    ms_status (*malloc_device)(void *ctx, uint64_t bytes, uint64_t *addr);
    ms_status (*free_device)(void *ctx, uint64_t addr);
    ms_status (*memset_device)(void *ctx, uint64_t addr, int value, uint64_t bytes);
    ms_status (*malloc_host)(void *ctx, uint64_t bytes, uint64_t *addr);
    ms_status (*free_host)(void *ctx, uint64_t addr);
    /* backend.h's priority: lower is more urgent, 0 the executor's compute
     * stream; each runtime maps it into its own range, keeping the order. */
    ms_status (*stream_create)(void *ctx, int priority, void **s);
    ms_status (*stream_destroy)(void *ctx, void *s);
    ms_status (*stream_synchronize)(void *ctx, void *s);
    /* Events time work (event_elapsed_ns) and order streams. */
    ms_status (*event_create)(void *ctx, void **e);
    ms_status (*event_destroy)(void *ctx, void *e);
    ms_status (*event_record)(void *ctx, void *e, void *s);
    ms_status (*event_query)(void *ctx, void *e, bool *done);
    ms_status (*event_synchronize)(void *ctx, void *e);
    ms_status (*event_elapsed_ns)(void *ctx, void *start, void *end, int64_t *ns);
    ms_status (*stream_wait_event)(void *ctx, void *s, void *e);
    ms_status (*memcpy_async)(void *ctx, uint64_t dst, uint64_t src, uint64_t bytes,
                              ms_copy_kind kind, void *s);
    ms_status (*gemm)(void *ctx, const npu_gemm *g, void *s);
    /* Whether gemm() runs g in g's own dtype at g's shape (FP8 needs the
     * hardware and aligned shapes); the proxies run what it does not take
     * as fp16. */
    bool (*gemm_takes)(void *ctx, const npu_gemm *g);
    ms_status (*device_synchronize)(void *ctx);
} npu_runtime;

#ifdef MS_WITH_CUDA
extern const npu_runtime npu_runtime_cuda; /* cuda.c */
#endif
extern const npu_runtime npu_runtime_acl; /* acl.c (built --with-ascend, or in tests) */

/* ---- above the runtime (runtime-neutral) -------------------------------- */

/* proxy.c: the device memory the proxy kernels work in, allocated once per
 * device: operands of the GEMMs and both sides of the copies that stand
 * for memory-bound kernels and collectives, and the GEMM library's own
 * workspace. */
typedef struct npu_proxy {
    uint64_t base, bytes;
    uint64_t scratch, scratch_bytes; /* the GEMM library's part */
} npu_proxy;

#define NPU_PROXY_WORKSPACE_BYTES (256ull << 20)
#define NPU_GEMM_SCRATCH_BYTES (32ull << 20)

ms_status npu_proxy_init(const npu_runtime *rt, void *ctx, npu_proxy *p, ms_diag *d);
void npu_proxy_fini(const npu_runtime *rt, void *ctx, npu_proxy *p);
/* Issue the proxy of k on stream s: GEMMs of its shape and FLOPs (matmul,
 * attention), a copy of its bytes (memory-bound kernels), a device-local
 * copy of its buffer (collectives, p2p). */
ms_status npu_proxy_launch(const npu_runtime *rt, void *ctx, const npu_proxy *p, const ms_kernel *k,
                           void *s);
/* The dtype npu_proxy_launch runs a matmul k's GEMMs in (its first tile's:
 * k's own where the runtime takes it, else fp16). */
ms_dtype npu_proxy_matmul_dtype(const npu_runtime *rt, void *ctx, const npu_proxy *p,
                                const ms_kernel *k);
/* What npu_proxy_launch issues for k (for tests and docs): GEMM calls and
 * their FLOPs, copies and the bytes they read plus write. */
typedef struct npu_proxy_plan {
    uint64_t gemms;
    double gemm_flops;
    uint64_t copies;
    double copy_bytes_moved;
} npu_proxy_plan;
ms_status npu_proxy_describe(const npu_proxy *p, const ms_kernel *k, npu_proxy_plan *out);

/* pinned.c: a caching host allocator over the runtime's pinned memory, as
 * PyTorch's CachingHostAllocator: sizes rounded up to a power of two (at
 * least 4 KiB), freed blocks kept for the next request of their size (the
 * executor frees a pinned buffer only once the copies that use it are
 * done), all cached blocks released and the allocation retried when the
 * runtime runs out. */
typedef struct npu_pinned_block {
    uint64_t addr, size;
    bool in_use;
} npu_pinned_block;

typedef struct npu_pinned {
    npu_pinned_block *blocks; /* sorted by addr */
    size_t n, cap;
} npu_pinned;

ms_status npu_pinned_malloc(const npu_runtime *rt, void *ctx, npu_pinned *p, uint64_t bytes,
                            uint64_t *addr);
ms_status npu_pinned_free(npu_pinned *p, uint64_t addr);
/* Release every block to the runtime; returns the bytes that were still in
 * use (a leak of the caller's). */
uint64_t npu_pinned_release(const npu_runtime *rt, void *ctx, npu_pinned *p);

/* device.c: backend.h's ops on a runtime, one device. */
ms_status npu_device_open(const npu_runtime *rt, int ordinal, int device, ms_backend **out,
                          ms_diag *d);

/* group.c: a group of one device on a runtime (the registry's openers,
 * ms_npu_group_open_cuda and ms_npu_group_open_acl, call it). */
ms_status npu_group_open(const npu_runtime *rt, const ms_group_config *cfg, ms_device_group **out,
                         ms_diag *d);

#endif
