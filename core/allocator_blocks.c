/* Blocks and block sets: best-fit lookup, splitting a found block, freeing
 * and merging with free neighbours (get_free_block, should_split,
 * alloc_found_block, free_block, try_merge_blocks in
 * CUDACachingAllocator.cpp). */
#include <stdlib.h>
#include <string.h>

#include "allocator_internal.h"

#define SLAB_BLOCKS 256

/* --------------------------------------------------------------- the slab */

ms_ablock *ms_ablock_new(ms_alloc *a)
{
    if (!a->free_blocks) {
        size_t bytes = sizeof(ms_aslab) + SLAB_BLOCKS * sizeof(ms_ablock);
        ms_aslab *s = aligned_alloc(_Alignof(ms_aslab), bytes);
        if (!s)
            return NULL;
        memset(s, 0, bytes);
        s->next = a->slabs;
        a->slabs = s;
        for (int i = SLAB_BLOCKS; i-- > 0;) {
            s->blocks[i].link = a->free_blocks;
            a->free_blocks = &s->blocks[i];
        }
    }
    ms_ablock *b = a->free_blocks;
    a->free_blocks = b->link;
    ms_ause *uses = b->uses;
    uint32_t cap = b->cap_uses;
    memset(b, 0, sizeof *b);
    b->uses = uses; /* keep the record_stream buffer for the next block */
    b->cap_uses = cap;
    b->mapped = true;
    return b;
}

void ms_ablock_recycle(ms_alloc *a, ms_ablock *b)
{
    b->link = a->free_blocks;
    a->free_blocks = b;
}

void ms_ablock_slabs_free(ms_alloc *a)
{
    while (a->slabs) {
        ms_aslab *s = a->slabs;
        a->slabs = s->next;
        for (int i = 0; i < SLAB_BLOCKS; i++)
            free(s->blocks[i].uses);
        free(s);
    }
    a->free_blocks = NULL;
}

/* ------------------------------------------------------------- block sets */

static ms_ablock *of_node(const ms_anode *n)
{
    return n ? (ms_ablock *)((char *)n - offsetof(ms_ablock, node)) : NULL;
}

/* BlockPool::insert_into_blocks: the block's age for garbage collection
 * counts get_free_block calls from here on. */
void ms_bpool_insert(ms_bpool *p, ms_ablock *b)
{
    b->gc_count_base = p->get_free_blocks_call_count;
    b->node.hi = ms_atree_size_key(b->stream_id, b->size);
    ms_atree_insert(&p->blocks, &b->node);
}

void ms_bpool_erase(ms_bpool *p, ms_ablock *b)
{
    ms_atree_erase(&p->blocks, &b->node);
}

void ms_bpool_insert_unmapped(ms_bpool *p, ms_ablock *b)
{
    b->node.hi = b->stream_id;
    ms_atree_insert(&p->unmapped, &b->node);
}

void ms_bpool_erase_unmapped(ms_bpool *p, ms_ablock *b)
{
    ms_atree_erase(&p->unmapped, &b->node);
}

ms_ablock *ms_bpool_lower_bound(const ms_bpool *p, uint64_t stream_id, uint64_t size)
{
    /* Round the key up so a size that is not a multiple of 512 still finds
     * only blocks at least that large. */
    return of_node(ms_atree_lower_bound(&p->blocks, ms_atree_size_key(stream_id, size + 511), 0));
}

ms_ablock *ms_bpool_next(const ms_ablock *b)
{
    return of_node(ms_atree_next(&b->node));
}

ms_ablock *ms_bpool_prev(const ms_ablock *b)
{
    return of_node(ms_atree_prev(&b->node));
}

ms_ablock *ms_bpool_first(const ms_bpool *p)
{
    return of_node(ms_atree_first(&p->blocks));
}

ms_ablock *ms_bpool_last(const ms_bpool *p)
{
    return of_node(ms_atree_last(&p->blocks));
}

/* ---------------------------------------------------------- finding a block */

static uint64_t expandable_size(const ms_ablock *b)
{
    return b->size + (b->next && !b->next->mapped ? b->next->size : 0);
}

/* An expandable block was the best fit: with expandable segments on, best
 * fit counts the unmapped space after a block; with them off, skip every
 * expandable block. */
static ms_ablock *expandable_fit(const ms_alloc *a, ms_ablock *b, uint64_t stream_id)
{
    if (a->cfg.expandable_segments) {
        for (ms_ablock *n = ms_bpool_next(b);
             b->seg->expandable && n && n->stream_id == stream_id &&
             expandable_size(n) < expandable_size(b);
             n = ms_bpool_next(n))
            b = n;
        return b;
    }
    do
        b = ms_bpool_next(b);
    while (b && b->seg->expandable && b->stream_id == stream_id);
    return b && b->stream_id == stream_id ? b : NULL;
}

