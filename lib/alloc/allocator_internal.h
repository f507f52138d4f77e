/* memsim allocator (private): the structures behind ms_alloc and the
 * functions the allocator_*.c files share.  Names mirror
 * c10/cuda/CUDACachingAllocator.cpp (Block, BlockPool, alloc_found_block,
 * free_block, ...) so each rule can be checked against its source. */
#ifndef MEMSIM_CORE_ALLOCATOR_INTERNAL_H
#define MEMSIM_CORE_ALLOCATOR_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "allocator_tree.h"
#include "memsim/allocator.h"

/* c10 constants (CUDACachingAllocator.cpp; NPUCachingAllocator.cpp). */
#define MS_KMIN_BLOCK ((uint64_t)512)
#define MS_KSMALL_SIZE ((uint64_t)1048576)
#define MS_KSMALL_BUFFER ((uint64_t)2097152)
#define MS_KLARGE_BUFFER ((uint64_t)20971520)
#define MS_KMIN_LARGE_ALLOC ((uint64_t)10485760)
#define MS_KROUND_LARGE ((uint64_t)2097152)
#define MS_KNPU_PADDING ((uint64_t)32)
#define MS_KNPU_ALIGN ((uint64_t)16384) /* torch_npu kAlignRoundLarge */
#define MS_KMB ((uint64_t)1048576)
/* MindSpeed memory fragmentation (Recorder.h): outside the forward pass a
 * default-pool block of myMaxSplitSize or more is not split for a request
 * that would leave kLargeBuffer or more behind. */
#define MS_KMINDSPEED_PROTECT ((uint64_t)1800000000)
/* MindSpeed (DeviceCachingAllocator.h, memory_fail_prejudgment): the room a
 * first attempt at a new segment leaves on the device (see
 * alloc_mindspeed_prejudged). */
#define MS_KMINDSPEED_PREJUDGE ((uint64_t)209715200)
/* MindSpore's dynamic memory pool: buffers are aligned to 512 bytes
 * (kDynamicMemAlignSize), blocks come from the device in units of
 * mempool_block_size (1 GB by default), doubled until the request fits,
 * and no block is asked for when less than 10 MiB is free
 * (kMinimumAllocMem). */
#define MS_KMINDSPORE_UNIT ((uint64_t)1 << 30)
#define MS_KMINDSPORE_MIN_FREE ((uint64_t)10 << 20)

/* A function of the malloc/free path inlined into its callers even where
 * it has several (its call and register saves cost more than its body). */
#if defined(__GNUC__)
#define MS_ALLOC_HOT __attribute__((always_inline))
#else
#define MS_ALLOC_HOT
#endif

struct ms_bpool;
struct ms_aseg;

/* A stream a block was used on (record_stream). */
typedef struct ms_ause {
    ms_stream *stream;
    uint64_t id;
} ms_ause;

/* Block: one contiguous range of a segment, allocated or free.  The tree
 * node and the sort keys share the first cache line (blocks are 64-byte
 * aligned): the set lookups on the hot path touch nothing else. */
typedef struct ms_ablock {
    _Alignas(64) ms_anode node; /* first: pool->blocks (mapped free) or pool->unmapped */
    uint64_t addr;
    uint64_t size;
    uint64_t stream_id;
    uint64_t requested;
    struct ms_ablock *prev; /* neighbours in the segment */
    struct ms_ablock *next;
    ms_stream *stream;
    struct ms_bpool *pool;
    struct ms_aseg *seg;
    struct ms_ablock *link; /* scratch list (release_blocks), slab free list */
    int64_t gc_count_base;
    ms_ause *uses;
    uint32_t n_uses;
    uint32_t cap_uses;
    uint32_t event_count;
    bool allocated;
    bool mapped;
} ms_ablock;

/* The tree compares keys without knowing blocks: the low word of a node's
 * key is the address of the block it starts. */
_Static_assert(offsetof(ms_ablock, node) == 0, "the node starts the block");

static inline uint64_t alloc_node_lo(const ms_anode *n)
{
    return ((const ms_ablock *)n)->addr;
}

/* Whether (hi, lo) sorts before node n's key. */
static inline bool alloc_tree_key_before(uint64_t hi, uint64_t lo, const ms_anode *n)
{
#ifdef __SIZEOF_INT128__
    /* One compare-with-borrow instead of two compares and a branch. */
    __extension__ typedef unsigned __int128 u128;
    return ((u128)hi << 64 | lo) < ((u128)n->hi << 64 | alloc_node_lo(n));
#else
    return hi < n->hi || (hi == n->hi && lo < alloc_node_lo(n));
#endif
}

