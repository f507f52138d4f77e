/* A test double of the Ascend ACL calls memsim uses (include/acl/acl.h,
 * aclnn/acl_meta.h, aclnnop/aclnn_batch_matmul.h): device memory is host
 * memory with a capacity, each stream is a thread of its own that runs its
 * tasks in order (copies move real bytes, events stamp the host clock,
 * waits block the stream), and every handle is counted so a test can check
 * that the code under test released everything (acl_double.h).
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
#include <time.h>

#include "acl/acl.h"
#include "acl_double.h"
#include "aclnn/acl_meta.h"
#include "aclnnop/aclnn_batch_matmul.h"

#define DBL_MAX_DEVICES 16
#define ACLNN_ERR_PARAM_INVALID 161002

typedef struct dbl_block {
    char *p;
    size_t size;
    int device; /* -1: pinned host memory */
    struct dbl_block *next;
} dbl_block;

struct dbl_event {
    int device;
    uint64_t issued, done; /* records issued and completed */
    int64_t done_ns;
    struct dbl_event *next;
};

typedef enum { T_COPY, T_RECORD, T_WAIT, T_GEMM } dbl_task_kind;

typedef struct dbl_task {
    dbl_task_kind kind;
    char *dst;
    const char *src;
    size_t bytes;
    struct dbl_event *ev;
    uint64_t gen;
    unsigned delay_us; /* a copy's: acl_double_set_copy_delay */
    struct dbl_task *next;
} dbl_task;

struct dbl_stream {
    int device;
    unsigned seed; /* the stream's own jitter sequence */
    pthread_t thread;
    dbl_task *head, *tail;
    bool busy, quit;
    struct dbl_stream *next;
};

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
    pthread_mutex_t mu;
    pthread_cond_t cv;
    bool inited;
    int n_devices;
    uint64_t hbm;
    uint64_t used[DBL_MAX_DEVICES];
    dbl_block *blocks;
    struct dbl_stream *streams;
    struct dbl_event *events;
    acl_double_stats st;
    unsigned jitter_us, jitter_seed, streams_made; /* acl_double_set_jitter */
    unsigned copy_delay_us[4];                     /* by aclrtMemcpyKind */
} dbl = {.mu = PTHREAD_MUTEX_INITIALIZER,
         .cv = PTHREAD_COND_INITIALIZER,
         .n_devices = 1,
         .hbm = 1ull << 30};

static _Thread_local int cur_device = -1;
static _Thread_local char last_msg[256];

static aclError refuse(aclError e, const char *fmt, const char *what)
{
    snprintf(last_msg, sizeof last_msg, fmt, what);
    dbl.st.rejected++;
    return e;
}

static int64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

void acl_double_configure(int n_devices, uint64_t hbm_bytes)
{
    pthread_mutex_lock(&dbl.mu);
    dbl.n_devices = n_devices < DBL_MAX_DEVICES ? n_devices : DBL_MAX_DEVICES;
    dbl.hbm = hbm_bytes;
    memset(&dbl.st, 0, sizeof dbl.st);
    memset(dbl.used, 0, sizeof dbl.used);
    memset(dbl.copy_delay_us, 0, sizeof dbl.copy_delay_us);
    pthread_mutex_unlock(&dbl.mu);
}

void acl_double_set_jitter(unsigned max_us, unsigned seed)
{
    pthread_mutex_lock(&dbl.mu);
    dbl.jitter_us = max_us;
    dbl.jitter_seed = seed;
    dbl.streams_made = 0;
    pthread_mutex_unlock(&dbl.mu);
}

void acl_double_set_copy_delay(aclrtMemcpyKind kind, unsigned us)
{
    pthread_mutex_lock(&dbl.mu);
    if ((unsigned)kind < sizeof dbl.copy_delay_us / sizeof dbl.copy_delay_us[0])
        dbl.copy_delay_us[kind] = us;
    pthread_mutex_unlock(&dbl.mu);
}

/* ACL_DOUBLE_JITTER=MAX_US[:SEED] in the environment: jitter from the start. */
static void jitter_from_env(void)
{
    const char *v = getenv("ACL_DOUBLE_JITTER");
    if (v == NULL || *v == '\0')
        return;
    char *end = NULL;
    unsigned long us = strtoul(v, &end, 10), seed = 1;
    if (end != NULL && *end == ':')
        seed = strtoul(end + 1, NULL, 10);
    acl_double_set_jitter((unsigned)us, (unsigned)seed);
}

