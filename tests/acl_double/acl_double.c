/* A test double of the Ascend ACL calls memsim uses (include/acl/acl.h,
 * aclnn/acl_meta.h, aclnnop/aclnn_batch_matmul.h): device memory is host
 * memory with a capacity, each stream is a thread of its own that runs its
 * tasks in order (copies move real bytes, events stamp the host clock,
 * waits block the stream), and every handle is counted so a test can check
 * that the code under test released everything (acl_double.h).  That
 * machinery is tests/runtime_double/'s, shared with the CUDA double; this
 * file is ACL's calls on it.
 *
 * It is stricter than the runtime where that catches bugs: a copy or a GEMM
 * operand outside a live allocation of the right kind is refused
 * (ACL_ERROR_INVALID_PARAM, counted in `rejected`).  GEMMs compute nothing:
 * they zero their output, which is enough for the data checks above them. */
#define _POSIX_C_SOURCE 200809L
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "acl/acl.h"
#include "acl_double.h"
#include "aclnn/acl_meta.h"
#include "aclnnop/aclnn_batch_matmul.h"
#include "runtime_double.h"

#define ACLNN_ERR_PARAM_INVALID 161002

_Static_assert(ACL_MEMCPY_HOST_TO_HOST == (int)RD_H2H && ACL_MEMCPY_HOST_TO_DEVICE == (int)RD_H2D &&
                   ACL_MEMCPY_DEVICE_TO_HOST == (int)RD_D2H &&
                   ACL_MEMCPY_DEVICE_TO_DEVICE == (int)RD_D2D,
               "rd_copy_kind mirrors aclrtMemcpyKind");

struct aclTensor {
    int64_t dims[3];
    uint64_t n_dims;
    aclDataType dtype;
    char *data;
};

struct aclOpExecutor {
    aclTensor a, b, out;
    uint64_t workspace;
};

static struct {
    rd_runtime rt; /* memory, streams, events and their counts */
    bool inited;
    acl_double_stats st; /* the rest: tensors, GEMMs, sweeps, refusals */
} dbl = {.rt = RD_RUNTIME_INIT};

static _Thread_local int cur_device = -1;
static _Thread_local char last_msg[256];

static aclError refuse(aclError e, const char *fmt, const char *what)
{
    snprintf(last_msg, sizeof last_msg, fmt, what);
    dbl.st.rejected++;
    return e;
}

void acl_double_configure(int n_devices, uint64_t hbm_bytes)
{
    pthread_mutex_lock(&dbl.rt.mu);
    rd_configure(&dbl.rt, n_devices, hbm_bytes);
    memset(&dbl.st, 0, sizeof dbl.st);
    pthread_mutex_unlock(&dbl.rt.mu);
}

void acl_double_set_jitter(unsigned max_us, unsigned seed)
{
    rd_set_jitter(&dbl.rt, max_us, seed);
}

void acl_double_set_copy_delay(aclrtMemcpyKind kind, unsigned us)
{
    rd_set_copy_delay(&dbl.rt, (rd_copy_kind)kind, us);
}

acl_double_stats acl_double_get_stats(void)
{
    pthread_mutex_lock(&dbl.rt.mu);
    acl_double_stats s = dbl.st;
    RD_COUNTS_INTO(s, dbl.rt.count);
    pthread_mutex_unlock(&dbl.rt.mu);
    return s;
}

const char *aclGetRecentErrMsg(void)
{
    return last_msg[0] ? last_msg : NULL;
}

/* ACL_DOUBLE_JITTER=MAX_US[:SEED] in the environment: jitter from the start. */
aclError aclInit(const char *configPath)
{
    (void)configPath;
    pthread_mutex_lock(&dbl.rt.mu);
    bool again = dbl.inited;
    dbl.inited = true;
    pthread_mutex_unlock(&dbl.rt.mu);
    if (!again)
        rd_jitter_from_env(&dbl.rt, "ACL_DOUBLE_JITTER");
    return again ? ACL_ERROR_REPEAT_INITIALIZE : ACL_SUCCESS;
}

aclError aclrtGetDeviceCount(uint32_t *count)
{
    if (count == NULL)
        return ACL_ERROR_INVALID_PARAM;
    *count = (uint32_t)dbl.rt.n_devices;
    if (dbl.rt.n_devices == 0) {
        snprintf(last_msg, sizeof last_msg, "EE1001: no device found (acl double)");
        return ACL_ERROR_RT_NO_DEVICE;
    }
    return ACL_SUCCESS;
}