/* BlockPool: the free blocks of one size class of one named pool. */
typedef struct ms_bpool {
    ms_atree blocks;   /* (stream, size, addr) */
    ms_atree unmapped; /* (stream, addr, 0) */
    bool is_small;
    struct ms_npool *owner;
    int64_t get_free_blocks_call_count;
} ms_bpool;

/* A named pool: small and large block sets of its own. */
typedef struct ms_npool {
    char *name;
    int id;
    ms_pool_options opt;
    ms_bpool small;
    ms_bpool large;
} ms_npool;

/* A segment: one device malloc, or one expandable VA reservation. */
typedef struct ms_aseg {
    uint64_t addr;
    uint64_t size; /* bytes (ordinary) or reserved VA (expandable) */
    ms_ablock *head;
    ms_bpool *pool;
    ms_stream *stream;
    uint64_t stream_id;
    uint32_t index; /* position in ms_alloc.segs */
    bool expandable;
    bool imported; /* VA not reserved through the backend */
    uint64_t page;
    uint64_t n_pages;
    uint8_t *page_mapped;
} ms_aseg;

/* Outstanding record_stream events of one stream, FIFO. */
typedef struct ms_aevent {
    ms_event *event;
    ms_ablock *block;
} ms_aevent;

typedef struct ms_aqueue {
    uint64_t stream_id;
    ms_aevent *items;
    uint32_t head;
    uint32_t count;
    uint32_t cap;
} ms_aqueue;

/* Allocated blocks by address (open addressing, linear probing); key and
 * value side by side so a probe touches one cache line. */
typedef struct ms_aslot {
    uint64_t addr;
    struct ms_ablock *block; /* NULL: empty */
} ms_aslot;

typedef struct ms_aindex {
    ms_aslot *slots;
    uint64_t mask;
    uint64_t count;
    unsigned shift; /* 64 - log2(slots): the hash keeps the product's top bits */
} ms_aindex;

typedef struct ms_aslab {
    struct ms_aslab *next;
    ms_ablock blocks[];
} ms_aslab;

/* One memory_stats() statistic, kept per pool class (small, large).  The
 * aggregate's current, allocated and freed are always the sums of the two
 * classes' (every change moves the aggregate and one class alike), so only
 * its peak, which is not a sum, is kept: half the updates of keeping all
 * three.  alloc_stats_fill lays it out as memory_stats() reports it. */
typedef struct ms_astat {
    /* By class (0 small, 1 large); arrays, not ms_stat[2], so that a field
     * of a class is one scaled-index access. */
    int64_t current[2];
    int64_t peak[2];
    int64_t allocated[2];
    int64_t freed[2];
    int64_t all_peak;
} ms_astat;

typedef struct ms_astats {
    ms_astat allocation;
    ms_astat segment;
    ms_astat active;
    ms_astat inactive_split;
    ms_astat allocated_bytes;
    ms_astat reserved_bytes;
    ms_astat active_bytes;
    ms_astat inactive_split_bytes;
    ms_astat requested_bytes;
    ms_stat oversize_allocations;
    ms_stat oversize_segments;
    int64_t num_alloc_retries;
    int64_t num_ooms;
    int64_t num_sync_all_streams;
    int64_t num_device_alloc;
    int64_t num_device_free;
    int64_t max_split_size;
} ms_astats;

struct ms_alloc {
    ms_backend *be;
    ms_alloc_config cfg;
    ms_astats stats;
    ms_npool **pools;
    int n_pools;
    int cap_pools;
    ms_aseg **segs;
    uint32_t n_segs;
    uint32_t cap_segs;
    ms_aindex index;
    ms_aqueue *queues; /* sorted by stream_id */
    uint32_t n_queues;
    uint32_t cap_queues;
    uint64_t n_outstanding;
    ms_event **spare_events;
    uint32_t n_spare_events;
    uint32_t cap_spare_events;
    ms_aslab *slabs;
    ms_ablock *free_blocks;
    uint64_t total_allocated_memory; /* reserved bytes */
    uint64_t allowed_memory_maximum;
    bool set_fraction;
    bool borrowing;
    /* The framework's phase (ms_alloc_set_forward): inside one micro-batch's
     * forward through the layers; forwards_begun counts those forwards. */
    bool in_forward;
    uint64_t forwards_begun;
    ms_alloc_observer observer;
    void *observer_user;
    /* Fixed by the configuration, for the malloc path: */
    bool plain_round;  /* no roundup_power2_divisions: round_size is 512-byte steps */
    bool npu_align;    /* torch_npu with expandable segments (alloc_npu_align) */
};