acl_double_stats acl_double_get_stats(void)
{
    pthread_mutex_lock(&dbl.mu);
    acl_double_stats s = dbl.st;
    pthread_mutex_unlock(&dbl.mu);
    return s;
}

const char *aclGetRecentErrMsg(void)
{
    return last_msg[0] ? last_msg : NULL;
}

aclError aclInit(const char *configPath)
{
    (void)configPath;
    pthread_mutex_lock(&dbl.mu);
    bool again = dbl.inited;
    dbl.inited = true;
    pthread_mutex_unlock(&dbl.mu);
    if (!again)
        jitter_from_env();
    return again ? ACL_ERROR_REPEAT_INITIALIZE : ACL_SUCCESS;
}

aclError aclrtGetDeviceCount(uint32_t *count)
{
    if (count == NULL)
        return ACL_ERROR_INVALID_PARAM;
    *count = (uint32_t)dbl.n_devices;
    if (dbl.n_devices == 0) {
        snprintf(last_msg, sizeof last_msg, "EE1001: no device found (acl double)");
        return ACL_ERROR_RT_NO_DEVICE;
    }
    return ACL_SUCCESS;
}

aclError aclrtSetDevice(int32_t deviceId)
{
    if (deviceId < 0 || deviceId >= dbl.n_devices)
        return refuse(ACL_ERROR_RT_INVALID_DEVICEID, "invalid device id %s", "");
    cur_device = deviceId;
    return ACL_SUCCESS;
}

const char *aclrtGetSocName(void)
{
    return "Ascend-double";
}

/* ---- memory --------------------------------------------------------------- */

/* The live block of the given device (-1: pinned host) holding all of
 * [p, p + n), or NULL.  Call with the lock held. */
static dbl_block *block_holding(const void *p, size_t n, int device)
{
    for (dbl_block *b = dbl.blocks; b != NULL; b = b->next)
        if (b->device == device && (const char *)p >= b->p && n <= b->size &&
            (size_t)((const char *)p - b->p) <= b->size - n)
            return b;
    return NULL;
}

static aclError add_block(void **out, size_t size, int device)
{
    dbl_block *b = calloc(1, sizeof *b);
    char *p = malloc(size ? size : 1);
    if (b == NULL || p == NULL) {
        free(b);
        free(p);
        return ACL_ERROR_RT_MEMORY_ALLOCATION;
    }
    *b = (dbl_block){.p = p, .size = size, .device = device, .next = dbl.blocks};
    dbl.blocks = b;
    *out = p;
    return ACL_SUCCESS;
}

/* Unlink and free the block starting at p; its size, or 0 if none. */
static size_t remove_block(void *p, int device)
{
    for (dbl_block **pp = &dbl.blocks; *pp != NULL; pp = &(*pp)->next) {
        dbl_block *b = *pp;
        if (b->p != p || b->device != device)
            continue;
        size_t size = b->size;
        *pp = b->next;
        free(b->p);
        free(b);
        return size;
    }
    return 0;
}

aclError aclrtMalloc(void **devPtr, size_t size, aclrtMemMallocPolicy policy)
{
    (void)policy;
    if (devPtr == NULL || size == 0 || cur_device < 0)
        return refuse(ACL_ERROR_INVALID_PARAM, "aclrtMalloc: bad argument or no device set%s", "");
    pthread_mutex_lock(&dbl.mu);
    aclError e = ACL_ERROR_RT_MEMORY_ALLOCATION;
    if (size <= dbl.hbm - dbl.used[cur_device])
        e = add_block(devPtr, size, cur_device);
    if (e == ACL_SUCCESS) {
        dbl.used[cur_device] += size;
        dbl.st.device_bytes += size;
        dbl.st.device_allocs++;
    } else
        snprintf(last_msg, sizeof last_msg, "EL0004: failed to allocate memory (acl double)");
    pthread_mutex_unlock(&dbl.mu);
    return e;
}

aclError aclrtFree(void *devPtr)
{
    pthread_mutex_lock(&dbl.mu);
    size_t size = cur_device >= 0 ? remove_block(devPtr, cur_device) : 0;
    if (size > 0) {
        dbl.used[cur_device] -= size;
        dbl.st.device_bytes -= size;
        dbl.st.device_allocs--;
    }
    pthread_mutex_unlock(&dbl.mu);
    return size > 0 ? ACL_SUCCESS
                    : refuse(ACL_ERROR_INVALID_PARAM, "aclrtFree: not a live allocation%s", "");
}

