/* Segments: opening one on the device (alloc_block), returning cached ones
 * (release_block, release_blocks, release_available_cached_blocks,
 * release_cached_blocks) and garbage collection
 * (garbage_collect_cached_blocks), as in CUDACachingAllocator.cpp. */
#include <stdlib.h>

#include "allocator_internal.h"
#include "lib/base/growable.h"

/* ---------------------------------------------------------- the registry */

static ms_status segs_reserve(ms_alloc *a)
{
    return MS_GROW(a->segs, a->n_segs, a->cap_segs, 64) ? MS_OK : MS_ENOMEM;
}

ms_aseg *alloc_seg_new(ms_alloc *a, uint64_t addr, uint64_t size, ms_bpool *pool, ms_stream *stream,
                       uint64_t stream_id)
{
    if (segs_reserve(a) != MS_OK)
        return NULL;
    ms_aseg *s = calloc(1, sizeof *s);
    if (!s)
        return NULL;
    s->addr = addr;
    s->size = size;
    s->pool = pool;
    s->stream = stream;
    s->stream_id = stream_id;
    s->index = a->n_segs;
    a->segs[a->n_segs++] = s;
    return s;
}

void alloc_seg_drop(ms_alloc *a, ms_aseg *s)
{
    ms_aseg *last = a->segs[--a->n_segs];
    a->segs[s->index] = last;
    last->index = s->index;
    free(s->page_mapped);
    free(s);
}

/* ------------------------------------------------------------ alloc_block */

static void count_new_segment(ms_alloc *a, const ms_ablock *b)
{
    a->total_allocated_memory += b->size;
    alloc_stats_pool_inc(&a->stats.segment, b->pool, 1);
    alloc_stats_pool_inc(&a->stats.reserved_bytes, b->pool, b->size);
    if (b->size >= a->cfg.max_split_size)
        alloc_torch_stat_inc(&a->stats.oversize_segments, 1);
}

static ms_status device_segment(ms_alloc *a, ms_aparams *p, bool *found)
{
    uint64_t size = p->alloc_size;
    ms_ablock *b = alloc_block_new(a);
    ms_aseg *s = b ? alloc_seg_new(a, 0, size, p->pool, p->stream, p->stream_id) : NULL;
    if (!s) {
        if (b)
            alloc_block_recycle(a, b);
        return MS_ENOMEM;
    }
    uint64_t addr = 0;
    ms_status st = a->be->ops->malloc_device(a->be->inst, size, &addr);
    if (st != MS_OK) {
        alloc_seg_drop(a, s);
        alloc_block_recycle(a, b);
        return st == MS_ENOMEM ? MS_OK : st; /* out of memory: not found */
    }
    s->addr = addr;
    s->head = b;
    b->addr = addr;
    b->size = size;
    b->stream = p->stream;
    b->stream_id = p->stream_id;
    b->pool = p->pool;
    b->seg = s;
    count_new_segment(a, b);
    a->stats.num_device_alloc++;
    alloc_emit(a, MS_AA_SEGMENT_ALLOC, addr, size, p->stream_id, p->pool);
    p->block = b;
    *found = true;
    return MS_OK;
}

/* With a memory fraction set, a segment that would take reserved memory past
 * the allowed maximum fails without asking the device; so does MindSpeed's
 * first attempt near a full device (alloc_mindspeed_prejudged). */
ms_status alloc_alloc_block(ms_alloc *a, ms_aparams *p, bool is_retry, bool *found)
{
    *found = false;
    if (is_retry)
        a->stats.num_alloc_retries++;
    if (!is_retry && alloc_mindspeed_prejudged(a, p))
        return MS_OK;
    if (a->set_fraction && a->total_allocated_memory + p->alloc_size > a->allowed_memory_maximum)
        return MS_OK;
    if (p->alloc_size >= MS_ATREE_MAX_SIZE)
        return MS_OK; /* more than any device holds: out of memory */
    if (a->cfg.expandable_segments && !p->pool->owner->opt.exact_segments)
        return alloc_try_expandable(a, p, found);
    return device_segment(a, p, found);
}

