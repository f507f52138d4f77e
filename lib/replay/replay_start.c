/* The allocator state when a trace began.
 *
 * A snapshot gives the segments as they stood at the end; the trace says
 * what happened before.  Undoing the trace event by event, last first,
 * gives the state at its first event (reference/caching-allocator.md,
 * "Memory snapshots"):
 *   alloc          -> the block becomes free and merges with free neighbours
 *                     (the allocator never leaves two free blocks adjacent);
 *   free_completed -> the block is cut back out of the free space around it;
 *   segment_alloc / segment_map   -> the (single free) range disappears;
 *   segment_free  / segment_unmap -> a free range appears.
 * The one thing the trace does not say is the size of a block it frees but
 * never allocated: it is round_size(requested), except where the caching
 * allocator would not have split the rest off (large pool, remainder
 * <= 1 MiB, or an oversize request), where the block runs to the end of the
 * free space.  A CSV trace has no final segments: it starts empty. */
#include "replay_start.h"
#include "lib/base/growable.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define KB_MIN_BLOCK 512ULL
#define KB_SMALL_SIZE (1ULL << 20)    /* kSmallSize */
#define KB_SMALL_BUFFER (2ULL << 20)  /* kSmallBuffer: every small-pool segment */
#define KB_LARGE_PAGE (20ULL << 20)   /* kLargeBuffer: expandable large page */
#define NPU_PADDING 32ULL
#define MAX_REQUEST (1ULL << 56) /* keeps the rounding below free of overflow */

typedef struct region {
    uint64_t addr, size, stream;
    bool is_large, expandable;
    ms_seed_block *b;
    size_t n, cap;
} region;

typedef struct rebuild {
    region *r; /* sorted by addr, non-overlapping */
    size_t n, cap;
    const ms_alloc_config *cfg;
    int dev;
    ms_diag *d;
} rebuild;

uint64_t rpl_start_round_size(const ms_alloc_config *cfg, uint64_t size)
{
    if (cfg != NULL && cfg->flavour == MS_ALLOC_NPU)
        size += NPU_PADDING;
    if (size < KB_MIN_BLOCK)
        return KB_MIN_BLOCK;
    int log = 63 - __builtin_clzll(size);
    int band = log > 20 ? log - 20 : 0;
    if (band > MS_ALLOC_BANDS - 1)
        band = MS_ALLOC_BANDS - 1;
    unsigned div = cfg != NULL ? cfg->roundup_power2_divisions[band] : 0;
    if (div > 1 && size > KB_MIN_BLOCK * div) {
        /* roundup_power2_next_division: steps of floor_pow2 / floor_pow2(div). */
        if ((size & (size - 1)) == 0)
            return size;
        uint64_t floor2 = 1ULL << log;
        uint64_t step = floor2 >> (31 - __builtin_clz(div));
        if (step == 0)
            return floor2 << 1;
        uint64_t down = size & ~(step - 1);
        return down == size ? size : down + step;
    }
    return KB_MIN_BLOCK * ((size + KB_MIN_BLOCK - 1) / KB_MIN_BLOCK);
}

static ms_status mismatch(rebuild *rb, size_t i, const ms_trace_event *e, const char *what)
{
    return ms_diag_set(rb->d, MS_EMISMATCH,
                       "device %d event %zu (%s addr 0x%llx size %llu): the trace contradicts the "
                       "snapshot's segments: %s",
                       rb->dev, i, ms_trace_action_name(e->action), (unsigned long long)e->addr,
                       (unsigned long long)e->size, what);
}

static void region_clear(region *r)
{
    free(r->b);
    r->b = NULL;
    r->n = r->cap = 0;
}

static bool block_reserve(region *r, size_t extra)
{
    return MS_GROW_TO(r->b, r->n + extra, r->cap, 4);
}

static void block_insert(region *r, size_t at, ms_seed_block blk)
{
    memmove(r->b + at + 1, r->b + at, (r->n - at) * sizeof *r->b);
    r->b[at] = blk;
    r->n++;
}

static void block_remove(region *r, size_t at)
{
    memmove(r->b + at, r->b + at + 1, (r->n - at - 1) * sizeof *r->b);
    r->n--;
}