aclError aclrtSetDevice(int32_t deviceId)
{
    if (!rd_device_ok(&dbl.rt, deviceId))
        return refuse(ACL_ERROR_RT_INVALID_DEVICEID, "invalid device id %s", "");
    cur_device = deviceId;
    return ACL_SUCCESS;
}

const char *aclrtGetSocName(void)
{
    return "Ascend-double";
}

/* ---- memory --------------------------------------------------------------- */

aclError aclrtMalloc(void **devPtr, size_t size, aclrtMemMallocPolicy policy)
{
    (void)policy;
    if (devPtr == NULL || size == 0 || cur_device < 0)
        return refuse(ACL_ERROR_INVALID_PARAM, "aclrtMalloc: bad argument or no device set%s", "");
    pthread_mutex_lock(&dbl.rt.mu);
    bool ok = rd_alloc(&dbl.rt, devPtr, size, cur_device);
    if (!ok)
        snprintf(last_msg, sizeof last_msg, "EL0004: failed to allocate memory (acl double)");
    pthread_mutex_unlock(&dbl.rt.mu);
    return ok ? ACL_SUCCESS : ACL_ERROR_RT_MEMORY_ALLOCATION;
}

/* Free the live block of device (RD_HOST: pinned) that starts at p. */
static bool free_block(void *p, int device)
{
    pthread_mutex_lock(&dbl.rt.mu);
    rd_block **b = rd_block_at(&dbl.rt, p, device);
    if (b != NULL)
        rd_free(&dbl.rt, b);
    pthread_mutex_unlock(&dbl.rt.mu);
    return b != NULL;
}

aclError aclrtFree(void *devPtr)
{
    return cur_device >= 0 && free_block(devPtr, cur_device)
               ? ACL_SUCCESS
               : refuse(ACL_ERROR_INVALID_PARAM, "aclrtFree: not a live allocation%s", "");
}

aclError aclrtMallocHost(void **hostPtr, size_t size)
{
    if (hostPtr == NULL || size == 0)
        return refuse(ACL_ERROR_INVALID_PARAM, "aclrtMallocHost: bad argument%s", "");
    pthread_mutex_lock(&dbl.rt.mu);
    bool ok = rd_alloc(&dbl.rt, hostPtr, size, RD_HOST);
    pthread_mutex_unlock(&dbl.rt.mu);
    return ok ? ACL_SUCCESS : ACL_ERROR_RT_MEMORY_ALLOCATION;
}

aclError aclrtFreeHost(void *hostPtr)
{
    return free_block(hostPtr, RD_HOST)
               ? ACL_SUCCESS
               : refuse(ACL_ERROR_INVALID_PARAM, "aclrtFreeHost: not a live allocation%s", "");
}

/* Whether [p, p + n) lies in a live allocation of the current device (lock
 * held). */
static bool on_device(const void *p, size_t n)
{
    return rd_block_holding(&dbl.rt, p, n, cur_device) != NULL;
}

aclError aclrtMemset(void *devPtr, size_t maxCount, int32_t value, size_t count)
{
    pthread_mutex_lock(&dbl.rt.mu);
    bool ok = count <= maxCount && on_device(devPtr, count);
    pthread_mutex_unlock(&dbl.rt.mu);
    if (!ok)
        return refuse(ACL_ERROR_INVALID_PARAM, "aclrtMemset: outside a live allocation%s", "");
    memset(devPtr, value, count);
    return ACL_SUCCESS;
}

aclError aclrtGetMemInfo(aclrtMemAttr attr, size_t *free_bytes, size_t *total)
{
    if (free_bytes == NULL || total == NULL || cur_device < 0)
        return refuse(ACL_ERROR_INVALID_PARAM, "aclrtGetMemInfo: bad argument%s", "");
    (void)attr;
    pthread_mutex_lock(&dbl.rt.mu);
    *free_bytes = rd_free_bytes(&dbl.rt, cur_device);
    *total = dbl.rt.hbm;
    pthread_mutex_unlock(&dbl.rt.mu);
    return ACL_SUCCESS;
}

/* ---- streams ---------------------------------------------------------------- */

aclError aclrtCreateStreamWithConfig(aclrtStream *stream, uint32_t priority, uint32_t flag)
{
    (void)flag;
    if (stream == NULL || cur_device < 0 || priority > 7)
        return refuse(ACL_ERROR_INVALID_PARAM, "aclrtCreateStreamWithConfig: bad argument%s", "");
    rd_stream *s = calloc(1, sizeof *s);
    if (s == NULL)
        return ACL_ERROR_RT_MEMORY_ALLOCATION;
    pthread_mutex_lock(&dbl.rt.mu);
    bool ok = rd_stream_start(&dbl.rt, s, cur_device);
    pthread_mutex_unlock(&dbl.rt.mu);
    if (!ok) {
        free(s);
        return ACL_ERROR_RT_MEMORY_ALLOCATION;
    }
    *stream = s;
    return ACL_SUCCESS;
}

