/* The replay backend: backend.h memory operations whose answers come from
 * the trace being replayed.
 *
 * Capacity is what the trace says the allocator could hold; a device
 * allocation or a mapping takes the address the trace recorded for the
 * matching segment_alloc / segment_map when that range is free (so replayed
 * addresses read like the recorded ones), else a fresh deterministic address
 * above everything the trace mentions.  Streams carry the recorded stream
 * handle as their id, which is what the caching allocator orders free blocks
 * by.  Events complete when the replay reaches the trace event that
 * completed the free they guard (free_completed).  No work runs here:
 * launch and memcpy are unsupported. */
#include "replay_start.h"

#include <stdlib.h>
#include <string.h>

#include "lib/base/range_set.h"

#define RB_ALIGN (2ULL << 20) /* fresh addresses: cudaMalloc's 2 MiB granularity */

/* Side streams of deferred frees.  Real traces need a few (one per stream
 * a block was used on, at most); a trace made to complete its frees in the
 * reverse order of their requests would need one each, and every malloc's
 * process_events walks every stream's queue, so past this many the replay
 * puts an event behind the earliest-completing one (docs/replay.md, Limits). */
enum { RPL_MAX_SIDE_STREAMS = 64 };

/* The id is the rank of the recorded handle among the trace's handles: the
 * caching allocator orders free blocks by stream pointer value, and rank
 * keeps that order in the small ids backend.h asks for. */
struct ms_stream {
    uint64_t id;
    size_t complete_at; /* work recorded here completes at this trace event */
    struct ms_stream *next;
};

struct ms_event {
    size_t complete_at;
    struct ms_event *prev, *next;
};

struct ms_rb {
    uint64_t capacity, total, used;
    uint64_t fresh, host_fresh;
    ms_range_set allocs; /* device allocations (malloc_device), one range each */
    ms_range_set mapped; /* mapped pages of expandable segments, merged */
    ms_range_set vas;    /* address reservations */
    ms_stream *streams;
    ms_stream *sides[RPL_MAX_SIDE_STREAMS]; /* of deferred frees, also in streams */
    size_t n_sides;
    ms_event events; /* list head */
    uint64_t *handles; /* recorded stream handles, sorted */
    size_t n_handles;
    uint64_t next_id;  /* ids of streams the allocator creates */
    size_t cursor;
    int64_t time_us;
    const ms_trace_event *hints;
    size_t n_hints;
    bool *hint_used;
    size_t hint_cap;
};

/* ---- address ranges ---- */

/* Add [addr, addr + size), disjoint from the set. */
static ms_status set_insert(ms_range_set *s, uint64_t addr, uint64_t size, bool merge)
{
    if (base_range_set_reserve(s, 1) != MS_OK)
        return MS_ENOMEM;
    base_range_set_add(s, (ms_range){addr, size}, merge);
    return MS_OK;
}

/* Remove [addr, addr + size), which must lie inside one range. */
static ms_status set_cut(ms_range_set *s, uint64_t addr, uint64_t size)
{
    size_t i = base_range_set_lower(s, addr);
    if (i == s->n || s->v[i].addr > addr || s->v[i].addr + s->v[i].size < addr + size)
        return MS_EINVAL;
    if (base_range_set_reserve(s, 1) != MS_OK)
        return MS_ENOMEM;
    base_range_set_cut(s, i, (ms_range){addr, size});
    return MS_OK;
}

static bool range_busy(const ms_rb *rb, uint64_t addr, uint64_t size, bool with_vas)
{
    if (addr + size < addr)
        return true;
    return base_range_set_overlaps(&rb->allocs, addr, size) ||
           base_range_set_overlaps(&rb->mapped, addr, size) ||
           (with_vas && base_range_set_overlaps(&rb->vas, addr, size));
}

/* The recorded address of the first unused hint of this action and size
 * whose range is free; 0 if none. */