/* What one malloc is looking for (AllocParams). */
typedef struct ms_aparams {
    uint64_t size;       /* rounded */
    uint64_t alloc_size; /* segment size if a new one is needed */
    uint64_t stream_id;
    ms_stream *stream;
    ms_bpool *pool;
    ms_ablock *block;
    bool exact;  /* own request of an exact_segments pool (large class) */
    bool protect; /* MindSpeed: large default blocks are kept whole (see
                     MS_KMINDSPEED_PROTECT) */
    bool split;  /* should_split of block */
    bool in_set; /* block is still in pool->blocks (split in place) */
} ms_aparams;

/* allocator.c */
void alloc_emit_event(ms_alloc *a, ms_alloc_action action, uint64_t addr, uint64_t size,
                      uint64_t stream_id, const ms_bpool *pool);

/* The hot path's small helpers are inline: malloc+free pairs run at several
 * million a second and a call per statistic would dominate. */
static inline void alloc_emit(ms_alloc *a, ms_alloc_action action, uint64_t addr, uint64_t size,
                              uint64_t stream_id, const ms_bpool *pool)
{
    if (a->observer)
        alloc_emit_event(a, action, addr, size, stream_id, pool);
}

static inline bool alloc_block_is_split(const ms_ablock *b)
{
    /* One test of both links: whether a block has neighbours is data, and
     * a short-circuit || was a second, badly predicted branch. */
    return ((uintptr_t)b->prev | (uintptr_t)b->next) != 0;
}

static inline void alloc_seg_fix_head(ms_ablock *b)
{
    if (!b->prev)
        b->seg->head = b;
}

/* Statistics (increase_stat / decrease_stat / get_stat_types_for_pool): a
 * stat moves for the aggregate and for the block set's size class; the
 * aggregate follows from the classes (ms_astat). */
static inline int alloc_stat_class(const ms_bpool *p)
{
    return p->is_small ? 0 : 1;
}

static inline void alloc_torch_stat_inc(ms_stat *s, uint64_t amount)
{
    s->current += (int64_t)amount;
    if (s->current > s->peak)
        s->peak = s->current;
    s->allocated += (int64_t)amount;
}

static inline void alloc_torch_stat_dec(ms_stat *s, uint64_t amount)
{
    s->current -= (int64_t)amount;
    s->freed += (int64_t)amount;
}

static inline int64_t alloc_stat_current(const ms_astat *s)
{
    return s->current[0] + s->current[1];
}

static inline void alloc_stat_inc(ms_astat *s, int c, uint64_t amount)
{
    int64_t cur = s->current[c] + (int64_t)amount;
    s->current[c] = cur;
    if (cur > s->peak[c])
        s->peak[c] = cur;
    s->allocated[c] += (int64_t)amount;
    int64_t all = alloc_stat_current(s);
    if (all > s->all_peak)
        s->all_peak = all;
}

static inline void alloc_stat_dec(ms_astat *s, int c, uint64_t amount)
{
    s->current[c] -= (int64_t)amount;
    s->freed[c] += (int64_t)amount;
}

/* free_block nets its inactive_split changes before applying them. */
static inline void alloc_stat_add(ms_astat *s, int c, int64_t delta)
{
    if (delta > 0)
        alloc_stat_inc(s, c, (uint64_t)delta);
    else if (delta < 0)
        alloc_stat_dec(s, c, (uint64_t)-delta);
}

static inline void alloc_stats_pool_inc(ms_astat *s, const ms_bpool *p, uint64_t amount)
{
    alloc_stat_inc(s, alloc_stat_class(p), amount);
}

static inline void alloc_stats_pool_dec(ms_astat *s, const ms_bpool *p, uint64_t amount)
{
    alloc_stat_dec(s, alloc_stat_class(p), amount);
}

/* torch_npu and MindSpeed's allocator, which copies it: a device
 * synchronize before segments go back, the NPU OOM text. */
