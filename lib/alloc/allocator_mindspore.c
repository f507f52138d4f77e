/* MindSpore's dynamic memory pool (mindspore/ccsrc/backend/common/mem_reuse/
 * mem_dynamic_allocator.cc, DynamicMemPoolBestFit), the allocator a
 * MindFormers job runs on at memory_optimize_level O0 (seed 003: SOMAS, the
 * static planner, is off for swap).  What differs from PyTorch's:
 *
 *  - every request is aligned to 512 bytes (AlignMemorySize) and served by
 *    the smallest idle buffer of the stream that holds it (one size-ordered
 *    map, no small/large classes, no oversize rules); a buffer is split when
 *    512 bytes or more are left (IsSplit), and freed buffers merge with idle
 *    neighbours (CombineMemBuf);
 *  - when no buffer fits, a new block of mempool_block_size (1 GB) doubled
 *    until it holds the request, but no more than the device has free, is
 *    taken (CalMemBlockAllocSize); with less free than the request, or
 *    under 10 MiB, there is none;
 *  - blocks are never given back: there is no empty-cache retry.  Before
 *    giving up, buffers still held by events are waited for and freed, and
 *    the search repeats (AllocTensorMem). */
#include <inttypes.h>

#include "allocator_internal.h"

static ms_status block_size(ms_alloc *a, uint64_t size, uint64_t *out)
{
    uint64_t free_bytes = 0, total = 0;
    ms_status st = a->be->ops->mem_get_info(a->be->inst, &free_bytes, &total);
    *out = 0;
    if (st != MS_OK || free_bytes < size || free_bytes < MS_KMINDSPORE_MIN_FREE)
        return st;
    uint64_t unit = MS_KMINDSPORE_UNIT;
    while (unit < size)
        unit *= 2;
    *out = unit < free_bytes ? unit : free_bytes;
    /* Blocks stay 512-byte aligned, as the device hands them out. */
    *out &= ~(MS_KMIN_BLOCK - 1);
    return MS_OK;
}

ms_status alloc_mindspore_new_block(ms_alloc *a, ms_aparams *p, bool *found)
{
    *found = false;
    ms_status st = block_size(a, p->size, &p->alloc_size);
    if (st == MS_OK && p->alloc_size >= p->size)
        st = alloc_alloc_block(a, p, false, found);
    if (st != MS_OK || *found)
        return st;
    /* Wait for the buffers events still hold, free them, search again. */
    st = alloc_sync_events(a);
    if (st == MS_OK)
        *found = alloc_get_free_block(a, p);
    return st;
}

/* The runtime's message when the pool cannot serve a kernel's output
 * (MS_LOG(EXCEPTION) in the graph scheduler's memory manager actor). */
ms_status alloc_mindspore_oom(ms_alloc *a, const ms_aparams *p, uint64_t orig_size, ms_diag *d)
{
    uint64_t free_bytes = 0, total = 0;
    ms_status st = a->be->ops->mem_get_info(a->be->inst, &free_bytes, &total);
    if (st != MS_OK)
        return ms_diag_set(d, st, "out of memory, and mem_get_info failed: %s", ms_strerror(st));
    a->stats.num_ooms++;
    alloc_emit(a, MS_AA_OOM, free_bytes, p->size, p->stream_id, p->pool);
    return ms_diag_set(d, MS_ENOMEM,
                       "Device(id:%d) memory isn't enough and alloc failed, alloc size: %" PRIu64
                       "B.",
                       a->be->device, orig_size);
}
