/* backend.h on a real device runtime (runtime.h): one device, driven by the
 * thread that opened it.
 *
 * Times come from device events: every copy and kernel is bracketed by two
 * events on its stream, and the tracer gets its start and end once the end
 * event has completed (at the latest at the next device_synchronize).
 * Device times are put on the host clock through an anchor: an event
 * recorded on an idle stream right after a synchronize, whose host time is
 * taken when the synchronize on it returns; elapsed times from it (float
 * milliseconds in both runtimes) stay within a microsecond over the seconds
 * of one step, and the anchor is renewed at every device_synchronize.
 *
 * Every device allocation is tracked, so that whatever the caller leaves is
 * released when the device closes.  Expandable segments (va_reserve,
 * mem_map) are not implemented: those calls answer MS_EUNSUPPORTED. */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "lib/base/growable.h"
#include "lib/base/range_set.h"
#include "runtime.h"

typedef struct npu_dev npu_dev;

struct ms_stream {
    npu_dev *owner;
    void *rs;
    uint64_t id;
    struct ms_stream *prev, *next;
};

struct ms_event {
    npu_dev *owner;
    void *re;
    struct ms_event *prev, *next;
};

/* A copy or kernel waiting for its end event. */
typedef struct npu_timed {
    uint64_t tag;
    bool is_copy;
    ms_copy_kind kind;
    const char *name;
    uint64_t stream_id;
    uint64_t bytes;
    void *start, *end;
} npu_timed;

struct npu_dev {
    const npu_runtime *rt;
    void *ctx;
    int ordinal;
    ms_range_set allocs; /* device allocations (addr, bytes) */
    npu_pinned pinned;
    npu_proxy proxy;
    struct ms_stream *streams;
    struct ms_event *events;
    uint64_t next_stream_id;
    npu_timed *timed;
    size_t n_timed, cap_timed;
    void **spare; /* timing events for reuse */
    size_t n_spare, cap_spare;
    void *anchor_stream, *anchor;
    int64_t anchor_host_ns;
    ms_work_tracer tracer;
    void *tracer_user;
};

/* Undelivered records beyond which a launch first delivers what is done. */
enum { NPU_TIMED_POLL = 4096 };

static int64_t host_clock_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static bool own_stream(const npu_dev *d, const ms_stream *s)
{
    return d != NULL && s != NULL && s->owner == d;
}

static bool own_event(const npu_dev *d, const ms_event *e)
{
    return d != NULL && e != NULL && e->owner == d;
}

/* ---- timing -------------------------------------------------------------- */

static ms_status timing_event(npu_dev *d, void **ev)
{
    if (d->n_spare > 0) {
        *ev = d->spare[--d->n_spare];
        return MS_OK;
    }
    return d->rt->event_create(d->ctx, ev);
}

static void recycle_event(npu_dev *d, void *ev)
{
    if (ev == NULL)
        return;
    if (MS_GROW(d->spare, d->n_spare, d->cap_spare, 64))
        d->spare[d->n_spare++] = ev;
    else
        d->rt->event_destroy(d->ctx, ev);
}

/* The anchor's host time is taken when the synchronize on it returns: later
 * than the event by the latency of that return (microseconds), so device
 * times on the host clock are never earlier than the host calls that
 * issued the work. */
static ms_status set_anchor(npu_dev *d)
{
    ms_status st = d->rt->event_record(d->ctx, d->anchor, d->anchor_stream);
    if (st == MS_OK)
        st = d->rt->event_synchronize(d->ctx, d->anchor);
    if (st == MS_OK)
        d->anchor_host_ns = host_clock_ns();
    return st;
}

/* Hand the records whose end event has completed to the tracer (all of
 * them with `all`, after a synchronize), keeping the others in order. */
