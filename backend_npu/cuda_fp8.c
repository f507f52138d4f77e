/* FP8 GEMMs on CUDA through cuBLASLt (cuda_private.h).  cublasGemmEx has
 * no FP8 types: Transformer Engine's FP8 linear layers, and so memsim's
 * `model.fp8` ops, run on cublasLtMatmul, and a calibration that timed them
 * as fp16 would fit the wrong ceiling (docs/validation.md, H100).
 *
 * What the FP8 kernels require (cuBLAS documentation, cublasLtMatmul):
 * compute capability 8.9 or later; A transposed and B not ("TN"); E4M3 or
 * E5M2 inputs, here E4M3 both (Transformer Engine's forward format, and the
 * `hybrid` recipe's for everything but the output gradient); an fp32 scale
 * type with fp32 accumulation; 16-byte aligned leading dimensions.  The
 * result is bf16, what TE's linear layers write.  Scaling factors are left
 * at their default of 1: the proxy's operands are fixed bytes (proxy.c:
 * 0x3c, 1.5 in E4M3), so there is nothing to scale, and a per-tensor scale
 * does not change a GEMM's speed.  Fast accumulation stays off, as TE
 * leaves it for two of a linear layer's three GEMMs (dgrad and wgrad).
 *
 * Row-major C (m x n) = A (m x k) . B (k x n) is column-major C^T = B^T.A^T
 * (n x m); in TN form cuBLASLt's A is our B stored k x n (transposed), its
 * B our A stored k x m.  The operands' bytes are the proxy's and mean
 * nothing, so only their sizes must match the shape. */
#include "cuda_private.h"

#include <stdio.h>
#include <string.h>

static ms_status lt_fail(cuda_ctx *c, cublasStatus_t s, const char *call)
{
    if (s == CUBLAS_STATUS_SUCCESS)
        return MS_OK;
    snprintf(c->err, sizeof c->err, "%s: %s", call, c->api->cublasLtGetStatusString(s));
    return s == CUBLAS_STATUS_ALLOC_FAILED ? MS_ENOMEM : MS_EIO;
}

/* LT(c, cublasLtCreate, &h): as CU, for cuBLASLt's status codes. */
#define LT(c, fn, ...) lt_fail((c), (c)->api->fn(__VA_ARGS__), #fn "(" #__VA_ARGS__ ")")

static ms_status fp8_descriptors(cuda_ctx *c)
{
    const cublasOperation_t transposed = CUBLAS_OP_T;
    const uint64_t workspace = NPU_GEMM_SCRATCH_BYTES;
    ms_status st = LT(c, cublasLtMatmulDescCreate, &c->fp8_desc, CUBLAS_COMPUTE_32F, CUDA_R_32F);
    if (st == MS_OK)
        st = LT(c, cublasLtMatmulDescSetAttribute, c->fp8_desc, CUBLASLT_MATMUL_DESC_TRANSA,
                &transposed, sizeof transposed);
    if (st == MS_OK)
        st = LT(c, cublasLtMatmulPreferenceCreate, &c->fp8_pref);
    if (st == MS_OK)
        st = LT(c, cublasLtMatmulPreferenceSetAttribute, c->fp8_pref,
                CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &workspace, sizeof workspace);
    return st;
}

ms_status cuda_fp8_open(cuda_ctx *c)
{
    struct cudaDeviceProp prop;
    ms_status st = CU(c, cudaGetDeviceProperties, &prop, c->ordinal);
    if (st != MS_OK)
        return st;
    if (prop.major < 8 || (prop.major == 8 && prop.minor < 9))
        return MS_OK;
    st = LT(c, cublasLtCreate, &c->lt);
    return st == MS_OK ? fp8_descriptors(c) : st;
}

static void plan_free(const cuda_api *api, cuda_fp8_plan *p)
{
    if (p->a != NULL)
        api->cublasLtMatrixLayoutDestroy(p->a);
    if (p->b != NULL)
        api->cublasLtMatrixLayoutDestroy(p->b);
    if (p->d != NULL)
        api->cublasLtMatrixLayoutDestroy(p->d);
    *p = (cuda_fp8_plan){0};
}

void cuda_fp8_close(cuda_ctx *c)
{
    const cuda_api *api = c->api;
    for (int i = 0; i < CUDA_FP8_PLANS; i++)
        plan_free(api, &c->plans[i]);
    if (c->fp8_pref != NULL)
        api->cublasLtMatmulPreferenceDestroy(c->fp8_pref);
    if (c->fp8_desc != NULL)
        api->cublasLtMatmulDescDestroy(c->fp8_desc);
    if (c->lt != NULL)
        api->cublasLtDestroy(c->lt);
    c->fp8_pref = NULL;
    c->fp8_desc = NULL;
    c->lt = NULL;
}

