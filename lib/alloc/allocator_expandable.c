/* Expandable segments (Note [Expandable Segments] in
 * CUDACachingAllocator.cpp): one virtual reservation per (stream, pool) of
 * ceil(1.125 x device memory / page) pages, 2 MiB pages for the small pool
 * and 20 MiB for the large; physical pages are mapped at the lowest unmapped
 * address that gives room and unmapped only when completely free. */
#include <stdlib.h>

#include "allocator_internal.h"

static uint64_t page_of(const ms_bpool *pool)
{
    return pool->is_small ? MS_KSMALL_BUFFER : MS_KLARGE_BUFFER;
}

static ms_ablock *new_piece(ms_alloc *a, ms_aseg *s, uint64_t addr, uint64_t size, bool mapped)
{
    ms_ablock *b = alloc_block_new(a);
    if (!b)
        return NULL;
    b->addr = addr;
    b->size = size;
    b->mapped = mapped;
    b->stream = s->stream;
    b->stream_id = s->stream_id;
    b->pool = s->pool;
    b->seg = s;
    return b;
}

/* Insert b between before and after (Block::splice). */
static void splice(ms_ablock *b, ms_ablock *before, ms_ablock *after)
{
    if (before)
        before->next = b;
    b->prev = before;
    if (after)
        after->prev = b;
    b->next = after;
    alloc_seg_fix_head(b);
}

/* The reservation: 1 1/8 of the device's memory, so pages unmapped early in
 * the segment can be mapped again at its end. */
ms_status alloc_seg_new_expandable(ms_alloc *a, ms_bpool *pool, ms_stream *stream,
                                   uint64_t stream_id, uint64_t base, bool imported, ms_aseg **out)
{
    const ms_backend_ops *ops = a->be->ops;
    uint64_t free_bytes = 0, total = 0;
    ms_status st = ops->mem_get_info(a->be->inst, &free_bytes, &total);
    if (st != MS_OK)
        return st;
    uint64_t page = page_of(pool);
    uint64_t n_pages = (total + total / 8 + page - 1) / page;
    if (n_pages >= MS_ATREE_MAX_SIZE / page)
        return MS_ERANGE; /* a device of 100+ PiB: beyond the block keys */
    if (!imported && (st = ops->va_reserve(a->be->inst, n_pages * page, &base)) != MS_OK)
        return st;
    ms_aseg *s = alloc_seg_new(a, base, n_pages * page, pool, stream, stream_id);
    uint8_t *pages = s ? calloc(n_pages ? n_pages : 1, 1) : NULL;
    ms_ablock *whole = pages ? new_piece(a, s, base, n_pages * page, false) : NULL;
    if (!whole) {
        free(pages);
        if (s)
            alloc_seg_drop(a, s);
        if (!imported)
            ops->va_release(a->be->inst, base);
        return MS_ENOMEM;
    }
    s->expandable = true;
    s->imported = imported;
    s->page = page;
    s->n_pages = n_pages;
    s->page_mapped = pages;
    s->head = whole;
    alloc_bpool_insert_unmapped(pool, whole);
    *out = s;
    return MS_OK;
}

static bool allocatable(const ms_ablock *b)
{
    return b && !b->allocated && b->event_count == 0 && b->n_uses == 0;
}

static bool has_room(const ms_ablock *b, uint64_t size)
{
    uint64_t bytes = 0;
    while (bytes < size && allocatable(b)) {
        bytes += b->size;
        b = b->next;
    }
    return bytes >= size;
}

/* find_expandable_block: the lowest unmapped address of the stream's
 * segments where free and unmapped space together give room (a free block
 * just before the unmapped one counts), else a new segment. */
static ms_status find_expandable(ms_alloc *a, const ms_aparams *p, ms_ablock **out)
{
    ms_anode *n = alloc_tree_lower_bound(&p->pool->unmapped, p->stream_id);
    for (; n && ((ms_ablock *)n)->stream_id == p->stream_id; n = alloc_tree_next(n)) {
        ms_ablock *c = (ms_ablock *)n; /* the node is the block's first member */
        if (allocatable(c->prev))
            c = c->prev;
        if (has_room(c, p->size)) {
            *out = c;
            return MS_OK;
        }
    }
    ms_aseg *s = NULL;
    ms_status st = alloc_seg_new_expandable(a, p->pool, p->stream, p->stream_id, 0, false, &s);
    if (st == MS_OK)
        *out = s->head;
    return st;
}