static ms_status deliver(npu_dev *d, bool all)
{
    size_t k = 0;
    ms_status first = MS_OK;
    for (size_t i = 0; i < d->n_timed; i++) {
        npu_timed *t = &d->timed[i];
        bool done = all;
        ms_status st = all ? MS_OK : d->rt->event_query(d->ctx, t->end, &done);
        int64_t s_ns = 0, e_ns = 0;
        if (st == MS_OK && done &&
            (st = d->rt->event_elapsed_ns(d->ctx, d->anchor, t->start, &s_ns)) == MS_OK)
            st = d->rt->event_elapsed_ns(d->ctx, d->anchor, t->end, &e_ns);
        if (st != MS_OK && first == MS_OK && st != MS_EAGAIN)
            first = st;
        if (st != MS_OK || !done) {
            d->timed[k++] = *t;
            continue;
        }
        if (d->tracer != NULL) {
            ms_work_record rec = {.tag = t->tag,
                                  .is_copy = t->is_copy,
                                  .copy_kind = t->kind,
                                  .name = t->name,
                                  .stream_id = t->stream_id,
                                  .start_ns = d->anchor_host_ns + s_ns,
                                  .end_ns = d->anchor_host_ns + e_ns,
                                  .bytes = t->bytes};
            d->tracer(d->tracer_user, &rec);
        }
        recycle_event(d, t->start);
        recycle_event(d, t->end);
    }
    d->n_timed = k;
    return first;
}

/* Bracket the work `issue` puts on stream s with timing events. */
typedef ms_status (*npu_issue_fn)(npu_dev *d, void *rs, const void *arg);

static ms_status timed_issue(npu_dev *d, ms_stream *s, npu_timed t, npu_issue_fn issue,
                             const void *arg)
{
    if (d->n_timed >= NPU_TIMED_POLL)
        deliver(d, false);
    if (!MS_GROW(d->timed, d->n_timed, d->cap_timed, 256))
        return MS_ENOMEM;
    ms_status st = timing_event(d, &t.start);
    if (st == MS_OK && (st = timing_event(d, &t.end)) != MS_OK)
        recycle_event(d, t.start);
    if (st != MS_OK)
        return st;
    if ((st = d->rt->event_record(d->ctx, t.start, s->rs)) == MS_OK &&
        (st = issue(d, s->rs, arg)) == MS_OK)
        st = d->rt->event_record(d->ctx, t.end, s->rs);
    if (st != MS_OK) {
        /* Recorded events may still be pending on the stream. */
        d->rt->stream_synchronize(d->ctx, s->rs);
        recycle_event(d, t.start);
        recycle_event(d, t.end);
        return st;
    }
    t.stream_id = s->id;
    d->timed[d->n_timed++] = t;
    return MS_OK;
}

/* ---- memory -------------------------------------------------------------- */

static ms_status npu_mem_get_info(void *inst, uint64_t *free_bytes, uint64_t *total_bytes)
{
    npu_dev *d = inst;
    if (d == NULL || free_bytes == NULL || total_bytes == NULL)
        return MS_EINVAL;
    return d->rt->mem_get_info(d->ctx, free_bytes, total_bytes);
}

static ms_status npu_malloc_device(void *inst, uint64_t bytes, uint64_t *addr)
{
    npu_dev *d = inst;
    if (d == NULL || addr == NULL || bytes == 0)
        return MS_EINVAL;
    ms_status st = base_range_set_reserve(&d->allocs, 1);
    if (st == MS_OK && (st = d->rt->malloc_device(d->ctx, bytes, addr)) == MS_OK)
        base_range_set_add(&d->allocs, (ms_range){*addr, bytes}, false);
    return st;
}

static ms_status npu_free_device(void *inst, uint64_t addr)
{
    npu_dev *d = inst;
    if (d == NULL)
        return MS_EINVAL;
    ptrdiff_t i = base_range_set_floor(&d->allocs, addr);
    if (i < 0 || d->allocs.v[i].addr != addr)
        return MS_EINVAL;
    ms_status st = d->rt->free_device(d->ctx, addr);
    if (st == MS_OK) {
        ms_range_set *rs = &d->allocs;
        memmove(&rs->v[i], &rs->v[i + 1], (rs->n - (size_t)i - 1) * sizeof *rs->v);
        rs->n--;
    }
    return st;
}

static ms_status npu_malloc_host(void *inst, uint64_t bytes, uint64_t *addr)
{
    npu_dev *d = inst;
    if (d == NULL)
        return MS_EINVAL;
    return npu_pinned_malloc(d->rt, d->ctx, &d->pinned, bytes, addr);
}

