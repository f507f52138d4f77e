/* A test double of the CUDA runtime, cuBLAS and cuBLASLt calls memsim makes
 * (backend_npu/cuda_private.h's lists), built as one shared library that
 * backend_npu/cuda.c loads in place of all three (MEMSIM_CUDART,
 * MEMSIM_CUBLAS, MEMSIM_CUBLASLT).  Each entry point is defined with the
 * toolkit header's own prototype, so the calls cross the real ABI.
 *
 * As the ACL double (tests/acl_double/), on the machinery they share
 * (tests/runtime_double/): device memory is host memory with a capacity,
 * each stream is a thread of its own that runs its tasks in order (copies
 * move real bytes, events stamp the host clock, waits block the stream),
 * and every handle is counted so a test can check that the code under test
 * released everything (cuda_double.h).
 *
 * It is stricter than the libraries where that catches bugs: an operand, a
 * copy or a workspace outside a live allocation of the right kind, a GEMM
 * cuBLAS documents as invalid, an FP8 matmul that breaks cuBLASLt's FP8
 * rules, the legacy default stream (memsim names every stream it uses) or
 * a stream priority outside the device's range (CUDA would clamp it; cuda.c
 * maps into it) are refused and counted in `rejected`.  GEMMs compute
 * nothing: they zero their output, which touches every byte of it. */
#ifndef _POSIX_C_SOURCE
#define _POSIX_C_SOURCE 200809L
#endif
#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The project builds with -fvisibility=hidden, but cuda.c and the tests
 * find every function these headers declare with dlsym. */
#pragma GCC visibility push(default)
#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include "cuda_double.h"
#pragma GCC visibility pop

#include "runtime_double.h"

#define DBL_LEAST_PRIORITY 0 /* as an H100 answers */
#define DBL_GREATEST_PRIORITY (-5)
#define DBL_ALGO_MAGIC 0x6d656d73696d4c74ull /* "memsimLt" in an algo it made */

_Static_assert(CUDA_DOUBLE_H2D == (int)cudaMemcpyHostToDevice &&
                   CUDA_DOUBLE_D2H == (int)cudaMemcpyDeviceToHost &&
                   CUDA_DOUBLE_D2D == (int)cudaMemcpyDeviceToDevice,
               "cuda_double_copy mirrors cudaMemcpyKind");
_Static_assert(RD_H2H == (int)cudaMemcpyHostToHost && RD_H2D == (int)cudaMemcpyHostToDevice &&
                   RD_D2H == (int)cudaMemcpyDeviceToHost && RD_D2D == (int)cudaMemcpyDeviceToDevice,
               "rd_copy_kind mirrors cudaMemcpyKind");

/* Kinds of handle the double hands out and checks beyond streams and
 * events (runtime_double.h keeps those). */
typedef enum { K_BLAS, K_LT, K_DESC, K_LAYOUT, K_PREF, K_KINDS } dbl_kind;

typedef struct dbl_live {
    void *p;
    dbl_kind kind;
} dbl_live;

struct cublasContext {
    int device;
    cudaStream_t stream; /* NULL until cublasSetStream */
    void *workspace;     /* NULL: cuBLAS's own pool */
    size_t workspace_bytes;
};

struct cublasLtContext {
    int unused;
};

/* cuBLASLt's semi-opaque descriptors, each with what the double keeps of
 * it after: the handle the caller holds points at the first member.  The
 * fields have the types cublasLt.h documents for their attributes. */
typedef struct lt_desc {
    cublasLtMatmulDescOpaque_t opaque;
    int32_t compute, scale, transa, transb;
} lt_desc;

typedef struct lt_layout {
    cublasLtMatrixLayoutOpaque_t opaque;
    uint32_t type;
    int32_t order, batch;
    uint64_t rows, cols;
    int64_t ld, stride;
} lt_layout;

typedef struct lt_pref {
    cublasLtMatmulPreferenceOpaque_t opaque;
    uint64_t max_workspace;
} lt_pref;

static struct {
    rd_runtime rt; /* memory, streams, events and their counts */
    int cc_major, cc_minor;
    dbl_live *live; /* every other live handle */
    size_t n_live, cap_live;
    uint64_t n_kind[K_KINDS];
    cuda_double_stats st; /* what happened since cuda_double_configure */
    char fail_next[64];   /* cuda_double_fail_next */
} dbl = {.rt = RD_RUNTIME_INIT, .cc_major = 9, .cc_minor = 0};

/* CUDA's per-thread state: the current device (none until cudaSetDevice:
 * memsim must choose its device) and the last error. */
static _Thread_local int cur_device = -1;
static _Thread_local cudaError_t last_error = cudaSuccess;

/* ---- bookkeeping (lock held) --------------------------------------------- */

static void note_refusal(const char *fn, const char *why)
{
    dbl.st.rejected++;
    snprintf(dbl.st.why, sizeof dbl.st.why, "%s: %s", fn, why);
}

static cudaError_t rt_refuse(cudaError_t e, const char *fn, const char *why)
{
    note_refusal(fn, why);
    return e;
}

static cublasStatus_t blas_refuse(cublasStatus_t s, const char *fn, const char *why)
{
    note_refusal(fn, why);
    return s;
}

/* Whether fn is the armed fault: it fires once. */
static bool fault(const char *fn)
{
    if (strcmp(dbl.fail_next, fn) != 0)
        return false;
    dbl.fail_next[0] = '\0';
    dbl.st.faults_fired++;
    return true;
}

/* A runtime call's status, kept for cudaGetLastError (not-ready is not an
 * error there). */
static cudaError_t rt_ret(cudaError_t e)
{
    if (e != cudaSuccess && e != cudaErrorNotReady)
        last_error = e;
    return e;
}

/* The body of an entry point: `call` under the lock, unless the armed fault
 * is this entry point's. */
#define RT_CALL(call)                                                                              \
    do {                                                                                           \
        pthread_mutex_lock(&dbl.rt.mu);                                                            \
        cudaError_t e_ = fault(__func__) ? cudaErrorMemoryAllocation : (call);                     \
        pthread_mutex_unlock(&dbl.rt.mu);                                                          \
        return rt_ret(e_);                                                                         \
    } while (0)
#define BLAS_CALL(call)                                                                            \
    do {                                                                                           \
        pthread_mutex_lock(&dbl.rt.mu);                                                            \
        cublasStatus_t s_ = fault(__func__) ? CUBLAS_STATUS_ALLOC_FAILED : (call);                 \
        pthread_mutex_unlock(&dbl.rt.mu);                                                          \
        return s_;                                                                                 \
    } while (0)

static bool live_add(void *p, dbl_kind kind)
{
    if (dbl.n_live == dbl.cap_live) {
        size_t cap = dbl.cap_live ? 2 * dbl.cap_live : 64;
        dbl_live *v = realloc(dbl.live, cap * sizeof *v);
        if (v == NULL)
            return false;
        dbl.live = v;
        dbl.cap_live = cap;
    }
    dbl.live[dbl.n_live++] = (dbl_live){p, kind};
    dbl.n_kind[kind]++;
    return true;
}

static ptrdiff_t live_index(const void *p, dbl_kind kind)
{
    for (size_t i = 0; p != NULL && i < dbl.n_live; i++)
        if (dbl.live[i].p == p && dbl.live[i].kind == kind)
            return (ptrdiff_t)i;
    return -1;
}

static bool is_live(const void *p, dbl_kind kind)
{
    return live_index(p, kind) >= 0;
}

/* Forget p, which is live; the registry's memory goes with its last entry,
 * so that a process that released everything holds nothing of the double. */
