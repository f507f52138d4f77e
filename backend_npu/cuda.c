/* The runtime layer on CUDA (runtime.h): the CUDA runtime API and cuBLAS,
 * called from C; no device code of our own (the proxies are cuBLAS GEMMs
 * and copies), so nothing here needs nvcc and the library links only
 * libcudart and libcublas. */
#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime.h"

typedef struct cuda_ctx {
    int ordinal;
    cublasHandle_t blas;
    int least_priority, greatest_priority; /* numerically: least >= greatest */
    char err[256];
} cuda_ctx;

/* Record the runtime's message and turn the error into an ms_status.  The
 * error is also cleared from the runtime's sticky "last error" slot (an
 * out-of-memory is not sticky: the next call may succeed). */
static ms_status cuda_fail(cuda_ctx *c, cudaError_t e, const char *call)
{
    if (e == cudaSuccess)
        return MS_OK;
    cudaGetLastError();
    if (c != NULL)
        snprintf(c->err, sizeof c->err, "%s: %s (%s)", call, cudaGetErrorString(e),
                 cudaGetErrorName(e));
    switch (e) {
    case cudaErrorMemoryAllocation: return MS_ENOMEM;
    case cudaErrorNotReady: return MS_EAGAIN;
    case cudaErrorInvalidValue:
    case cudaErrorInvalidResourceHandle: return MS_EINVAL;
    default: return MS_EIO;
    }
}

#define CU(c, call) cuda_fail((c), (call), #call)

static ms_status blas_fail(cuda_ctx *c, cublasStatus_t s, const char *call)
{
    if (s == CUBLAS_STATUS_SUCCESS)
        return MS_OK;
    snprintf(c->err, sizeof c->err, "%s: %s", call, cublasGetStatusString(s));
    return s == CUBLAS_STATUS_ALLOC_FAILED ? MS_ENOMEM : MS_EIO;
}

static ms_status cuda_device_count(int *n, char *why, size_t n_why)
{
    int count = 0;
    cudaError_t e = cudaGetDeviceCount(&count);
    *n = e == cudaSuccess ? count : 0;
    if (e != cudaSuccess) {
        snprintf(why, n_why, "%s (%s)", cudaGetErrorString(e), cudaGetErrorName(e));
        cudaGetLastError();
    }
    return MS_OK;
}

static ms_status cuda_open(int ordinal, void **out, ms_diag *d)
{
    cuda_ctx *c = calloc(1, sizeof *c);
    if (c == NULL)
        return MS_ENOMEM;
    c->ordinal = ordinal;
    ms_status st = CU(c, cudaSetDevice(ordinal));
    if (st == MS_OK)
        st = CU(c, cudaDeviceGetStreamPriorityRange(&c->least_priority, &c->greatest_priority));
    if (st == MS_OK)
        st = blas_fail(c, cublasCreate(&c->blas), "cublasCreate");
    if (st != MS_OK) {
        ms_diag_set(d, st, "cuda:%d: %s", ordinal, c->err);
        free(c);
        return st;
    }
    *out = c;
    return MS_OK;
}

static void cuda_close(void *ctx)
{
    cuda_ctx *c = ctx;
    if (c->blas != NULL)
        cublasDestroy(c->blas);
    free(c);
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
    ms_status st = CU(c, cudaGetDeviceProperties(&prop, c->ordinal));
    if (st == MS_OK)
        snprintf(buf, n, "%s", prop.name);
    return st;
}

static ms_status cuda_mem_get_info(void *ctx, uint64_t *free_bytes, uint64_t *total_bytes)
{
    size_t f = 0, t = 0;
    ms_status st = CU(ctx, cudaMemGetInfo(&f, &t));
    *free_bytes = f;
    *total_bytes = t;
    return st;
}

static ms_status cuda_malloc_device(void *ctx, uint64_t bytes, uint64_t *addr)
{
    void *p = NULL;
    ms_status st = CU(ctx, cudaMalloc(&p, bytes));
    *addr = (uint64_t)(uintptr_t)p;
    return st;
}

static ms_status cuda_free_device(void *ctx, uint64_t addr)
{
    return CU(ctx, cudaFree((void *)(uintptr_t)addr));
}

static ms_status cuda_memset_device(void *ctx, uint64_t addr, int value, uint64_t bytes)
{
    ms_status st = CU(ctx, cudaMemset((void *)(uintptr_t)addr, value, bytes));
    return st == MS_OK ? CU(ctx, cudaDeviceSynchronize()) : st;
}

static ms_status cuda_malloc_host(void *ctx, uint64_t bytes, uint64_t *addr)
{
    void *p = NULL;
    ms_status st = CU(ctx, cudaHostAlloc(&p, bytes, cudaHostAllocDefault));
    *addr = (uint64_t)(uintptr_t)p;
    return st;
}