static uint64_t take_hint(ms_rb *rb, ms_trace_action action, uint64_t size, bool exact)
{
    for (size_t i = 0; i < rb->n_hints; i++) {
        const ms_trace_event *h = &rb->hints[i];
        if (rb->hint_used[i] || h->action != action || (exact && h->size != size))
            continue;
        if (h->addr == 0 || range_busy(rb, h->addr, size, true))
            continue;
        rb->hint_used[i] = exact;
        return h->addr;
    }
    return 0;
}

static uint64_t fresh(ms_rb *rb, uint64_t size)
{
    uint64_t a = rb->fresh;
    rb->fresh += (size + RB_ALIGN - 1) / RB_ALIGN * RB_ALIGN;
    return a;
}

/* ---- backend operations ---- */

static ms_status rb_destroy(void *inst)
{
    ms_rb *rb = inst;
    while (rb->streams != NULL) {
        ms_stream *s = rb->streams;
        rb->streams = s->next;
        free(s);
    }
    while (rb->events.next != &rb->events) {
        ms_event *e = rb->events.next;
        rb->events.next = e->next;
        free(e);
    }
    base_range_set_fini(&rb->allocs);
    base_range_set_fini(&rb->mapped);
    base_range_set_fini(&rb->vas);
    free(rb->hint_used);
    free(rb->handles);
    free(rb);
    return MS_OK;
}

static ms_status rb_mem_get_info(void *inst, uint64_t *free_bytes, uint64_t *total_bytes)
{
    ms_rb *rb = inst;
    if (free_bytes == NULL || total_bytes == NULL)
        return MS_EINVAL;
    *free_bytes = rb->capacity > rb->used ? rb->capacity - rb->used : 0;
    *total_bytes = rb->total;
    return MS_OK;
}

static ms_status rb_malloc_device(void *inst, uint64_t bytes, uint64_t *addr)
{
    ms_rb *rb = inst;
    if (addr == NULL || bytes == 0)
        return MS_EINVAL;
    if (bytes > rb->capacity - rb->used || rb->used > rb->capacity)
        return MS_ENOMEM;
    uint64_t a = take_hint(rb, MS_TA_SEGMENT_ALLOC, bytes, true);
    if (a == 0)
        a = fresh(rb, bytes);
    ms_status st = set_insert(&rb->allocs, a, bytes, false);
    if (st != MS_OK)
        return st;
    rb->used += bytes;
    *addr = a;
    return MS_OK;
}

static ms_status rb_free_device(void *inst, uint64_t addr)
{
    ms_rb *rb = inst;
    size_t i = base_range_set_lower(&rb->allocs, addr);
    if (i == rb->allocs.n || rb->allocs.v[i].addr != addr)
        return MS_EINVAL;
    rb->used -= rb->allocs.v[i].size;
    return set_cut(&rb->allocs, addr, rb->allocs.v[i].size);
}

static ms_status rb_malloc_host(void *inst, uint64_t bytes, uint64_t *addr)
{
    ms_rb *rb = inst;
    if (addr == NULL)
        return MS_EINVAL;
    *addr = rb->host_fresh;
    rb->host_fresh += (bytes + RB_ALIGN - 1) / RB_ALIGN * RB_ALIGN;
    return MS_OK;
}

static ms_status rb_free_host(void *inst, uint64_t addr)
{
    return MS_OK;
}

/* A new expandable segment's first mapping is at its base, so the recorded
 * segment_map about to happen names the base the trace had. */
static ms_status rb_va_reserve(void *inst, uint64_t bytes, uint64_t *addr)
{
    ms_rb *rb = inst;
    if (addr == NULL || bytes == 0)
        return MS_EINVAL;
    uint64_t a = take_hint(rb, MS_TA_SEGMENT_MAP, bytes, false);
    if (a == 0)
        a = fresh(rb, bytes);
    ms_status st = set_insert(&rb->vas, a, bytes, false);
    if (st == MS_OK)
        *addr = a;
    return st;
}

static ms_status rb_va_release(void *inst, uint64_t addr)
{
    ms_rb *rb = inst;
    size_t i = base_range_set_lower(&rb->vas, addr);
    if (i == rb->vas.n || rb->vas.v[i].addr != addr)
        return MS_EINVAL;
    return set_cut(&rb->vas, addr, rb->vas.v[i].size);
}