aclError aclrtMallocHost(void **hostPtr, size_t size)
{
    if (hostPtr == NULL || size == 0)
        return refuse(ACL_ERROR_INVALID_PARAM, "aclrtMallocHost: bad argument%s", "");
    pthread_mutex_lock(&dbl.mu);
    aclError e = add_block(hostPtr, size, -1);
    if (e == ACL_SUCCESS) {
        dbl.st.host_bytes += size;
        dbl.st.host_allocs++;
        dbl.st.host_allocs_made++;
    }
    pthread_mutex_unlock(&dbl.mu);
    return e;
}

aclError aclrtFreeHost(void *hostPtr)
{
    pthread_mutex_lock(&dbl.mu);
    size_t size = remove_block(hostPtr, -1);
    if (size > 0) {
        dbl.st.host_bytes -= size;
        dbl.st.host_allocs--;
    }
    pthread_mutex_unlock(&dbl.mu);
    return size > 0 ? ACL_SUCCESS
                    : refuse(ACL_ERROR_INVALID_PARAM, "aclrtFreeHost: not a live allocation%s", "");
}

aclError aclrtMemset(void *devPtr, size_t maxCount, int32_t value, size_t count)
{
    pthread_mutex_lock(&dbl.mu);
    bool ok = count <= maxCount && block_holding(devPtr, count, cur_device) != NULL;
    pthread_mutex_unlock(&dbl.mu);
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
    pthread_mutex_lock(&dbl.mu);
    *free_bytes = dbl.hbm - dbl.used[cur_device];
    *total = dbl.hbm;
    pthread_mutex_unlock(&dbl.mu);
    return ACL_SUCCESS;
}

/* ---- streams ---------------------------------------------------------------- */

static void pause_us(unsigned us)
{
    struct timespec ts = {.tv_sec = us / 1000000, .tv_nsec = (long)(us % 1000000) * 1000};
    while (us > 0 && nanosleep(&ts, &ts) != 0)
        ;
}

static void run_task(dbl_task *t)
{
    switch (t->kind) {
    case T_COPY:
        pause_us(t->delay_us);
        memmove(t->dst, t->src, t->bytes);
        break;
    case T_GEMM: memset(t->dst, 0, t->bytes); break;
    case T_RECORD:
        pthread_mutex_lock(&dbl.mu);
        if (t->gen > t->ev->done) {
            t->ev->done = t->gen;
            t->ev->done_ns = now_ns();
        }
        pthread_mutex_unlock(&dbl.mu);
        break;
    case T_WAIT:
        pthread_mutex_lock(&dbl.mu);
        while (t->ev->done < t->gen)
            pthread_cond_wait(&dbl.cv, &dbl.mu);
        pthread_mutex_unlock(&dbl.mu);
        break;
    }
}

/* A random pause of up to max_us before a task (acl_double_set_jitter). */
static void jitter(struct dbl_stream *s, unsigned max_us)
{
    if (max_us > 0)
        pause_us((unsigned)rand_r(&s->seed) % (max_us + 1));
}

static void *stream_thread(void *arg)
{
    struct dbl_stream *s = arg;
    pthread_mutex_lock(&dbl.mu);
    for (;;) {
        while (s->head == NULL && !s->quit)
            pthread_cond_wait(&dbl.cv, &dbl.mu);
        if (s->head == NULL)
            break;
        dbl_task *t = s->head;
        s->busy = true;
        unsigned max_us = dbl.jitter_us;
        pthread_mutex_unlock(&dbl.mu);
        jitter(s, max_us);
        run_task(t);
        pthread_mutex_lock(&dbl.mu);
        s->head = t->next;
        if (s->head == NULL)
            s->tail = NULL;
        s->busy = false;
        free(t);
        pthread_cond_broadcast(&dbl.cv);
    }
    pthread_mutex_unlock(&dbl.mu);
    return NULL;
}

static bool live_stream(const struct dbl_stream *s)
{
    for (const struct dbl_stream *x = dbl.streams; x != NULL; x = x->next)
        if (x == s)
            return true;
    return false;
}

static bool live_event(const struct dbl_event *e)
{
    for (const struct dbl_event *x = dbl.events; x != NULL; x = x->next)
        if (x == e)
            return true;
    return false;
}

/* Queue t on s (lock held). */
static void push(struct dbl_stream *s, dbl_task *t)
{
    if (s->tail != NULL)
        s->tail->next = t;
    else
        s->head = t;
    s->tail = t;
    pthread_cond_broadcast(&dbl.cv);
}