/* Unmap the mapped pages in [begin, end); the first failure is returned. */
static ms_status unmap_pages(ms_alloc *a, ms_aseg *s, uint64_t begin, uint64_t end)
{
    ms_status st = MS_OK;
    for (uint64_t i = begin; i < end; i++) {
        if (!s->page_mapped[i])
            continue;
        ms_status r = a->be->ops->mem_unmap(a->be->inst, s->addr + i * s->page, s->page);
        if (st == MS_OK)
            st = r;
        s->page_mapped[i] = 0;
    }
    return st;
}

/* ~ExpandableSegment: every mapped page, then the reservation (at destroy,
 * whatever the blocks' state). */
ms_status alloc_give_back_expandable(ms_alloc *a, ms_aseg *s)
{
    ms_status st = unmap_pages(a, s, 0, s->n_pages);
    if (!s->imported) {
        ms_status r = a->be->ops->va_release(a->be->inst, s->addr);
        if (st == MS_OK)
            st = r;
    }
    return st;
}

/* ExpandableSegment::map: whole pages covering [addr, addr + size); on out
 * of memory the pages mapped so far go back and nothing is mapped. */
static ms_status seg_map(ms_alloc *a, ms_aseg *s, uint64_t addr, uint64_t size, uint64_t *mapped)
{
    uint64_t begin = (addr - s->addr) / s->page;
    uint64_t end = (addr + size - s->addr + s->page - 1) / s->page;
    *mapped = 0;
    for (uint64_t i = begin; i < end; i++) {
        ms_status st = a->be->ops->mem_map(a->be->inst, s->addr + i * s->page, s->page);
        if (st != MS_OK) {
            unmap_pages(a, s, begin, i);
            return st == MS_ENOMEM ? MS_OK : st;
        }
        s->page_mapped[i] = 1;
    }
    *mapped = (end - begin) * s->page;
    return MS_OK;
}

/* map_block: map the front of an unmapped block, leave the rest unmapped,
 * merge with free mapped neighbours. */
static ms_status map_block(ms_alloc *a, ms_ablock *to_map, uint64_t size, bool *ok)
{
    ms_aseg *s = to_map->seg;
    ms_ablock *rest = new_piece(a, s, 0, 0, false);
    if (!rest)
        return MS_ENOMEM;
    uint64_t mapped = 0;
    ms_status st = seg_map(a, s, to_map->addr, size, &mapped);
    *ok = st == MS_OK && mapped > 0;
    if (!*ok) {
        alloc_block_recycle(a, rest);
        return st;
    }
    uint64_t start = to_map->addr;
    alloc_bpool_erase_unmapped(to_map->pool, to_map);
    to_map->mapped = true;
    if (mapped < to_map->size) {
        rest->addr = to_map->addr + mapped;
        rest->size = to_map->size - mapped;
        splice(rest, to_map, to_map->next);
        alloc_bpool_insert_unmapped(to_map->pool, rest);
        to_map->size = mapped;
    } else {
        alloc_block_recycle(a, rest);
    }
    ms_ablock *neighbours[2] = {to_map->prev, to_map->next};
    for (int i = 0; i < 2; i++)
        if (alloc_try_merge(to_map, neighbours[i]) > 0)
            alloc_block_recycle(a, neighbours[i]);
    alloc_bpool_insert(to_map->pool, to_map);
    a->total_allocated_memory += mapped;
    alloc_stats_pool_inc(&a->stats.reserved_bytes, to_map->pool, mapped);
    a->stats.num_device_alloc++;
    alloc_emit(a, MS_AA_SEGMENT_MAP, start, mapped, to_map->stream_id, to_map->pool);
    return MS_OK;
}

/* try_allocate_expandable_block: the candidate is free -> unmapped -> ...
 * or unmapped -> ...; map until it holds the (rounded) request. */