static ms_status npu_free_host(void *inst, uint64_t addr)
{
    npu_dev *d = inst;
    if (d == NULL)
        return MS_EINVAL;
    return npu_pinned_free(&d->pinned, addr);
}

static ms_status npu_va_reserve(void *inst, uint64_t bytes, uint64_t *addr)
{
    return MS_EUNSUPPORTED;
}

static ms_status npu_va_release(void *inst, uint64_t addr)
{
    return MS_EUNSUPPORTED;
}

static ms_status npu_mem_map(void *inst, uint64_t addr, uint64_t bytes)
{
    return MS_EUNSUPPORTED;
}

static ms_status npu_mem_unmap(void *inst, uint64_t addr, uint64_t bytes)
{
    return MS_EUNSUPPORTED;
}

/* ---- streams and events -------------------------------------------------- */

static ms_status npu_stream_create(void *inst, int priority, ms_stream **out)
{
    npu_dev *d = inst;
    if (d == NULL || out == NULL)
        return MS_EINVAL;
    ms_stream *s = calloc(1, sizeof *s);
    if (s == NULL)
        return MS_ENOMEM;
    ms_status st = d->rt->stream_create(d->ctx, priority, &s->rs);
    if (st != MS_OK) {
        free(s);
        return st;
    }
    s->owner = d;
    s->id = d->next_stream_id++;
    s->next = d->streams;
    if (d->streams != NULL)
        d->streams->prev = s;
    d->streams = s;
    *out = s;
    return MS_OK;
}

static ms_status npu_stream_destroy(void *inst, ms_stream *s)
{
    npu_dev *d = inst;
    if (!own_stream(d, s))
        return MS_EINVAL;
    ms_status st = d->rt->stream_destroy(d->ctx, s->rs);
    if (s->prev != NULL)
        s->prev->next = s->next;
    else
        d->streams = s->next;
    if (s->next != NULL)
        s->next->prev = s->prev;
    free(s);
    return st;
}

static ms_status npu_stream_synchronize(void *inst, ms_stream *s)
{
    npu_dev *d = inst;
    if (!own_stream(d, s))
        return MS_EINVAL;
    ms_status st = d->rt->stream_synchronize(d->ctx, s->rs);
    return st == MS_OK ? deliver(d, false) : st;
}

static ms_status npu_stream_id(void *inst, const ms_stream *s, uint64_t *id)
{
    npu_dev *d = inst;
    if (!own_stream(d, s) || id == NULL)
        return MS_EINVAL;
    *id = s->id;
    return MS_OK;
}

static ms_status npu_event_create(void *inst, ms_event **out)
{
    npu_dev *d = inst;
    if (d == NULL || out == NULL)
        return MS_EINVAL;
    ms_event *e = calloc(1, sizeof *e);
    if (e == NULL)
        return MS_ENOMEM;
    ms_status st = d->rt->event_create(d->ctx, &e->re);
    if (st != MS_OK) {
        free(e);
        return st;
    }
    e->owner = d;
    e->next = d->events;
    if (d->events != NULL)
        d->events->prev = e;
    d->events = e;
    *out = e;
    return MS_OK;
}

static ms_status npu_event_destroy(void *inst, ms_event *e)
{
    npu_dev *d = inst;
    if (!own_event(d, e))
        return MS_EINVAL;
    ms_status st = d->rt->event_destroy(d->ctx, e->re);
    if (e->prev != NULL)
        e->prev->next = e->next;
    else
        d->events = e->next;
    if (e->next != NULL)
        e->next->prev = e->prev;
    free(e);
    return st;
}

static ms_status npu_event_record(void *inst, ms_event *e, ms_stream *s)
{
    npu_dev *d = inst;
    if (!own_event(d, e) || !own_stream(d, s))
        return MS_EINVAL;
    return d->rt->event_record(d->ctx, e->re, s->rs);
}

static ms_status npu_event_query(void *inst, ms_event *e, bool *complete)
{
    npu_dev *d = inst;
    if (!own_event(d, e) || complete == NULL)
        return MS_EINVAL;
    return d->rt->event_query(d->ctx, e->re, complete);
}