aclError aclrtCreateStreamWithConfig(aclrtStream *stream, uint32_t priority, uint32_t flag)
{
    (void)flag;
    if (stream == NULL || cur_device < 0 || priority > 7)
        return refuse(ACL_ERROR_INVALID_PARAM, "aclrtCreateStreamWithConfig: bad argument%s", "");
    struct dbl_stream *s = calloc(1, sizeof *s);
    if (s == NULL)
        return ACL_ERROR_RT_MEMORY_ALLOCATION;
    s->device = cur_device;
    pthread_mutex_lock(&dbl.mu);
    s->seed = dbl.jitter_seed * 2654435761u + ++dbl.streams_made;
    pthread_mutex_unlock(&dbl.mu);
    if (pthread_create(&s->thread, NULL, stream_thread, s) != 0) {
        free(s);
        return ACL_ERROR_RT_MEMORY_ALLOCATION;
    }
    pthread_mutex_lock(&dbl.mu);
    s->next = dbl.streams;
    dbl.streams = s;
    dbl.st.streams++;
    pthread_mutex_unlock(&dbl.mu);
    *stream = s;
    return ACL_SUCCESS;
}

static void wait_idle(struct dbl_stream *s)
{
    while (s->head != NULL || s->busy)
        pthread_cond_wait(&dbl.cv, &dbl.mu);
}

/* Finish its work, stop its thread, free it (lock held on entry and exit). */
static void end_stream(struct dbl_stream *s)
{
    for (struct dbl_stream **pp = &dbl.streams; *pp != NULL; pp = &(*pp)->next)
        if (*pp == s) {
            *pp = s->next;
            break;
        }
    wait_idle(s);
    s->quit = true;
    pthread_cond_broadcast(&dbl.cv);
    pthread_mutex_unlock(&dbl.mu);
    pthread_join(s->thread, NULL);
    pthread_mutex_lock(&dbl.mu);
    free(s);
    dbl.st.streams--;
}

aclError aclrtDestroyStream(aclrtStream stream)
{
    pthread_mutex_lock(&dbl.mu);
    bool ok = live_stream(stream);
    if (ok)
        end_stream(stream);
    pthread_mutex_unlock(&dbl.mu);
    return ok ? ACL_SUCCESS
              : refuse(ACL_ERROR_INVALID_PARAM, "aclrtDestroyStream: %s", "no such stream");
}

aclError aclrtSynchronizeStream(aclrtStream stream)
{
    pthread_mutex_lock(&dbl.mu);
    bool ok = live_stream(stream);
    if (ok)
        wait_idle(stream);
    pthread_mutex_unlock(&dbl.mu);
    return ok ? ACL_SUCCESS
              : refuse(ACL_ERROR_INVALID_PARAM, "aclrtSynchronizeStream: %s", "no such stream");
}

aclError aclrtSynchronizeDevice(void)
{
    pthread_mutex_lock(&dbl.mu);
    for (struct dbl_stream *s = dbl.streams; s != NULL; s = s->next)
        if (s->device == cur_device)
            wait_idle(s);
    pthread_mutex_unlock(&dbl.mu);
    return ACL_SUCCESS;
}

/* Queue a task on stream (NULL task: out of memory). */
static aclError enqueue(aclrtStream stream, dbl_task t)
{
    dbl_task *copy = malloc(sizeof *copy);
    if (copy == NULL)
        return ACL_ERROR_RT_MEMORY_ALLOCATION;
    *copy = t;
    copy->next = NULL;
    push(stream, copy);
    return ACL_SUCCESS;
}

aclError aclrtMemcpyAsync(void *dst, size_t destMax, const void *src, size_t count,
                          aclrtMemcpyKind kind, aclrtStream stream)
{
    pthread_mutex_lock(&dbl.mu);
    int dst_dev = kind == ACL_MEMCPY_DEVICE_TO_HOST ? -1 : cur_device;
    int src_dev = kind == ACL_MEMCPY_HOST_TO_DEVICE ? -1 : cur_device;
    aclError e = ACL_SUCCESS;
    if (!live_stream(stream) || count > destMax || kind == ACL_MEMCPY_HOST_TO_HOST)
        e = refuse(ACL_ERROR_INVALID_PARAM, "aclrtMemcpyAsync: %s", "bad stream, size or kind");
    else if (block_holding(dst, count, dst_dev) == NULL ||
             block_holding(src, count, src_dev) == NULL)
        e = refuse(ACL_ERROR_INVALID_PARAM, "aclrtMemcpyAsync: %s",
                   "a side is not in a live "
                   "allocation of its kind");
    else
        e = enqueue(stream, (dbl_task){.kind = T_COPY,
                                       .dst = dst,
                                       .src = src,
                                       .bytes = count,
                                       .delay_us = dbl.copy_delay_us[kind]});
    if (e == ACL_SUCCESS) {
        uint64_t *c = kind == ACL_MEMCPY_HOST_TO_DEVICE   ? &dbl.st.bytes_h2d
                      : kind == ACL_MEMCPY_DEVICE_TO_HOST ? &dbl.st.bytes_d2h
                                                          : &dbl.st.bytes_d2d;
        *c += count;
    }
    pthread_mutex_unlock(&dbl.mu);
    return e;
}