static void live_drop(const void *p, dbl_kind kind)
{
    ptrdiff_t i = live_index(p, kind);
    dbl.live[i] = dbl.live[--dbl.n_live];
    dbl.n_kind[kind]--;
    if (dbl.n_live == 0) {
        free(dbl.live);
        dbl.live = NULL;
        dbl.cap_live = 0;
    }
}

/* A zeroed object of `size` bytes, live as `kind`; NULL: out of memory. */
static void *new_live(size_t size, dbl_kind kind)
{
    void *p = calloc(1, size);
    if (p != NULL && !live_add(p, kind)) {
        free(p);
        p = NULL;
    }
    return p;
}

static bool have_device(void)
{
    return rd_device_ok(&dbl.rt, cur_device);
}

/* The double's objects behind the toolkit's stream and event handles. */
static rd_stream *as_stream(cudaStream_t s)
{
    return (rd_stream *)s;
}

static rd_event *as_event(cudaEvent_t e)
{
    return (rd_event *)e;
}

static bool stream_live(cudaStream_t s)
{
    return rd_stream_live(&dbl.rt, s);
}

static bool event_live(cudaEvent_t e)
{
    return rd_event_live(&dbl.rt, e);
}

/* ---- control (cuda_double.h) --------------------------------------------- */

void cuda_double_configure(int n_devices, uint64_t hbm_bytes, int cc_major, int cc_minor)
{
    pthread_mutex_lock(&dbl.rt.mu);
    rd_configure(&dbl.rt, n_devices, hbm_bytes);
    dbl.cc_major = cc_major;
    dbl.cc_minor = cc_minor;
    memset(&dbl.st, 0, sizeof dbl.st);
    dbl.fail_next[0] = '\0';
    pthread_mutex_unlock(&dbl.rt.mu);
}

cuda_double_stats cuda_double_get_stats(void)
{
    pthread_mutex_lock(&dbl.rt.mu);
    cuda_double_stats s = dbl.st;
    RD_COUNTS_INTO(s, dbl.rt.count);
    s.blas_handles = dbl.n_kind[K_BLAS];
    s.lt_handles = dbl.n_kind[K_LT];
    s.lt_descs = dbl.n_kind[K_DESC];
    s.lt_layouts = dbl.n_kind[K_LAYOUT];
    s.lt_prefs = dbl.n_kind[K_PREF];
    pthread_mutex_unlock(&dbl.rt.mu);
    return s;
}

void cuda_double_set_jitter(unsigned max_us, unsigned seed)
{
    rd_set_jitter(&dbl.rt, max_us, seed);
}

void cuda_double_set_copy_delay(cuda_double_copy kind, unsigned us)
{
    rd_set_copy_delay(&dbl.rt, (rd_copy_kind)kind, us);
}

void cuda_double_fail_next(const char *symbol)
{
    pthread_mutex_lock(&dbl.rt.mu);
    snprintf(dbl.fail_next, sizeof dbl.fail_next, "%s", symbol != NULL ? symbol : "");
    pthread_mutex_unlock(&dbl.rt.mu);
}

/* CUDA_DOUBLE_JITTER=MAX_US[:SEED]: jitter from the moment cuda.c loads
 * the double, for a run of the memsim command. */
__attribute__((constructor)) static void jitter_from_env(void)
{
    rd_jitter_from_env(&dbl.rt, "CUDA_DOUBLE_JITTER");
}

/* ---- devices and errors -------------------------------------------------- */

static const struct {
    cudaError_t e;
    const char *name, *text;
} rt_errors[] = {
    {cudaSuccess, "cudaSuccess", "no error"},
    {cudaErrorInvalidValue, "cudaErrorInvalidValue", "invalid argument"},
    {cudaErrorMemoryAllocation, "cudaErrorMemoryAllocation", "out of memory"},
    {cudaErrorInvalidMemcpyDirection, "cudaErrorInvalidMemcpyDirection",
     "invalid copy direction for memcpy"},
    {cudaErrorNoDevice, "cudaErrorNoDevice", "no CUDA-capable device is detected"},
    {cudaErrorInvalidDevice, "cudaErrorInvalidDevice", "invalid device ordinal"},
    {cudaErrorInvalidResourceHandle, "cudaErrorInvalidResourceHandle", "invalid resource handle"},
    {cudaErrorNotReady, "cudaErrorNotReady", "device not ready"},
};

const char *cudaGetErrorName(cudaError_t error)
{
    for (size_t i = 0; i < sizeof rt_errors / sizeof rt_errors[0]; i++)
        if (rt_errors[i].e == error)
            return rt_errors[i].name;
    return "unrecognized error code";
}

const char *cudaGetErrorString(cudaError_t error)
{
    for (size_t i = 0; i < sizeof rt_errors / sizeof rt_errors[0]; i++)
        if (rt_errors[i].e == error)
            return rt_errors[i].text;
    return "unrecognized error code";
}

cudaError_t cudaGetLastError(void)
{
    cudaError_t e = last_error;
    last_error = cudaSuccess;
    return e;
}

static cudaError_t device_count_locked(int *count)
{
    if (count == NULL)
        return rt_refuse(cudaErrorInvalidValue, "cudaGetDeviceCount", "count is NULL");
    *count = dbl.rt.n_devices;
    return dbl.rt.n_devices > 0 ? cudaSuccess : cudaErrorNoDevice;
}

cudaError_t cudaGetDeviceCount(int *count)
{
    RT_CALL(device_count_locked(count));
}

static cudaError_t set_device_locked(int device)
{
    if (!rd_device_ok(&dbl.rt, device))
        return rt_refuse(cudaErrorInvalidDevice, "cudaSetDevice", "no such device");
    cur_device = device;
    return cudaSuccess;
}

cudaError_t cudaSetDevice(int device)
{
    RT_CALL(set_device_locked(device));
}

static cudaError_t properties_locked(struct cudaDeviceProp *prop, int device)
{
    if (prop == NULL)
        return rt_refuse(cudaErrorInvalidValue, "cudaGetDeviceProperties", "prop is NULL");
    if (!rd_device_ok(&dbl.rt, device))
        return rt_refuse(cudaErrorInvalidDevice, "cudaGetDeviceProperties", "no such device");
    memset(prop, 0, sizeof *prop);
    snprintf(prop->name, sizeof prop->name, "memsim CUDA double");
    prop->totalGlobalMem = dbl.rt.hbm;
    prop->major = dbl.cc_major;
    prop->minor = dbl.cc_minor;
    prop->warpSize = 32;
    prop->multiProcessorCount = 1;
    return cudaSuccess;
}

cudaError_t cudaGetDeviceProperties(struct cudaDeviceProp *prop, int device)
{
    RT_CALL(properties_locked(prop, device));
}

static cudaError_t priority_range_locked(int *leastPriority, int *greatestPriority)
{
    if (!have_device())
        return rt_refuse(cudaErrorInvalidDevice, "cudaDeviceGetStreamPriorityRange",
                         "no device set");
    if (leastPriority != NULL)
        *leastPriority = DBL_LEAST_PRIORITY;
    if (greatestPriority != NULL)
        *greatestPriority = DBL_GREATEST_PRIORITY;
    return cudaSuccess;
}

cudaError_t cudaDeviceGetStreamPriorityRange(int *leastPriority, int *greatestPriority)
{
    RT_CALL(priority_range_locked(leastPriority, greatestPriority));
}

/* ---- memory -------------------------------------------------------------- */

static cudaError_t malloc_locked(void **devPtr, size_t size)
{
    if (devPtr == NULL || !have_device())
        return rt_refuse(cudaErrorInvalidValue, "cudaMalloc", "devPtr is NULL or no device set");
    *devPtr = NULL;
    if (size == 0)
        return cudaSuccess;
    return rd_alloc(&dbl.rt, devPtr, size, cur_device) ? cudaSuccess : cudaErrorMemoryAllocation;
}

