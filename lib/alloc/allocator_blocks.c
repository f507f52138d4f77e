/* Blocks and block sets: best-fit lookup, splitting a found block, freeing
 * and merging with free neighbours (get_free_block, should_split,
 * alloc_found_block, free_block, try_merge_blocks in
 * CUDACachingAllocator.cpp). */
#include <stdlib.h>
#include <string.h>

#include "allocator_internal.h"

#define SLAB_BLOCKS 256

/* --------------------------------------------------------------- the slab */

ms_ablock *alloc_block_new(ms_alloc *a)
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
    /* Every field but the record_stream buffer, kept for the next block
     * (a recycled block's node is already unlinked). */
    b->node = (ms_anode){{NULL, NULL}, NULL, 0, 0};
    b->addr = b->size = b->stream_id = b->requested = 0;
    b->prev = b->next = b->link = NULL;
    b->stream = NULL;
    b->pool = NULL;
    b->seg = NULL;
    b->gc_count_base = 0;
    b->n_uses = b->event_count = 0;
    b->allocated = false;
    b->mapped = true;
    return b;
}

void alloc_block_recycle(ms_alloc *a, ms_ablock *b)
{
    b->link = a->free_blocks;
    a->free_blocks = b;
}

void alloc_block_slabs_free(ms_alloc *a)
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
void alloc_bpool_insert(ms_bpool *p, ms_ablock *b)
{
    b->gc_count_base = p->get_free_blocks_call_count;
    b->node.hi = alloc_tree_size_key(b->stream_id, b->size);
    alloc_tree_insert(&p->blocks, &b->node);
}

void alloc_bpool_erase(ms_bpool *p, ms_ablock *b)
{
    alloc_tree_erase(&p->blocks, &b->node);
}

void alloc_bpool_insert_unmapped(ms_bpool *p, ms_ablock *b)
{
    b->node.hi = b->stream_id;
    alloc_tree_insert(&p->unmapped, &b->node);
}

void alloc_bpool_erase_unmapped(ms_bpool *p, ms_ablock *b)
{
    alloc_tree_erase(&p->unmapped, &b->node);
}

ms_ablock *alloc_bpool_lower_bound(const ms_bpool *p, uint64_t stream_id, uint64_t size)
{
    /* Round the key up so a size that is not a multiple of 512 still finds
     * only blocks at least that large. */
    return of_node(alloc_tree_lower_bound(&p->blocks, alloc_tree_size_key(stream_id, size + 511)));
}

ms_ablock *alloc_bpool_next(const ms_ablock *b)
{
    return of_node(alloc_tree_next(&b->node));
}

ms_ablock *alloc_bpool_prev(const ms_ablock *b)
{
    return of_node(alloc_tree_prev(&b->node));
}

ms_ablock *alloc_bpool_first(const ms_bpool *p)
{
    return of_node(alloc_tree_first(&p->blocks));
}

ms_ablock *alloc_bpool_last(const ms_bpool *p)
{
    return of_node(alloc_tree_last(&p->blocks));
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
        for (ms_ablock *n = alloc_bpool_next(b);
             b->seg->expandable && n && n->stream_id == stream_id &&
             expandable_size(n) < expandable_size(b);
             n = alloc_bpool_next(n))
            b = n;
        return b;
    }
    do
        b = alloc_bpool_next(b);
    while (b && b->seg->expandable && b->stream_id == stream_id);
    return b && b->stream_id == stream_id ? b : NULL;
}

/* get_free_block, leaving the block in its set (the caller takes it out,
 * or splits it in place). */