/* ---- events --------------------------------------------------------------- */

aclError aclrtCreateEvent(aclrtEvent *event)
{
    if (event == NULL || cur_device < 0)
        return refuse(ACL_ERROR_INVALID_PARAM, "aclrtCreateEvent: %s", "bad argument");
    struct dbl_event *e = calloc(1, sizeof *e);
    if (e == NULL)
        return ACL_ERROR_RT_MEMORY_ALLOCATION;
    e->device = cur_device;
    pthread_mutex_lock(&dbl.mu);
    e->next = dbl.events;
    dbl.events = e;
    dbl.st.events++;
    pthread_mutex_unlock(&dbl.mu);
    *event = e;
    return ACL_SUCCESS;
}

aclError aclrtDestroyEvent(aclrtEvent event)
{
    pthread_mutex_lock(&dbl.mu);
    bool ok = false;
    for (struct dbl_event **pp = &dbl.events; *pp != NULL; pp = &(*pp)->next)
        if (*pp == event) {
            *pp = ((struct dbl_event *)event)->next;
            ok = true;
            break;
        }
    if (ok) {
        /* A record or wait may still be queued: let the streams drain. */
        for (struct dbl_stream *s = dbl.streams; s != NULL; s = s->next)
            wait_idle(s);
        free(event);
        dbl.st.events--;
    }
    pthread_mutex_unlock(&dbl.mu);
    return ok ? ACL_SUCCESS
              : refuse(ACL_ERROR_INVALID_PARAM, "aclrtDestroyEvent: %s", "no such event");
}

aclError aclrtRecordEvent(aclrtEvent event, aclrtStream stream)
{
    pthread_mutex_lock(&dbl.mu);
    aclError e;
    if (!live_event(event) || !live_stream(stream))
        e = refuse(ACL_ERROR_INVALID_PARAM, "aclrtRecordEvent: %s", "no such event or stream");
    else {
        struct dbl_event *ev = event;
        e = enqueue(stream, (dbl_task){.kind = T_RECORD, .ev = ev, .gen = ++ev->issued});
    }
    pthread_mutex_unlock(&dbl.mu);
    return e;
}

aclError aclrtStreamWaitEvent(aclrtStream stream, aclrtEvent event)
{
    pthread_mutex_lock(&dbl.mu);
    aclError e;
    if (!live_event(event) || !live_stream(stream))
        e = refuse(ACL_ERROR_INVALID_PARAM, "aclrtStreamWaitEvent: %s", "no such event or stream");
    else {
        struct dbl_event *ev = event;
        e = enqueue(stream, (dbl_task){.kind = T_WAIT, .ev = ev, .gen = ev->issued});
    }
    pthread_mutex_unlock(&dbl.mu);
    return e;
}

/* Never recorded: complete, as in CUDA and ACL. */
aclError aclrtQueryEventStatus(aclrtEvent event, aclrtEventRecordedStatus *status)
{
    pthread_mutex_lock(&dbl.mu);
    aclError e = ACL_SUCCESS;
    if (!live_event(event) || status == NULL)
        e = refuse(ACL_ERROR_INVALID_PARAM, "aclrtQueryEventStatus: %s", "no such event");
    else {
        struct dbl_event *ev = event;
        *status = ev->done >= ev->issued ? ACL_EVENT_RECORDED_STATUS_COMPLETE
                                         : ACL_EVENT_RECORDED_STATUS_NOT_READY;
    }
    pthread_mutex_unlock(&dbl.mu);
    return e;
}

aclError aclrtSynchronizeEvent(aclrtEvent event)
{
    pthread_mutex_lock(&dbl.mu);
    bool ok = live_event(event);
    if (ok) {
        struct dbl_event *ev = event;
        uint64_t target = ev->issued;
        while (ev->done < target)
            pthread_cond_wait(&dbl.cv, &dbl.mu);
    }
    pthread_mutex_unlock(&dbl.mu);
    return ok ? ACL_SUCCESS
              : refuse(ACL_ERROR_INVALID_PARAM, "aclrtSynchronizeEvent: %s", "no such event");
}

