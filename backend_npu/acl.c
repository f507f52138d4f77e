/* The runtime layer on Ascend ACL (runtime.h): aclrt for memory, streams,
 * events and copies, aclnnBatchMatMul for the GEMMs.  Built with
 * configure --with-ascend=CANN; CI builds and tests it against the double in
 * tests/acl_double/ (host memory, one thread per stream, the same
 * signatures), since CANN cannot be installed there.
 *
 * CANN's error codes are `static const int` in its headers, not macros, so
 * they are compared, never used as case labels.  aclInit may be called once
 * per process (ACL_ERROR_REPEAT_INITIALIZE after that is fine) and is never
 * undone: aclFinalize cannot be followed by another aclInit, and a later
 * run in the same process would need it. */
#include <acl/acl.h>
#include <aclnn/acl_meta.h>
#include <aclnnop/aclnn_batch_matmul.h>
#include <stdio.h>
#include <stdlib.h>

#include "runtime.h"

typedef struct acl_ctx {
    int32_t ordinal;
    uint64_t ws, ws_bytes; /* aclnn workspace beyond the scratch it was given */
    char err[256];
} acl_ctx;

static ms_status acl_fail(acl_ctx *c, aclError e, const char *call)
{
    if (e == ACL_SUCCESS)
        return MS_OK;
    const char *msg = aclGetRecentErrMsg();
    if (c != NULL)
        snprintf(c->err, sizeof c->err, "%s: error %d%s%s", call, (int)e, msg ? ": " : "",
                 msg ? msg : "");
    if (e == ACL_ERROR_RT_MEMORY_ALLOCATION)
        return MS_ENOMEM;
    if (e == ACL_ERROR_INVALID_PARAM || e == ACL_ERROR_RT_PARAM_INVALID ||
        e == ACL_ERROR_RT_INVALID_HANDLE)
        return MS_EINVAL;
    return MS_EIO;
}

#define ACL(c, call) acl_fail((c), (call), #call)

static ms_status acl_device_count(int *n, char *why, size_t n_why)
{
    uint32_t count = 0;
    aclError e = aclInit(NULL);
    if (e == ACL_SUCCESS || e == ACL_ERROR_REPEAT_INITIALIZE)
        e = aclrtGetDeviceCount(&count);
    *n = e == ACL_SUCCESS ? (int)count : 0;
    if (e != ACL_SUCCESS) {
        const char *msg = aclGetRecentErrMsg();
        snprintf(why, n_why, "error %d%s%s", (int)e, msg ? ": " : "", msg ? msg : "");
    }
    return MS_OK;
}

static ms_status acl_open(int ordinal, void **out, ms_diag *d)
{
    acl_ctx *c = calloc(1, sizeof *c);
    if (c == NULL)
        return MS_ENOMEM;
    c->ordinal = ordinal;
    ms_status st = ACL(c, aclrtSetDevice(ordinal));
    if (st != MS_OK) {
        ms_diag_set(d, st, "npu:%d: %s", ordinal, c->err);
        free(c);
        return st;
    }
    *out = c;
    return MS_OK;
}

/* Resetting the device releases whatever is left on it (the device layer
 * has freed everything it made by now). */
static void acl_close(void *ctx)
{
    acl_ctx *c = ctx;
    if (c->ws != 0)
        aclrtFree((void *)(uintptr_t)c->ws);
    aclrtResetDevice(c->ordinal);
    free(c);
}

static const char *acl_last_error(void *ctx)
{
    const acl_ctx *c = ctx;
    return c != NULL && c->err[0] ? c->err : "no error recorded";
}

static ms_status acl_device_name(void *ctx, char *buf, size_t n)
{
    const char *soc = aclrtGetSocName();
    snprintf(buf, n, "%s", soc ? soc : "Ascend NPU");
    return MS_OK;
}

static ms_status acl_mem_get_info(void *ctx, uint64_t *free_bytes, uint64_t *total_bytes)
{
    size_t f = 0, t = 0;
    ms_status st = ACL(ctx, aclrtGetMemInfo(ACL_HBM_MEM, &f, &t));
    *free_bytes = f;
    *total_bytes = t;
    return st;
}

static ms_status acl_malloc_device(void *ctx, uint64_t bytes, uint64_t *addr)
{
    void *p = NULL;
    ms_status st = ACL(ctx, aclrtMalloc(&p, bytes, ACL_MEM_MALLOC_HUGE_FIRST));
    *addr = (uint64_t)(uintptr_t)p;
    return st;
}

static ms_status acl_free_device(void *ctx, uint64_t addr)
{
    return ACL(ctx, aclrtFree((void *)(uintptr_t)addr));
}