static ms_status rb_mem_map(void *inst, uint64_t addr, uint64_t bytes)
{
    ms_rb *rb = inst;
    if (bytes == 0 || range_busy(rb, addr, bytes, false))
        return MS_EINVAL;
    if (bytes > rb->capacity - rb->used || rb->used > rb->capacity)
        return MS_ENOMEM;
    ms_status st = set_insert(&rb->mapped, addr, bytes, true);
    if (st == MS_OK)
        rb->used += bytes;
    return st;
}

static ms_status rb_mem_unmap(void *inst, uint64_t addr, uint64_t bytes)
{
    ms_rb *rb = inst;
    ms_status st = set_cut(&rb->mapped, addr, bytes);
    if (st == MS_OK)
        rb->used -= bytes;
    return st;
}

static ms_status new_stream(ms_rb *rb, uint64_t id, size_t complete_at, ms_stream **out)
{
    ms_stream *s = calloc(1, sizeof *s);
    if (s == NULL)
        return MS_ENOMEM;
    s->id = id;
    s->complete_at = complete_at;
    s->next = rb->streams;
    rb->streams = s;
    *out = s;
    return MS_OK;
}

static ms_status rb_stream_create(void *inst, int priority, ms_stream **out)
{
    ms_rb *rb = inst;
    if (out == NULL)
        return MS_EINVAL;
    return new_stream(rb, rb->next_id++, 0, out);
}

static ms_status rb_stream_destroy(void *inst, ms_stream *s)
{
    ms_rb *rb = inst;
    for (ms_stream **p = &rb->streams; *p != NULL; p = &(*p)->next) {
        if (*p == s) {
            *p = s->next;
            free(s);
            return MS_OK;
        }
    }
    return MS_EINVAL;
}

static ms_status rb_ok_stream(void *inst, ms_stream *s)
{
    return s == NULL ? MS_EINVAL : MS_OK;
}

static ms_status rb_stream_id(void *inst, const ms_stream *s, uint64_t *id)
{
    if (s == NULL || id == NULL)
        return MS_EINVAL;
    *id = s->id;
    return MS_OK;
}

static ms_status rb_event_create(void *inst, ms_event **out)
{
    ms_rb *rb = inst;
    if (out == NULL)
        return MS_EINVAL;
    ms_event *e = calloc(1, sizeof *e);
    if (e == NULL)
        return MS_ENOMEM;
    e->next = rb->events.next;
    e->prev = &rb->events;
    rb->events.next->prev = e;
    rb->events.next = e;
    *out = e;
    return MS_OK;
}

static ms_status rb_event_destroy(void *inst, ms_event *e)
{
    if (e == NULL)
        return MS_EINVAL;
    e->prev->next = e->next;
    e->next->prev = e->prev;
    free(e);
    return MS_OK;
}

static ms_status rb_event_record(void *inst, ms_event *e, ms_stream *s)
{
    if (e == NULL || s == NULL)
        return MS_EINVAL;
    e->complete_at = s->complete_at;
    return MS_OK;
}

static ms_status rb_event_query(void *inst, ms_event *e, bool *complete)
{
    ms_rb *rb = inst;
    if (e == NULL || complete == NULL)
        return MS_EINVAL;
    *complete = e->complete_at <= rb->cursor;
    return MS_OK;
}

/* Waiting for an event completes it: the real allocator synchronizes in
 * empty_cache / release_cached_blocks, and its trace then shows the
 * free_completed there. */
static ms_status rb_event_synchronize(void *inst, ms_event *e)
{
    if (e == NULL)
        return MS_EINVAL;
    e->complete_at = 0;
    return MS_OK;
}

static ms_status rb_event_elapsed_ns(void *inst, ms_event *a, ms_event *b, int64_t *ns)
{
    if (ns == NULL)
        return MS_EINVAL;
    *ns = 0;
    return MS_OK;
}

static ms_status rb_stream_wait_event(void *inst, ms_stream *s, ms_event *e)
{
    return s == NULL || e == NULL ? MS_EINVAL : MS_OK;
}

