/* The allocator's part of a quiet moment's state (fast-forward, backend.h
 * ms_state_sig): whatever decides which block a later malloc gets, where,
 * and when a later free returns it.  Statistics are counts of what already
 * happened and decide nothing, except the current bytes that the blocks
 * already say; peaks restart with every step. */
#include "allocator_internal.h"

/* A block as the rules see it: its place and size, who uses it, what an
 * allocated or pending-free one was asked for (its free takes that from
 * requested_bytes; segments.csv and snapshots show it),
 * and a free one's age for garbage collection (get_free_blocks calls since
 * it was freed: only the difference is ever read, gc_count).  A free
 * block's last request and an allocated one's age are stale: set again
 * before they are read. */
static void write_block(const ms_ablock *b, ms_state_sig *sig)
{
    ms_state_sig_u64(sig, b->addr);
    ms_state_sig_u64(sig, b->size);
    ms_state_sig_u64(sig, b->allocated || b->event_count > 0 ? b->requested : 0);
    ms_state_sig_u64(sig, b->stream_id);
    ms_state_sig_u64(sig, (uint64_t)b->pool->owner->id << 1 | b->pool->is_small);
    ms_state_sig_u64(sig, (uint64_t)b->allocated << 1 | b->mapped);
    ms_state_sig_u64(
        sig, b->allocated ? 0 : (uint64_t)(b->pool->get_free_blocks_call_count - b->gc_count_base));
    ms_state_sig_u64(sig, b->event_count);
    ms_state_sig_u64(sig, b->n_uses);
    for (uint32_t i = 0; i < b->n_uses; i++)
        ms_state_sig_u64(sig, b->uses[i].id);
}

static void write_segment(const ms_aseg *s, ms_state_sig *sig)
{
    ms_state_sig_u64(sig, s->addr);
    ms_state_sig_u64(sig, s->size);
    ms_state_sig_u64(sig, s->stream_id);
    ms_state_sig_u64(sig, (uint64_t)s->expandable << 1 | s->imported);
    ms_state_sig_u64(sig, s->page);
    ms_state_sig_u64(sig, s->n_pages);
    if (s->expandable && s->page_mapped != NULL)
        ms_state_sig_put(sig, s->page_mapped, s->n_pages);
    for (const ms_ablock *b = s->head; b != NULL; b = b->next)
        write_block(b, sig);
    ms_state_sig_u64(sig, UINT64_MAX); /* the segment's end */
}

static void write_pools(const ms_alloc *a, ms_state_sig *sig)
{
    ms_state_sig_u64(sig, (uint64_t)a->n_pools);
    for (int i = 0; i < a->n_pools; i++) {
        const ms_npool *p = a->pools[i];
        ms_state_sig_u64(sig, (uint64_t)p->id);
        ms_state_sig_u64(sig, (uint64_t)p->opt.exact_segments << 1 | p->opt.lendable);
    }
}

/* Outstanding record_stream events: which block each holds back, and
 * whether it completed (the next malloc's process_events frees those). */
static ms_status write_queues(const ms_alloc *a, ms_state_sig *sig)
{
    ms_state_sig_u64(sig, a->n_queues);
    for (uint32_t q = 0; q < a->n_queues; q++) {
        const ms_aqueue *qu = &a->queues[q];
        ms_state_sig_u64(sig, qu->stream_id);
        ms_state_sig_u64(sig, qu->count);
        for (uint32_t i = 0; i < qu->count; i++) {
            const ms_aevent *ev = &qu->items[(qu->head + i) % qu->cap];
            ms_state_sig_u64(sig, ev->block->addr);
            const ms_backend_ops *ops = a->be->ops;
            if (ops->event_state == NULL)
                return MS_EUNSUPPORTED;
            ms_status st = ops->event_state(a->be->inst, ev->event, sig);
            if (st != MS_OK)
                return st;
        }
    }
    return MS_OK;
}

ms_status ms_alloc_state_write(const ms_alloc *a, ms_state_sig *sig)
{
    if (a == NULL || sig == NULL)
        return MS_EINVAL;
    write_pools(a, sig);
    ms_state_sig_u64(sig, a->n_segs);
    for (uint32_t i = 0; i < a->n_segs; i++)
        write_segment(a->segs[i], sig);
    ms_state_sig_u64(sig, a->total_allocated_memory);
    ms_state_sig_u64(sig, a->allowed_memory_maximum);
    ms_state_sig_u64(sig,
                     (uint64_t)a->set_fraction << 2 | (uint64_t)a->borrowing << 1 | a->in_forward);
    /* MindSpeed treats the first forward alone apart (allocator_mindspeed.c):
     * past it, the count decides nothing. */
    ms_state_sig_u64(sig, a->forwards_begun < 2 ? a->forwards_begun : 2);
    ms_state_sig_u64(sig, a->n_outstanding);
    ms_status st = write_queues(a, sig);
    return st != MS_OK ? st : sig->st;
}