static ms_status acl_memset_device(void *ctx, uint64_t addr, int value, uint64_t bytes)
{
    return ACL(ctx, aclrtMemset((void *)(uintptr_t)addr, bytes, value, bytes));
}

static ms_status acl_malloc_host(void *ctx, uint64_t bytes, uint64_t *addr)
{
    void *p = NULL;
    ms_status st = ACL(ctx, aclrtMallocHost(&p, bytes));
    *addr = (uint64_t)(uintptr_t)p;
    return st;
}

static ms_status acl_free_host(void *ctx, uint64_t addr)
{
    return ACL(ctx, aclrtFreeHost((void *)(uintptr_t)addr));
}

/* ACL priorities run 0 (most urgent) to 7, as backend.h's do from 0. */
static ms_status acl_stream_create(void *ctx, int priority, void **s)
{
    uint32_t p = priority < 0 ? 0 : priority > 7 ? 7 : (uint32_t)priority;
    aclrtStream stream = NULL;
    ms_status st = ACL(ctx, aclrtCreateStreamWithConfig(&stream, p, 0));
    *s = stream;
    return st;
}

static ms_status acl_stream_destroy(void *ctx, void *s)
{
    return ACL(ctx, aclrtDestroyStream(s));
}

static ms_status acl_stream_synchronize(void *ctx, void *s)
{
    return ACL(ctx, aclrtSynchronizeStream(s));
}

static ms_status acl_event_create(void *ctx, void **e)
{
    aclrtEvent ev = NULL;
    ms_status st = ACL(ctx, aclrtCreateEvent(&ev));
    *e = ev;
    return st;
}

static ms_status acl_event_destroy(void *ctx, void *e)
{
    return ACL(ctx, aclrtDestroyEvent(e));
}

static ms_status acl_event_record(void *ctx, void *e, void *s)
{
    return ACL(ctx, aclrtRecordEvent(e, s));
}

static ms_status acl_event_query(void *ctx, void *e, bool *done)
{
    aclrtEventRecordedStatus status = ACL_EVENT_RECORDED_STATUS_NOT_READY;
    ms_status st = ACL(ctx, aclrtQueryEventStatus(e, &status));
    *done = st == MS_OK && status == ACL_EVENT_RECORDED_STATUS_COMPLETE;
    return st;
}

static ms_status acl_event_synchronize(void *ctx, void *e)
{
    return ACL(ctx, aclrtSynchronizeEvent(e));
}

/* MS_EAGAIN until both events have completed, as backend.h says. */
static ms_status acl_event_elapsed_ns(void *ctx, void *start, void *end, int64_t *ns)
{
    bool a = false, b = false;
    ms_status st = acl_event_query(ctx, start, &a);
    if (st == MS_OK)
        st = acl_event_query(ctx, end, &b);
    if (st != MS_OK)
        return st;
    if (!a || !b)
        return MS_EAGAIN;
    float ms = 0;
    st = ACL(ctx, aclrtEventElapsedTime(&ms, start, end));
    *ns = (int64_t)((double)ms * 1e6);
    return st;
}

static ms_status acl_stream_wait_event(void *ctx, void *s, void *e)
{
    return ACL(ctx, aclrtStreamWaitEvent(s, e));
}

static ms_status acl_memcpy_async(void *ctx, uint64_t dst, uint64_t src, uint64_t bytes,
                                  ms_copy_kind kind, void *s)
{
    aclrtMemcpyKind k = kind == MS_COPY_H2D   ? ACL_MEMCPY_HOST_TO_DEVICE
                        : kind == MS_COPY_D2H ? ACL_MEMCPY_DEVICE_TO_HOST
                                              : ACL_MEMCPY_DEVICE_TO_DEVICE;
    return ACL(ctx, aclrtMemcpyAsync((void *)(uintptr_t)dst, bytes, (const void *)(uintptr_t)src,
                                     bytes, k, s));
}

static aclDataType acl_type(ms_dtype t)
{
    return t == MS_DTYPE_FP32 ? ACL_FLOAT : t == MS_DTYPE_BF16 ? ACL_BF16 : ACL_FLOAT16;
}

/* A packed row-major [batch, rows, cols] tensor at addr. */
static aclTensor *tensor3(ms_dtype t, int64_t batch, int64_t rows, int64_t cols, uint64_t addr)
{
    int64_t dims[3] = {batch, rows, cols};
    int64_t strides[3] = {rows * cols, cols, 1};
    return aclCreateTensor(dims, 3, acl_type(t), strides, 0, ACL_FORMAT_ND, dims, 3,
                           (void *)(uintptr_t)addr);
}