aclError aclrtEventElapsedTime(float *ms, aclrtEvent startEvent, aclrtEvent endEvent)
{
    pthread_mutex_lock(&dbl.mu);
    aclError e = ACL_SUCCESS;
    struct dbl_event *a = startEvent, *b = endEvent;
    if (ms == NULL || !live_event(a) || !live_event(b) || a->issued == 0 || b->issued == 0)
        e = refuse(ACL_ERROR_INVALID_PARAM, "aclrtEventElapsedTime: %s", "event not recorded");
    else if (a->done < a->issued || b->done < b->issued)
        e = ACL_ERROR_RT_EVENT_NOT_COMPLETE;
    else
        *ms = (float)((double)(b->done_ns - a->done_ns) / 1e6);
    pthread_mutex_unlock(&dbl.mu);
    return e;
}

/* ---- device reset: sweep what the caller left ------------------------------- */

aclError aclrtResetDevice(int32_t deviceId)
{
    if (deviceId < 0 || deviceId >= dbl.n_devices)
        return refuse(ACL_ERROR_RT_INVALID_DEVICEID, "aclrtResetDevice: %s", "invalid device id");
    pthread_mutex_lock(&dbl.mu);
    struct dbl_stream *s = dbl.streams;
    while (s != NULL) {
        struct dbl_stream *next = s->next;
        if (s->device == deviceId) {
            end_stream(s);
            dbl.st.swept_objects++;
            next = dbl.streams; /* the list changed while the lock was dropped */
        }
        s = next;
    }
    for (struct dbl_event **pp = &dbl.events; *pp != NULL;) {
        struct dbl_event *e = *pp;
        if (e->device != deviceId) {
            pp = &e->next;
            continue;
        }
        *pp = e->next;
        free(e);
        dbl.st.events--;
        dbl.st.swept_objects++;
    }
    for (dbl_block **pp = &dbl.blocks; *pp != NULL;) {
        dbl_block *b = *pp;
        if (b->device != deviceId) {
            pp = &b->next;
            continue;
        }
        *pp = b->next;
        dbl.used[deviceId] -= b->size;
        dbl.st.device_bytes -= b->size;
        dbl.st.device_allocs--;
        dbl.st.swept_bytes += b->size;
        dbl.st.swept_objects++;
        free(b->p);
        free(b);
    }
    pthread_mutex_unlock(&dbl.mu);
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
    pthread_mutex_lock(&dbl.mu);
    dbl.st.tensors++;
    pthread_mutex_unlock(&dbl.mu);
    return t;
}

aclnnStatus aclDestroyTensor(const aclTensor *tensor)
{
    if (tensor == NULL)
        return ACLNN_ERR_PARAM_INVALID;
    free((void *)tensor);
    pthread_mutex_lock(&dbl.mu);
    dbl.st.tensors--;
    pthread_mutex_unlock(&dbl.mu);
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
    pthread_mutex_lock(&dbl.mu);
    aclnnStatus e = OK;
    bool ws_ok = x.workspace == 0 || (workspaceSize >= x.workspace &&
                                      block_holding(workspace, x.workspace, cur_device) != NULL);
    if (!live_stream(stream) || !ws_ok ||
        block_holding(x.a.data, tensor_bytes(&x.a), cur_device) == NULL ||
        block_holding(x.b.data, tensor_bytes(&x.b), cur_device) == NULL ||
        block_holding(x.out.data, tensor_bytes(&x.out), cur_device) == NULL)
        e = refuse(ACLNN_ERR_PARAM_INVALID, "aclnnBatchMatMul: %s",
                   "an operand or the workspace "
                   "is not in a live device allocation");
    else
        e = enqueue(stream,
                    (dbl_task){.kind = T_GEMM, .dst = x.out.data, .bytes = tensor_bytes(&x.out)});
    if (e == OK) {
        dbl.st.gemms++;
        dbl.st.fp16_gemms += x.a.dtype == ACL_FLOAT16;
        dbl.st.gemm_flops += 2.0 * (double)x.a.dims[0] * (double)x.a.dims[1] * (double)x.a.dims[2] *
                             (double)x.b.dims[2];
    }
    pthread_mutex_unlock(&dbl.mu);
    return e;
}