static ms_status npu_event_synchronize(void *inst, ms_event *e)
{
    npu_dev *d = inst;
    if (!own_event(d, e))
        return MS_EINVAL;
    return d->rt->event_synchronize(d->ctx, e->re);
}

static ms_status npu_event_elapsed_ns(void *inst, ms_event *a, ms_event *b, int64_t *ns)
{
    npu_dev *d = inst;
    if (!own_event(d, a) || !own_event(d, b) || ns == NULL)
        return MS_EINVAL;
    return d->rt->event_elapsed_ns(d->ctx, a->re, b->re, ns);
}

static ms_status npu_stream_wait_event(void *inst, ms_stream *s, ms_event *e)
{
    npu_dev *d = inst;
    if (!own_event(d, e) || !own_stream(d, s))
        return MS_EINVAL;
    return d->rt->stream_wait_event(d->ctx, s->rs, e->re);
}

/* ---- work ---------------------------------------------------------------- */

typedef struct copy_args {
    uint64_t dst, src, bytes;
    ms_copy_kind kind;
} copy_args;

static ms_status issue_copy(npu_dev *d, void *rs, const void *arg)
{
    const copy_args *c = arg;
    return d->rt->memcpy_async(d->ctx, c->dst, c->src, c->bytes, c->kind, rs);
}

static ms_status issue_kernel(npu_dev *d, void *rs, const void *arg)
{
    return npu_proxy_launch(d->rt, d->ctx, &d->proxy, arg, rs);
}

static ms_status npu_memcpy_async(void *inst, uint64_t dst, uint64_t src, uint64_t bytes,
                                  ms_copy_kind kind, ms_stream *s, uint64_t tag)
{
    npu_dev *d = inst;
    if (!own_stream(d, s) || (kind != MS_COPY_H2D && kind != MS_COPY_D2H && kind != MS_COPY_D2D))
        return MS_EINVAL;
    if (bytes == 0)
        return MS_OK;
    copy_args c = {dst, src, bytes, kind};
    npu_timed t = {.tag = tag, .is_copy = true, .kind = kind, .name = "memcpy", .bytes = bytes};
    return timed_issue(d, s, t, issue_copy, &c);
}

static ms_status npu_launch(void *inst, const ms_kernel *k, ms_stream *s, uint64_t tag)
{
    npu_dev *d = inst;
    if (!own_stream(d, s) || k == NULL)
        return MS_EINVAL;
    npu_timed t = {.tag = tag,
                   .name = k->name ? k->name : "kernel",
                   .bytes = k->bytes > 0 ? (uint64_t)k->bytes : 0};
    return timed_issue(d, s, t, issue_kernel, k);
}

static ms_status npu_matmul_dtype(void *inst, const ms_kernel *k, ms_dtype *runs_as)
{
    npu_dev *d = inst;
    if (d == NULL || k == NULL || runs_as == NULL)
        return MS_EINVAL;
    *runs_as = npu_proxy_matmul_dtype(d->rt, d->ctx, &d->proxy, k);
    return MS_OK;
}

static ms_status npu_device_synchronize(void *inst)
{
    npu_dev *d = inst;
    if (d == NULL)
        return MS_EINVAL;
    ms_status st = d->rt->device_synchronize(d->ctx);
    if (st == MS_OK)
        st = deliver(d, true);
    if (st == MS_OK)
        st = set_anchor(d);
    return st;
}

static ms_status npu_now(void *inst, int64_t *ns)
{
    if (inst == NULL || ns == NULL)
        return MS_EINVAL;
    *ns = host_clock_ns();
    return MS_OK;
}

static ms_status npu_set_tracer(void *inst, ms_work_tracer fn, void *user)
{
    npu_dev *d = inst;
    if (d == NULL)
        return MS_EINVAL;
    d->tracer = fn;
    d->tracer_user = fn != NULL ? user : NULL;
    return MS_OK;
}

/* The runtime's message of its last failed call. */
static const char *npu_last_error(void *inst)
{
    npu_dev *d = inst;
    const char *msg = d != NULL ? d->rt->last_error(d->ctx) : NULL;
    return msg != NULL && strcmp(msg, "no error recorded") != 0 ? msg : "";
}

