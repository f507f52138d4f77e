/* The runtime layer on CUDA (runtime.h): the CUDA runtime API, cuBLAS and,
 * for FP8 GEMMs, cuBLASLt (cuda_fp8.c), called from C; no device code of our
 * own (the proxies are cuBLAS GEMMs and copies), so nothing here needs nvcc.
 *
 * libcudart, libcublas and libcublasLt are not linked: they are loaded with dlopen the
 * first time a process asks for --backend cuda (as PyTorch's lazy CUDA
 * stubs, NCCL's cudart loader and TensorFlow's dso_loader do), so that the
 * mock, --help and every other command start without loading them
 * (~77 M instructions of loading and initialisers at every start,
 * bench/README.md) and run on a machine where they are not installed.  The calls are typed from the toolkit's
 * own headers (__typeof__), so the compiler checks each one as if linked. */
#include "cuda_private.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config.h" /* MS_CUDART_SONAME, MS_CUBLAS_SONAME, MS_CUBLASLT_SONAME, MS_CUDA_LIBDIR */

/* The libraries as loaded, or why they could not be.  The only writable
 * state of this file (with its once flag), written once under
 * pthread_once and read-only after: device_count() has no handle to keep
 * it in (runtime.h), and the
 * libraries are loaded once per process and never unloaded (libcudart and
 * cuBLAS register exit-time teardown that must find their code still
 * mapped; NCCL and PyTorch never dlclose them either), so every handle
 * would hold the same pointers. */
typedef struct cuda_loaded {
    cuda_api api;
    ms_status status;
    char why[1024];
} cuda_loaded;

static pthread_once_t cuda_load_once = PTHREAD_ONCE_INIT;
static cuda_loaded cuda_lib;

/* Names of the environment's overrides (docs/backends.md): a SONAME or a
 * path, loaded as given and nothing else tried. */
#define CUDA_CUDART_ENV "MEMSIM_CUDART"
#define CUDA_CUBLAS_ENV "MEMSIM_CUBLAS"
#define CUDA_CUBLASLT_ENV "MEMSIM_CUBLASLT"

/* dlopen one library: the override in $env if set, else SONAME in the
 * toolkit configure found (what a linked build's rpath named), else SONAME
 * wherever the loader finds it (LD_LIBRARY_PATH, ld.so.cache).  NULL with
 * the library and the loader's reasons in why. */
static void *cuda_dlopen(const char *env, const char *soname, char *why, size_t n_why)
{
    const char *given = getenv(env);
    if (given != NULL && given[0] != '\0') {
        void *h = dlopen(given, RTLD_NOW | RTLD_LOCAL);
        if (h == NULL)
            snprintf(why, n_why, "cannot load %s (%s=%s): %s", soname, env, given, dlerror());
        return h;
    }
    char path[4096], first[512];
    snprintf(path, sizeof path, "%s/%s", MS_CUDA_LIBDIR, soname);
    void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (h != NULL)
        return h;
    snprintf(first, sizeof first, "%s", dlerror());
    h = dlopen(soname, RTLD_NOW | RTLD_LOCAL);
    if (h == NULL)
        snprintf(why, n_why,
                 "cannot load %s: %s; %s (install the CUDA toolkit's libraries, or set %s)", soname,
                 first, dlerror(), env);
    return h;
}

/* Store dlsym(h, name) in *slot (a function pointer of the table: POSIX
 * guarantees a void * from dlsym converts to one; memcpy says so without
 * a cast ISO C leaves undefined). */
static bool cuda_dlsym(void *h, const char *lib, const char *name, void *slot, char *why,
                       size_t n_why)
{
    dlerror();
    void *p = dlsym(h, name);
    if (p == NULL) {
        const char *e = dlerror();
        snprintf(why, n_why, "%s has no %s: %s", lib, name, e != NULL ? e : "null symbol");
        return false;
    }
    memcpy(slot, &p, sizeof p);
    return true;
}

#define CUDA_STR_(x) #x
#define CUDA_STR(x) CUDA_STR_(x) /* after expanding: cublasCreate -> "cublasCreate_v2" */

/* Fill the table's entries of one library (h, soname): false with the
 * first missing symbol in why. */