bool cuda_fp8_takes(const cuda_ctx *c, const npu_gemm *g)
{
    return c->lt != NULL && g->m % 16 == 0 && g->n % 16 == 0 && g->k % 16 == 0 && g->m > 0 &&
           g->n > 0 && g->k > 0 && g->batch > 0 && g->batch <= INT32_MAX;
}

/* A column-major rows x cols layout of `batch` matrices packed one after
 * another. */
static ms_status layout(cuda_ctx *c, cublasLtMatrixLayout_t *out, cudaDataType t, int64_t rows,
                        int64_t cols, int64_t batch)
{
    const int32_t count = (int32_t)batch;
    const int64_t stride = rows * cols;
    ms_status st = LT(c, cublasLtMatrixLayoutCreate, out, t, (uint64_t)rows, (uint64_t)cols, rows);
    if (st == MS_OK)
        st = LT(c, cublasLtMatrixLayoutSetAttribute, *out, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT,
                &count, sizeof count);
    if (st == MS_OK)
        st = LT(c, cublasLtMatrixLayoutSetAttribute, *out,
                CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &stride, sizeof stride);
    return st;
}

/* Layouts and algorithm for g's shape; MS_EUNSUPPORTED (with the reason in
 * c->err) if cuBLASLt has no FP8 kernel for it. */
static ms_status plan_make(cuda_ctx *c, const npu_gemm *g, cuda_fp8_plan *p)
{
    *p = (cuda_fp8_plan){.m = g->m, .n = g->n, .k = g->k, .batch = g->batch};
    ms_status st = layout(c, &p->a, CUDA_R_8F_E4M3, g->k, g->n, g->batch);
    if (st == MS_OK)
        st = layout(c, &p->b, CUDA_R_8F_E4M3, g->k, g->m, g->batch);
    if (st == MS_OK)
        st = layout(c, &p->d, CUDA_R_16BF, g->n, g->m, g->batch);
    cublasLtMatmulHeuristicResult_t found;
    int n_found = 0;
    if (st == MS_OK)
        st = LT(c, cublasLtMatmulAlgoGetHeuristic, c->lt, c->fp8_desc, p->a, p->b, p->d, p->d,
                c->fp8_pref, 1, &found, &n_found);
    /* The result's fields hold only when its own state says success. */
    if (st == MS_OK && (n_found < 1 || found.state != CUBLAS_STATUS_SUCCESS)) {
        snprintf(c->err, sizeof c->err,
                 "cublasLtMatmulAlgoGetHeuristic: no FP8 kernel for m=%lld n=%lld k=%lld batch=%lld",
                 (long long)g->m, (long long)g->n, (long long)g->k, (long long)g->batch);
        st = MS_EUNSUPPORTED;
    }
    if (st == MS_OK)
        p->algo = found.algo;
    else
        plan_free(c->api, p);
    return st;
}

static ms_status plan_for(cuda_ctx *c, const npu_gemm *g, const cuda_fp8_plan **out)
{
    for (int i = 0; i < CUDA_FP8_PLANS; i++) {
        const cuda_fp8_plan *p = &c->plans[i];
        if (p->m == g->m && p->n == g->n && p->k == g->k && p->batch == g->batch) {
            *out = p;
            return MS_OK;
        }
    }
    cuda_fp8_plan *p = &c->plans[c->next_plan];
    c->next_plan = (c->next_plan + 1) % CUDA_FP8_PLANS;
    plan_free(c->api, p);
    *out = p;
    return plan_make(c, g, p);
}

ms_status cuda_fp8_gemm(cuda_ctx *c, const npu_gemm *g, void *stream)
{
    if (!cuda_fp8_takes(c, g))
        return MS_EINVAL; /* proxy.c asks gemm_takes first */
    const cuda_fp8_plan *p = NULL;
    ms_status st = plan_for(c, g, &p);
    if (st != MS_OK)
        return st;
    const float alpha = 1.0f, beta = 0.0f;
    void *d = (void *)(uintptr_t)g->c;
    return LT(c, cublasLtMatmul, c->lt, c->fp8_desc, &alpha, (const void *)(uintptr_t)g->b, p->a,
              (const void *)(uintptr_t)g->a, p->b, &beta, d, p->d, d, p->d, &p->algo,
              (void *)(uintptr_t)g->scratch, g->scratch_bytes, (cudaStream_t)stream);
}