static ms_status rb_memcpy_async(void *inst, uint64_t dst, uint64_t src, uint64_t bytes,
                                 ms_copy_kind kind, ms_stream *s, uint64_t tag)
{
    return MS_EUNSUPPORTED;
}

static ms_status rb_launch(void *inst, const ms_kernel *k, ms_stream *s, uint64_t tag)
{
    return MS_EUNSUPPORTED;
}

static ms_status rb_device_synchronize(void *inst)
{
    return MS_OK;
}

static ms_status rb_now(void *inst, int64_t *ns)
{
    ms_rb *rb = inst;
    if (ns == NULL)
        return MS_EINVAL;
    *ns = rb->time_us * 1000;
    return MS_OK;
}

static ms_status rb_set_tracer(void *inst, ms_work_tracer fn, void *user)
{
    return MS_OK; /* a replay runs no work to report */
}

static const ms_backend_ops rb_ops = {
    .name = "replay",
    .destroy = rb_destroy,
    .mem_get_info = rb_mem_get_info,
    .malloc_device = rb_malloc_device,
    .free_device = rb_free_device,
    .malloc_host = rb_malloc_host,
    .free_host = rb_free_host,
    .va_reserve = rb_va_reserve,
    .va_release = rb_va_release,
    .mem_map = rb_mem_map,
    .mem_unmap = rb_mem_unmap,
    .stream_create = rb_stream_create,
    .stream_destroy = rb_stream_destroy,
    .stream_synchronize = rb_ok_stream,
    .stream_id = rb_stream_id,
    .event_create = rb_event_create,
    .event_destroy = rb_event_destroy,
    .event_record = rb_event_record,
    .event_query = rb_event_query,
    .event_synchronize = rb_event_synchronize,
    .event_elapsed_ns = rb_event_elapsed_ns,
    .stream_wait_event = rb_stream_wait_event,
    .memcpy_async = rb_memcpy_async,
    .launch = rb_launch,
    .device_synchronize = rb_device_synchronize,
    .now = rb_now,
    .set_tracer = rb_set_tracer,
};

ms_status rpl_backend_create(uint64_t capacity, uint64_t total, uint64_t fresh_base,
                             ms_backend **be, ms_rb **out)
{
    if (be == NULL || out == NULL || capacity == 0 || total < capacity)
        return MS_EINVAL;
    ms_rb *rb = calloc(1, sizeof *rb);
    ms_backend *b = calloc(1, sizeof *b);
    if (rb == NULL || b == NULL) {
        free(rb);
        free(b);
        return MS_ENOMEM;
    }
    rb->capacity = capacity;
    rb->total = total;
    rb->fresh = (fresh_base + RB_ALIGN - 1) / RB_ALIGN * RB_ALIGN;
    rb->host_fresh = RB_ALIGN; /* pinned host addresses live apart, low */
    rb->events.next = rb->events.prev = &rb->events;
    b->ops = &rb_ops;
    b->inst = rb;
    *be = b;
    *out = rb;
    return MS_OK;
}

ms_status rpl_backend_account(ms_rb *rb, uint64_t addr, uint64_t size, bool mapped)
{
    if (rb == NULL || size == 0 || range_busy(rb, addr, size, false))
        return MS_EINVAL;
    ms_status st = set_insert(mapped ? &rb->mapped : &rb->allocs, addr, size, mapped);
    if (st == MS_OK)
        rb->used += size;
    return st;
}

ms_status rpl_backend_set_stream_handles(ms_rb *rb, const uint64_t *handles, size_t n)
{
    if (rb == NULL || (handles == NULL && n > 0) || rb->n_handles > 0 || rb->streams != NULL)
        return MS_EINVAL;
    rb->handles = malloc((n ? n : 1) * sizeof *rb->handles);
    if (rb->handles == NULL)
        return MS_ENOMEM;
    for (size_t i = 0; i < n; i++) {
        if (i > 0 && handles[i] <= handles[i - 1]) {
            free(rb->handles);
            rb->handles = NULL;
            return MS_EINVAL;
        }
        rb->handles[i] = handles[i];
    }
    rb->n_handles = n;
    rb->next_id = n + 1; /* n: the side stream */
    return MS_OK;
}