aclError aclrtDestroyStream(aclrtStream stream)
{
    pthread_mutex_lock(&dbl.rt.mu);
    bool ok = rd_stream_live(&dbl.rt, stream);
    if (ok) {
        rd_stream_stop(&dbl.rt, stream);
        free(stream);
    }
    pthread_mutex_unlock(&dbl.rt.mu);
    return ok ? ACL_SUCCESS
              : refuse(ACL_ERROR_INVALID_PARAM, "aclrtDestroyStream: %s", "no such stream");
}

aclError aclrtSynchronizeStream(aclrtStream stream)
{
    pthread_mutex_lock(&dbl.rt.mu);
    bool ok = rd_stream_live(&dbl.rt, stream);
    if (ok)
        rd_stream_sync(&dbl.rt, stream);
    pthread_mutex_unlock(&dbl.rt.mu);
    return ok ? ACL_SUCCESS
              : refuse(ACL_ERROR_INVALID_PARAM, "aclrtSynchronizeStream: %s", "no such stream");
}

aclError aclrtSynchronizeDevice(void)
{
    pthread_mutex_lock(&dbl.rt.mu);
    rd_device_sync(&dbl.rt, cur_device);
    pthread_mutex_unlock(&dbl.rt.mu);
    return ACL_SUCCESS;
}

aclError aclrtMemcpyAsync(void *dst, size_t destMax, const void *src, size_t count,
                          aclrtMemcpyKind kind, aclrtStream stream)
{
    pthread_mutex_lock(&dbl.rt.mu);
    aclError e = ACL_SUCCESS;
    if (!rd_stream_live(&dbl.rt, stream) || count > destMax || kind == ACL_MEMCPY_HOST_TO_HOST)
        e = refuse(ACL_ERROR_INVALID_PARAM, "aclrtMemcpyAsync: %s", "bad stream, size or kind");
    else if (!rd_copy_sides_live(&dbl.rt, dst, src, count, (rd_copy_kind)kind, cur_device))
        e = refuse(ACL_ERROR_INVALID_PARAM, "aclrtMemcpyAsync: %s",
                   "a side is not in a live "
                   "allocation of its kind");
    else if (!rd_enqueue_copy(&dbl.rt, stream, dst, src, count, (rd_copy_kind)kind))
        e = ACL_ERROR_RT_MEMORY_ALLOCATION;
    pthread_mutex_unlock(&dbl.rt.mu);
    return e;
}

/* ---- events --------------------------------------------------------------- */

aclError aclrtCreateEvent(aclrtEvent *event)
{
    if (event == NULL || cur_device < 0)
        return refuse(ACL_ERROR_INVALID_PARAM, "aclrtCreateEvent: %s", "bad argument");
    pthread_mutex_lock(&dbl.rt.mu);
    rd_event *e = rd_event_create(&dbl.rt, cur_device);
    pthread_mutex_unlock(&dbl.rt.mu);
    if (e == NULL)
        return ACL_ERROR_RT_MEMORY_ALLOCATION;
    *event = e;
    return ACL_SUCCESS;
}

/* Returns at once; a record or wait still queued frees it when it runs
 * (CANN 8.0's aclrtDestroyEvent: it does not block, and the event's
 * resources go when it completes). */
aclError aclrtDestroyEvent(aclrtEvent event)
{
    pthread_mutex_lock(&dbl.rt.mu);
    bool ok = rd_event_live(&dbl.rt, event);
    if (ok)
        rd_event_destroy(&dbl.rt, event);
    pthread_mutex_unlock(&dbl.rt.mu);
    return ok ? ACL_SUCCESS
              : refuse(ACL_ERROR_INVALID_PARAM, "aclrtDestroyEvent: %s", "no such event");
}

aclError aclrtRecordEvent(aclrtEvent event, aclrtStream stream)
{
    pthread_mutex_lock(&dbl.rt.mu);
    aclError e = ACL_SUCCESS;
    if (!rd_event_live(&dbl.rt, event) || !rd_stream_live(&dbl.rt, stream))
        e = refuse(ACL_ERROR_INVALID_PARAM, "aclrtRecordEvent: %s", "no such event or stream");
    else if (!rd_enqueue_record(&dbl.rt, stream, event))
        e = ACL_ERROR_RT_MEMORY_ALLOCATION;
    pthread_mutex_unlock(&dbl.rt.mu);
    return e;
}