/* The workspace aclnn asks for: the scratch it was given when that is
 * enough, else one of the runtime layer's own, grown (after the device is
 * idle, since queued GEMMs may still use the old one) as needed. */
static ms_status gemm_workspace(acl_ctx *c, const npu_gemm *g, uint64_t need, uint64_t *ws)
{
    *ws = need == 0 ? 0 : g->scratch;
    if (need <= g->scratch_bytes)
        return MS_OK;
    if (need > c->ws_bytes) {
        ms_status st = ACL(c, aclrtSynchronizeDevice());
        if (st == MS_OK && c->ws != 0)
            st = ACL(c, aclrtFree((void *)(uintptr_t)c->ws));
        c->ws = 0;
        c->ws_bytes = 0;
        void *p = NULL;
        if (st == MS_OK && (st = ACL(c, aclrtMalloc(&p, need, ACL_MEM_MALLOC_HUGE_FIRST))) != MS_OK)
            return st;
        c->ws = (uint64_t)(uintptr_t)p;
        c->ws_bytes = need;
    }
    *ws = c->ws;
    return MS_OK;
}

/* aclnn's matmuls on the 910B take fp32, fp16 and bf16; the 910B has no
 * FP8 (the proxies run it as fp16). */
static bool acl_gemm_takes(void *ctx, const npu_gemm *g)
{
    (void)ctx;
    return g->dtype == MS_DTYPE_FP32 || g->dtype == MS_DTYPE_FP16 || g->dtype == MS_DTYPE_BF16;
}

/* cubeMathType 1 (ALLOW_FP32_DOWN_PRECISION): fp16 and bf16 run as they
 * are; fp32 may use HF32, as torch_npu allows by default for matmul. */
static ms_status acl_gemm(void *ctx, const npu_gemm *g, void *s)
{
    acl_ctx *c = ctx;
    aclTensor *a = tensor3(g->dtype, g->batch, g->m, g->k, g->a);
    aclTensor *b = tensor3(g->dtype, g->batch, g->k, g->n, g->b);
    aclTensor *out = tensor3(g->dtype, g->batch, g->m, g->n, g->c);
    ms_status st = a && b && out ? MS_OK : MS_ENOMEM;
    uint64_t need = 0, ws = 0;
    aclOpExecutor *exec = NULL;
    if (st == MS_OK)
        st = ACL(c, aclnnBatchMatMulGetWorkspaceSize(a, b, out, 1, &need, &exec));
    if (st == MS_OK)
        st = gemm_workspace(c, g, need, &ws);
    if (st == MS_OK)
        st = ACL(c, aclnnBatchMatMul((void *)(uintptr_t)ws, need, exec, s));
    if (a != NULL)
        aclDestroyTensor(a);
    if (b != NULL)
        aclDestroyTensor(b);
    if (out != NULL)
        aclDestroyTensor(out);
    return st;
}

static ms_status acl_device_synchronize(void *ctx)
{
    return ACL(ctx, aclrtSynchronizeDevice());
}

const npu_runtime npu_runtime_acl = {
    .name = "npu",
    .device_noun = "Ascend NPU",
    .device_count = acl_device_count,
    .open = acl_open,
    .close = acl_close,
    .last_error = acl_last_error,
    .device_name = acl_device_name,
    .mem_get_info = acl_mem_get_info,
    .malloc_device = acl_malloc_device,
    .free_device = acl_free_device,
    .memset_device = acl_memset_device,
    .malloc_host = acl_malloc_host,
    .free_host = acl_free_host,
    .stream_create = acl_stream_create,
    .stream_destroy = acl_stream_destroy,
    .stream_synchronize = acl_stream_synchronize,
    .event_create = acl_event_create,
    .event_destroy = acl_event_destroy,
    .event_record = acl_event_record,
    .event_query = acl_event_query,
    .event_synchronize = acl_event_synchronize,
    .event_elapsed_ns = acl_event_elapsed_ns,
    .stream_wait_event = acl_stream_wait_event,
    .memcpy_async = acl_memcpy_async,
    .gemm = acl_gemm,
    .gemm_takes = acl_gemm_takes,
    .device_synchronize = acl_device_synchronize,
};

/* The registry's "npu" entry (lib/backend/registry.c). */
ms_group_open_fn ms_npu_group_open_acl;

ms_status ms_npu_group_open_acl(const ms_group_config *cfg, ms_device_group **out, ms_diag *d)
{
    return npu_group_open(&npu_runtime_acl, cfg, out, d);
}