/* get_free_block, leaving the block in its set (the caller takes it out,
 * or splits it in place). */
ms_ablock *ms_alloc_peek_free_block(ms_alloc *a, const ms_aparams *p)
{
    ms_bpool *pool = p->pool;
    if (a->set_fraction && a->cfg.garbage_collection_threshold > 0.0)
        pool->get_free_blocks_call_count++;
    ms_ablock *b = ms_bpool_lower_bound(pool, p->stream_id, p->size);
    if (!b || b->stream_id != p->stream_id)
        return NULL;
    if (b->seg->expandable && !(b = expandable_fit(a, b, p->stream_id)))
        return NULL;
    uint64_t max_split = a->cfg.max_split_size;
    /* Do not hand an oversize block to a request below max_split_size, and
     * round an oversize request up by less than the oversize limit. */
    if (p->size < max_split && b->size >= max_split)
        return NULL;
    if (p->size >= max_split && b->size >= p->size + ms_alloc_oversize_limit(&a->cfg))
        return NULL;
    /* MindSpeed LONG_LC: a long-lived request takes only an exact, unsplit
     * block (zero fragmentation in the lifetime pool). */
    if (p->exact && (b->size != p->alloc_size || ms_ablock_is_split(b)))
        return NULL;
    return b;
}

bool ms_alloc_should_split(const ms_alloc *a, const ms_ablock *b, uint64_t size)
{
    uint64_t remaining = b->size - size;
    if (b->pool->is_small || a->cfg.expandable_segments)
        return remaining >= MS_KMIN_BLOCK;
    return size < a->cfg.max_split_size && remaining > MS_KSMALL_SIZE;
}

/* torch_npu: with expandable segments a request of 2 MiB or more starts on a
 * 16 KiB boundary; the bytes skipped stay behind as a free block. */
void ms_alloc_npu_align(ms_alloc *a, ms_aparams *p)
{
    ms_ablock *b = p->block;
    if (a->cfg.flavour != MS_ALLOC_NPU || !a->cfg.expandable_segments ||
        p->size < MS_KROUND_LARGE || b->addr % MS_KNPU_ALIGN == 0)
        return;
    uint64_t offset = MS_KNPU_ALIGN - b->addr % MS_KNPU_ALIGN;
    if (offset + p->size > b->size)
        return;
    ms_ablock *nb = ms_ablock_new(a);
    if (!nb)
        return; /* out of host memory: serve the block unaligned */
    nb->addr = b->addr + offset;
    nb->size = b->size - offset;
    nb->stream = p->stream;
    nb->stream_id = p->stream_id;
    nb->pool = p->pool;
    nb->seg = b->seg;
    nb->next = b->next;
    if (nb->next)
        nb->next->prev = nb;
    nb->prev = b;
    b->next = nb;
    b->size = offset;
    ms_bpool_insert(p->pool, b);
    p->block = nb;
}

/* ------------------------------------------------------- alloc_found_block */

static ms_ablock *split_front(ms_alloc *a, ms_aparams *p, ms_ablock *remaining)
{
    ms_ablock *b = ms_ablock_new(a);
    if (!b)
        return NULL;
    b->addr = remaining->addr;
    b->size = p->size;
    b->stream = p->stream;
    b->stream_id = p->stream_id;
    b->pool = p->pool;
    b->seg = remaining->seg;
    b->prev = remaining->prev;
    if (b->prev)
        b->prev->next = b;
    b->next = remaining;
    ms_aseg_fix_head(b);
    remaining->prev = b;
    remaining->addr += p->size;
    remaining->size -= p->size;
    if (p->in_set) {
        /* The tail keeps its place in the set: see ms_alloc_split_in_place.
         * Re-keying it stands for PyTorch's erase + insert_into_blocks. */
        remaining->node.hi = ms_atree_size_key(remaining->stream_id, remaining->size);
        remaining->gc_count_base = p->pool->get_free_blocks_call_count;
    } else {
        ms_bpool_insert(p->pool, remaining);
    }
    return b;
}

/* Whether a found block can be split without leaving its set.  It was the
 * lower bound of (stream, size), so its predecessor is smaller than size;
 * a tail of at least size bytes therefore still sorts after it, and before
 * the successor since the tail is smaller than the block.  Saves an erase
 * and an insert when a cached block is carved up, the common case. */
bool ms_alloc_split_in_place(const ms_aparams *p, bool split)
{
    const ms_ablock *b = p->block;
    return split && !b->seg->expandable && b->size - p->size >= p->size;
}