/* ---------------------------------------------------------------- release */

ms_status alloc_release_block(ms_alloc *a, ms_ablock *b)
{
    a->stats.num_device_free++;
    ms_status st = a->be->ops->free_device(a->be->inst, b->addr);
    if (st != MS_OK)
        return st;
    a->total_allocated_memory -= b->size;
    alloc_stats_pool_dec(&a->stats.segment, b->pool, 1);
    alloc_stats_pool_dec(&a->stats.reserved_bytes, b->pool, b->size);
    if (b->size >= a->cfg.max_split_size)
        alloc_torch_stat_dec(&a->stats.oversize_segments, 1);
    alloc_emit(a, MS_AA_SEGMENT_FREE, b->addr, b->size, b->stream_id, b->pool);
    alloc_bpool_erase(b->pool, b);
    alloc_seg_drop(a, b->seg);
    alloc_block_recycle(a, b);
    return MS_OK;
}

/* release_blocks: free every unsplit cached block; expandable blocks give
 * back their completely free pages, and a segment left wholly unmapped gives
 * back its address space. */
static ms_status release_blocks(ms_alloc *a, ms_bpool *pool)
{
    ms_ablock *to_unmap = NULL;
    ms_ablock **tail = &to_unmap;
    ms_status st = MS_OK;
    for (ms_ablock *b = alloc_bpool_first(pool), *next; b && st == MS_OK; b = next) {
        next = alloc_bpool_next(b);
        if (b->seg->expandable) {
            b->link = NULL;
            *tail = b;
            tail = &b->link;
        } else if (!alloc_block_is_split(b)) {
            st = alloc_release_block(a, b);
        }
    }
    for (ms_ablock *b = to_unmap, *next; b && st == MS_OK; b = next) {
        next = b->link;
        st = alloc_unmap_block(a, b);
        if (st == MS_OK && !b->mapped && !alloc_block_is_split(b))
            st = alloc_release_expandable(a, b->seg);
    }
    return st;
}

static bool releasable(const ms_ablock *b)
{
    /* PyTorch would cudaFree these (an assertion or a driver error); memsim
     * declines instead. */
    return !b->seg->expandable && !alloc_block_is_split(b);
}

static ms_status release_oversize_run(ms_alloc *a, const ms_aparams *p, ms_ablock *cur,
                                      uint64_t key_size, bool *released)
{
    uint64_t total = 0;
    ms_status st = MS_OK;
    while (cur && total < key_size && cur->size >= a->cfg.max_split_size &&
           cur->stream_id == p->stream_id && releasable(cur) && st == MS_OK) {
        ms_ablock *before = alloc_bpool_prev(cur);
        total += cur->size;
        st = alloc_release_block(a, cur);
        cur = before;
    }
    *released = st == MS_OK && total >= key_size;
    return st;
}

/* release_available_cached_blocks (only with max_split_size set): free one
 * cached block of at least max(request, max_split_size), or else oversize
 * blocks of the stream, largest first, until that much is freed. */
ms_status alloc_release_available(ms_alloc *a, const ms_aparams *p, bool *released)
{
    *released = false;
    uint64_t max_split = a->cfg.max_split_size;
    if (max_split == UINT64_MAX)
        return MS_OK;
    uint64_t key_size = p->size < max_split ? max_split : p->size;
    ms_ablock *b = alloc_bpool_lower_bound(p->pool, p->stream_id, key_size);
    if (alloc_npu_family(a)) {
        ms_status st = a->be->ops->device_synchronize(a->be->inst);
        if (st != MS_OK)
            return st;
    }
    if (b && b->stream_id == p->stream_id) {
        if (!releasable(b))
            return MS_OK;
        *released = true;
        return alloc_release_block(a, b);
    }
    /* Back up one: the largest block of the stream, if it has any. */
    ms_ablock *largest = b ? alloc_bpool_prev(b) : alloc_bpool_last(p->pool);
    return release_oversize_run(a, p, largest, key_size, released);
}