static inline MS_ALLOC_HOT ms_ablock *peek_free_block(ms_alloc *a, const ms_aparams *p)
{
    ms_bpool *pool = p->pool;
    if (a->set_fraction && a->cfg.garbage_collection_threshold > 0.0)
        pool->get_free_blocks_call_count++;
    ms_ablock *b = alloc_bpool_lower_bound(pool, p->stream_id, p->size);
    if (!b || b->stream_id != p->stream_id)
        return NULL;
    if (b->seg->expandable && !(b = expandable_fit(a, b, p->stream_id)))
        return NULL;
    uint64_t max_split = a->cfg.max_split_size;
    /* Do not hand an oversize block to a request below max_split_size, and
     * round an oversize request up by less than the oversize limit. */
    if (p->size < max_split && b->size >= max_split)
        return NULL;
    if (p->size >= max_split && b->size >= p->size + alloc_oversize_limit(&a->cfg))
        return NULL;
    /* MindSpeed LONG_LC: a long-lived request takes only an exact, unsplit
     * block (zero fragmentation in the lifetime pool). */
    if (p->exact && (b->size != p->alloc_size || alloc_block_is_split(b)))
        return NULL;
    if (p->protect && alloc_mindspeed_protected(p, b))
        return NULL;
    return b;
}

ms_ablock *alloc_peek_free_block(ms_alloc *a, const ms_aparams *p)
{
    return peek_free_block(a, p);
}

bool alloc_should_split(const ms_alloc *a, const ms_ablock *b, uint64_t size)
{
    uint64_t remaining = b->size - size;
    /* MindSpore splits any buffer that leaves 512 bytes (IsSplit). */
    if (b->pool->is_small || a->cfg.expandable_segments || a->cfg.flavour == MS_ALLOC_MINDSPORE)
        return remaining >= MS_KMIN_BLOCK;
    return size < a->cfg.max_split_size && remaining > MS_KSMALL_SIZE;
}

/* torch_npu: with expandable segments a request of 2 MiB or more starts on a
 * 16 KiB boundary; the bytes skipped stay behind as a free block. */
static bool npu_align_applies(const ms_alloc *a, const ms_aparams *p)
{
    const ms_ablock *b = p->block;
    if (!a->npu_align || p->size < MS_KROUND_LARGE || b->addr % MS_KNPU_ALIGN == 0)
        return false;
    return MS_KNPU_ALIGN - b->addr % MS_KNPU_ALIGN + p->size <= b->size;
}

bool alloc_npu_align(ms_alloc *a, ms_aparams *p)
{
    if (!npu_align_applies(a, p))
        return false;
    ms_ablock *b = p->block;
    uint64_t offset = MS_KNPU_ALIGN - b->addr % MS_KNPU_ALIGN;
    ms_ablock *nb = alloc_block_new(a);
    if (!nb)
        return false; /* out of host memory: serve the block unaligned */
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
    alloc_bpool_insert(p->pool, b);
    p->block = nb;
    return true;
}

/* ------------------------------------------------------- alloc_found_block */

static ms_ablock *split_front(ms_alloc *a, ms_aparams *p, ms_ablock *remaining)
{
    ms_ablock *b = alloc_block_new(a);
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
    alloc_seg_fix_head(b);
    remaining->prev = b;
    remaining->addr += p->size;
    remaining->size -= p->size;
    if (p->in_set) {
        /* The tail keeps its place in the set: see split_in_place.
         * Re-keying it stands for PyTorch's erase + insert_into_blocks. */
        remaining->node.hi = alloc_tree_size_key(remaining->stream_id, remaining->size);
        remaining->gc_count_base = p->pool->get_free_blocks_call_count;
    } else {
        alloc_bpool_insert(p->pool, remaining);
    }
    return b;
}

/* Whether a found block can be split without leaving its set: the tail
 * [addr + size, end) must sort where the block did.  The tail is smaller
 * than the block, so it sorts before the block's successor; it must still
 * sort after the block's predecessor.  The block was the lower bound of
 * (stream, size), so its predecessor is smaller than size and a tail of at
 * least size bytes always does; a smaller tail is checked against it.
 * Saves an erase and an insert when a cached block is carved up, the
 * common case.  Not where torch_npu's alignment would cut the block first. */