cudaError_t cudaMalloc(void **devPtr, size_t size)
{
    RT_CALL(malloc_locked(devPtr, size));
}

/* cudaFree may synchronise (cuda_runtime_api.h): here it always does, the
 * pointer's device, so that no queued task writes freed memory.  Any
 * device's pointer, whichever is current (unified addressing). */
static cudaError_t free_locked(void *devPtr)
{
    if (devPtr == NULL)
        return cudaSuccess;
    rd_block **pp = rd_block_at(&dbl.rt, devPtr, RD_ANY_DEVICE);
    if (pp == NULL)
        return rt_refuse(cudaErrorInvalidValue, "cudaFree", "not a live cudaMalloc allocation");
    rd_device_sync(&dbl.rt, (*pp)->device);
    if ((pp = rd_block_at(&dbl.rt, devPtr, RD_ANY_DEVICE)) == NULL) /* freed meanwhile */
        return rt_refuse(cudaErrorInvalidValue, "cudaFree", "not a live cudaMalloc allocation");
    rd_free(&dbl.rt, pp);
    return cudaSuccess;
}

cudaError_t cudaFree(void *devPtr)
{
    RT_CALL(free_locked(devPtr));
}

/* cudaMemset runs on the legacy default stream, which memsim's non-blocking
 * streams do not wait for: synchronous here, as cuda.c follows it with a
 * cudaDeviceSynchronize. */
static cudaError_t memset_locked(void *devPtr, int value, size_t count)
{
    if (!have_device() || rd_block_holding(&dbl.rt, devPtr, count, cur_device) == NULL)
        return rt_refuse(cudaErrorInvalidValue, "cudaMemset",
                         "not inside a live allocation of the current device");
    memset(devPtr, value, count);
    return cudaSuccess;
}

cudaError_t cudaMemset(void *devPtr, int value, size_t count)
{
    RT_CALL(memset_locked(devPtr, value, count));
}

static cudaError_t mem_info_locked(size_t *free_bytes, size_t *total)
{
    if (free_bytes == NULL || total == NULL || !have_device())
        return rt_refuse(cudaErrorInvalidValue, "cudaMemGetInfo",
                         "a NULL argument or no device set");
    *free_bytes = rd_free_bytes(&dbl.rt, cur_device);
    *total = dbl.rt.hbm;
    return cudaSuccess;
}

cudaError_t cudaMemGetInfo(size_t *free_bytes, size_t *total)
{
    RT_CALL(mem_info_locked(free_bytes, total));
}

static cudaError_t host_alloc_locked(void **pHost, size_t size, unsigned int flags)
{
    const unsigned known = cudaHostAllocPortable | cudaHostAllocMapped | cudaHostAllocWriteCombined;
    if (pHost == NULL || (flags & ~known) != 0)
        return rt_refuse(cudaErrorInvalidValue, "cudaHostAlloc", "pHost is NULL or unknown flags");
    *pHost = NULL;
    if (size == 0)
        return cudaSuccess;
    return rd_alloc(&dbl.rt, pHost, size, RD_HOST) ? cudaSuccess : cudaErrorMemoryAllocation;
}

cudaError_t cudaHostAlloc(void **pHost, size_t size, unsigned int flags)
{
    RT_CALL(host_alloc_locked(pHost, size, flags));
}

/* Synchronises, as cudaFree: any device's stream may be copying it. */
static cudaError_t free_host_locked(void *ptr)
{
    if (ptr == NULL)
        return cudaSuccess;
    rd_device_sync(&dbl.rt, RD_ANY_DEVICE);
    rd_block **pp = rd_block_at(&dbl.rt, ptr, RD_HOST);
    if (pp == NULL)
        return rt_refuse(cudaErrorInvalidValue, "cudaFreeHost", "not a live cudaHostAlloc block");
    rd_free(&dbl.rt, pp);
    return cudaSuccess;
}

cudaError_t cudaFreeHost(void *ptr)
{
    RT_CALL(free_host_locked(ptr));
}

/* ---- streams ------------------------------------------------------------- */

static cudaError_t stream_create_locked(cudaStream_t *pStream, unsigned int flags, int priority)
{
    const char *fn = "cudaStreamCreateWithPriority";
    if (pStream == NULL || !have_device() || flags > cudaStreamNonBlocking)
        return rt_refuse(cudaErrorInvalidValue, fn, "pStream is NULL, no device or bad flags");
    if (priority < DBL_GREATEST_PRIORITY || priority > DBL_LEAST_PRIORITY)
        return rt_refuse(cudaErrorInvalidValue, fn,
                         "priority outside cudaDeviceGetStreamPriorityRange's range");
    /* In range, the priority changes nothing here: the double's streams are
     * threads the host schedules. */
    rd_stream *s = calloc(1, sizeof *s);
    if (s == NULL || !rd_stream_start(&dbl.rt, s, cur_device)) {
        free(s);
        return cudaErrorMemoryAllocation;
    }
    *pStream = (cudaStream_t)s;
    return cudaSuccess;
}

cudaError_t cudaStreamCreateWithPriority(cudaStream_t *pStream, unsigned int flags, int priority)
{
    RT_CALL(stream_create_locked(pStream, flags, priority));
}

/* Finish its work, stop its thread, free it.  (cudaStreamDestroy returns
 * at once and lets the work finish; waiting here is the same to a caller
 * that does not look at the clock.) */
static cudaError_t stream_destroy_locked(cudaStream_t stream)
{
    if (!stream_live(stream))
        return rt_refuse(cudaErrorInvalidResourceHandle, "cudaStreamDestroy", "not a live stream");
    rd_stream_stop(&dbl.rt, as_stream(stream));
    free(stream);
    return cudaSuccess;
}

cudaError_t cudaStreamDestroy(cudaStream_t stream)
{
    RT_CALL(stream_destroy_locked(stream));
}

static cudaError_t stream_sync_locked(cudaStream_t stream)
{
    if (!stream_live(stream))
        return rt_refuse(cudaErrorInvalidResourceHandle, "cudaStreamSynchronize",
                         "not a live stream (the double has no legacy default stream)");
    rd_stream_sync(&dbl.rt, as_stream(stream));
    return cudaSuccess;
}

cudaError_t cudaStreamSynchronize(cudaStream_t stream)
{
    RT_CALL(stream_sync_locked(stream));
}

static cudaError_t device_sync_locked(void)
{
    if (!have_device())
        return rt_refuse(cudaErrorInvalidDevice, "cudaDeviceSynchronize", "no device set");
    rd_device_sync(&dbl.rt, cur_device);
    return cudaSuccess;
}

cudaError_t cudaDeviceSynchronize(void)
{
    RT_CALL(device_sync_locked());
}

/* ---- events -------------------------------------------------------------- */

static cudaError_t event_create_locked(cudaEvent_t *event)
{
    if (event == NULL || !have_device())
        return rt_refuse(cudaErrorInvalidValue, "cudaEventCreate", "event is NULL or no device");
    rd_event *e = rd_event_create(&dbl.rt, cur_device);
    if (e == NULL)
        return cudaErrorMemoryAllocation;
    *event = (cudaEvent_t)e;
    return cudaSuccess;
}

cudaError_t cudaEventCreate(cudaEvent_t *event)
{
    RT_CALL(event_create_locked(event));
}

/* Returns at once; a record or wait still queued frees it when it runs. */
static cudaError_t event_destroy_locked(cudaEvent_t event)
{
    if (!event_live(event))
        return rt_refuse(cudaErrorInvalidResourceHandle, "cudaEventDestroy", "not a live event");
    rd_event_destroy(&dbl.rt, as_event(event));
    return cudaSuccess;
}

