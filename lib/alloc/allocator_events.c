/* record_stream and deferred frees (recordStream, insert_events,
 * process_events, synchronize_and_free_events): a block used on other
 * streams is not reused until an event recorded on each of them at free time
 * has completed.  Events are pooled as PyTorch's EventPool does; outstanding
 * ones sit in one FIFO per stream so a slow stream does not hold up others. */
#include <stdlib.h>

#include "allocator_internal.h"
#include "lib/base/growable.h"

ms_status alloc_block_add_use(ms_ablock *b, ms_stream *s, uint64_t id)
{
    for (uint32_t i = 0; i < b->n_uses; i++)
        if (b->uses[i].id == id)
            return MS_OK; /* stream_uses is a set */
    if (!MS_GROW(b->uses, b->n_uses, b->cap_uses, 2))
        return MS_ENOMEM;
    b->uses[b->n_uses++] = (ms_ause){s, id};
    return MS_OK;
}

ms_status ms_alloc_record_stream(ms_alloc *a, uint64_t addr, ms_stream *s)
{
    if (!a || !s)
        return MS_EINVAL;
    if (addr == 0)
        return MS_OK; /* an empty tensor has no block */
    ms_ablock *b = alloc_index_get(&a->index, addr);
    if (!b)
        return MS_EINVAL;
    uint64_t id = 0;
    ms_status st = a->be->ops->stream_id(a->be->inst, s, &id);
    if (st != MS_OK)
        return st;
    /* CUDA ignores uses on the allocation stream; torch_npu records them. */
    if (a->cfg.flavour == MS_ALLOC_CUDA && id == b->stream_id)
        return MS_OK;
    return alloc_block_add_use(b, s, id);
}

/* ------------------------------------------------------------ event pool */

static ms_status get_event(ms_alloc *a, ms_event **e)
{
    if (a->n_spare_events > 0) {
        *e = a->spare_events[--a->n_spare_events];
        return MS_OK;
    }
    return a->be->ops->event_create(a->be->inst, e);
}

static void put_event(ms_alloc *a, ms_event *e)
{
    if (!MS_GROW(a->spare_events, a->n_spare_events, a->cap_spare_events, 16)) {
        a->be->ops->event_destroy(a->be->inst, e);
        return;
        }
    a->spare_events[a->n_spare_events++] = e;
}

/* ----------------------------------------------------------- the queues */

static ms_aqueue *queue_for(ms_alloc *a, uint64_t stream_id)
{
    uint32_t lo = 0, hi = a->n_queues;
    while (lo < hi) {
        uint32_t mid = (lo + hi) / 2;
        if (a->queues[mid].stream_id < stream_id)
            lo = mid + 1;
        else
            hi = mid;
    }
    if (lo < a->n_queues && a->queues[lo].stream_id == stream_id)
        return &a->queues[lo];
    if (!MS_GROW(a->queues, a->n_queues, a->cap_queues, 4))
        return NULL;
    for (uint32_t i = a->n_queues; i > lo; i--)
        a->queues[i] = a->queues[i - 1];
    a->n_queues++;
    a->queues[lo] = (ms_aqueue){.stream_id = stream_id};
    return &a->queues[lo];
}

static ms_status queue_push(ms_aqueue *q, ms_aevent item)
{
    if (q->count == q->cap) {
        uint32_t cap = q->cap ? q->cap * 2 : 8;
        ms_aevent *items = malloc(cap * sizeof *items);
        if (!items)
            return MS_ENOMEM;
        for (uint32_t i = 0; i < q->count; i++)
            items[i] = q->items[(q->head + i) % q->cap];
        free(q->items);
        q->items = items;
        q->head = 0;
        q->cap = cap;
    }
    q->items[(q->head + q->count) % q->cap] = item;
    q->count++;
    return MS_OK;
}

static ms_aevent queue_pop(ms_aqueue *q)
{
    ms_aevent item = q->items[q->head];
    q->head = (q->head + 1) % q->cap;
    q->count--;
    return item;
}

/* ----------------------------------------------------------- the events */

/* insert_events: at free time, one event on every stream the block was used
 * on; the block is freed when the last of them completes. */
ms_status alloc_insert_events(ms_alloc *a, ms_ablock *b)
{
    for (uint32_t i = 0; i < b->n_uses; i++) {
        ms_aqueue *q = queue_for(a, b->uses[i].id);
        ms_event *e = NULL;
        ms_status st = q ? get_event(a, &e) : MS_ENOMEM;
        if (st == MS_OK)
            st = a->be->ops->event_record(a->be->inst, e, b->uses[i].stream);
        if (st == MS_OK)
            st = queue_push(q, (ms_aevent){e, b});
        if (st != MS_OK) {
            if (e)
                put_event(a, e);
            return st;
        }
        b->event_count++;
        a->n_outstanding++;
    }
    b->n_uses = 0;
    return MS_OK;
}

static void event_done(ms_alloc *a, ms_aqueue *q)
{
    ms_aevent item = queue_pop(q);
    put_event(a, item.event);
    a->n_outstanding--;
    if (--item.block->event_count == 0)
        alloc_free_block(a, item.block);
}

/* process_events: per stream, retire completed events from the front and
 * stop at the first one still pending. */
ms_status alloc_process_events_slow(ms_alloc *a)
{
    /* Every malloc queries the front of each waiting queue, most often to
     * hear "not yet": the backend's entry point is looked up once. */
    ms_status (*query)(void *, ms_event *, bool *) = a->be->ops->event_query;
    void *inst = a->be->inst;
    for (uint32_t i = 0; i < a->n_queues; i++) {
        ms_aqueue *q = &a->queues[i];
        while (q->count > 0) {
            bool complete = false;
            ms_status st = query(inst, q->items[q->head].event, &complete);
            if (st != MS_OK)
                return st;
            if (!complete)
                break;
            event_done(a, q);
        }
    }
    return MS_OK;
}

/* synchronize_and_free_events: wait for every outstanding event. */
ms_status alloc_sync_events(ms_alloc *a)
{
    a->stats.num_sync_all_streams++;
    for (uint32_t i = 0; i < a->n_queues; i++) {
        ms_aqueue *q = &a->queues[i];
        while (q->count > 0) {
            ms_status st = a->be->ops->event_synchronize(a->be->inst, q->items[q->head].event);
            if (st != MS_OK)
                return st;
            event_done(a, q);
        }
    }
    return MS_OK;
}

void alloc_events_free(ms_alloc *a)
{
    for (uint32_t i = 0; i < a->n_queues; i++) {
        ms_aqueue *q = &a->queues[i];
        while (q->count > 0)
            a->be->ops->event_destroy(a->be->inst, queue_pop(q).event);
        free(q->items);
    }
    free(a->queues);
    a->queues = NULL;
    a->n_queues = 0;
    for (uint32_t i = 0; i < a->n_spare_events; i++)
        a->be->ops->event_destroy(a->be->inst, a->spare_events[i]);
    free(a->spare_events);
    a->spare_events = NULL;
    a->n_spare_events = 0;
}