aclError aclrtStreamWaitEvent(aclrtStream stream, aclrtEvent event)
{
    pthread_mutex_lock(&dbl.rt.mu);
    aclError e = ACL_SUCCESS;
    if (!rd_event_live(&dbl.rt, event) || !rd_stream_live(&dbl.rt, stream))
        e = refuse(ACL_ERROR_INVALID_PARAM, "aclrtStreamWaitEvent: %s", "no such event or stream");
    else if (!rd_enqueue_wait(&dbl.rt, stream, event))
        e = ACL_ERROR_RT_MEMORY_ALLOCATION;
    pthread_mutex_unlock(&dbl.rt.mu);
    return e;
}

/* Never recorded: complete, as in CUDA and ACL. */
aclError aclrtQueryEventStatus(aclrtEvent event, aclrtEventRecordedStatus *status)
{
    pthread_mutex_lock(&dbl.rt.mu);
    aclError e = ACL_SUCCESS;
    if (!rd_event_live(&dbl.rt, event) || status == NULL)
        e = refuse(ACL_ERROR_INVALID_PARAM, "aclrtQueryEventStatus: %s", "no such event");
    else
        *status = rd_event_complete(event) ? ACL_EVENT_RECORDED_STATUS_COMPLETE
                                           : ACL_EVENT_RECORDED_STATUS_NOT_READY;
    pthread_mutex_unlock(&dbl.rt.mu);
    return e;
}

aclError aclrtSynchronizeEvent(aclrtEvent event)
{
    pthread_mutex_lock(&dbl.rt.mu);
    bool ok = rd_event_live(&dbl.rt, event);
    if (ok)
        rd_event_sync(&dbl.rt, event);
    pthread_mutex_unlock(&dbl.rt.mu);
    return ok ? ACL_SUCCESS
              : refuse(ACL_ERROR_INVALID_PARAM, "aclrtSynchronizeEvent: %s", "no such event");
}

aclError aclrtEventElapsedTime(float *ms, aclrtEvent startEvent, aclrtEvent endEvent)
{
    pthread_mutex_lock(&dbl.rt.mu);
    aclError e = ACL_SUCCESS;
    const rd_event *a = startEvent, *b = endEvent;
    if (ms == NULL || !rd_event_live(&dbl.rt, a) || !rd_event_live(&dbl.rt, b) || a->issued == 0 ||
        b->issued == 0)
        e = refuse(ACL_ERROR_INVALID_PARAM, "aclrtEventElapsedTime: %s", "event not recorded");
    else if (!rd_elapsed_ms(a, b, ms))
        e = ACL_ERROR_RT_EVENT_NOT_COMPLETE;
    pthread_mutex_unlock(&dbl.rt.mu);
    return e;
}

/* ---- device reset: sweep what the caller left ------------------------------- */

/* Free the device's streams, events and memory, each counted as swept
 * (lock held). */
static void sweep(int device)
{
    rd_runtime *rt = &dbl.rt;
    rd_stream *s;
    while ((s = rd_stream_of(rt, device)) != NULL) {
        rd_stream_stop(rt, s);
        free(s);
        dbl.st.swept_objects++;
    }
    rd_event *e;
    while ((e = rd_event_of(rt, device)) != NULL) {
        rd_event_destroy(rt, e);
        dbl.st.swept_objects++;
    }
    rd_block **b;
    while ((b = rd_block_of(rt, device)) != NULL) {
        dbl.st.swept_bytes += rd_free(rt, b);
        dbl.st.swept_objects++;
    }
}

aclError aclrtResetDevice(int32_t deviceId)
{
    if (!rd_device_ok(&dbl.rt, deviceId))
        return refuse(ACL_ERROR_RT_INVALID_DEVICEID, "aclrtResetDevice: %s", "invalid device id");
    pthread_mutex_lock(&dbl.rt.mu);
    sweep(deviceId);
    pthread_mutex_unlock(&dbl.rt.mu);
    if (cur_device == deviceId)
        cur_device = -1;
    return ACL_SUCCESS;
}

/* ---- aclnn ------------------------------------------------------------------ */

static size_t dtype_size(aclDataType t)
{
    return t == ACL_FLOAT ? 4 : t == ACL_FLOAT16 || t == ACL_BF16 ? 2 : 0;
}