static void split_stats(ms_alloc *a, const ms_aparams *p, bool already_split,
                        const ms_ablock *b, const ms_ablock *remaining)
{
    if (b->seg->expandable)
        return; /* inactive_split leaves expandable segments out */
    if (already_split) {
        /* An already-split inactive block is being shrunk by size bytes. */
        ms_stats_pool_dec(a->stats.inactive_split_bytes, p->pool, b->size);
        return;
    }
    /* A new split inactive block is being created from an unsplit one. */
    ms_stats_pool_inc(a->stats.inactive_split_bytes, p->pool, remaining->size);
    ms_stats_pool_inc(a->stats.inactive_split, p->pool, 1);
}

ms_status ms_alloc_found_block(ms_alloc *a, ms_aparams *p, uint64_t orig_size, bool split,
                               uint64_t *addr)
{
    ms_ablock *b = p->block;
    bool already_split = ms_ablock_is_split(b);
    if (split) {
        ms_ablock *remaining = b;
        b = split_front(a, p, remaining);
        if (!b) {
            if (!p->in_set)
                ms_bpool_insert(p->pool, remaining);
            return MS_ENOMEM;
        }
        split_stats(a, p, already_split, b, remaining);
    } else if (already_split && !b->seg->expandable) {
        /* An already-split block is becoming active. */
        ms_stats_pool_dec(a->stats.inactive_split_bytes, p->pool, b->size);
        ms_stats_pool_dec(a->stats.inactive_split, p->pool, 1);
    }
    /* ms_alloc_malloc reserved the slot, so this cannot fail. */
    ms_aindex_put(&a->index, b);
    b->allocated = true;
    b->requested = orig_size;
    ms_stats_pool_inc(a->stats.allocation, b->pool, 1);
    ms_stats_pool_inc(a->stats.allocated_bytes, b->pool, b->size);
    ms_stats_pool_inc(a->stats.active, b->pool, 1);
    ms_stats_pool_inc(a->stats.active_bytes, b->pool, b->size);
    ms_stats_pool_inc(a->stats.requested_bytes, b->pool, orig_size);
    if (b->size >= a->cfg.max_split_size)
        ms_stat_inc(&a->stats.oversize_allocations, 1);
    /* After the stats: observers see the state the event left. */
    ms_alloc_emit(a, MS_AA_ALLOC, b->addr, orig_size, b->stream_id, b->pool);
    *addr = b->addr;
    return MS_OK;
}

/* -------------------------------------------------------------- free_block */

uint64_t ms_alloc_try_merge(ms_ablock *dst, ms_ablock *src)
{
    if (!src || src->allocated || src->event_count > 0 || src->n_uses > 0 ||
        dst->mapped != src->mapped)
        return 0;
    if (dst->prev == src) { /* [src dst] */
        dst->addr = src->addr;
        dst->prev = src->prev;
        if (dst->prev)
            dst->prev->next = dst;
        ms_aseg_fix_head(dst);
    } else { /* [dst src] */
        dst->next = src->next;
        if (dst->next)
            dst->next->prev = dst;
    }
    uint64_t subsumed = src->size;
    dst->size += subsumed;
    if (src->mapped)
        ms_bpool_erase(src->pool, src);
    else
        ms_bpool_erase_unmapped(src->pool, src);
    return subsumed;
}

void ms_alloc_free_block(ms_alloc *a, ms_ablock *b)
{
    uint64_t freed_addr = b->addr; /* merging may move the block's start */
    uint64_t original_size = b->size;
    uint64_t requested = b->requested;
    int64_t net_blocks = 0;
    int64_t net_bytes = 0;
    ms_ablock *candidates[2] = {b->prev, b->next};
    for (int i = 0; i < 2; i++) {
        uint64_t subsumed = ms_alloc_try_merge(b, candidates[i]);
        if (subsumed > 0) {
            net_blocks -= 1;
            net_bytes -= (int64_t)subsumed;
            ms_ablock_recycle(a, candidates[i]);
        }
    }
    ms_bpool_insert(b->pool, b);
    if (ms_ablock_is_split(b)) {
        net_blocks += 1;
        net_bytes += (int64_t)b->size;
    }
    int t = ms_alloc_stat_type(b->pool);
    ms_alloc_stats *s = &a->stats;
    if (!b->seg->expandable) {
        ms_stat_add(&s->inactive_split[MS_STAT_ALL], net_blocks);
        ms_stat_add(&s->inactive_split[t], net_blocks);
        ms_stat_add(&s->inactive_split_bytes[MS_STAT_ALL], net_bytes);
        ms_stat_add(&s->inactive_split_bytes[t], net_bytes);
    }
    ms_stats_pool_dec(s->active, b->pool, 1);
    ms_stats_pool_dec(s->active_bytes, b->pool, original_size);
    ms_stats_pool_dec(s->requested_bytes, b->pool, requested);
    ms_alloc_emit(a, MS_AA_FREE_COMPLETED, freed_addr, requested, b->stream_id, b->pool);
}