cudaError_t cudaEventDestroy(cudaEvent_t event)
{
    RT_CALL(event_destroy_locked(event));
}

static cudaError_t event_record_locked(cudaEvent_t event, cudaStream_t stream)
{
    const char *fn = "cudaEventRecord";
    if (!event_live(event) || !stream_live(stream))
        return rt_refuse(cudaErrorInvalidResourceHandle, fn,
                         "not a live event and stream (the double has no legacy default stream)");
    if (as_event(event)->device != as_stream(stream)->device)
        return rt_refuse(cudaErrorInvalidResourceHandle, fn, "event and stream on two devices");
    return rd_enqueue_record(&dbl.rt, as_stream(stream), as_event(event))
               ? cudaSuccess
               : cudaErrorMemoryAllocation;
}

cudaError_t cudaEventRecord(cudaEvent_t event, cudaStream_t stream)
{
    RT_CALL(event_record_locked(event, stream));
}

/* Never recorded: complete, as CUDA says. */
static cudaError_t event_query_locked(cudaEvent_t event)
{
    if (!event_live(event))
        return rt_refuse(cudaErrorInvalidResourceHandle, "cudaEventQuery", "not a live event");
    return rd_event_complete(as_event(event)) ? cudaSuccess : cudaErrorNotReady;
}

cudaError_t cudaEventQuery(cudaEvent_t event)
{
    RT_CALL(event_query_locked(event));
}

static cudaError_t event_sync_locked(cudaEvent_t event)
{
    if (!event_live(event))
        return rt_refuse(cudaErrorInvalidResourceHandle, "cudaEventSynchronize",
                         "not a live event");
    rd_event_sync(&dbl.rt, as_event(event));
    return cudaSuccess;
}

cudaError_t cudaEventSynchronize(cudaEvent_t event)
{
    RT_CALL(event_sync_locked(event));
}

static cudaError_t elapsed_locked(float *ms, cudaEvent_t start, cudaEvent_t end)
{
    const char *fn = "cudaEventElapsedTime";
    if (ms == NULL)
        return rt_refuse(cudaErrorInvalidValue, fn, "ms is NULL");
    if (!event_live(start) || !event_live(end))
        return rt_refuse(cudaErrorInvalidResourceHandle, fn, "an event is not live");
    const rd_event *a = as_event(start), *b = as_event(end);
    if (a->issued == 0 || b->issued == 0)
        return rt_refuse(cudaErrorInvalidResourceHandle, fn, "an event is not recorded");
    if (a->device != b->device)
        return rt_refuse(cudaErrorInvalidResourceHandle, fn, "events of two devices");
    return rd_elapsed_ms(a, b, ms) ? cudaSuccess : cudaErrorNotReady;
}

cudaError_t cudaEventElapsedTime(float *ms, cudaEvent_t start, cudaEvent_t end)
{
    RT_CALL(elapsed_locked(ms, start, end));
}

static cudaError_t wait_event_locked(cudaStream_t stream, cudaEvent_t event, unsigned int flags)
{
    if (!event_live(event) || !stream_live(stream))
        return rt_refuse(cudaErrorInvalidResourceHandle, "cudaStreamWaitEvent",
                         "not a live event and stream (the double has no legacy default stream)");
    if (flags != cudaEventWaitDefault)
        return rt_refuse(cudaErrorInvalidValue, "cudaStreamWaitEvent", "unknown flags");
    return rd_enqueue_wait(&dbl.rt, as_stream(stream), as_event(event)) ? cudaSuccess
                                                                        : cudaErrorMemoryAllocation;
}

cudaError_t cudaStreamWaitEvent(cudaStream_t stream, cudaEvent_t event, unsigned int flags)
{
    RT_CALL(wait_event_locked(stream, event, flags));
}

/* ---- copies -------------------------------------------------------------- */

/* Each side in a live allocation of the kind named: pinned host memory or
 * the stream's device. */
static cudaError_t memcpy_locked(void *dst, const void *src, size_t count, enum cudaMemcpyKind kind,
                                 cudaStream_t stream)
{
    const char *fn = "cudaMemcpyAsync";
    if (!stream_live(stream))
        return rt_refuse(cudaErrorInvalidResourceHandle, fn,
                         "not a live stream (the double has no legacy default stream)");
    if (kind != cudaMemcpyHostToDevice && kind != cudaMemcpyDeviceToHost &&
        kind != cudaMemcpyDeviceToDevice)
        return rt_refuse(cudaErrorInvalidMemcpyDirection, fn, "not H2D, D2H or D2D");
    rd_stream *s = as_stream(stream);
    if (!rd_copy_sides_live(&dbl.rt, dst, src, count, (rd_copy_kind)kind, s->device))
        return rt_refuse(cudaErrorInvalidValue, fn,
                         "a side is not inside a live allocation of the kind named");
    return rd_enqueue_copy(&dbl.rt, s, dst, src, count, (rd_copy_kind)kind)
               ? cudaSuccess
               : cudaErrorMemoryAllocation;
}

cudaError_t cudaMemcpyAsync(void *dst, const void *src, size_t count, enum cudaMemcpyKind kind,
                            cudaStream_t stream)
{
    RT_CALL(memcpy_locked(dst, src, count, kind, stream));
}

/* ---- operands of GEMMs --------------------------------------------------- */

static size_t type_bytes(cudaDataType t)
{
    switch (t) {
    case CUDA_R_32F: return 4;
    case CUDA_R_16F:
    case CUDA_R_16BF: return 2;
    case CUDA_R_8F_E4M3:
    case CUDA_R_8F_E5M2: return 1;
    default: return 0;
    }
}

static cuda_double_type type_index(cudaDataType t)
{
    return t == CUDA_R_32F    ? CUDA_DOUBLE_FP32
           : t == CUDA_R_16F  ? CUDA_DOUBLE_FP16
           : t == CUDA_R_16BF ? CUDA_DOUBLE_BF16
                              : CUDA_DOUBLE_FP8;
}

/* A column-major operand: `batch` matrices of rows x cols, ld elements from
 * one column to the next and stride from one matrix to the next. */
typedef struct operand {
    const void *p;
    cudaDataType type;
    uint64_t rows, cols;
    int64_t ld, stride, batch;
} operand;

/* Bytes from its first element to past its last (what the library reads
 * or writes); false if that overflows. */
static bool operand_bytes(const operand *o, size_t *out)
{
    uint64_t n = 0, col = 0, mat = 0;
    *out = 0;
    if (o->rows == 0 || o->cols == 0 || o->batch <= 0)
        return true;
    if (__builtin_mul_overflow((uint64_t)o->ld, o->cols - 1, &col) ||
        __builtin_mul_overflow((uint64_t)o->stride, (uint64_t)o->batch - 1, &mat) ||
        __builtin_add_overflow(col, mat, &n) || __builtin_add_overflow(n, o->rows, &n) ||
        __builtin_mul_overflow(n, (uint64_t)type_bytes(o->type), &n) || n > SIZE_MAX)
        return false;
    *out = (size_t)n;
    return true;
}

/* Whether all of o lies in one live allocation of device. */
static bool operand_live(const operand *o, int device)
{
    size_t n = 0;
    return o->p != NULL && operand_bytes(o, &n) &&
           rd_block_holding(&dbl.rt, o->p, n, device) != NULL;
}

/* Queue the write of o's bytes (a GEMM's output) on s. */
static bool enqueue_output(cudaStream_t s, const operand *o)
{
    size_t n = 0;
    operand_bytes(o, &n);
    return rd_enqueue_fill(&dbl.rt, as_stream(s), (void *)(uintptr_t)o->p, n);
}