/* ---- lifetime ------------------------------------------------------------ */

/* Everything the device still holds goes back to the runtime, whatever the
 * caller forgot: a run that fails halfway leaves the device as it found it. */
static ms_status npu_destroy(void *inst)
{
    npu_dev *d = inst;
    if (d == NULL)
        return MS_EINVAL;
    if (d->ctx != NULL)
        d->rt->device_synchronize(d->ctx);
    d->tracer = NULL;
    deliver(d, true);
    for (size_t i = 0; i < d->n_spare; i++)
        d->rt->event_destroy(d->ctx, d->spare[i]);
    while (d->events != NULL)
        npu_event_destroy(d, d->events);
    while (d->streams != NULL)
        npu_stream_destroy(d, d->streams);
    if (d->anchor != NULL)
        d->rt->event_destroy(d->ctx, d->anchor);
    if (d->anchor_stream != NULL)
        d->rt->stream_destroy(d->ctx, d->anchor_stream);
    npu_proxy_fini(d->rt, d->ctx, &d->proxy);
    for (size_t i = 0; i < d->allocs.n; i++)
        d->rt->free_device(d->ctx, d->allocs.v[i].addr);
    npu_pinned_release(d->rt, d->ctx, &d->pinned);
    if (d->ctx != NULL)
        d->rt->close(d->ctx);
    base_range_set_fini(&d->allocs);
    free(d->timed);
    free(d->spare);
    free(d);
    return MS_OK;
}

static const ms_backend_ops npu_ops = {
    .name = "npu-runtime",
    .destroy = npu_destroy,
    .mem_get_info = npu_mem_get_info,
    .malloc_device = npu_malloc_device,
    .free_device = npu_free_device,
    .malloc_host = npu_malloc_host,
    .free_host = npu_free_host,
    .va_reserve = npu_va_reserve,
    .va_release = npu_va_release,
    .mem_map = npu_mem_map,
    .mem_unmap = npu_mem_unmap,
    .stream_create = npu_stream_create,
    .stream_destroy = npu_stream_destroy,
    .stream_synchronize = npu_stream_synchronize,
    .stream_id = npu_stream_id,
    .event_create = npu_event_create,
    .event_destroy = npu_event_destroy,
    .event_record = npu_event_record,
    .event_query = npu_event_query,
    .event_synchronize = npu_event_synchronize,
    .event_elapsed_ns = npu_event_elapsed_ns,
    .stream_wait_event = npu_stream_wait_event,
    .memcpy_async = npu_memcpy_async,
    .launch = npu_launch,
    .matmul_dtype = npu_matmul_dtype,
    .device_synchronize = npu_device_synchronize,
    .now = npu_now,
    .set_tracer = npu_set_tracer,
    .last_error = npu_last_error,
};

ms_status npu_device_open(const npu_runtime *rt, int ordinal, int device, ms_backend **out,
                          ms_diag *d)
{
    npu_dev *dev = calloc(1, sizeof *dev);
    ms_backend *b = calloc(1, sizeof *b);
    if (dev == NULL || b == NULL) {
        free(dev);
        free(b);
        return MS_ENOMEM;
    }
    dev->rt = rt;
    dev->ordinal = ordinal;
    ms_status st = rt->open(ordinal, &dev->ctx, d);
    if (st == MS_OK)
        st = npu_proxy_init(rt, dev->ctx, &dev->proxy, d);
    if (st == MS_OK && ((st = rt->stream_create(dev->ctx, 0, &dev->anchor_stream)) != MS_OK ||
                        (st = rt->event_create(dev->ctx, &dev->anchor)) != MS_OK ||
                        (st = set_anchor(dev)) != MS_OK))
        ms_diag_set(d, st, "%s:%d: cannot create the timing stream and event: %s", rt->name,
                    ordinal, rt->last_error(dev->ctx));
    if (st != MS_OK) {
        npu_destroy(dev);
        free(b);
        return st;
    }
    *b = (ms_backend){.ops = &npu_ops, .inst = dev, .device = device, .carries_data = true};
    *out = b;
    return MS_OK;
}