ms_status alloc_try_expandable(ms_alloc *a, ms_aparams *p, bool *found)
{
    *found = false;
    ms_ablock *c = NULL;
    ms_status st = find_expandable(a, p, &c);
    bool ok = true;
    if (st == MS_OK && !c->mapped)
        st = map_block(a, c, c->size < p->size ? c->size : p->size, &ok);
    while (st == MS_OK && ok && c->size < p->size) {
        ms_ablock *nc = c->next;
        uint64_t want = p->size - c->size;
        st = map_block(a, nc, want < nc->size ? want : nc->size, &ok);
        c = nc;
    }
    if (st != MS_OK || !ok)
        return st;
    alloc_bpool_erase(p->pool, c);
    p->block = c;
    *found = true;
    return MS_OK;
}

/* ExpandableSegment::unmap: only pages wholly inside [addr, addr + size);
 * the segment's stream is synchronized first (cuMemUnmap does not wait). */
static ms_status seg_unmap(ms_alloc *a, ms_aseg *s, uint64_t addr, uint64_t size,
                           uint64_t *first, uint64_t *bytes)
{
    uint64_t begin = (addr - s->addr + s->page - 1) / s->page;
    uint64_t end = (addr + size - s->addr) / s->page;
    *bytes = 0;
    if (begin >= end)
        return MS_OK;
    ms_status st = a->be->ops->stream_synchronize(a->be->inst, s->stream);
    if (st == MS_OK)
        st = unmap_pages(a, s, begin, end);
    if (st != MS_OK)
        return st;
    *first = s->addr + begin * s->page;
    *bytes = (end - begin) * s->page;
    return MS_OK;
}

/* unmap_block: a free expandable block becomes [free][unmapped][free]. */
ms_status alloc_unmap_block(ms_alloc *a, ms_ablock *b)
{
    ms_aseg *s = b->seg;
    ms_ablock *before = new_piece(a, s, b->addr, 0, true);
    ms_ablock *after = before ? new_piece(a, s, 0, 0, true) : NULL;
    uint64_t first = 0, bytes = 0;
    ms_status st = after ? seg_unmap(a, s, b->addr, b->size, &first, &bytes) : MS_ENOMEM;
    if (st != MS_OK || bytes == 0) {
        if (before)
            alloc_block_recycle(a, before);
        if (after)
            alloc_block_recycle(a, after);
        return st;
    }
    alloc_bpool_erase(b->pool, b);
    if (first > b->addr) {
        before->size = first - b->addr;
        splice(before, b->prev, b);
        alloc_bpool_insert(b->pool, before);
    } else {
        alloc_block_recycle(a, before);
    }
    uint64_t after_size = b->addr + b->size - (first + bytes);
    if (after_size > 0) {
        after->addr = first + bytes;
        after->size = after_size;
        splice(after, b, b->next);
        alloc_bpool_insert(b->pool, after);
    } else {
        alloc_block_recycle(a, after);
    }
    b->addr = first;
    b->size = bytes;
    b->mapped = false;
    ms_ablock *neighbours[2] = {b->prev, b->next};
    for (int i = 0; i < 2; i++)
        if (alloc_try_merge(b, neighbours[i]) > 0)
            alloc_block_recycle(a, neighbours[i]);
    alloc_bpool_insert_unmapped(b->pool, b);
    a->total_allocated_memory -= bytes;
    alloc_stats_pool_dec(&a->stats.reserved_bytes, b->pool, bytes);
    a->stats.num_device_free++;
    alloc_emit(a, MS_AA_SEGMENT_UNMAP, first, bytes, b->stream_id, b->pool);
    return MS_OK;
}

/* release_expandable_segment: a segment wholly unmapped gives back its
 * address space (an imported one was never reserved through the backend). */
ms_status alloc_release_expandable(ms_alloc *a, ms_aseg *s)
{
    ms_ablock *b = s->head;
    alloc_bpool_erase_unmapped(b->pool, b);
    ms_status st = MS_OK;
    if (!s->imported)
        st = a->be->ops->va_release(a->be->inst, s->addr);
    alloc_block_recycle(a, b);
    alloc_seg_drop(a, s);
    return st;
}