#define CUDA_API_LOAD(fn) ok = ok && cuda_dlsym(h, soname, CUDA_STR(fn), &api->fn, why, n_why);

static bool cuda_resolve_cudart(void *h, cuda_api *api, char *why, size_t n_why)
{
    const char *soname = MS_CUDART_SONAME;
    bool ok = true;
    CUDART_CALLS(CUDA_API_LOAD)
    return ok;
}

static bool cuda_resolve_cublas(void *h, cuda_api *api, char *why, size_t n_why)
{
    const char *soname = MS_CUBLAS_SONAME;
    bool ok = true;
    CUBLAS_CALLS(CUDA_API_LOAD)
    return ok;
}
static bool cuda_resolve_cublaslt(void *h, cuda_api *api, char *why, size_t n_why)
{
    const char *soname = MS_CUBLASLT_SONAME;
    bool ok = true;
    CUBLASLT_CALLS(CUDA_API_LOAD)
    return ok;
}
#undef CUDA_API_LOAD

/* pthread_once's routine.  A library that loads but lacks a symbol stays
 * loaded, as does libcudart when cuBLAS is missing: their initialisers
 * have run, and unloading them could leave their exit handlers dangling. */
static void cuda_load_libraries(void)
{
    cuda_loaded *l = &cuda_lib;
    l->status = MS_ENOENT;
    void *rt = cuda_dlopen(CUDA_CUDART_ENV, MS_CUDART_SONAME, l->why, sizeof l->why);
    if (rt == NULL || !cuda_resolve_cudart(rt, &l->api, l->why, sizeof l->why))
        return;
    void *blas = cuda_dlopen(CUDA_CUBLAS_ENV, MS_CUBLAS_SONAME, l->why, sizeof l->why);
    if (blas == NULL || !cuda_resolve_cublas(blas, &l->api, l->why, sizeof l->why))
        return;
    /* Every cuBLAS since CUDA 10.1 ships (and itself loads) cuBLASLt. */
    void *lt = cuda_dlopen(CUDA_CUBLASLT_ENV, MS_CUBLASLT_SONAME, l->why, sizeof l->why);
    if (lt == NULL || !cuda_resolve_cublaslt(lt, &l->api, l->why, sizeof l->why))
        return;
    l->status = MS_OK;
}

/* The loaded table, or MS_ENOENT with why (library and reason). */
static ms_status cuda_api_get(const cuda_api **api, char *why, size_t n_why)
{
    pthread_once(&cuda_load_once, cuda_load_libraries);
    if (cuda_lib.status != MS_OK) {
        snprintf(why, n_why, "%s", cuda_lib.why);
        return cuda_lib.status;
    }
    *api = &cuda_lib.api;
    return MS_OK;
}

static ms_status cuda_load(char *why, size_t n_why)
{
    const cuda_api *api = NULL;
    return cuda_api_get(&api, why, n_why);
}

ms_status cuda_fail(cuda_ctx *c, cudaError_t e, const char *call)
{
    if (e == cudaSuccess)
        return MS_OK;
    c->api->cudaGetLastError();
    snprintf(c->err, sizeof c->err, "%s: %s (%s)", call, c->api->cudaGetErrorString(e),
             c->api->cudaGetErrorName(e));
    switch (e) {
    case cudaErrorMemoryAllocation: return MS_ENOMEM;
    case cudaErrorNotReady: return MS_EAGAIN;
    case cudaErrorInvalidValue:
    case cudaErrorInvalidResourceHandle: return MS_EINVAL;
    default: return MS_EIO;
    }
}

ms_status cuda_blas_fail(cuda_ctx *c, cublasStatus_t s, const char *call)
{
    if (s == CUBLAS_STATUS_SUCCESS)
        return MS_OK;
    snprintf(c->err, sizeof c->err, "%s: %s", call, c->api->cublasGetStatusString(s));
    return s == CUBLAS_STATUS_ALLOC_FAILED ? MS_ENOMEM : MS_EIO;
}

/* "no driver" and "no device" come back here as MS_OK with no devices and
 * the runtime's reason (group.c: "no CUDA device: ..."); libraries that
 * cannot be loaded as MS_ENOENT (group.c calls cuda_load first). */