static inline bool alloc_npu_family(const ms_alloc *a)
{
    return a->cfg.flavour == MS_ALLOC_NPU || a->cfg.flavour == MS_ALLOC_MINDSPEED;
}

/* An exact_segments block is never split, except in MindSpeed's allocator,
 * whose alloc_found_block splits a long block like any other
 * (should_split: more than 1 MiB left); the tail stays in the long pool,
 * and the block is whole again, and exact, once both are free. */
static inline bool alloc_may_split(const ms_alloc *a, const ms_aparams *p)
{
    return !p->exact || a->cfg.flavour == MS_ALLOC_MINDSPEED;
}

/* allocator_blocks.c: blocks, block sets, split and merge */
ms_ablock *alloc_block_new(ms_alloc *a);
void alloc_block_recycle(ms_alloc *a, ms_ablock *b);
void alloc_block_slabs_free(ms_alloc *a);
void alloc_bpool_insert(ms_bpool *p, ms_ablock *b);
void alloc_bpool_erase(ms_bpool *p, ms_ablock *b);
void alloc_bpool_insert_unmapped(ms_bpool *p, ms_ablock *b);
void alloc_bpool_erase_unmapped(ms_bpool *p, ms_ablock *b);
ms_ablock *alloc_bpool_lower_bound(const ms_bpool *p, uint64_t stream_id, uint64_t size);
ms_ablock *alloc_bpool_next(const ms_ablock *b);
ms_ablock *alloc_bpool_prev(const ms_ablock *b);
ms_ablock *alloc_bpool_first(const ms_bpool *p);
ms_ablock *alloc_bpool_last(const ms_bpool *p);
uint64_t alloc_try_merge(ms_ablock *dst, ms_ablock *src);
ms_ablock *alloc_peek_free_block(ms_alloc *a, const ms_aparams *p);
bool alloc_get_free_block(ms_alloc *a, ms_aparams *p);
bool alloc_should_split(const ms_alloc *a, const ms_ablock *b, uint64_t size);
ms_status alloc_found_block(ms_alloc *a, ms_aparams *p, uint64_t orig_size, uint64_t *addr);
void alloc_free_block(ms_alloc *a, ms_ablock *b);
bool alloc_npu_align(ms_alloc *a, ms_aparams *p);

/* allocator_segments.c: device segments, release and garbage collection */
ms_aseg *alloc_seg_new(ms_alloc *a, uint64_t addr, uint64_t size, ms_bpool *pool, ms_stream *stream,
                       uint64_t stream_id);
void alloc_seg_drop(ms_alloc *a, ms_aseg *s);
ms_status alloc_alloc_block(ms_alloc *a, ms_aparams *p, bool is_retry, bool *found);
ms_status alloc_release_block(ms_alloc *a, ms_ablock *b);
ms_status alloc_release_available(ms_alloc *a, const ms_aparams *p, bool *released);
ms_status alloc_release_cached(ms_alloc *a);
ms_status alloc_garbage_collect(ms_alloc *a);
ms_status alloc_release_all(ms_alloc *a);

/* allocator_expandable.c */
ms_status alloc_try_expandable(ms_alloc *a, ms_aparams *p, bool *found);
ms_status alloc_unmap_block(ms_alloc *a, ms_ablock *b);
ms_status alloc_release_expandable(ms_alloc *a, ms_aseg *s);
ms_status alloc_give_back_expandable(ms_alloc *a, ms_aseg *s);
ms_status alloc_seg_new_expandable(ms_alloc *a, ms_bpool *pool, ms_stream *stream,
                                   uint64_t stream_id, uint64_t base, bool imported, ms_aseg **out);

/* allocator_events.c: record_stream deferred frees */
ms_status alloc_insert_events(ms_alloc *a, ms_ablock *b);
ms_status alloc_process_events_slow(ms_alloc *a);

/* process_events; nothing to do unless record_stream left events behind. */
static inline ms_status alloc_process_events(ms_alloc *a)
{
    return a->n_outstanding ? alloc_process_events_slow(a) : MS_OK;
}
ms_status alloc_sync_events(ms_alloc *a);
void alloc_events_free(ms_alloc *a);
ms_status alloc_block_add_use(ms_ablock *b, ms_stream *s, uint64_t id);

/* allocator_index.c: allocated blocks by address */
ms_status alloc_index_init(ms_aindex *ix);
void alloc_index_free(ms_aindex *ix);
ms_status alloc_index_reserve_n(ms_aindex *ix, uint64_t extra);

