/* The fake device behind the allocator tests (see test_allocator_fake.h). */
#include "test_allocator_fake.h"

#include <stdlib.h>

#define FAKE_MAX_STREAMS 16
#define FAKE_MAX_ALLOCS 4096

struct ms_stream {
    uint64_t id;
    uint64_t recorded; /* work items enqueued (event records) */
    uint64_t finished; /* work items completed */
};

struct ms_event {
    ms_stream *stream;
    uint64_t seq;
};

typedef struct fake_alloc {
    uint64_t addr;
    uint64_t size;
} fake_alloc;

typedef struct fake_dev {
    uint64_t capacity;
    uint64_t next_dev;
    uint64_t next_va;
    fake_counts counts;
    ms_stream *streams[FAKE_MAX_STREAMS];
    int n_streams;
    fake_alloc allocs[FAKE_MAX_ALLOCS];
    int n_allocs;
} fake_dev;

static fake_dev *dev_of(void *inst)
{
    return inst;
}

static ms_status f_destroy(void *inst)
{
    fake_dev *f = dev_of(inst);
    for (int i = 0; i < f->n_streams; i++)
        free(f->streams[i]);
    free(f);
    return MS_OK;
}

static ms_status f_mem_get_info(void *inst, uint64_t *free_bytes, uint64_t *total)
{
    fake_dev *f = dev_of(inst);
    *free_bytes = f->capacity - f->counts.used;
    *total = f->capacity;
    return MS_OK;
}

static ms_status f_malloc_device(void *inst, uint64_t bytes, uint64_t *addr)
{
    fake_dev *f = dev_of(inst);
    f->counts.malloc_calls++;
    if (bytes > f->capacity - f->counts.used || f->n_allocs == FAKE_MAX_ALLOCS)
        return MS_ENOMEM;
    *addr = f->next_dev;
    f->next_dev += bytes;
    f->counts.used += bytes;
    f->allocs[f->n_allocs++] = (fake_alloc){*addr, bytes};
    return MS_OK;
}

static ms_status f_free_device(void *inst, uint64_t addr)
{
    fake_dev *f = dev_of(inst);
    f->counts.free_calls++;
    for (int i = 0; i < f->n_allocs; i++)
        if (f->allocs[i].addr == addr) {
            f->counts.used -= f->allocs[i].size;
            f->allocs[i] = f->allocs[--f->n_allocs];
            return MS_OK;
        }
    return MS_EINVAL;
}

static ms_status f_host(void *inst, uint64_t bytes, uint64_t *addr)
{
    (void)inst;
    (void)bytes;
    (void)addr;
    return MS_EUNSUPPORTED;
}

static ms_status f_free_host(void *inst, uint64_t addr)
{
    (void)inst;
    (void)addr;
    return MS_EUNSUPPORTED;
}

static ms_status f_va_reserve(void *inst, uint64_t bytes, uint64_t *addr)
{
    fake_dev *f = dev_of(inst);
    f->counts.va_reserve_calls++;
    *addr = f->next_va;
    f->next_va += bytes;
    return MS_OK;
}

static ms_status f_va_release(void *inst, uint64_t addr)
{
    (void)addr;
    dev_of(inst)->counts.va_release_calls++;
    return MS_OK;
}

static ms_status f_mem_map(void *inst, uint64_t addr, uint64_t bytes)
{
    fake_dev *f = dev_of(inst);
    (void)addr;
    f->counts.map_calls++;
    if (bytes > f->capacity - f->counts.used)
        return MS_ENOMEM;
    f->counts.used += bytes;
    return MS_OK;
}

static ms_status f_mem_unmap(void *inst, uint64_t addr, uint64_t bytes)
{
    fake_dev *f = dev_of(inst);
    (void)addr;
    f->counts.unmap_calls++;
    f->counts.used -= bytes;
    return MS_OK;
}

static ms_status f_stream_create(void *inst, int priority, ms_stream **out)
{
    fake_dev *f = dev_of(inst);
    (void)priority;
    if (f->n_streams == FAKE_MAX_STREAMS)
        return MS_ENOMEM;
    ms_stream *s = calloc(1, sizeof *s);
    if (!s)
        return MS_ENOMEM;
    s->id = (uint64_t)f->n_streams;
    f->streams[f->n_streams++] = s;
    *out = s;
    return MS_OK;
}

