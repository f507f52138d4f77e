/* The allocator's state as a memory snapshot sees it: visiting every
 * segment and block in address order (DeviceCachingAllocator::snapshot,
 * which reports each mapped range of an expandable segment as a segment of
 * its own), and importing segments to start a trace replay from. */
#include <stdlib.h>

#include "allocator_internal.h"

/* ------------------------------------------------------------------ visit */

static int seg_order(const void *x, const void *y)
{
    const ms_aseg *a = *(const ms_aseg *const *)x;
    const ms_aseg *b = *(const ms_aseg *const *)y;
    return a->addr < b->addr ? -1 : a->addr > b->addr;
}

static void visit_run(const ms_ablock *b, uint64_t seg_addr, uint64_t seg_size, ms_block_visitor fn,
                      void *user)
{
    for (; b && b->mapped; b = b->next) {
        ms_block_info info = {
            .segment_addr = seg_addr,
            .segment_size = seg_size,
            .addr = b->addr,
            .size = b->size,
            .requested = b->requested,
            .allocated = b->allocated,
            .stream_id = b->stream_id,
            .pool = b->seg->pool->owner->id,
            .expandable = b->seg->expandable,
            .pending_free = !b->allocated && b->event_count > 0,
            .small = b->seg->pool->is_small,
        };
        fn(user, &info);
    }
}

static void visit_segment(const ms_aseg *s, ms_block_visitor fn, void *user)
{
    if (!s->expandable) {
        visit_run(s->head, s->addr, s->size, fn, user);
        return;
    }
    const ms_ablock *b = s->head;
    while (b) {
        if (!b->mapped) {
            b = b->next;
            continue;
        }
        const ms_ablock *end = b;
        uint64_t size = 0;
        for (; end && end->mapped; end = end->next)
            size += end->size;
        visit_run(b, b->addr, size, fn, user);
        b = end;
    }
}

ms_status ms_alloc_visit_blocks(const ms_alloc *a, ms_block_visitor fn, void *user)
{
    if (!a || !fn)
        return MS_EINVAL;
    if (a->n_segs == 0)
        return MS_OK;
    ms_aseg **order = malloc(a->n_segs * sizeof *order);
    if (!order)
        return MS_ENOMEM;
    for (uint32_t i = 0; i < a->n_segs; i++)
        order[i] = a->segs[i];
    qsort(order, a->n_segs, sizeof *order, seg_order);
    for (uint32_t i = 0; i < a->n_segs; i++)
        visit_segment(order[i], fn, user);
    free(order);
    return MS_OK;
}

/* ----------------------------------------------------------------- import */

/* Blocks tile the segment; every PyTorch block is a multiple of 512 bytes. */
static ms_status check_tiling(const ms_seed_segment *seg)
{
    uint64_t at = seg->addr;
    if (seg->size >= MS_ATREE_MAX_SIZE)
        return MS_ERANGE;
    for (uint32_t i = 0; i < seg->n_blocks; i++) {
        const ms_seed_block *b = &seg->blocks[i];
        if (b->addr != at || b->size == 0 || b->size % MS_KMIN_BLOCK != 0 ||
            b->size > seg->addr + seg->size - at)
            return MS_EINVAL;
        at += b->size;
    }
    return at == seg->addr + seg->size ? MS_OK : MS_EINVAL;
}

static bool overlaps(const ms_alloc *a, uint64_t addr, uint64_t size)
{
    for (uint32_t i = 0; i < a->n_segs; i++) {
        const ms_aseg *s = a->segs[i];
        if (addr < s->addr + s->size && s->addr < addr + size)
            return true;
    }
    return false;
}

/* Blocks for every seed, taken before anything changes so a host
 * out-of-memory leaves the allocator as it was. */
static ms_status take_blocks(ms_alloc *a, uint32_t n, ms_ablock **out)
{
    for (uint32_t i = 0; i < n; i++) {
        out[i] = alloc_block_new(a);
        if (!out[i]) {
            while (i-- > 0)
                alloc_block_recycle(a, out[i]);
            return MS_ENOMEM;
        }
    }
    return MS_OK;
}