/* Room for one more entry; the common case is an inline compare. */
static inline ms_status alloc_index_reserve(ms_aindex *ix)
{
    if ((ix->count + 1) * 2 <= ix->mask + 1)
        return MS_OK;
    return alloc_index_reserve_n(ix, 1);
}
ms_status alloc_index_put(ms_aindex *ix, ms_ablock *b);

static inline uint64_t alloc_index_slot(unsigned shift, uint64_t addr)
{
    /* Fibonacci hashing, keeping the product's top bits, the only ones that
     * depend on every bit of the address: large blocks sit on 2 MiB
     * boundaries, so a window of middle bits saw few of them and made long
     * probe runs. */
    return (addr * UINT64_C(0x9E3779B97F4A7C15)) >> shift;
}

static inline void alloc_index_put_slot(ms_aslot *slots, uint64_t mask, unsigned shift,
                                        ms_ablock *b)
{
    uint64_t i = alloc_index_slot(shift, b->addr);
    while (slots[i].block)
        i = (i + 1) & mask;
    slots[i].addr = b->addr;
    slots[i].block = b;
}

/* alloc_index_put after alloc_index_reserve succeeded: cannot fail. */
static inline void alloc_index_put_reserved(ms_aindex *ix, ms_ablock *b)
{
    alloc_index_put_slot(ix->slots, ix->mask, ix->shift, b);
    ix->count++;
}
ms_ablock *alloc_index_get(const ms_aindex *ix, uint64_t addr);
ms_ablock *alloc_index_take(ms_aindex *ix, uint64_t addr);

/* allocator_stats.c: memory_stats() and its resets are public */
void alloc_stats_fill(const ms_astats *s, ms_alloc_stats *out);

/* allocator_conf.c */
uint64_t alloc_round(const ms_alloc_config *cfg, uint64_t size);

/* round_size on the malloc path: without power-of-2 divisions it is
 * alloc_round's last case (torch_npu pads by 32 bytes first; MindSpeed's
 * and MindSpore's allocators do not). */
static inline uint64_t alloc_round_request(const ms_alloc *a, uint64_t size)
{
    if (!a->plain_round)
        return alloc_round(&a->cfg, size);
    if (a->cfg.flavour == MS_ALLOC_NPU)
        size += MS_KNPU_PADDING;
    if (size < MS_KMIN_BLOCK)
        return MS_KMIN_BLOCK;
    return (size + MS_KMIN_BLOCK - 1) & ~(MS_KMIN_BLOCK - 1);
}
uint64_t alloc_segment_size(uint64_t rounded, bool exact);
uint64_t alloc_oversize_limit(const ms_alloc_config *cfg);
ms_status alloc_config_check(const ms_alloc_config *cfg);

/* allocator_oom.c */
void alloc_format(uint64_t size, char out[32]);
ms_status alloc_oom(ms_alloc *a, const ms_aparams *p, ms_diag *d);

/* allocator_pools.c */
ms_status alloc_npool_new(ms_alloc *a, const char *name, const ms_pool_options *opt, int *id);
void alloc_npools_free(ms_alloc *a);
/* get_pool: requests up to 1 MiB (rounded) use the small block set. */
static inline ms_bpool *alloc_npool_class(ms_npool *np, uint64_t rounded)
{
    return rounded <= MS_KSMALL_SIZE ? &np->small : &np->large;
}
bool alloc_borrow(ms_alloc *a, ms_aparams *p);

/* allocator_mindspeed.c: MindSpeed's memory-fragmentation allocator */
int alloc_mindspeed_pool(const ms_alloc *a, int pool);
bool alloc_mindspeed_protected(const ms_aparams *p, const ms_ablock *b);
ms_status alloc_mindspeed_after_alloc(ms_alloc *a, ms_aparams *p, bool *found);
bool alloc_mindspeed_prejudged(ms_alloc *a, const ms_aparams *p);
bool alloc_mindspeed_may_borrow(const ms_alloc *a, const ms_aparams *p);

/* allocator_mindspore.c: MindSpore's dynamic memory pool */
ms_status alloc_mindspore_new_block(ms_alloc *a, ms_aparams *p, bool *found);
ms_status alloc_mindspore_oom(ms_alloc *a, const ms_aparams *p, uint64_t orig_size, ms_diag *d);

#endif