/* release_cached_blocks: wait for every outstanding record_stream event, then
 * free every unsplit cached block, large pool then small, pool by pool. */
ms_status alloc_release_cached(ms_alloc *a)
{
    ms_status st = MS_OK;
    if (alloc_npu_family(a))
        st = a->be->ops->device_synchronize(a->be->inst);
    if (st == MS_OK)
        st = alloc_sync_events(a);
    for (int i = 0; i < a->n_pools && st == MS_OK; i++) {
        st = release_blocks(a, &a->pools[i]->large);
        if (st == MS_OK)
            st = release_blocks(a, &a->pools[i]->small);
    }
    return st;
}

/* ------------------------------------------------------ garbage collection */

static uint64_t gc_count(const ms_ablock *b)
{
    return (uint64_t)(b->pool->get_free_blocks_call_count - b->gc_count_base);
}

static bool gc_candidate(const ms_ablock *b)
{
    return !alloc_block_is_split(b) && !b->seg->expandable;
}

/* One pass: free every candidate at least as old as the average. */
static ms_status gc_pass(ms_alloc *a, double age_threshold, uint64_t *total_age, int *count,
                         uint64_t *reclaimed, bool *freed)
{
    for (int i = 0; i < a->n_pools; i++) {
        ms_bpool *pool = &a->pools[i]->large;
        for (ms_ablock *b = alloc_bpool_first(pool), *next; b; b = next) {
            next = alloc_bpool_next(b);
            if (!gc_candidate(b) || (double)gc_count(b) < age_threshold)
                continue;
            *freed = true;
            *reclaimed += b->size;
            *total_age -= gc_count(b);
            (*count)--;
            ms_status st = alloc_release_block(a, b);
            if (st != MS_OK)
                return st;
        }
    }
    return MS_OK;
}

/* garbage_collect_cached_blocks: when reserved memory passes
 * garbage_collection_threshold x allowed, free unsplit large cached blocks
 * aged at least the average (age = get_free_block calls on their pool since
 * they were cached), round after round, until enough is reclaimed. */
ms_status alloc_garbage_collect(ms_alloc *a)
{
    uint64_t gc_threshold =
        (uint64_t)(a->cfg.garbage_collection_threshold * (double)a->allowed_memory_maximum);
    if (a->total_allocated_memory <= gc_threshold)
        return MS_OK;
    uint64_t target = a->total_allocated_memory - gc_threshold;
    uint64_t total_age = 0;
    int count = 0;
    for (int i = 0; i < a->n_pools; i++)
        for (ms_ablock *b = alloc_bpool_first(&a->pools[i]->large); b; b = alloc_bpool_next(b))
            if (gc_candidate(b)) {
                total_age += gc_count(b);
                count++;
            }
    if (count == 0)
        return MS_OK;
    if (alloc_npu_family(a)) {
        ms_status st = a->be->ops->device_synchronize(a->be->inst);
        if (st != MS_OK)
            return st;
    }
    uint64_t reclaimed = 0;
    bool freed = true;
    while (reclaimed < target && freed && count > 0) {
        double age_threshold = (double)total_age / count;
        freed = false;
        ms_status st = gc_pass(a, age_threshold, &total_age, &count, &reclaimed, &freed);
        if (st != MS_OK)
            return st;
    }
    return MS_OK;
}

/* ---------------------------------------------------------------- destroy */

static ms_status give_back(ms_alloc *a, ms_aseg *s)
{
    if (s->expandable)
        return alloc_give_back_expandable(a, s);
    return a->be->ops->free_device(a->be->inst, s->addr);
}

/* At destroy every segment goes back to the backend, in use or not. */
ms_status alloc_release_all(ms_alloc *a)
{
    ms_status st = MS_OK;
    while (a->n_segs > 0) {
        ms_aseg *s = a->segs[a->n_segs - 1];
        ms_status r = give_back(a, s);
        if (st == MS_OK)
            st = r;
        alloc_seg_drop(a, s);
    }
    return st;
}