ms_status rpl_backend_stream(ms_rb *rb, uint64_t handle, ms_stream **out)
{
    if (rb == NULL || out == NULL)
        return MS_EINVAL;
    size_t lo = 0, hi = rb->n_handles;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (rb->handles[mid] < handle)
            lo = mid + 1;
        else
            hi = mid;
    }
    if (lo == rb->n_handles || rb->handles[lo] != handle)
        return MS_ENOENT;
    for (ms_stream *s = rb->streams; s != NULL; s = s->next) {
        if (s->id == lo) {
            *out = s;
            return MS_OK;
        }
    }
    return new_stream(rb, lo, 0, out);
}

/* The stream a deferred free's event goes on; the allocator records it when
 * the block is freed, right after this call.  The caching allocator keeps
 * one FIFO of events per stream and stops at the first pending one
 * (process_events), so the stream must not hold an event that completes
 * later than this one: behind it, this block would wait past its recorded
 * free_completed.  One side stream for every deferred free did exactly that
 * when the blocks had been used on several streams and came back out of
 * order (a pipeline stage's send and receive streams: memsim's own snapshot
 * of llama2-70B at global batch 16, stage 1, replayed 54% of its allocs at
 * the recorded address).  So the event goes on the side stream whose last event
 * completes latest but no later than this one (the fewest streams: each is
 * a run of events in completion order), or on a new one; the recording
 * does not say which stream a block was used on, and needs not: its
 * free_completed says when it came back. */
static ms_stream *side_fit(const ms_rb *rb, size_t complete_at)
{
    ms_stream *best = NULL;
    for (size_t i = 0; i < rb->n_sides; i++) {
        ms_stream *s = rb->sides[i];
        if (s->complete_at <= complete_at && (best == NULL || s->complete_at > best->complete_at))
            best = s;
    }
    return best;
}

/* At the cap: the side stream whose last event completes first holds this
 * one up the least. */
static ms_stream *side_earliest(const ms_rb *rb)
{
    ms_stream *first = rb->sides[0];
    for (size_t i = 1; i < rb->n_sides; i++)
        if (rb->sides[i]->complete_at < first->complete_at)
            first = rb->sides[i];
    return first;
}

ms_status rpl_backend_side_stream(ms_rb *rb, size_t complete_at, ms_stream **out)
{
    if (rb == NULL || out == NULL)
        return MS_EINVAL;
    ms_stream *s = side_fit(rb, complete_at);
    if (s == NULL && rb->n_sides == RPL_MAX_SIDE_STREAMS)
        s = side_earliest(rb);
    if (s == NULL) {
        uint64_t id = rb->n_sides == 0 ? rb->n_handles : rb->next_id++;
        ms_status st = new_stream(rb, id, 0, &s);
        if (st != MS_OK)
            return st;
        rb->sides[rb->n_sides++] = s;
    }
    s->complete_at = complete_at;
    *out = s;
    return MS_OK;
}

ms_status rpl_backend_set_cursor(ms_rb *rb, size_t index, int64_t time_us)
{
    if (rb == NULL)
        return MS_EINVAL;
    rb->cursor = index;
    rb->time_us = time_us;
    return MS_OK;
}

ms_status rpl_backend_set_hints(ms_rb *rb, const ms_trace_event *ev, size_t n)
{
    if (rb == NULL || (ev == NULL && n > 0))
        return MS_EINVAL;
    if (n > rb->hint_cap) {
        bool *u = realloc(rb->hint_used, n * sizeof *u);
        if (u == NULL)
            return MS_ENOMEM;
        rb->hint_used = u;
        rb->hint_cap = n;
    }
    if (n > 0)
        memset(rb->hint_used, 0, n * sizeof *rb->hint_used);
    rb->hints = ev;
    rb->n_hints = n;
    return MS_OK;
}
