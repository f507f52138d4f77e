/* backend_npu/cuda*.c: what the CUDA runtime layer's files share (private
 * to them): the table of loaded entry points, a device's context, and the
 * FP8 GEMMs through cuBLASLt (cuda_fp8.c). */
#ifndef MEMSIM_NPU_CUDA_PRIVATE_H
#define MEMSIM_NPU_CUDA_PRIVATE_H

#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <stdbool.h>

#include "runtime.h"

/* Every entry point the files call.  A name the headers turn into another
 * symbol (cublasCreate is cublasCreate_v2; cudaMemcpyAsync is
 * cudaMemcpyAsync_ptsz under per-thread default streams) is looked up
 * under that symbol.  (Kept from clang-format, which would stair-step
 * the lists.) */
// clang-format off
#define CUDART_CALLS(X)                                                                        \
    X(cudaGetDeviceCount) X(cudaGetLastError) X(cudaGetErrorString) X(cudaGetErrorName)        \
    X(cudaSetDevice) X(cudaDeviceGetStreamPriorityRange) X(cudaGetDeviceProperties)            \
    X(cudaMemGetInfo) X(cudaMalloc) X(cudaFree) X(cudaMemset) X(cudaDeviceSynchronize)         \
    X(cudaHostAlloc) X(cudaFreeHost) X(cudaStreamCreateWithPriority) X(cudaStreamDestroy)      \
    X(cudaStreamSynchronize) X(cudaEventCreate) X(cudaEventDestroy) X(cudaEventRecord)         \
    X(cudaEventQuery) X(cudaEventSynchronize) X(cudaEventElapsedTime) X(cudaStreamWaitEvent)   \
    X(cudaMemcpyAsync)
#define CUBLAS_CALLS(X)                                                                        \
    X(cublasCreate) X(cublasDestroy) X(cublasGetStatusString) X(cublasSetStream)               \
    X(cublasSetWorkspace) X(cublasGemmStridedBatchedEx)
#define CUBLASLT_CALLS(X)                                                                      \
    X(cublasLtCreate) X(cublasLtDestroy) X(cublasLtGetStatusString)                            \
    X(cublasLtMatmulDescCreate) X(cublasLtMatmulDescDestroy) X(cublasLtMatmulDescSetAttribute) \
    X(cublasLtMatrixLayoutCreate) X(cublasLtMatrixLayoutDestroy)                               \
    X(cublasLtMatrixLayoutSetAttribute) X(cublasLtMatmulPreferenceCreate)                      \
    X(cublasLtMatmulPreferenceDestroy) X(cublasLtMatmulPreferenceSetAttribute)                 \
    X(cublasLtMatmulAlgoGetHeuristic) X(cublasLtMatmul)
// clang-format on

typedef struct cuda_api {
#define CUDA_API_FIELD(fn) __typeof__(&fn) fn;
    CUDART_CALLS(CUDA_API_FIELD)
    CUBLAS_CALLS(CUDA_API_FIELD)
    CUBLASLT_CALLS(CUDA_API_FIELD)
#undef CUDA_API_FIELD
} cuda_api;

/* One FP8 GEMM shape as cuBLASLt was set up for it: its four layouts and
 * the algorithm its heuristic chose.  A proxy or a calibration repeats a
 * shape many times, and the heuristic costs more host time than a small
 * GEMM takes on the device. */
typedef struct cuda_fp8_plan {
    int64_t m, n, k, batch; /* 0: empty */
    cublasLtMatrixLayout_t a, b, d;
    cublasLtMatmulAlgo_t algo;
} cuda_fp8_plan;

#define CUDA_FP8_PLANS 4

typedef struct cuda_ctx {
    const cuda_api *api;
    int ordinal;
    cublasHandle_t blas;
    int least_priority, greatest_priority; /* numerically: least >= greatest */
    /* Made only where the device has FP8 tensor cores (compute capability
     * 8.9, Ada, or later): NULL says it has none. */
    cublasLtHandle_t lt;
    cublasLtMatmulDesc_t fp8_desc;
    cublasLtMatmulPreference_t fp8_pref;
    cuda_fp8_plan plans[CUDA_FP8_PLANS];
    int next_plan; /* replaced next when all are taken */
    char err[256];
} cuda_ctx;

/* Record the runtime's message and turn the error into an ms_status.  The
 * error is also cleared from the runtime's sticky "last error" slot (an
 * out-of-memory is not sticky: the next call may succeed). */
ms_status cuda_fail(cuda_ctx *c, cudaError_t e, const char *call);
ms_status cuda_blas_fail(cuda_ctx *c, cublasStatus_t s, const char *call);

/* CU(c, cudaMalloc, &p, bytes): the call through c's table, its error
 * recorded under the name and arguments as written. */
#define CU(c, fn, ...) cuda_fail((c), (c)->api->fn(__VA_ARGS__), #fn "(" #__VA_ARGS__ ")")

/* CUDA's current device belongs to the calling thread, not to a context, and
 * allocations, streams, events, cuBLAS/cuBLASLt calls and device-wide
 * synchronization act on it: each such call first makes c's device current,
 * so that one thread holding two devices sends each its own work. */
ms_status cuda_use(cuda_ctx *c);

/* cuda_fp8.c.  open: the handle and the descriptors every FP8 GEMM shares,
 * when the device has FP8 tensor cores (else c->lt stays NULL); close
 * frees what open and the GEMMs made. */
ms_status cuda_fp8_open(cuda_ctx *c);
void cuda_fp8_close(cuda_ctx *c);
/* Whether cuBLASLt runs g as FP8 on this device (its shape meets the FP8
 * kernels' alignment). */
bool cuda_fp8_takes(const cuda_ctx *c, const npu_gemm *g);
ms_status cuda_fp8_gemm(cuda_ctx *c, const npu_gemm *g, void *stream);

#endif