static bool split_in_place(const ms_alloc *a, const ms_aparams *p)
{
    const ms_ablock *b = p->block;
    if (b->seg->expandable || npu_align_applies(a, p))
        return false;
    uint64_t tail = b->size - p->size;
    if (tail >= p->size)
        return true;
    uint64_t hi = alloc_tree_size_key(b->stream_id, tail);
    uint64_t lo = b->addr + p->size;
    if (!alloc_tree_key_before(hi, lo, &b->node))
        return false;
    /* Keys are unique (addresses differ), so not before is after. */
    const ms_anode *pred = alloc_tree_prev(&b->node);
    return !pred || !alloc_tree_key_before(hi, lo, pred);
}

/* get_free_block: the best fit, taken out of its set, or left there when
 * it is about to be carved from the front and may stay (split_in_place).
 * Also decides should_split. */
bool alloc_get_free_block(ms_alloc *a, ms_aparams *p)
{
    ms_ablock *b = peek_free_block(a, p);
    if (!b)
        return false;
    p->block = b;
    p->split = alloc_may_split(a, p) && alloc_should_split(a, b, p->size);
    if (p->split && split_in_place(a, p))
        p->in_set = true;
    else
        alloc_bpool_erase(p->pool, b);
    return true;
}

static void split_stats(ms_astats *s, int c, bool already_split, const ms_ablock *b,
                        const ms_ablock *remaining)
{
    if (b->seg->expandable)
        return; /* inactive_split leaves expandable segments out */
    if (already_split) {
        /* An already-split inactive block is being shrunk by size bytes. */
        alloc_stat_dec(&s->inactive_split_bytes, c, b->size);
        return;
    }
    /* A new split inactive block is being created from an unsplit one. */
    alloc_stat_inc(&s->inactive_split_bytes, c, remaining->size);
    alloc_stat_inc(&s->inactive_split, c, 1);
}

ms_status alloc_found_block(ms_alloc *a, ms_aparams *p, uint64_t orig_size, uint64_t *addr)
{
    ms_ablock *b = p->block;
    ms_astats *s = &a->stats;
    int c = alloc_stat_class(p->pool); /* the block's set, split or not */
    bool already_split = alloc_block_is_split(b);
    if (p->split) {
        ms_ablock *remaining = b;
        b = split_front(a, p, remaining);
        if (!b) {
            if (!p->in_set)
                alloc_bpool_insert(p->pool, remaining);
            return MS_ENOMEM;
        }
        split_stats(s, c, already_split, b, remaining);
    } else if (already_split && !b->seg->expandable) {
        /* An already-split block is becoming active. */
        alloc_stat_dec(&s->inactive_split_bytes, c, b->size);
        alloc_stat_dec(&s->inactive_split, c, 1);
    }
    /* ms_alloc_malloc reserved the slot. */
    alloc_index_put_reserved(&a->index, b);
    b->allocated = true;
    b->requested = orig_size;
    uint64_t size = b->size;
    alloc_stat_inc(&s->allocation, c, 1);
    alloc_stat_inc(&s->allocated_bytes, c, size);
    alloc_stat_inc(&s->active, c, 1);
    alloc_stat_inc(&s->active_bytes, c, size);
    alloc_stat_inc(&s->requested_bytes, c, orig_size);
    if (size >= a->cfg.max_split_size)
        alloc_torch_stat_inc(&s->oversize_allocations, 1);
    /* After the stats: observers see the state the event left. */
    alloc_emit(a, MS_AA_ALLOC, b->addr, orig_size, b->stream_id, b->pool);
    *addr = b->addr;
    return MS_OK;
}

/* -------------------------------------------------------------- free_block */

/* try_merge_blocks' test: src is a free, idle neighbour of dst. */
static bool can_merge(const ms_ablock *dst, const ms_ablock *src)
{
    /* Whether a neighbour is free is data: test the conditions together,
     * one branch instead of a badly predicted one per condition. */
    return src && ((!src->allocated & (src->event_count == 0) & (src->n_uses == 0) &
                    (dst->mapped == src->mapped)) != 0);
}

/* try_merge_blocks' splice: dst takes over src's range (src stays in its
 * set for the caller to take out). */