static ms_status cuda_device_count(int *n, char *why, size_t n_why)
{
    const cuda_api *api = NULL;
    *n = 0;
    ms_status st = cuda_api_get(&api, why, n_why);
    if (st != MS_OK)
        return st;
    int count = 0;
    cudaError_t e = api->cudaGetDeviceCount(&count);
    *n = e == cudaSuccess ? count : 0;
    if (e != cudaSuccess) {
        snprintf(why, n_why, "%s (%s)", api->cudaGetErrorString(e), api->cudaGetErrorName(e));
        api->cudaGetLastError();
    }
    return MS_OK;
}

ms_status cuda_use(cuda_ctx *c)
{
    return CU(c, cudaSetDevice, c->ordinal);
}

static void cuda_close(void *ctx)
{
    cuda_ctx *c = ctx;
    cuda_fp8_close(c);
    if (c->blas != NULL)
        c->api->cublasDestroy(c->blas);
    free(c);
}

static ms_status cuda_open(int ordinal, void **out, ms_diag *d)
{
    char why[sizeof cuda_lib.why];
    const cuda_api *api = NULL;
    ms_status st = cuda_api_get(&api, why, sizeof why);
    if (st != MS_OK)
        return ms_diag_set(d, st, "cuda:%d: no CUDA runtime: %s", ordinal, why);
    cuda_ctx *c = calloc(1, sizeof *c);
    if (c == NULL)
        return MS_ENOMEM;
    c->api = api;
    c->ordinal = ordinal;
    st = cuda_use(c);
    if (st == MS_OK)
        st = CU(c, cudaDeviceGetStreamPriorityRange, &c->least_priority, &c->greatest_priority);
    if (st == MS_OK)
        st = cuda_blas_fail(c, api->cublasCreate(&c->blas), "cublasCreate");
    if (st == MS_OK)
        st = cuda_fp8_open(c);
    if (st != MS_OK) {
        ms_diag_set(d, st, "cuda:%d: %s", ordinal, c->err);
        cuda_close(c);
        return st;
    }
    *out = c;
    return MS_OK;
}

static const char *cuda_last_error(void *ctx)
{
    const cuda_ctx *c = ctx;
    return c != NULL && c->err[0] ? c->err : "no error recorded";
}

static ms_status cuda_device_name(void *ctx, char *buf, size_t n)
{
    cuda_ctx *c = ctx;
    struct cudaDeviceProp prop;
    ms_status st = CU(c, cudaGetDeviceProperties, &prop, c->ordinal);
    if (st == MS_OK)
        snprintf(buf, n, "%s", prop.name);
    return st;
}

static ms_status cuda_mem_get_info(void *ctx, uint64_t *free_bytes, uint64_t *total_bytes)
{
    cuda_ctx *c = ctx;
    size_t f = 0, t = 0;
    ms_status st = cuda_use(c);
    if (st == MS_OK)
        st = CU(c, cudaMemGetInfo, &f, &t);
    *free_bytes = f;
    *total_bytes = t;
    return st;
}

static ms_status cuda_malloc_device(void *ctx, uint64_t bytes, uint64_t *addr)
{
    cuda_ctx *c = ctx;
    void *p = NULL;
    ms_status st = cuda_use(c);
    if (st == MS_OK)
        st = CU(c, cudaMalloc, &p, bytes);
    *addr = (uint64_t)(uintptr_t)p;
    return st;
}

static ms_status cuda_free_device(void *ctx, uint64_t addr)
{
    cuda_ctx *c = ctx;
    ms_status st = cuda_use(c);
    return st == MS_OK ? CU(c, cudaFree, (void *)(uintptr_t)addr) : st;
}

static ms_status cuda_memset_device(void *ctx, uint64_t addr, int value, uint64_t bytes)
{
    cuda_ctx *c = ctx;
    ms_status st = cuda_use(c);
    if (st == MS_OK)
        st = CU(c, cudaMemset, (void *)(uintptr_t)addr, value, bytes);
    return st == MS_OK ? CU(c, cudaDeviceSynchronize) : st;
}

