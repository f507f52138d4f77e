/* backend.h's memory calls on a device runtime, for the allocator alone.
 *
 * Inside a PyTorch job the framework owns the streams and the kernels: the
 * allocator only needs segments (malloc_device / free_device), the device's
 * free memory (its OOM message and memory fraction), stream ids to keep its
 * per-stream pools apart, and synchronisation for releasing cached blocks
 * (PyTorch's release_cached_blocks synchronises the device first).  The
 * pluggable interface has no record_stream, so events are never needed. */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bridge_torch/bridge.h"
#include "lib/base/growable.h"

struct ms_stream {
    void *handle;
    uint64_t id;
};

typedef struct bridge_dev {
    const npu_runtime *rt;
    void *ctx;
    ms_stream **streams; /* by id */
    size_t n_streams, cap_streams;
    uint64_t last_id;
} bridge_dev;

static ms_status dev_destroy(void *inst)
{
    bridge_dev *d = inst;
    for (size_t i = 0; i < d->n_streams; i++)
        free(d->streams[i]);
    free(d->streams);
    d->rt->close(d->ctx);
    free(d);
    return MS_OK;
}

static ms_status dev_mem_get_info(void *inst, uint64_t *free_bytes, uint64_t *total_bytes)
{
    bridge_dev *d = inst;
    return d->rt->mem_get_info(d->ctx, free_bytes, total_bytes);
}

static ms_status dev_malloc(void *inst, uint64_t bytes, uint64_t *addr)
{
    bridge_dev *d = inst;
    return d->rt->malloc_device(d->ctx, bytes, addr);
}

static ms_status dev_free(void *inst, uint64_t addr)
{
    bridge_dev *d = inst;
    return d->rt->free_device(d->ctx, addr);
}

static ms_status dev_stream_synchronize(void *inst, ms_stream *s)
{
    bridge_dev *d = inst;
    return d->rt->stream_synchronize(d->ctx, s->handle);
}

static ms_status dev_stream_id(void *inst, const ms_stream *s, uint64_t *id)
{
    (void)inst;
    *id = s->id;
    return MS_OK;
}

static ms_status dev_device_synchronize(void *inst)
{
    bridge_dev *d = inst;
    return d->rt->device_synchronize(d->ctx);
}

static ms_status dev_now(void *inst, int64_t *ns)
{
    (void)inst;
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    *ns = (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
    return MS_OK;
}

/* Everything the allocator does not call inside a framework. */
static ms_status dev_unsupported(void)
{
    return MS_EUNSUPPORTED;
}

static ms_status dev_event_create(void *inst, ms_event **out)
{
    (void)inst;
    (void)out;
    return dev_unsupported();
}

static ms_status dev_event_destroy(void *inst, ms_event *e)
{
    (void)inst;
    (void)e;
    return dev_unsupported();
}

static ms_status dev_va_reserve(void *inst, uint64_t bytes, uint64_t *addr)
{
    (void)inst;
    (void)bytes;
    (void)addr;
    return dev_unsupported();
}

static ms_status dev_va_release(void *inst, uint64_t addr)
{
    (void)inst;
    (void)addr;
    return dev_unsupported();
}

static ms_status dev_mem_map(void *inst, uint64_t addr, uint64_t bytes)
{
    (void)inst;
    (void)addr;
    (void)bytes;
    return dev_unsupported();
}

static ms_status dev_event_record(void *inst, ms_event *e, ms_stream *s)
{
    (void)inst;
    (void)e;
    (void)s;
    return dev_unsupported();
}

static ms_status dev_event_query(void *inst, ms_event *e, bool *complete)
{
    (void)inst;
    (void)e;
    (void)complete;
    return dev_unsupported();
}

static ms_status dev_event_synchronize(void *inst, ms_event *e)
{
    return dev_event_destroy(inst, e);
}

static const ms_backend_ops bridge_ops = {
    .name = "torch",
    .destroy = dev_destroy,
    .mem_get_info = dev_mem_get_info,
    .malloc_device = dev_malloc,
    .free_device = dev_free,
    .va_reserve = dev_va_reserve,
    .va_release = dev_va_release,
    .mem_map = dev_mem_map,
    .mem_unmap = dev_mem_map,
    .stream_synchronize = dev_stream_synchronize,
    .stream_id = dev_stream_id,
    .event_create = dev_event_create,
    .event_destroy = dev_event_destroy,
    .event_record = dev_event_record,
    .event_query = dev_event_query,
    .event_synchronize = dev_event_synchronize,
    .device_synchronize = dev_device_synchronize,
    .now = dev_now,
};

ms_status bridge_device_open(const npu_runtime *rt, int ordinal, ms_backend **out, ms_diag *d)
{
    if (rt == NULL || out == NULL)
        return ms_diag_set(d, MS_EINVAL, "bridge_device_open: NULL argument");
    *out = NULL;
    bridge_dev *dev = calloc(1, sizeof *dev);
    ms_backend *be = calloc(1, sizeof *be);
    if (dev == NULL || be == NULL) {
        free(dev);
        free(be);
        return ms_diag_set(d, MS_ENOMEM, "out of host memory");
    }
    dev->rt = rt;
    ms_status st = rt->open(ordinal, &dev->ctx, d);
    if (st != MS_OK) {
        free(dev);
        free(be);
        return st;
    }
    *be = (ms_backend){.ops = &bridge_ops, .inst = dev, .device = ordinal, .carries_data = true};
    *out = be;
    return MS_OK;
}

ms_status bridge_device_stream(ms_backend *be, void *handle, ms_stream **out)
{
    if (be == NULL || out == NULL)
        return MS_EINVAL;
    bridge_dev *d = be->inst;
    for (size_t i = 0; i < d->n_streams; i++)
        if (d->streams[i]->handle == handle) {
            *out = d->streams[i];
            return MS_OK;
        }
    /* The allocator keys its pools by stream id below 65536. */
    if (d->n_streams >= 65535)
        return MS_ERANGE;
    ms_stream *s = malloc(sizeof *s);
    if (s == NULL || !MS_GROW(d->streams, d->n_streams, d->cap_streams, 4)) {
        free(s);
        return MS_ENOMEM;
    }
    /* The default stream is 0, as in a PyTorch snapshot. */
    *s = (ms_stream){.handle = handle, .id = handle == NULL ? 0 : ++d->last_id};
    d->streams[d->n_streams++] = s;
    *out = s;
    return MS_OK;
}

const char *bridge_device_error(const ms_backend *be)
{
    if (be == NULL)
        return "";
    const bridge_dev *d = be->inst;
    return d->rt->last_error(d->ctx);
}