static uint64_t absorb(ms_ablock *dst, ms_ablock *src)
{
    if (dst->prev == src) { /* [src dst] */
        dst->addr = src->addr;
        dst->prev = src->prev;
        if (dst->prev)
            dst->prev->next = dst;
        alloc_seg_fix_head(dst);
    } else { /* [dst src] */
        dst->next = src->next;
        if (dst->next)
            dst->next->prev = dst;
    }
    dst->size += src->size;
    return src->size;
}

uint64_t alloc_try_merge(ms_ablock *dst, ms_ablock *src)
{
    if (!can_merge(dst, src))
        return 0;
    uint64_t subsumed = absorb(dst, src);
    if (src->mapped)
        alloc_bpool_erase(src->pool, src);
    else
        alloc_bpool_erase_unmapped(src->pool, src);
    return subsumed;
}

static bool node_before(const ms_anode *x, const ms_anode *y)
{
    return alloc_tree_key_before(x->hi, alloc_node_lo(x), y);
}

/* The set after merging: the merged neighbours leave, b (already grown)
 * enters.  b sorts after each neighbour it absorbed (same stream, larger);
 * when it also sorts before the larger neighbour's successor it takes that
 * neighbour's node in place, which saves an erase and an insert.  The set
 * holds the same blocks either way, so every lookup answers the same. */
static void insert_merged(ms_bpool *pool, ms_ablock *b, ms_ablock *const *m, int n)
{
    b->gc_count_base = pool->get_free_blocks_call_count; /* insert_into_blocks */
    b->node.hi = alloc_tree_size_key(b->stream_id, b->size);
    if (n > 0) {
        ms_ablock *z = m[0];
        if (n == 2) {
            ms_ablock *w = m[1];
            if (node_before(&z->node, &w->node)) {
                w = m[0];
                z = m[1];
            }
            alloc_bpool_erase(w->pool, w);
        }
        const ms_anode *succ = alloc_tree_next(&z->node);
        if (z->pool == pool && node_before(&z->node, &b->node) &&
            (!succ || node_before(&b->node, succ))) {
            alloc_tree_replace(&pool->blocks, &z->node, &b->node);
            return;
        }
        alloc_bpool_erase(z->pool, z);
    }
    alloc_tree_insert(&pool->blocks, &b->node);
}

/* free_block: merge with free neighbours (previous first), cache the block,
 * and net the inactive_split changes. */
void alloc_free_block(ms_alloc *a, ms_ablock *b)
{
    uint64_t freed_addr = b->addr; /* merging may move the block's start */
    uint64_t original_size = b->size;
    uint64_t requested = b->requested;
    int64_t net_blocks = 0;
    int64_t net_bytes = 0;
    ms_ablock *merged[2];
    int n = 0;
    ms_ablock *candidates[2] = {b->prev, b->next};
    for (int i = 0; i < 2; i++) {
        if (!can_merge(b, candidates[i]))
            continue;
        net_blocks -= 1;
        net_bytes -= (int64_t)absorb(b, candidates[i]);
        merged[n++] = candidates[i];
    }
    if (b->mapped) {
        /* Free neighbours of a mapped block are in b's block set. */
        insert_merged(b->pool, b, merged, n);
    } else {
        for (int i = 0; i < n; i++)
            alloc_bpool_erase_unmapped(merged[i]->pool, merged[i]);
        alloc_bpool_insert(b->pool, b);
    }
    for (int i = 0; i < n; i++)
        alloc_block_recycle(a, merged[i]);
    if (alloc_block_is_split(b)) {
        net_blocks += 1;
        net_bytes += (int64_t)b->size;
    }
    int c = alloc_stat_class(b->pool);
    ms_astats *s = &a->stats;
    if (!b->seg->expandable) {
        alloc_stat_add(&s->inactive_split, c, net_blocks);
        alloc_stat_add(&s->inactive_split_bytes, c, net_bytes);
    }
    alloc_stat_dec(&s->active, c, 1);
    alloc_stat_dec(&s->active_bytes, c, original_size);
    alloc_stat_dec(&s->requested_bytes, c, requested);
    alloc_emit(a, MS_AA_FREE_COMPLETED, freed_addr, requested, b->stream_id, b->pool);
}