static ms_status cuda_malloc_host(void *ctx, uint64_t bytes, uint64_t *addr)
{
    cuda_ctx *c = ctx;
    void *p = NULL;
    ms_status st = cuda_use(c);
    if (st == MS_OK)
        st = CU(c, cudaHostAlloc, &p, bytes, cudaHostAllocDefault);
    *addr = (uint64_t)(uintptr_t)p;
    return st;
}

static ms_status cuda_free_host(void *ctx, uint64_t addr)
{
    cuda_ctx *c = ctx;
    return CU(c, cudaFreeHost, (void *)(uintptr_t)addr);
}

/* backend.h's priority 0 (compute) is CUDA's greatest, each step after it
 * one less urgent, clamped to the device's range. */
static ms_status cuda_stream_create(void *ctx, int priority, void **s)
{
    cuda_ctx *c = ctx;
    int p = c->greatest_priority + (priority > 0 ? priority : 0);
    if (p > c->least_priority)
        p = c->least_priority;
    cudaStream_t stream = NULL;
    ms_status st = cuda_use(c);
    if (st == MS_OK)
        st = CU(c, cudaStreamCreateWithPriority, &stream, cudaStreamNonBlocking, p);
    *s = stream;
    return st;
}

static ms_status cuda_stream_destroy(void *ctx, void *s)
{
    cuda_ctx *c = ctx;
    return CU(c, cudaStreamDestroy, s);
}

static ms_status cuda_stream_synchronize(void *ctx, void *s)
{
    cuda_ctx *c = ctx;
    return CU(c, cudaStreamSynchronize, s);
}

static ms_status cuda_event_create(void *ctx, void **e)
{
    cuda_ctx *c = ctx;
    cudaEvent_t ev = NULL;
    ms_status st = cuda_use(c);
    if (st == MS_OK)
        st = CU(c, cudaEventCreate, &ev);
    *e = ev;
    return st;
}

static ms_status cuda_event_destroy(void *ctx, void *e)
{
    cuda_ctx *c = ctx;
    return CU(c, cudaEventDestroy, e);
}

static ms_status cuda_event_record(void *ctx, void *e, void *s)
{
    cuda_ctx *c = ctx;
    return CU(c, cudaEventRecord, e, s);
}

static ms_status cuda_event_query(void *ctx, void *e, bool *done)
{
    cuda_ctx *c = ctx;
    cudaError_t r = c->api->cudaEventQuery(e);
    *done = r == cudaSuccess;
    return r == cudaErrorNotReady ? MS_OK : cuda_fail(c, r, "cudaEventQuery(e)");
}

static ms_status cuda_event_synchronize(void *ctx, void *e)
{
    cuda_ctx *c = ctx;
    return CU(c, cudaEventSynchronize, e);
}

static ms_status cuda_event_elapsed_ns(void *ctx, void *start, void *end, int64_t *ns)
{
    cuda_ctx *c = ctx;
    float ms = 0;
    ms_status st = CU(c, cudaEventElapsedTime, &ms, start, end);
    *ns = (int64_t)((double)ms * 1e6);
    return st;
}

static ms_status cuda_stream_wait_event(void *ctx, void *s, void *e)
{
    cuda_ctx *c = ctx;
    return CU(c, cudaStreamWaitEvent, s, e, 0);
}

static ms_status cuda_memcpy_async(void *ctx, uint64_t dst, uint64_t src, uint64_t bytes,
                                   ms_copy_kind kind, void *s)
{
    cuda_ctx *c = ctx;
    enum cudaMemcpyKind k = kind == MS_COPY_H2D   ? cudaMemcpyHostToDevice
                            : kind == MS_COPY_D2H ? cudaMemcpyDeviceToHost
                                                  : cudaMemcpyDeviceToDevice;
    return CU(c, cudaMemcpyAsync, (void *)(uintptr_t)dst, (const void *)(uintptr_t)src, bytes, k,
              s);
}

static bool cuda_gemm_takes(void *ctx, const npu_gemm *g)
{
    const cuda_ctx *c = ctx;
    if (g->dtype == MS_DTYPE_FP8)
        return cuda_fp8_takes(c, g);
    return g->dtype == MS_DTYPE_FP32 || g->dtype == MS_DTYPE_FP16 || g->dtype == MS_DTYPE_BF16;
}