static void seed_one(ms_alloc *a, ms_ablock *b, const ms_seed_block *sb, ms_aseg *s, bool split)
{
    b->addr = sb->addr;
    b->size = sb->size;
    b->requested = sb->requested;
    b->stream = s->stream;
    b->stream_id = s->stream_id;
    b->pool = s->pool;
    b->seg = s;
    if (!sb->allocated) {
        alloc_bpool_insert(s->pool, b);
        if (split && !s->expandable) {
            alloc_stats_pool_inc(&a->stats.inactive_split, s->pool, 1);
            alloc_stats_pool_inc(&a->stats.inactive_split_bytes, s->pool, b->size);
        }
        return;
    }
    b->allocated = true;
    alloc_index_put(&a->index, b); /* reserved by the caller */
    alloc_stats_pool_inc(&a->stats.allocation, s->pool, 1);
    alloc_stats_pool_inc(&a->stats.allocated_bytes, s->pool, b->size);
    alloc_stats_pool_inc(&a->stats.active, s->pool, 1);
    alloc_stats_pool_inc(&a->stats.active_bytes, s->pool, b->size);
    alloc_stats_pool_inc(&a->stats.requested_bytes, s->pool, b->requested);
    if (b->size >= a->cfg.max_split_size)
        alloc_torch_stat_inc(&a->stats.oversize_allocations, 1);
}

/* Link blocks[0..n) between left and right and seed them. */
static void seed_chain(ms_alloc *a, ms_ablock **blocks, const ms_seed_segment *seg, ms_aseg *s,
                       ms_ablock *left, ms_ablock *right, bool split)
{
    for (uint32_t i = 0; i < seg->n_blocks; i++) {
        ms_ablock *b = blocks[i];
        b->prev = i ? blocks[i - 1] : left;
        b->next = i + 1 < seg->n_blocks ? blocks[i + 1] : right;
    }
    if (left)
        left->next = blocks[0];
    else
        s->head = blocks[0];
    if (right)
        right->prev = blocks[seg->n_blocks - 1];
    for (uint32_t i = 0; i < seg->n_blocks; i++)
        seed_one(a, blocks[i], &seg->blocks[i], s, split);
}

static ms_status reserve_index(ms_alloc *a, const ms_seed_segment *seg)
{
    uint64_t n = 0;
    for (uint32_t i = 0; i < seg->n_blocks; i++)
        n += seg->blocks[i].allocated;
    return alloc_index_reserve_n(&a->index, n);
}

static ms_status import_plain(ms_alloc *a, const ms_seed_segment *seg, ms_bpool *pool,
                              uint64_t stream_id, ms_ablock **blocks)
{
    if (overlaps(a, seg->addr, seg->size))
        return MS_EINVAL;
    ms_aseg *s = alloc_seg_new(a, seg->addr, seg->size, pool, seg->stream, stream_id);
    if (!s)
        return MS_ENOMEM;
    a->total_allocated_memory += seg->size;
    alloc_stats_pool_inc(&a->stats.segment, pool, 1);
    alloc_stats_pool_inc(&a->stats.reserved_bytes, pool, seg->size);
    if (seg->size >= a->cfg.max_split_size)
        alloc_torch_stat_inc(&a->stats.oversize_segments, 1);
    seed_chain(a, blocks, seg, s, NULL, NULL, seg->n_blocks > 1);
    return MS_OK;
}

static ms_aseg *host_segment(const ms_alloc *a, const ms_seed_segment *seg, const ms_bpool *pool,
                             uint64_t stream_id)
{
    for (uint32_t i = 0; i < a->n_segs; i++) {
        ms_aseg *s = a->segs[i];
        if (s->expandable && s->pool == pool && s->stream_id == stream_id &&
            seg->addr >= s->addr && seg->addr + seg->size <= s->addr + s->size)
            return s;
    }
    return NULL;
}

static ms_ablock *unmapped_cover(const ms_aseg *s, uint64_t addr, uint64_t size)
{
    for (ms_ablock *b = s->head; b; b = b->next)
        if (!b->mapped && b->addr <= addr && addr + size <= b->addr + b->size)
            return b;
    return NULL;
}

/* An expandable range lands in the stream's segment of that pool whose
 * reservation holds it, else in a new one that starts at the range:
 * [unmapped head][seeded blocks][unmapped tail]. */