static ms_status cuda_free_host(void *ctx, uint64_t addr)
{
    return CU(ctx, cudaFreeHost((void *)(uintptr_t)addr));
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
    ms_status st = CU(c, cudaStreamCreateWithPriority(&stream, cudaStreamNonBlocking, p));
    *s = stream;
    return st;
}

static ms_status cuda_stream_destroy(void *ctx, void *s)
{
    return CU(ctx, cudaStreamDestroy(s));
}

static ms_status cuda_stream_synchronize(void *ctx, void *s)
{
    return CU(ctx, cudaStreamSynchronize(s));
}

static ms_status cuda_event_create(void *ctx, void **e)
{
    cudaEvent_t ev = NULL;
    ms_status st = CU(ctx, cudaEventCreate(&ev));
    *e = ev;
    return st;
}

static ms_status cuda_event_destroy(void *ctx, void *e)
{
    return CU(ctx, cudaEventDestroy(e));
}

static ms_status cuda_event_record(void *ctx, void *e, void *s)
{
    return CU(ctx, cudaEventRecord(e, s));
}

static ms_status cuda_event_query(void *ctx, void *e, bool *done)
{
    cudaError_t r = cudaEventQuery(e);
    *done = r == cudaSuccess;
    return r == cudaErrorNotReady ? MS_OK : CU(ctx, r);
}

static ms_status cuda_event_synchronize(void *ctx, void *e)
{
    return CU(ctx, cudaEventSynchronize(e));
}

static ms_status cuda_event_elapsed_ns(void *ctx, void *start, void *end, int64_t *ns)
{
    float ms = 0;
    ms_status st = CU(ctx, cudaEventElapsedTime(&ms, start, end));
    *ns = (int64_t)((double)ms * 1e6);
    return st;
}

static ms_status cuda_stream_wait_event(void *ctx, void *s, void *e)
{
    return CU(ctx, cudaStreamWaitEvent(s, e, 0));
}

static ms_status cuda_memcpy_async(void *ctx, uint64_t dst, uint64_t src, uint64_t bytes,
                                   ms_copy_kind kind, void *s)
{
    enum cudaMemcpyKind k = kind == MS_COPY_H2D   ? cudaMemcpyHostToDevice
                            : kind == MS_COPY_D2H ? cudaMemcpyDeviceToHost
                                                  : cudaMemcpyDeviceToDevice;
    return CU(ctx,
              cudaMemcpyAsync((void *)(uintptr_t)dst, (const void *)(uintptr_t)src, bytes, k, s));
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
    if (g->m > INT32_MAX || g->n > INT32_MAX || g->k > INT32_MAX || g->batch > INT32_MAX)
        return MS_ERANGE;
    ms_status st = blas_fail(c, cublasSetStream(c->blas, s), "cublasSetStream");
    /* cublasSetStream resets the workspace: give it ours again, so cuBLAS
     * allocates none outside the proxy workspace. */
    if (st == MS_OK)
        st = blas_fail(c,
                       cublasSetWorkspace(c->blas, (void *)(uintptr_t)g->scratch, g->scratch_bytes),
                       "cublasSetWorkspace");
    if (st != MS_OK)
        return st;
    const float alpha = 1.0f, beta = 0.0f;
    cudaDataType t = cuda_type(g->dtype);
    cublasStatus_t r = cublasGemmStridedBatchedEx(
        c->blas, CUBLAS_OP_N, CUBLAS_OP_N, (int)g->n, (int)g->m, (int)g->k, &alpha,
        (const void *)(uintptr_t)g->b, t, (int)g->n, g->k * g->n, (const void *)(uintptr_t)g->a, t,
        (int)g->k, g->m * g->k, &beta, (void *)(uintptr_t)g->c, t, (int)g->n, g->m * g->n,
        (int)g->batch, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
    return blas_fail(c, r, "cublasGemmStridedBatchedEx");
}

static ms_status cuda_device_synchronize(void *ctx)
{
    return CU(ctx, cudaDeviceSynchronize());
}

const npu_runtime npu_runtime_cuda = {
    .name = "cuda",
    .device_noun = "CUDA device",
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
    .device_synchronize = cuda_device_synchronize,
};

/* The registry's "cuda" entry (lib/backend/registry.c). */
ms_group_open_fn ms_npu_group_open_cuda;

ms_status ms_npu_group_open_cuda(const ms_group_config *cfg, ms_device_group **out, ms_diag *d)
{
    return npu_group_open(&npu_runtime_cuda, cfg, out, d);
}