/* Merge block at with free neighbours; returns the merged block's index. */
static size_t merge_free(region *r, size_t at)
{
    if (at + 1 < r->n && !r->b[at + 1].allocated) {
        r->b[at].size += r->b[at + 1].size;
        block_remove(r, at + 1);
    }
    if (at > 0 && !r->b[at - 1].allocated) {
        r->b[at - 1].size += r->b[at].size;
        block_remove(r, at);
        at--;
    }
    return at;
}

/* The region containing addr, or the index where one would be inserted. */
static size_t region_find(const rebuild *rb, uint64_t addr, bool *found)
{
    size_t lo = 0, hi = rb->n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (rb->r[mid].addr + rb->r[mid].size <= addr)
            lo = mid + 1;
        else
            hi = mid;
    }
    *found = lo < rb->n && rb->r[lo].addr <= addr;
    return lo;
}

/* The block containing addr in r (r must contain addr). */
static size_t block_find(const region *r, uint64_t addr)
{
    size_t lo = 0, hi = r->n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (r->b[mid].addr + r->b[mid].size <= addr)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

static ms_status region_insert(rebuild *rb, region reg, size_t *at_out)
{
    bool found;
    size_t at = region_find(rb, reg.addr, &found);
    if (found || (at < rb->n && rb->r[at].addr < reg.addr + reg.size))
        return MS_EMISMATCH;
    if (!MS_GROW(rb->r, rb->n, rb->cap, 16))
        return MS_ENOMEM;
    memmove(rb->r + at + 1, rb->r + at, (rb->n - at) * sizeof *rb->r);
    rb->r[at] = reg;
    rb->n++;
    if (at_out != NULL)
        *at_out = at;
    return MS_OK;
}

static void region_remove(rebuild *rb, size_t at)
{
    region_clear(&rb->r[at]);
    memmove(rb->r + at, rb->r + at + 1, (rb->n - at - 1) * sizeof *rb->r);
    rb->n--;
}

static ms_status free_region(rebuild *rb, uint64_t addr, uint64_t size, uint64_t stream,
                             bool is_large, bool expandable, size_t *at)
{
    region reg = {.addr = addr, .size = size, .stream = stream, .is_large = is_large,
                  .expandable = expandable};
    if (!block_reserve(&reg, 1))
        return MS_ENOMEM;
    reg.b[0] = (ms_seed_block){.addr = addr, .size = size};
    reg.n = 1;
    ms_status st = region_insert(rb, reg, at);
    if (st != MS_OK)
        region_clear(&reg);
    return st;
}

/* ---- the final state ---- */

static ms_status load_segment(rebuild *rb, const ms_snapshot_segment *sg, size_t k)
{
    region reg = {.addr = sg->addr, .size = sg->total_size, .stream = sg->stream,
                  .is_large = sg->is_large, .expandable = sg->is_expandable};
    if (!block_reserve(&reg, sg->n_blocks ? sg->n_blocks : 1))
        return ms_diag_set(rb->d, MS_ENOMEM, "out of host memory");
    uint64_t next = sg->addr;
    for (size_t i = 0; i < sg->n_blocks; i++) {
        const ms_snapshot_block *b = &sg->blocks[i];
        if (b->addr != next || b->size == 0) {
            region_clear(&reg);
            return ms_diag_set(rb->d, MS_EPARSE,
                               "segments[%zu].blocks[%zu]: block at 0x%llx does not follow the "
                               "previous block (expected 0x%llx)",
                               k, i, (unsigned long long)b->addr, (unsigned long long)next);
        }
        ms_seed_block sb = {.addr = b->addr, .size = b->size, .requested = b->requested,
                            .allocated = b->state != MS_BLOCK_INACTIVE};
        if (!sb.allocated && reg.n > 0 && !reg.b[reg.n - 1].allocated)
            reg.b[reg.n - 1].size += sb.size;
        else
            reg.b[reg.n++] = sb;
        next = b->addr + b->size;
    }
    if (next != sg->addr + sg->total_size) {
        region_clear(&reg);
        return ms_diag_set(rb->d, MS_EPARSE,
                           "segments[%zu]: blocks cover %llu of total_size %llu bytes", k,
                           (unsigned long long)(next - sg->addr),
                           (unsigned long long)sg->total_size);
    }
    ms_status st = region_insert(rb, reg, NULL);
    if (st != MS_OK) {
        region_clear(&reg);
        return st == MS_ENOMEM ? ms_diag_set(rb->d, st, "out of host memory")
                               : ms_diag_set(rb->d, MS_EPARSE,
                                             "segments[%zu]: overlaps another segment", k);
    }
    return MS_OK;
}

/* ---- undoing events ---- */

static ms_status undo_alloc(rebuild *rb, size_t i, const ms_trace_event *e)
{
    bool found;
    size_t at = region_find(rb, e->addr, &found);
    if (!found)
        return mismatch(rb, i, e, "no segment holds the block");
    region *r = &rb->r[at];
    size_t k = block_find(r, e->addr);
    if (r->b[k].addr != e->addr || !r->b[k].allocated)
        return mismatch(rb, i, e, "no allocated block starts there");
    r->b[k].allocated = false;
    r->b[k].requested = 0;
    merge_free(r, k);
    return MS_OK;
}

/* The size of the block freed at e, cut from free block f of region r. */
static uint64_t freed_block_size(const rebuild *rb, const region *r, const ms_seed_block *f,
                                 uint64_t addr, uint64_t requested)
{
    uint64_t want = rpl_start_round_size(rb->cfg, requested);
    uint64_t room = f->addr + f->size - addr;
    if (want >= room || r->expandable || !r->is_large)
        return want; /* small pool and expandable segments split at >= 512 */
    bool oversize = rb->cfg->max_split_size != UINT64_MAX && want >= rb->cfg->max_split_size;
    if (room - want <= KB_SMALL_SIZE || oversize)
        return room; /* the allocator would not have split the rest off */
    return want;
}

static ms_status undo_free(rebuild *rb, size_t i, const ms_trace_event *e)
{
    bool found;
    size_t at = region_find(rb, e->addr, &found);
    if (!found)
        return mismatch(rb, i, e, "no segment holds the block");
    region *r = &rb->r[at];
    size_t k = block_find(r, e->addr);
    if (r->b[k].allocated)
        return mismatch(rb, i, e, "the block is still allocated after its free");
    ms_seed_block f = r->b[k];
    if (e->size > MAX_REQUEST)
        return mismatch(rb, i, e, "no allocator serves a request that large");
    uint64_t size = freed_block_size(rb, r, &f, e->addr, e->size);
    if (size > f.addr + f.size - e->addr) {
        char what[128];
        snprintf(what, sizeof what, "a block of %llu bytes does not fit the %llu free bytes there",
                 (unsigned long long)size, (unsigned long long)(f.addr + f.size - e->addr));
        return mismatch(rb, i, e, what);
    }
    if (!block_reserve(r, 2))
        return ms_diag_set(rb->d, MS_ENOMEM, "out of host memory");
    ms_seed_block mid = {.addr = e->addr, .size = size, .requested = e->size, .allocated = true};
    r->b[k] = mid;
    uint64_t end = f.addr + f.size;
    if (e->addr + size < end)
        block_insert(r, k + 1,
                     (ms_seed_block){.addr = e->addr + size, .size = end - e->addr - size});
    if (f.addr < e->addr)
        block_insert(r, k, (ms_seed_block){.addr = f.addr, .size = e->addr - f.addr});
    return MS_OK;
}

static ms_status undo_segment_alloc(rebuild *rb, size_t i, const ms_trace_event *e)
{
    bool found;
    size_t at = region_find(rb, e->addr, &found);
    if (!found || rb->r[at].addr != e->addr || rb->r[at].size != e->size)
        return mismatch(rb, i, e, "no segment of that size starts there");
    if (rb->r[at].n != 1 || rb->r[at].b[0].allocated)
        return mismatch(rb, i, e, "the new segment is not one free block");
    region_remove(rb, at);
    return MS_OK;
}

static ms_status undo_segment_free(rebuild *rb, size_t i, const ms_trace_event *e)
{
    /* Every small-pool segment is kSmallBuffer; large ones never are. */
    ms_status st = free_region(rb, e->addr, e->size, e->stream, e->size != KB_SMALL_BUFFER,
                               false, NULL);
    if (st == MS_ENOMEM)
        return ms_diag_set(rb->d, st, "out of host memory");
    if (st != MS_OK || e->size == 0)
        return mismatch(rb, i, e, "the freed segment overlaps a live one");
    return MS_OK;
}

/* segment_map undone: [addr, addr + size) is unmapped again.  It must be
 * free; the mapped range around it may split in two. */
static ms_status undo_map(rebuild *rb, size_t i, const ms_trace_event *e)
{
    bool found;
    size_t at = region_find(rb, e->addr, &found);
    if (!found || e->size == 0)
        return mismatch(rb, i, e, "no mapped range holds it");
    region *r = &rb->r[at];
    size_t k = block_find(r, e->addr);
    ms_seed_block f = r->b[k];
    uint64_t end = e->addr + e->size;
    if (f.allocated || end > f.addr + f.size)
        return mismatch(rb, i, e, "the newly mapped range is not free");
    /* The right part becomes a region of its own. */
    region right = {.addr = end, .size = r->addr + r->size - end, .stream = r->stream,
                    .is_large = r->is_large, .expandable = r->expandable};
    if (right.size > 0) {
        size_t nr = r->n - k;
        if (!block_reserve(&right, nr))
            return ms_diag_set(rb->d, MS_ENOMEM, "out of host memory");
        memcpy(right.b, r->b + k, nr * sizeof *r->b);
        right.n = nr;
        right.b[0].addr = end;
        right.b[0].size = f.addr + f.size - end;
        if (right.b[0].size == 0) {
            memmove(right.b, right.b + 1, (nr - 1) * sizeof *right.b);
            right.n--;
        }
    }
    /* The left part keeps r. */
    r->size = e->addr - r->addr;
    r->n = k;
    if (f.addr < e->addr)
        r->b[r->n++] = (ms_seed_block){.addr = f.addr, .size = e->addr - f.addr};
    if (r->size == 0)
        region_remove(rb, at);
    if (right.size > 0 && region_insert(rb, right, NULL) != MS_OK) {
        region_clear(&right);
        return ms_diag_set(rb->d, MS_ENOMEM, "out of host memory");
    }
    return MS_OK;
}

/* Join region at with the next one (adjacent, same expandable segment). */
static void join_next(rebuild *rb, size_t at)
{
    region *a = &rb->r[at], *b = &rb->r[at + 1];
    if (!block_reserve(a, b->n))
        return; /* left apart: still a correct, if split, state */
    size_t first = a->n;
    memcpy(a->b + a->n, b->b, b->n * sizeof *b->b);
    a->n += b->n;
    a->size += b->size;
    region_remove(rb, at + 1);
    if (!a->b[first].allocated && first > 0 && !a->b[first - 1].allocated)
        merge_free(a, first);
}

static bool same_segment(const region *a, const region *b)
{
    return a->expandable && b->expandable && a->addr + a->size == b->addr &&
           a->stream == b->stream && a->is_large == b->is_large;
}

/* segment_unmap undone: [addr, addr + size) is mapped and free again. */
static ms_status undo_unmap(rebuild *rb, size_t i, const ms_trace_event *e)
{
    bool found;
    size_t at = region_find(rb, e->addr, &found);
    /* The pool: that of a neighbouring mapped range, else by page size. */
    bool is_large = e->size % KB_LARGE_PAGE == 0;
    if (at > 0 && rb->r[at - 1].addr + rb->r[at - 1].size == e->addr)
        is_large = rb->r[at - 1].is_large;
    else if (at < rb->n && rb->r[at].addr == e->addr + e->size)
        is_large = rb->r[at].is_large;
    ms_status st = found || e->size == 0
                       ? MS_EMISMATCH
                       : free_region(rb, e->addr, e->size, e->stream, is_large, true, &at);
    if (st == MS_ENOMEM)
        return ms_diag_set(rb->d, st, "out of host memory");
    if (st != MS_OK)
        return mismatch(rb, i, e, "the unmapped range overlaps a mapped one");
    if (at + 1 < rb->n && same_segment(&rb->r[at], &rb->r[at + 1]))
        join_next(rb, at);
    if (at > 0 && same_segment(&rb->r[at - 1], &rb->r[at]))
        join_next(rb, at - 1);
    return MS_OK;
}

static ms_status undo(rebuild *rb, size_t i, const ms_trace_event *e)
{
    switch (e->action) {
    case MS_TA_ALLOC: return undo_alloc(rb, i, e);
    case MS_TA_FREE_COMPLETED: return undo_free(rb, i, e);
    case MS_TA_SEGMENT_ALLOC: return undo_segment_alloc(rb, i, e);
    case MS_TA_SEGMENT_FREE: return undo_segment_free(rb, i, e);
    case MS_TA_SEGMENT_MAP: return undo_map(rb, i, e);
    case MS_TA_SEGMENT_UNMAP: return undo_unmap(rb, i, e);
    default: return MS_OK; /* free_requested keeps the block; oom/snapshot change nothing */
    }
}

static ms_status reserved_series(const ms_trace_event *ev, size_t n, int dev,
                                 ms_start_state *out, ms_diag *d)
{
    out->reserved_after = malloc((n ? n : 1) * sizeof *out->reserved_after);
    if (out->reserved_after == NULL)
        return ms_diag_set(d, MS_ENOMEM, "out of host memory");
    uint64_t r = out->reserved;
    out->peak_reserved = r;
    for (size_t i = 0; i < n; i++) {
        if (ev[i].action == MS_TA_SEGMENT_ALLOC || ev[i].action == MS_TA_SEGMENT_MAP)
            r += ev[i].size;
        else if (ev[i].action == MS_TA_SEGMENT_FREE || ev[i].action == MS_TA_SEGMENT_UNMAP) {
            /* Only a trace without final segments (CSV) can get here
             * unchecked by the backward walk. */
            if (ev[i].size > r)
                return ms_diag_set(d, MS_EMISMATCH,
                                   "device %d event %zu (%s addr 0x%llx size %llu): releases "
                                   "more than the %llu bytes reserved",
                                   dev, i, ms_trace_action_name(ev[i].action),
                                   (unsigned long long)ev[i].addr,
                                   (unsigned long long)ev[i].size, (unsigned long long)r);
            r -= ev[i].size;
        }
        out->reserved_after[i] = r;
        if (r > out->peak_reserved)
            out->peak_reserved = r;
    }
    return MS_OK;
}

static ms_status export_state(rebuild *rb, ms_start_state *out)
{
    out->segs = calloc(rb->n ? rb->n : 1, sizeof *out->segs);
    if (out->segs == NULL)
        return ms_diag_set(rb->d, MS_ENOMEM, "out of host memory");
    for (size_t i = 0; i < rb->n; i++) {
        region *r = &rb->r[i];
        out->segs[i] = (ms_start_segment){.addr = r->addr, .size = r->size, .stream = r->stream,
                                          .is_large = r->is_large, .expandable = r->expandable,
                                          .blocks = r->b, .n_blocks = (uint32_t)r->n};
        r->b = NULL; /* moved */
        out->n_segs = i + 1;
        out->reserved += r->size;
        for (size_t k = 0; k < out->segs[i].n_blocks; k++)
            if (out->segs[i].blocks[k].allocated)
                out->allocated += out->segs[i].blocks[k].size;
    }
    return MS_OK;
}

ms_status rpl_start_state_build(const ms_snapshot *s, int dev, const ms_alloc_config *cfg,
                                ms_start_state *out, ms_diag *d)
{
    const ms_snapshot_segment *segs = NULL;
    const ms_trace_event *ev = NULL;
    size_t n_segs = 0, n_ev = 0;
    if (s == NULL || cfg == NULL || out == NULL)
        return ms_diag_set(d, MS_EINVAL, "rpl_start_state_build: NULL argument");
    memset(out, 0, sizeof *out);
    segs = ms_snapshot_segments(s, &n_segs);
    ms_status st = ms_snapshot_trace(s, dev, &ev, &n_ev);
    if (st != MS_OK)
        return ms_diag_set(d, st, "device %d: no such device in the snapshot", dev);
    bool has_segments = ms_snapshot_has_segments(s);
    rebuild rb = {.cfg = cfg, .dev = dev, .d = d};
    for (size_t k = 0; k < n_segs && st == MS_OK; k++)
        if (segs[k].device == dev)
            st = load_segment(&rb, &segs[k], k);
    /* Without final segments there is nothing to walk back from: the
     * trace starts from an empty allocator. */
    for (size_t i = n_ev; has_segments && i-- > 0 && st == MS_OK;)
        st = undo(&rb, i, &ev[i]);
    if (st == MS_OK)
        st = export_state(&rb, out);
    if (st == MS_OK)
        st = reserved_series(ev, n_ev, dev, out, d);
    for (size_t i = 0; i < rb.n; i++)
        region_clear(&rb.r[i]);
    free(rb.r);
    if (st != MS_OK)
        rpl_start_state_free(out);
    return st;
}

ms_status rpl_start_state_free(ms_start_state *st)
{
    if (st == NULL)
        return MS_EINVAL;
    for (size_t i = 0; i < st->n_segs; i++)
        free(st->segs[i].blocks);
    free(st->segs);
    free(st->reserved_after);
    memset(st, 0, sizeof *st);
    return MS_OK;
}