static cudaDataType cuda_type(ms_dtype t)
{
    return t == MS_DTYPE_FP32 ? CUDA_R_32F : t == MS_DTYPE_BF16 ? CUDA_R_16BF : CUDA_R_16F;
}

/* Row-major C = A.B is column-major C^T = B^T.A^T: cuBLAS gets (n, m, k)
 * with B first.  fp32 accumulates in fp32 without TF32 (PyTorch's default
 * for matmul since 1.12); fp16 and bf16 accumulate in fp32, as PyTorch does. */
static ms_status cuda_gemm(void *ctx, const npu_gemm *g, void *s)
{
    cuda_ctx *c = ctx;
    const cuda_api *api = c->api;
    if (g->m > INT32_MAX || g->n > INT32_MAX || g->k > INT32_MAX || g->batch > INT32_MAX)
        return MS_ERANGE;
    ms_status st = cuda_use(c);
    if (st != MS_OK)
        return st;
    if (g->dtype == MS_DTYPE_FP8)
        return cuda_fp8_gemm(c, g, s);
    st = cuda_blas_fail(c, api->cublasSetStream(c->blas, s), "cublasSetStream");
    /* cublasSetStream resets the workspace: give it ours again, so cuBLAS
     * allocates none outside the proxy workspace. */
    if (st == MS_OK)
        st = cuda_blas_fail(
            c, api->cublasSetWorkspace(c->blas, (void *)(uintptr_t)g->scratch, g->scratch_bytes),
            "cublasSetWorkspace");
    if (st != MS_OK)
        return st;
    const float alpha = 1.0f, beta = 0.0f;
    cudaDataType t = cuda_type(g->dtype);
    cublasStatus_t r = api->cublasGemmStridedBatchedEx(
        c->blas, CUBLAS_OP_N, CUBLAS_OP_N, (int)g->n, (int)g->m, (int)g->k, &alpha,
        (const void *)(uintptr_t)g->b, t, (int)g->n, g->k * g->n, (const void *)(uintptr_t)g->a, t,
        (int)g->k, g->m * g->k, &beta, (void *)(uintptr_t)g->c, t, (int)g->n, g->m * g->n,
        (int)g->batch, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
    return cuda_blas_fail(c, r, "cublasGemmStridedBatchedEx");
}

static ms_status cuda_device_synchronize(void *ctx)
{
    cuda_ctx *c = ctx;
    ms_status st = cuda_use(c);
    return st == MS_OK ? CU(c, cudaDeviceSynchronize) : st;
}

const npu_runtime npu_runtime_cuda = {
    .name = "cuda",
    .device_noun = "CUDA device",
    .runtime_noun = "CUDA runtime",
    .load = cuda_load,
    .device_count = cuda_device_count,
    .open = cuda_open,
    .close = cuda_close,
    .last_error = cuda_last_error,
    .device_name = cuda_device_name,
    .mem_get_info = cuda_mem_get_info,
    .malloc_device = cuda_malloc_device,
    .free_device = cuda_free_device,
    .memset_device = cuda_memset_device,
    .malloc_host = cuda_malloc_host,
    .free_host = cuda_free_host,
    .stream_create = cuda_stream_create,
    .stream_destroy = cuda_stream_destroy,
    .stream_synchronize = cuda_stream_synchronize,
    .event_create = cuda_event_create,
    .event_destroy = cuda_event_destroy,
    .event_record = cuda_event_record,
    .event_query = cuda_event_query,
    .event_synchronize = cuda_event_synchronize,
    .event_elapsed_ns = cuda_event_elapsed_ns,
    .stream_wait_event = cuda_stream_wait_event,
    .memcpy_async = cuda_memcpy_async,
    .gemm = cuda_gemm,
    .gemm_takes = cuda_gemm_takes,
    .device_synchronize = cuda_device_synchronize,
};

/* The registry's "cuda" entry (lib/backend/registry.c). */
ms_group_open_fn ms_npu_group_open_cuda;

ms_status ms_npu_group_open_cuda(const ms_group_config *cfg, ms_device_group **out, ms_diag *d)
{
    return npu_group_open(&npu_runtime_cuda, cfg, out, d);
}