static ms_status import_expandable(ms_alloc *a, const ms_seed_segment *seg, ms_bpool *pool,
                                   uint64_t stream_id, ms_ablock **blocks)
{
    uint64_t page = pool->is_small ? MS_KSMALL_BUFFER : MS_KLARGE_BUFFER;
    if (seg->size % page != 0)
        return MS_EINVAL;
    ms_aseg *s = host_segment(a, seg, pool, stream_id);
    if (!s) {
        if (overlaps(a, seg->addr, seg->size))
            return MS_EINVAL;
        ms_status st =
            alloc_seg_new_expandable(a, pool, seg->stream, stream_id, seg->addr, true, &s);
        if (st != MS_OK)
            return st;
    }
    ms_ablock *u = unmapped_cover(s, seg->addr, seg->size);
    if (!u || (seg->addr - s->addr) % s->page != 0 || seg->size % s->page != 0)
        return MS_EINVAL;
    ms_ablock *left = u->prev, *right = u->next, *tail = blocks[seg->n_blocks];
    uint64_t head_len = seg->addr - u->addr;
    uint64_t tail_len = u->addr + u->size - (seg->addr + seg->size);
    alloc_bpool_erase_unmapped(pool, u);
    if (tail_len > 0) {
        tail->addr = seg->addr + seg->size;
        tail->size = tail_len;
        tail->mapped = false;
        tail->stream = s->stream;
        tail->stream_id = s->stream_id;
        tail->pool = pool;
        tail->seg = s;
        tail->next = right;
        if (right)
            right->prev = tail;
        right = tail;
        alloc_bpool_insert_unmapped(pool, tail);
    } else {
        alloc_block_recycle(a, tail);
    }
    if (head_len > 0) {
        u->size = head_len;
        left = u;
        alloc_bpool_insert_unmapped(pool, u);
    } else {
        alloc_block_recycle(a, u);
    }
    seed_chain(a, blocks, seg, s, left, right, true);
    uint64_t first = (seg->addr - s->addr) / s->page;
    for (uint64_t i = 0; i < seg->size / s->page; i++)
        s->page_mapped[first + i] = 1;
    a->total_allocated_memory += seg->size;
    alloc_stats_pool_inc(&a->stats.reserved_bytes, pool, seg->size);
    return MS_OK;
}

ms_status ms_alloc_import_seed(ms_alloc *a, const ms_seed_segment *seg)
{
    if (!a || !seg || !seg->stream || !seg->blocks || seg->n_blocks == 0 || seg->size == 0 ||
        seg->pool < 0 || seg->pool >= a->n_pools || seg->addr + seg->size < seg->addr)
        return MS_EINVAL;
    ms_status st = check_tiling(seg);
    uint64_t stream_id = 0;
    if (st == MS_OK)
        st = a->be->ops->stream_id(a->be->inst, seg->stream, &stream_id);
    if (st == MS_OK && stream_id >= MS_ATREE_MAX_STREAM)
        st = MS_ERANGE;
    if (st == MS_OK)
        st = reserve_index(a, seg);
    ms_ablock **blocks = st == MS_OK ? malloc((seg->n_blocks + 1) * sizeof *blocks) : NULL;
    if (st != MS_OK || !blocks)
        return st != MS_OK ? st : MS_ENOMEM;
    st = take_blocks(a, seg->n_blocks + 1, blocks);
    if (st == MS_OK) {
        ms_npool *np = a->pools[seg->pool];
        ms_bpool *pool = seg->small ? &np->small : &np->large;
        st = seg->expandable ? import_expandable(a, seg, pool, stream_id, blocks)
                             : import_plain(a, seg, pool, stream_id, blocks);
        if (st != MS_OK)
            for (uint32_t i = 0; i <= seg->n_blocks; i++)
                alloc_block_recycle(a, blocks[i]);
        else if (!seg->expandable)
            alloc_block_recycle(a, blocks[seg->n_blocks]);
    }
    free(blocks);
    return st;
}

ms_status ms_alloc_import_segment(ms_alloc *a, uint64_t addr, uint64_t size, ms_stream *stream,
                                  bool expandable, const ms_seed_block *blocks, uint32_t n_blocks)
{
    ms_seed_segment seg = {
        .addr = addr,
        .size = size,
        .stream = stream,
        .expandable = expandable,
        .small = expandable ? size % MS_KLARGE_BUFFER != 0 : size == MS_KSMALL_BUFFER,
        .pool = 0,
        .blocks = blocks,
        .n_blocks = n_blocks,
    };
    return ms_alloc_import_seed(a, &seg);
}