aclTensor *aclCreateTensor(const int64_t *viewDims, uint64_t viewDimsNum, aclDataType dataType,
                           const int64_t *stride, int64_t offset, aclFormat format,
                           const int64_t *storageDims, uint64_t storageDimsNum, void *tensorData)
{
    (void)storageDims;
    (void)storageDimsNum;
    if (viewDims == NULL || stride == NULL || viewDimsNum != 3 || offset != 0 ||
        format != ACL_FORMAT_ND || stride[2] != 1 || stride[1] != viewDims[2] ||
        stride[0] != viewDims[1] * viewDims[2])
        return NULL; /* the double knows packed 3-D tensors only */
    aclTensor *t = calloc(1, sizeof *t);
    if (t == NULL)
        return NULL;
    memcpy(t->dims, viewDims, sizeof t->dims);
    t->n_dims = viewDimsNum;
    t->dtype = dataType;
    t->data = tensorData;
    pthread_mutex_lock(&dbl.rt.mu);
    dbl.st.tensors++;
    pthread_mutex_unlock(&dbl.rt.mu);
    return t;
}

aclnnStatus aclDestroyTensor(const aclTensor *tensor)
{
    if (tensor == NULL)
        return ACLNN_ERR_PARAM_INVALID;
    free((void *)tensor);
    pthread_mutex_lock(&dbl.rt.mu);
    dbl.st.tensors--;
    pthread_mutex_unlock(&dbl.rt.mu);
    return OK;
}

static size_t tensor_bytes(const aclTensor *t)
{
    return (size_t)(t->dims[0] * t->dims[1] * t->dims[2]) * dtype_size(t->dtype);
}

aclnnStatus aclnnBatchMatMulGetWorkspaceSize(const aclTensor *self, const aclTensor *mat2,
                                             aclTensor *out, int8_t cubeMathType,
                                             uint64_t *workspaceSize, aclOpExecutor **executor)
{
    (void)cubeMathType;
    if (self == NULL || mat2 == NULL || out == NULL || workspaceSize == NULL || executor == NULL ||
        dtype_size(self->dtype) == 0 || self->dtype != mat2->dtype || self->dtype != out->dtype ||
        self->dims[0] != mat2->dims[0] || self->dims[2] != mat2->dims[1] ||
        out->dims[0] != self->dims[0] || out->dims[1] != self->dims[1] ||
        out->dims[2] != mat2->dims[2]) {
        snprintf(last_msg, sizeof last_msg, "aclnnBatchMatMul: shapes or dtypes do not match");
        return ACLNN_ERR_PARAM_INVALID;
    }
    aclOpExecutor *x = calloc(1, sizeof *x);
    if (x == NULL)
        return ACL_ERROR_RT_MEMORY_ALLOCATION;
    x->a = *self;
    x->b = *mat2;
    x->out = *out;
    /* Big GEMMs ask for a workspace, so callers are tested with one. */
    x->workspace = tensor_bytes(out) >= (1u << 20) ? (1u << 20) : 0;
    *workspaceSize = x->workspace;
    *executor = x;
    return OK;
}

aclnnStatus aclnnBatchMatMul(void *workspace, uint64_t workspaceSize, aclOpExecutor *executor,
                             aclrtStream stream)
{
    if (executor == NULL)
        return ACLNN_ERR_PARAM_INVALID;
    aclOpExecutor x = *executor;
    free(executor); /* one launch per executor, as aclnn's */
    pthread_mutex_lock(&dbl.rt.mu);
    aclnnStatus e = OK;
    bool ws_ok =
        x.workspace == 0 || (workspaceSize >= x.workspace && on_device(workspace, x.workspace));
    if (!rd_stream_live(&dbl.rt, stream) || !ws_ok || !on_device(x.a.data, tensor_bytes(&x.a)) ||
        !on_device(x.b.data, tensor_bytes(&x.b)) || !on_device(x.out.data, tensor_bytes(&x.out)))
        e = refuse(ACLNN_ERR_PARAM_INVALID, "aclnnBatchMatMul: %s",
                   "an operand or the workspace "
                   "is not in a live device allocation");
    else if (!rd_enqueue_fill(&dbl.rt, stream, x.out.data, tensor_bytes(&x.out)))
        e = ACL_ERROR_RT_MEMORY_ALLOCATION;
    if (e == OK) {
        dbl.st.gemms++;
        dbl.st.fp16_gemms += x.a.dtype == ACL_FLOAT16;
        dbl.st.gemm_flops += 2.0 * (double)x.a.dims[0] * (double)x.a.dims[1] * (double)x.a.dims[2] *
                             (double)x.b.dims[2];
    }
    pthread_mutex_unlock(&dbl.rt.mu);
    return e;
}
