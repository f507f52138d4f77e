/* MindSpeed's memory-fragmentation allocator (seeds 001/004), the rules it
 * adds to torch_npu's caching allocator (MindSpeed
 * mindspeed/ops/csrc/pluggable_allocator/memory_fragmentation/
 * DeviceCachingAllocator.cpp and Recorder.cpp):
 *
 *  - a default pool and a lifetime ("long") pool; a long request takes only
 *    an exact, unsplit block of its pool, a default request may take idle
 *    long blocks outside the forward pass (the lendable pools);
 *  - the first forward: "all tensors from setup_model to the end of the
 *    first forward stage are marked as long lifecycle" (MemoryRecorder::
 *    get_lc while last_forward_rec_set is empty), so the first forward's
 *    requests go to the long pool;
 *  - outside the forward pass a default-pool block of 1.8e9 bytes or more is
 *    not split for a request that would leave 20 MiB or more behind
 *    (myMaxSplitSize), so the backward's small temporaries cannot carve up
 *    the large blocks the next forward needs;
 *  - multi-level allocation: when no block is cached for the request and no
 *    new segment can be had, any cached block of the other pool, then of its
 *    own, with only the oversize rules (get_free_block_after_alloc; a
 *    default request still stays out of the long pool during the forward),
 *    and a small request may then take a large block; only after that is
 *    the cache emptied;
 *  - near a full device the first attempt at a new segment is not made
 *    (memory_fail_prejudgment, alloc_mindspeed_prejudged), so the
 *    multi-level search above reuses cached blocks of both pools before
 *    the device's last 200 MiB are taken;
 *  - a default request searches the long pool right after its own (pool_idx
 *    1 of get_pool_list): outside the forward any idle long block, inside it
 *    only the long pool's small blocks ("not allowed to be placed in the
 *    long lifecycle memory pool in the forward phase" is tested for
 *    long_lc_pools.large_blocks alone), and the protection of large blocks
 *    is the default pool's own (tested at pool_idx 0 only). */
#include "allocator_internal.h"

/* The first pool with exact segments: MindSpeed's long pool. */
static int long_pool(const ms_alloc *a)
{
    for (int i = 1; i < a->n_pools; i++)
        if (a->pools[i]->opt.exact_segments)
            return i;
    return 0;
}

int alloc_mindspeed_pool(const ms_alloc *a, int pool)
{
    if (a->cfg.flavour != MS_ALLOC_MINDSPEED || pool != 0 || !a->in_forward ||
        a->forwards_begun != 1)
        return pool;
    return long_pool(a);
}

bool alloc_mindspeed_protected(const ms_aparams *p, const ms_ablock *b)
{
    return b->size >= MS_KMINDSPEED_PROTECT && b->size - p->size >= MS_KLARGE_BUFFER;
}

/* get_free_block_after_alloc on one block set: the best fit by the oversize
 * rules alone, split as any non-exact request would be. */
static bool take_relaxed(ms_alloc *a, ms_aparams *p, ms_bpool *pool)
{
    ms_aparams q = *p;
    q.pool = pool;
    q.exact = false;
    q.protect = false;
    if (!alloc_get_free_block(a, &q))
        return false;
    *p = q;
    return true;
}

/* get_free_block_after_alloc's one restriction: during the forward the
 * long pool's large blocks are not searched when they come first in the
 * list (pool_idx 0). */
static bool skipped(const ms_alloc *a, const ms_npool *np, int idx, bool large)
{
    return np->id != 0 && large && idx == 0 && a->in_forward;
}

ms_status alloc_mindspeed_after_alloc(ms_alloc *a, ms_aparams *p, bool *found)
{
    ms_npool *own = p->pool->owner;
    int other_id = own->id == 0 ? long_pool(a) : 0;
    ms_npool *other = a->pools[other_id];
    bool small = p->pool->is_small;
    *found = false;
    /* The pool list reversed: the other pool, then its own. */
    ms_npool *reversed[2] = {other, own};
    for (int i = other == own ? 1 : 0; i < 2 && !*found; i++)
        if (!skipped(a, reversed[i], i, !small))
            *found = take_relaxed(a, p, small ? &reversed[i]->small : &reversed[i]->large);
    /* A small request then searches the large block sets, its own first. */
    ms_npool *forward[2] = {own, other};
    for (int i = 0; i < (other == own ? 1 : 2) && small && !*found; i++)
        if (!skipped(a, forward[i], i, true))
            *found = take_relaxed(a, p, &forward[i]->large);
    return MS_OK;
}

/* alloc_block's pre-judgment (DeviceCachingAllocator.cpp: "In order to
 * prevent the failure of aclrtMalloc_wrapper from consuming a lot of time,
 * prediction is made in advance"): once a segment has been allocated,
 * usable_total is the memory reserved plus the device's free memory, and a
 * first attempt (not the retry after the cache is emptied) asks the device
 * for nothing when reserved + segment + memory_fail_prejudgment would pass
 * it.  MindSpeed samples usable_total after each device malloc; memsim
 * reads the device's free memory at the attempt: the same sum while nothing
 * else allocates on the device (the mock), a fresher one where something
 * does (a real device).  With expandable segments MindSpeed maps memory
 * before usable_total is ever set, so it never pre-judges. */
static bool device_malloc_seen(const ms_alloc *a)
{
    /* num_device_alloc may have been reset with the accumulated stats. */
    return a->stats.num_device_alloc > 0 || a->total_allocated_memory > 0;
}

bool alloc_mindspeed_prejudged(ms_alloc *a, const ms_aparams *p)
{
    if (a->cfg.flavour != MS_ALLOC_MINDSPEED || a->cfg.expandable_segments ||
        !device_malloc_seen(a))
        return false;
    uint64_t free_bytes = 0, total = 0;
    if (a->be->ops->mem_get_info(a->be->inst, &free_bytes, &total) != MS_OK)
        return false; /* the device malloc will say */
    return p->alloc_size + MS_KMINDSPEED_PREJUDGE > free_bytes;
}

/* Inside the forward a default request still searches the long pool's
 * small blocks (get_free_block refuses only long_lc_pools.large_blocks
 * there). */
bool alloc_mindspeed_may_borrow(const ms_alloc *a, const ms_aparams *p)
{
    return a->cfg.flavour == MS_ALLOC_MINDSPEED && p->pool->is_small;
}