/* ---- cuBLAS -------------------------------------------------------------- */

static const struct {
    cublasStatus_t s;
    const char *text;
} blas_statuses[] = {
    {CUBLAS_STATUS_SUCCESS, "success"},
    {CUBLAS_STATUS_NOT_INITIALIZED, "the library was not initialized"},
    {CUBLAS_STATUS_ALLOC_FAILED, "the resource allocation failed"},
    {CUBLAS_STATUS_INVALID_VALUE, "an invalid numeric value was used as an argument"},
    {CUBLAS_STATUS_ARCH_MISMATCH, "an absent device architectural feature is required"},
    {CUBLAS_STATUS_NOT_SUPPORTED, "the functionality requested is not supported"},
};

static const char *blas_text(cublasStatus_t status)
{
    for (size_t i = 0; i < sizeof blas_statuses / sizeof blas_statuses[0]; i++)
        if (blas_statuses[i].s == status)
            return blas_statuses[i].text;
    return "unknown error";
}

const char *cublasGetStatusString(cublasStatus_t status)
{
    return blas_text(status);
}

static cublasStatus_t blas_create_locked(cublasHandle_t *handle)
{
    if (handle == NULL || !have_device())
        return blas_refuse(CUBLAS_STATUS_INVALID_VALUE, "cublasCreate_v2",
                           "handle is NULL or no device set");
    struct cublasContext *h = new_live(sizeof *h, K_BLAS);
    if (h == NULL)
        return CUBLAS_STATUS_ALLOC_FAILED;
    h->device = cur_device;
    *handle = h;
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasCreate_v2(cublasHandle_t *handle)
{
    BLAS_CALL(blas_create_locked(handle));
}

/* cublasDestroy synchronises the device (cuBLAS documentation). */
static cublasStatus_t blas_destroy_locked(cublasHandle_t handle)
{
    if (!is_live(handle, K_BLAS))
        return blas_refuse(CUBLAS_STATUS_NOT_INITIALIZED, "cublasDestroy_v2", "not a live handle");
    rd_device_sync(&dbl.rt, handle->device);
    live_drop(handle, K_BLAS);
    free(handle);
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasDestroy_v2(cublasHandle_t handle)
{
    BLAS_CALL(blas_destroy_locked(handle));
}

/* cublasSetStream resets the workspace to cuBLAS's own pool (cuBLAS
 * documentation): a caller that wants its own sets it again. */
static cublasStatus_t blas_set_stream_locked(cublasHandle_t handle, cudaStream_t stream)
{
    const char *fn = "cublasSetStream_v2";
    if (!is_live(handle, K_BLAS))
        return blas_refuse(CUBLAS_STATUS_NOT_INITIALIZED, fn, "not a live handle");
    if (!stream_live(stream) || as_stream(stream)->device != handle->device)
        return blas_refuse(CUBLAS_STATUS_INVALID_VALUE, fn,
                           "not a live stream of the handle's device (the double has no legacy "
                           "default stream)");
    handle->stream = stream;
    handle->workspace = NULL;
    handle->workspace_bytes = 0;
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasSetStream_v2(cublasHandle_t handle, cudaStream_t streamId)
{
    BLAS_CALL(blas_set_stream_locked(handle, streamId));
}

/* The workspace must be 256-byte aligned (cuBLAS documentation) device
 * memory of the handle's device. */
static cublasStatus_t blas_set_workspace_locked(cublasHandle_t handle, void *workspace,
                                                size_t bytes)
{
    const char *fn = "cublasSetWorkspace_v2";
    if (!is_live(handle, K_BLAS))
        return blas_refuse(CUBLAS_STATUS_NOT_INITIALIZED, fn, "not a live handle");
    if ((uintptr_t)workspace % 256 != 0 ||
        (bytes > 0 && rd_block_holding(&dbl.rt, workspace, bytes, handle->device) == NULL))
        return blas_refuse(CUBLAS_STATUS_INVALID_VALUE, fn,
                           "not 256-byte aligned or not inside a live device allocation");
    handle->workspace = bytes > 0 ? workspace : NULL;
    handle->workspace_bytes = bytes;
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasSetWorkspace_v2(cublasHandle_t handle, void *workspace,
                                     size_t workspaceSizeInBytes)
{
    BLAS_CALL(blas_set_workspace_locked(handle, workspace, workspaceSizeInBytes));
}

/* cublasGemmStridedBatchedEx's arguments. */
typedef struct gemm_args {
    cublasHandle_t h;
    cublasOperation_t ta, tb;
    int m, n, k, batch;
    const void *alpha, *beta;
    operand a, b, c;
    cublasComputeType_t compute;
} gemm_args;

static bool supported_op(cublasOperation_t op)
{
    return op == CUBLAS_OP_N || op == CUBLAS_OP_T;
}

/* Why cuBLAS would refuse the call's scalars (cuBLAS documentation,
 * cublasGemmStridedBatchedEx), or NULL. */
static const char *gemm_scalars_refusal(const gemm_args *g)
{
    if (!is_live(g->h, K_BLAS) || !stream_live(g->h->stream))
        return "not a live handle, or its stream was never set or is gone";
    if (!supported_op(g->ta) || !supported_op(g->tb))
        return "an operation other than N or T";
    if (g->m < 0 || g->n < 0 || g->k < 0 || g->batch < 0)
        return "a negative size";
    if (g->a.ld < (int64_t)(g->a.rows > 1 ? g->a.rows : 1) ||
        g->b.ld < (int64_t)(g->b.rows > 1 ? g->b.rows : 1) ||
        g->c.ld < (int64_t)(g->c.rows > 1 ? g->c.rows : 1))
        return "a leading dimension below its operand's rows";
    if (g->a.type != g->b.type || g->a.type != g->c.type || type_bytes(g->a.type) < 2)
        return "A, B and C not of one type among 32F, 16F and 16BF";
    if (g->compute != CUBLAS_COMPUTE_32F)
        return "a compute type other than CUBLAS_COMPUTE_32F";
    if (g->alpha == NULL || g->beta == NULL)
        return "alpha or beta is NULL";
    if (g->a.stride < 0 || g->b.stride < 0 ||
        (g->batch > 1 && g->c.stride < g->c.ld * (int64_t)g->c.cols))
        return "a negative stride, or outputs of the batch that overlap";
    return NULL;
}

/* Why the operands or the workspace are not live device memory, or NULL. */
static const char *gemm_memory_refusal(const gemm_args *g)
{
    const struct cublasContext *h = g->h;
    if (!operand_live(&g->a, h->device) || !operand_live(&g->b, h->device) ||
        !operand_live(&g->c, h->device))
        return "an operand is not inside a live allocation of the handle's device";
    if (h->workspace != NULL &&
        rd_block_holding(&dbl.rt, h->workspace, h->workspace_bytes, h->device) == NULL)
        return "the workspace set is no longer live";
    return NULL;
}

static cublasStatus_t gemm_locked(const gemm_args *g)
{
    const char *why = gemm_scalars_refusal(g);
    if (why == NULL && g->m > 0 && g->n > 0 && g->k > 0 && g->batch > 0)
        why = gemm_memory_refusal(g);
    if (why != NULL)
        return blas_refuse(CUBLAS_STATUS_INVALID_VALUE, "cublasGemmStridedBatchedEx", why);
    if (g->m == 0 || g->n == 0 || g->k == 0 || g->batch == 0)
        return CUBLAS_STATUS_SUCCESS; /* cuBLAS returns at once */
    if (!enqueue_output(g->h->stream, &g->c))
        return CUBLAS_STATUS_ALLOC_FAILED;
    cuda_double_type t = type_index(g->c.type);
    dbl.st.gemms[t]++;
    dbl.st.flops[t] += 2.0 * g->m * (double)g->n * (double)g->k * (double)g->batch;
    dbl.st.blas_own_workspace += g->h->workspace == NULL;
    return CUBLAS_STATUS_SUCCESS;
}

/* Column-major operands: op(A) is m x k, op(B) k x n, C m x n. */
cublasStatus_t cublasGemmStridedBatchedEx(cublasHandle_t handle, cublasOperation_t transa,
                                          cublasOperation_t transb, int m, int n, int k,
                                          const void *alpha, const void *A, cudaDataType Atype,
                                          int lda, long long int strideA, const void *B,
                                          cudaDataType Btype, int ldb, long long int strideB,
                                          const void *beta, void *C, cudaDataType Ctype, int ldc,
                                          long long int strideC, int batchCount,
                                          cublasComputeType_t computeType, cublasGemmAlgo_t algo)
{
    bool ta = transa != CUBLAS_OP_N, tb = transb != CUBLAS_OP_N;
    gemm_args g = {
        .h = handle,
        .ta = transa,
        .tb = transb,
        .m = m,
        .n = n,
        .k = k,
        .batch = batchCount,
        .alpha = alpha,
        .beta = beta,
        .compute = computeType,
        .a = {A, Atype, (uint64_t)(ta ? k : m), (uint64_t)(ta ? m : k), lda, strideA, batchCount},
        .b = {B, Btype, (uint64_t)(tb ? n : k), (uint64_t)(tb ? k : n), ldb, strideB, batchCount},
        .c = {C, Ctype, (uint64_t)m, (uint64_t)n, ldc, strideC, batchCount}};
    BLAS_CALL(gemm_locked(&g));
}

/* ---- cuBLASLt: handles and descriptors ----------------------------------- */

const char *cublasLtGetStatusString(cublasStatus_t status)
{
    return blas_text(status);
}

static cublasStatus_t lt_create_locked(cublasLtHandle_t *lightHandle)
{
    if (lightHandle == NULL)
        return blas_refuse(CUBLAS_STATUS_INVALID_VALUE, "cublasLtCreate", "lightHandle is NULL");
    struct cublasLtContext *h = new_live(sizeof *h, K_LT);
    if (h == NULL)
        return CUBLAS_STATUS_ALLOC_FAILED;
    *lightHandle = h;
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtCreate(cublasLtHandle_t *lightHandle)
{
    BLAS_CALL(lt_create_locked(lightHandle));
}

/* Free a live object of the given kind. */
static cublasStatus_t lt_destroy_locked(void *p, dbl_kind kind, const char *fn)
{
    if (!is_live(p, kind))
        return blas_refuse(CUBLAS_STATUS_INVALID_VALUE, fn, "not a live object of its kind");
    live_drop(p, kind);
    free(p);
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtDestroy(cublasLtHandle_t lightHandle)
{
    BLAS_CALL(lt_destroy_locked(lightHandle, K_LT, __func__));
}

static cublasStatus_t desc_create_locked(cublasLtMatmulDesc_t *matmulDesc,
                                         cublasComputeType_t computeType, cudaDataType_t scaleType)
{
    if (matmulDesc == NULL)
        return blas_refuse(CUBLAS_STATUS_INVALID_VALUE, "cublasLtMatmulDescCreate",
                           "matmulDesc is NULL");
    lt_desc *d = new_live(sizeof *d, K_DESC);
    if (d == NULL)
        return CUBLAS_STATUS_ALLOC_FAILED;
    d->compute = computeType;
    d->scale = scaleType;
    d->transa = d->transb = CUBLAS_OP_N;
    *matmulDesc = &d->opaque;
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulDescCreate(cublasLtMatmulDesc_t *matmulDesc,
                                        cublasComputeType_t computeType, cudaDataType_t scaleType)
{
    BLAS_CALL(desc_create_locked(matmulDesc, computeType, scaleType));
}

cublasStatus_t cublasLtMatmulDescDestroy(cublasLtMatmulDesc_t matmulDesc)
{
    BLAS_CALL(lt_destroy_locked(matmulDesc, K_DESC, __func__));
}

/* An attribute the double keeps: where in its object, and its size. */
typedef struct lt_field {
    int attr;
    size_t offset, size;
} lt_field;

#define LT_FIELD(attr, type, member)                                                               \
    {                                                                                              \
        attr, offsetof(type, member), sizeof(((type *)0)->member)                                  \
    }

static const lt_field desc_fields[] = {
    LT_FIELD(CUBLASLT_MATMUL_DESC_COMPUTE_TYPE, lt_desc, compute),
    LT_FIELD(CUBLASLT_MATMUL_DESC_SCALE_TYPE, lt_desc, scale),
    LT_FIELD(CUBLASLT_MATMUL_DESC_TRANSA, lt_desc, transa),
    LT_FIELD(CUBLASLT_MATMUL_DESC_TRANSB, lt_desc, transb),
};

static const lt_field layout_fields[] = {
    LT_FIELD(CUBLASLT_MATRIX_LAYOUT_TYPE, lt_layout, type),
    LT_FIELD(CUBLASLT_MATRIX_LAYOUT_ORDER, lt_layout, order),
    LT_FIELD(CUBLASLT_MATRIX_LAYOUT_ROWS, lt_layout, rows),
    LT_FIELD(CUBLASLT_MATRIX_LAYOUT_COLS, lt_layout, cols),
    LT_FIELD(CUBLASLT_MATRIX_LAYOUT_LD, lt_layout, ld),
    LT_FIELD(CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, lt_layout, batch),
    LT_FIELD(CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, lt_layout, stride),
};

static const lt_field pref_fields[] = {
    LT_FIELD(CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, lt_pref, max_workspace),
};

/* Set attribute attr of the live object p from buf, which must hold
 * exactly the attribute's type.  An attribute the double does not model is
 * refused: a caller that starts to use one needs the double taught it. */
static cublasStatus_t lt_set_locked(void *p, dbl_kind kind, const lt_field *fields, size_t n,
                                    int attr, const void *buf, size_t size, const char *fn)
{
    if (!is_live(p, kind) || buf == NULL)
        return blas_refuse(CUBLAS_STATUS_INVALID_VALUE, fn, "not a live object, or buf is NULL");
    for (size_t i = 0; i < n; i++) {
        if (fields[i].attr != attr)
            continue;
        if (size != fields[i].size)
            return blas_refuse(CUBLAS_STATUS_INVALID_VALUE, fn, "the size is not the attribute's");
        memcpy((char *)p + fields[i].offset, buf, size);
        return CUBLAS_STATUS_SUCCESS;
    }
    return blas_refuse(CUBLAS_STATUS_INVALID_VALUE, fn, "an attribute the double does not model");
}

cublasStatus_t cublasLtMatmulDescSetAttribute(cublasLtMatmulDesc_t matmulDesc,
                                              cublasLtMatmulDescAttributes_t attr, const void *buf,
                                              size_t sizeInBytes)
{
    BLAS_CALL(lt_set_locked(matmulDesc, K_DESC, desc_fields,
                            sizeof desc_fields / sizeof desc_fields[0], attr, buf, sizeInBytes,
                            __func__));
}

static cublasStatus_t layout_create_locked(cublasLtMatrixLayout_t *matLayout, cudaDataType type,
                                           uint64_t rows, uint64_t cols, int64_t ld)
{
    if (matLayout == NULL)
        return blas_refuse(CUBLAS_STATUS_INVALID_VALUE, "cublasLtMatrixLayoutCreate",
                           "matLayout is NULL");
    lt_layout *l = new_live(sizeof *l, K_LAYOUT);
    if (l == NULL)
        return CUBLAS_STATUS_ALLOC_FAILED;
    l->type = type;
    l->order = CUBLASLT_ORDER_COL;
    l->batch = 1;
    l->rows = rows;
    l->cols = cols;
    l->ld = ld;
    *matLayout = &l->opaque;
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatrixLayoutCreate(cublasLtMatrixLayout_t *matLayout, cudaDataType type,
                                          uint64_t rows, uint64_t cols, int64_t ld)
{
    BLAS_CALL(layout_create_locked(matLayout, type, rows, cols, ld));
}

cublasStatus_t cublasLtMatrixLayoutDestroy(cublasLtMatrixLayout_t matLayout)
{
    BLAS_CALL(lt_destroy_locked(matLayout, K_LAYOUT, __func__));
}

cublasStatus_t cublasLtMatrixLayoutSetAttribute(cublasLtMatrixLayout_t matLayout,
                                                cublasLtMatrixLayoutAttribute_t attr,
                                                const void *buf, size_t sizeInBytes)
{
    BLAS_CALL(lt_set_locked(matLayout, K_LAYOUT, layout_fields,
                            sizeof layout_fields / sizeof layout_fields[0], attr, buf, sizeInBytes,
                            __func__));
}

static cublasStatus_t pref_create_locked(cublasLtMatmulPreference_t *pref)
{
    if (pref == NULL)
        return blas_refuse(CUBLAS_STATUS_INVALID_VALUE, "cublasLtMatmulPreferenceCreate",
                           "pref is NULL");
    lt_pref *p = new_live(sizeof *p, K_PREF);
    if (p == NULL)
        return CUBLAS_STATUS_ALLOC_FAILED;
    *pref = &p->opaque;
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulPreferenceCreate(cublasLtMatmulPreference_t *pref)
{
    BLAS_CALL(pref_create_locked(pref));
}

cublasStatus_t cublasLtMatmulPreferenceDestroy(cublasLtMatmulPreference_t pref)
{
    BLAS_CALL(lt_destroy_locked(pref, K_PREF, __func__));
}

cublasStatus_t cublasLtMatmulPreferenceSetAttribute(cublasLtMatmulPreference_t pref,
                                                    cublasLtMatmulPreferenceAttributes_t attr,
                                                    const void *buf, size_t sizeInBytes)
{
    BLAS_CALL(lt_set_locked(pref, K_PREF, pref_fields, sizeof pref_fields / sizeof pref_fields[0],
                            attr, buf, sizeInBytes, __func__));
}

/* ---- cuBLASLt: FP8 matmuls ----------------------------------------------- */

/* One cublasLtMatmul problem: its descriptor and the layouts of A, B, C
 * and D (the handles as given; lt_problem_live says whether they are). */
typedef struct lt_problem {
    const lt_desc *op;
    const lt_layout *a, *b, *c, *d;
} lt_problem;

static bool lt_problem_live(const lt_problem *p)
{
    return is_live(p->op, K_DESC) && is_live(p->a, K_LAYOUT) && is_live(p->b, K_LAYOUT) &&
           is_live(p->c, K_LAYOUT) && is_live(p->d, K_LAYOUT);
}

/* op(A) is m x k, op(B) k x n, C and D m x n. */
static void lt_shape(const lt_problem *p, uint64_t *m, uint64_t *n, uint64_t *k)
{
    bool ta = p->op->transa != CUBLAS_OP_N, tb = p->op->transb != CUBLAS_OP_N;
    *m = ta ? p->a->cols : p->a->rows;
    *k = ta ? p->a->rows : p->a->cols;
    *n = tb ? p->b->rows : p->b->cols;
}

static bool lt_shapes_agree(const lt_problem *p)
{
    uint64_t m, n, k;
    lt_shape(p, &m, &n, &k);
    uint64_t kb = p->op->transb != CUBLAS_OP_N ? p->b->cols : p->b->rows;
    return kb == k && p->c->rows == m && p->c->cols == n && p->d->rows == m && p->d->cols == n;
}

/* Leading dimensions and batches as cuBLASLt takes them: ld >= rows, the
 * same batch count everywhere, batches of D that do not overlap. */
static bool lt_layouts_sound(const lt_problem *p)
{
    const lt_layout *l[4] = {p->a, p->b, p->c, p->d};
    for (int i = 0; i < 4; i++)
        if (l[i]->order != CUBLASLT_ORDER_COL || l[i]->ld < (int64_t)l[i]->rows ||
            l[i]->batch < 1 || l[i]->batch != p->a->batch || l[i]->stride < 0)
            return false;
    return p->d->batch == 1 || p->d->stride >= p->d->ld * (int64_t)p->d->cols;
}

static bool lt_ld_16(const lt_problem *p)
{
    return p->a->ld % 16 == 0 && p->b->ld % 16 == 0 && p->c->ld % 16 == 0 && p->d->ld % 16 == 0;
}

/* Why cuBLASLt has no FP8 kernel for the problem (its documented rules for
 * E4M3 inputs), with the status in *code, or NULL.  The double knows FP8
 * matmuls only: memsim runs the others through cuBLAS. */
static const char *lt_refusal(const lt_problem *p, cublasStatus_t *code)
{
    *code = CUBLAS_STATUS_NOT_SUPPORTED;
    if (p->a->type != CUDA_R_8F_E4M3 || p->b->type != CUDA_R_8F_E4M3)
        return "A and B not both CUDA_R_8F_E4M3";
    if (dbl.cc_major < 8 || (dbl.cc_major == 8 && dbl.cc_minor < 9)) {
        *code = CUBLAS_STATUS_ARCH_MISMATCH;
        return "FP8 needs compute capability 8.9 or later";
    }
    if (p->op->transa != CUBLAS_OP_T || p->op->transb != CUBLAS_OP_N)
        return "FP8 needs A transposed and B not (TN)";
    if (p->c->type != p->d->type ||
        (p->d->type != CUDA_R_16BF && p->d->type != CUDA_R_16F && p->d->type != CUDA_R_32F))
        return "C and D not of one type among 16BF, 16F and 32F";
    if (p->op->compute != CUBLAS_COMPUTE_32F || p->op->scale != CUDA_R_32F)
        return "FP8 needs CUBLAS_COMPUTE_32F and a CUDA_R_32F scale type";
    if (!lt_ld_16(p))
        return "FP8 needs leading dimensions that are multiples of 16";
    *code = CUBLAS_STATUS_INVALID_VALUE;
    if (!lt_layouts_sound(p))
        return "a column-major layout with ld below its rows, or batches that disagree";
    if (!lt_shapes_agree(p))
        return "op(A) is not M x K, op(B) K x N and C, D M x N";
    return NULL;
}

/* What identifies a problem, so that cublasLtMatmul knows an algo that
 * the heuristic chose for another one (FNV-1a of every field). */
static uint64_t lt_signature(const lt_problem *p)
{
    const lt_layout *l[4] = {p->a, p->b, p->c, p->d};
    uint64_t f[4 + 4 * 7] = {(uint64_t)p->op->compute, (uint64_t)p->op->scale,
                             (uint64_t)p->op->transa, (uint64_t)p->op->transb};
    for (int i = 0; i < 4; i++) {
        uint64_t *g = &f[4 + 7 * i];
        g[0] = l[i]->type;
        g[1] = (uint64_t)l[i]->order;
        g[2] = l[i]->rows;
        g[3] = l[i]->cols;
        g[4] = (uint64_t)l[i]->ld;
        g[5] = (uint64_t)l[i]->batch;
        g[6] = (uint64_t)l[i]->stride;
    }
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < sizeof f / sizeof f[0]; i++)
        h = (h ^ f[i]) * 1099511628211ull;
    return h;
}

/* An algo, as the heuristic hands it out: which problem it is for, the
 * workspace it needs and the most the preference allowed. */
enum { ALGO_MAGIC, ALGO_SIGNATURE, ALGO_NEEDS, ALGO_MAX_WORKSPACE };

static cublasStatus_t heuristic_locked(cublasLtHandle_t h, const lt_problem *p, const lt_pref *pref,
                                       int requested, cublasLtMatmulHeuristicResult_t *results,
                                       int *count)
{
    const char *fn = "cublasLtMatmulAlgoGetHeuristic";
    dbl.st.lt_heuristics++;
    if (!is_live(h, K_LT) || !lt_problem_live(p) || !is_live(pref, K_PREF) || requested < 1 ||
        results == NULL || count == NULL)
        return blas_refuse(CUBLAS_STATUS_INVALID_VALUE, fn,
                           "a handle, descriptor, layout or preference not live, or no room for "
                           "a result");
    cublasStatus_t code;
    const char *why = lt_refusal(p, &code);
    *count = 0;
    if (why != NULL)
        return blas_refuse(CUBLAS_STATUS_NOT_SUPPORTED, fn, why);
    memset(&results[0], 0, sizeof results[0]);
    uint64_t *algo = results[0].algo.data;
    algo[ALGO_MAGIC] = DBL_ALGO_MAGIC;
    algo[ALGO_SIGNATURE] = lt_signature(p);
    algo[ALGO_NEEDS] = 0;
    algo[ALGO_MAX_WORKSPACE] = pref->max_workspace;
    results[0].workspaceSize = 0;
    results[0].state = CUBLAS_STATUS_SUCCESS;
    results[0].wavesCount = 1.0f;
    *count = 1;
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulAlgoGetHeuristic(
    cublasLtHandle_t lightHandle, cublasLtMatmulDesc_t operationDesc, cublasLtMatrixLayout_t Adesc,
    cublasLtMatrixLayout_t Bdesc, cublasLtMatrixLayout_t Cdesc, cublasLtMatrixLayout_t Ddesc,
    cublasLtMatmulPreference_t preference, int requestedAlgoCount,
    cublasLtMatmulHeuristicResult_t heuristicResultsArray[], int *returnAlgoCount)
{
    lt_problem p = {(const lt_desc *)operationDesc, (const lt_layout *)Adesc,
                    (const lt_layout *)Bdesc, (const lt_layout *)Cdesc, (const lt_layout *)Ddesc};
    BLAS_CALL(heuristic_locked(lightHandle, &p, (const lt_pref *)preference, requestedAlgoCount,
                               heuristicResultsArray, returnAlgoCount));
}

/* cublasLtMatmul's arguments. */
typedef struct lt_args {
    cublasLtHandle_t h;
    lt_problem p;
    const void *alpha, *beta;
    operand a, b, c, d;
    const cublasLtMatmulAlgo_t *algo;
    void *workspace;
    size_t workspace_bytes;
    cudaStream_t stream;
} lt_args;

/* The algo's workspace needs and the preference's most, or false if the
 * algo is not the heuristic's for this problem (NULL: cuBLASLt runs its
 * own heuristic, on the workspace given). */
static bool algo_bounds(const lt_args *x, uint64_t *needs, uint64_t *most)
{
    *needs = 0;
    *most = UINT64_MAX;
    if (x->algo == NULL)
        return true;
    const uint64_t *a = x->algo->data;
    *needs = a[ALGO_NEEDS];
    *most = a[ALGO_MAX_WORKSPACE];
    return a[ALGO_MAGIC] == DBL_ALGO_MAGIC && a[ALGO_SIGNATURE] == lt_signature(&x->p);
}

/* Why the arguments beyond the problem are wrong, or NULL. */
static const char *lt_call_refusal(const lt_args *x)
{
    if (!is_live(x->h, K_LT) || !stream_live(x->stream))
        return "not a live handle and stream (the double has no legacy default stream)";
    if (x->alpha == NULL || x->beta == NULL)
        return "alpha or beta is NULL";
    uint64_t needs, most;
    if (!algo_bounds(x, &needs, &most))
        return "an algo the heuristic did not choose for this problem";
    if (x->workspace_bytes < needs || x->workspace_bytes > most)
        return "a workspace smaller than the algo needs or larger than the preference allowed";
    int dev = as_stream(x->stream)->device;
    if (x->workspace_bytes > 0 &&
        rd_block_holding(&dbl.rt, x->workspace, x->workspace_bytes, dev) == NULL)
        return "the workspace is not inside a live allocation of the stream's device";
    const operand *o[4] = {&x->a, &x->b, &x->c, &x->d};
    for (int i = 0; i < 4; i++) {
        if ((uintptr_t)o[i]->p % 16 != 0)
            return "FP8 needs 16-byte aligned operands";
        if (!operand_live(o[i], dev))
            return "an operand is not inside a live allocation of the stream's device";
    }
    return NULL;
}

/* The layout's view of the operand at p. */
static operand lt_operand(const void *p, const lt_layout *l)
{
    return (operand){p, (cudaDataType)l->type, l->rows, l->cols, l->ld, l->stride, l->batch};
}

static cublasStatus_t matmul_locked(lt_args *x)
{
    const char *fn = "cublasLtMatmul";
    if (!lt_problem_live(&x->p))
        return blas_refuse(CUBLAS_STATUS_INVALID_VALUE, fn, "a descriptor or layout not live");
    cublasStatus_t code;
    const char *why = lt_refusal(&x->p, &code);
    if (why != NULL)
        return blas_refuse(code, fn, why);
    x->a = lt_operand(x->a.p, x->p.a);
    x->b = lt_operand(x->b.p, x->p.b);
    x->c = lt_operand(x->c.p, x->p.c);
    x->d = lt_operand(x->d.p, x->p.d);
    if ((why = lt_call_refusal(x)) != NULL)
        return blas_refuse(CUBLAS_STATUS_INVALID_VALUE, fn, why);
    if (!enqueue_output(x->stream, &x->d))
        return CUBLAS_STATUS_ALLOC_FAILED;
    uint64_t m, n, k;
    lt_shape(&x->p, &m, &n, &k);
    dbl.st.gemms[CUDA_DOUBLE_FP8]++;
    dbl.st.flops[CUDA_DOUBLE_FP8] += 2.0 * (double)m * (double)n * (double)k * x->p.a->batch;
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmul(cublasLtHandle_t lightHandle, cublasLtMatmulDesc_t computeDesc,
                              const void *alpha, const void *A, cublasLtMatrixLayout_t Adesc,
                              const void *B, cublasLtMatrixLayout_t Bdesc, const void *beta,
                              const void *C, cublasLtMatrixLayout_t Cdesc, void *D,
                              cublasLtMatrixLayout_t Ddesc, const cublasLtMatmulAlgo_t *algo,
                              void *workspace, size_t workspaceSizeInBytes, cudaStream_t stream)
{
    lt_args x = {.h = lightHandle,
                 .p = {(const lt_desc *)computeDesc, (const lt_layout *)Adesc,
                       (const lt_layout *)Bdesc, (const lt_layout *)Cdesc,
                       (const lt_layout *)Ddesc},
                 .alpha = alpha,
                 .beta = beta,
                 .a = {.p = A},
                 .b = {.p = B},
                 .c = {.p = C},
                 .d = {.p = D},
                 .algo = algo,
                 .workspace = workspace,
                 .workspace_bytes = workspaceSizeInBytes,
                 .stream = stream};
    BLAS_CALL(matmul_locked(&x));
}