static ms_status f_stream_destroy(void *inst, ms_stream *s)
{
    (void)inst;
    (void)s; /* freed with the device */
    return MS_OK;
}

static ms_status f_stream_synchronize(void *inst, ms_stream *s)
{
    dev_of(inst)->counts.stream_syncs++;
    s->finished = s->recorded;
    return MS_OK;
}

static ms_status f_stream_id(void *inst, const ms_stream *s, uint64_t *id)
{
    (void)inst;
    *id = s->id;
    return MS_OK;
}

static ms_status f_event_create(void *inst, ms_event **out)
{
    ms_event *e = calloc(1, sizeof *e);
    if (!e)
        return MS_ENOMEM;
    dev_of(inst)->counts.events_live++;
    *out = e;
    return MS_OK;
}

static ms_status f_event_destroy(void *inst, ms_event *e)
{
    dev_of(inst)->counts.events_live--;
    free(e);
    return MS_OK;
}

static ms_status f_event_record(void *inst, ms_event *e, ms_stream *s)
{
    dev_of(inst)->counts.event_records++;
    e->stream = s;
    e->seq = ++s->recorded;
    return MS_OK;
}

static ms_status f_event_query(void *inst, ms_event *e, bool *complete)
{
    (void)inst;
    *complete = !e->stream || e->seq <= e->stream->finished;
    return MS_OK;
}

static ms_status f_event_synchronize(void *inst, ms_event *e)
{
    dev_of(inst)->counts.event_syncs++;
    if (e->stream && e->stream->finished < e->seq)
        e->stream->finished = e->seq;
    return MS_OK;
}

static ms_status f_event_elapsed(void *inst, ms_event *start, ms_event *end, int64_t *ns)
{
    (void)inst;
    (void)start;
    (void)end;
    *ns = 0;
    return MS_OK;
}

static ms_status f_stream_wait_event(void *inst, ms_stream *s, ms_event *e)
{
    (void)inst;
    (void)s;
    (void)e;
    return MS_OK;
}

static ms_status f_device_synchronize(void *inst)
{
    fake_dev *f = dev_of(inst);
    f->counts.device_syncs++;
    for (int i = 0; i < f->n_streams; i++)
        f->streams[i]->finished = f->streams[i]->recorded;
    return MS_OK;
}

static ms_status f_now(void *inst, int64_t *ns)
{
    (void)inst;
    *ns = 0;
    return MS_OK;
}

static const ms_backend_ops fake_ops = {
    .name = "fake",
    .destroy = f_destroy,
    .mem_get_info = f_mem_get_info,
    .malloc_device = f_malloc_device,
    .free_device = f_free_device,
    .malloc_host = f_host,
    .free_host = f_free_host,
    .va_reserve = f_va_reserve,
    .va_release = f_va_release,
    .mem_map = f_mem_map,
    .mem_unmap = f_mem_unmap,
    .stream_create = f_stream_create,
    .stream_destroy = f_stream_destroy,
    .stream_synchronize = f_stream_synchronize,
    .stream_id = f_stream_id,
    .event_create = f_event_create,
    .event_destroy = f_event_destroy,
    .event_record = f_event_record,
    .event_query = f_event_query,
    .event_synchronize = f_event_synchronize,
    .event_elapsed_ns = f_event_elapsed,
    .stream_wait_event = f_stream_wait_event,
    .device_synchronize = f_device_synchronize,
    .now = f_now,
};

ms_backend *fake_open(uint64_t capacity, int device)
{
    ms_backend *be = calloc(1, sizeof *be);
    fake_dev *f = calloc(1, sizeof *f);
    if (!be || !f) {
        free(be);
        free(f);
        return NULL;
    }
    f->capacity = capacity;
    f->next_dev = FAKE_DEV_BASE;
    f->next_va = FAKE_VA_BASE;
    be->ops = &fake_ops;
    be->inst = f;
    be->device = device;
    return be;
}

void fake_close(ms_backend *be)
{
    if (!be)
        return;
    be->ops->destroy(be->inst);
    free(be);
}

ms_stream *fake_stream(ms_backend *be)
{
    ms_stream *s = NULL;
    return be->ops->stream_create(be->inst, 0, &s) == MS_OK ? s : NULL;
}

void fake_finish(ms_backend *be, ms_stream *s)
{
    (void)be;
    s->finished = s->recorded;
}

const fake_counts *fake_get_counts(const ms_backend *be)
{
    return &dev_of(be->inst)->counts;
}
