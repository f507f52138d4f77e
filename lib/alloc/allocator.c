/* The caching allocator's entry points: create/destroy, malloc in PyTorch's
 * order (DeviceCachingAllocator::malloc), free, empty_cache, the memory
 * fraction and the observer. */
#include <stdlib.h>

#include "allocator_internal.h"

/* NativeCachingAllocator::allocate refuses anything from 1 EiB up. */
#define ONE_EXA_BYTE (UINT64_C(1) << 60)

const char *ms_alloc_action_name(ms_alloc_action action)
{
    static const char *const names[MS_AA_COUNT] = {
        [MS_AA_ALLOC] = "alloc",
        [MS_AA_FREE_REQUESTED] = "free_requested",
        [MS_AA_FREE_COMPLETED] = "free_completed",
        [MS_AA_SEGMENT_ALLOC] = "segment_alloc",
        [MS_AA_SEGMENT_FREE] = "segment_free",
        [MS_AA_SEGMENT_MAP] = "segment_map",
        [MS_AA_SEGMENT_UNMAP] = "segment_unmap",
        [MS_AA_OOM] = "oom",
    };
    if ((unsigned)action >= MS_AA_COUNT)
        return "unknown";
    return names[action];
}

void alloc_emit_event(ms_alloc *a, ms_alloc_action action, uint64_t addr, uint64_t size,
                      uint64_t stream_id, const ms_bpool *pool)
{
    const ms_astats *s = &a->stats;
    ms_alloc_event ev = {action, addr, size, stream_id, pool->owner->id,
                         (uint64_t)alloc_stat_current(&s->allocated_bytes),
                         (uint64_t)alloc_stat_current(&s->reserved_bytes),
                         (uint64_t)alloc_stat_current(&s->active_bytes)};
    a->observer(a->observer_user, &ev);
}

ms_status ms_alloc_set_observer(ms_alloc *a, ms_alloc_observer fn, void *user)
{
    if (!a)
        return MS_EINVAL;
    a->observer = fn;
    a->observer_user = user;
    return MS_OK;
}

/* setMemoryFraction: allowed = fraction x total device memory. */
ms_status ms_alloc_set_memory_fraction(ms_alloc *a, double fraction)
{
    if (!a || !(fraction >= 0.0 && fraction <= 1.0))
        return MS_EINVAL;
    uint64_t free_bytes = 0, total = 0;
    ms_status st = a->be->ops->mem_get_info(a->be->inst, &free_bytes, &total);
    if (st != MS_OK)
        return st;
    a->allowed_memory_maximum = (uint64_t)(fraction * (double)total);
    a->set_fraction = true;
    return MS_OK;
}

static bool backend_usable(const ms_backend *be)
{
    const ms_backend_ops *o = be ? be->ops : NULL;
    return o && o->mem_get_info && o->malloc_device && o->free_device && o->va_reserve &&
           o->va_release && o->mem_map && o->mem_unmap && o->stream_synchronize &&
           o->stream_id && o->event_create && o->event_destroy && o->event_record &&
           o->event_query && o->event_synchronize && o->device_synchronize;
}

ms_status ms_alloc_create(ms_backend *be, const ms_alloc_config *cfg, ms_alloc **out)
{
    if (!out || !backend_usable(be))
        return MS_EINVAL;
    *out = NULL;
    ms_alloc_config defaults;
    if (!cfg) {
        ms_alloc_config_default(MS_ALLOC_CUDA, &defaults);
        cfg = &defaults;
    }
    ms_status st = alloc_config_check(cfg);
    if (st != MS_OK)
        return st;
    ms_alloc *a = calloc(1, sizeof *a);
    if (!a)
        return MS_ENOMEM;
    a->be = be;
    a->cfg = *cfg;
    /* memory_stats()["max_split_size"]: SIZE_MAX reads as -1. */
    a->stats.max_split_size = (int64_t)cfg->max_split_size;
    a->plain_round = true;
    for (int i = 0; i < MS_ALLOC_BANDS; i++)
        if (cfg->roundup_power2_divisions[i] > 1)
            a->plain_round = false;
    a->npu_align = cfg->flavour == MS_ALLOC_NPU && cfg->expandable_segments;
    int id = 0;
    st = alloc_index_init(&a->index);
    if (st == MS_OK)
        st = alloc_npool_new(a, "default", NULL, &id);
    if (st == MS_OK && cfg->memory_fraction > 0.0)
        st = ms_alloc_set_memory_fraction(a, cfg->memory_fraction);
    if (st != MS_OK) {
        ms_alloc_destroy(a);
        return st;
    }
    *out = a;
    return MS_OK;
}

ms_status ms_alloc_destroy(ms_alloc *a)
{
    if (!a)
        return MS_EINVAL;
    alloc_events_free(a);
    ms_status st = alloc_release_all(a);
    alloc_block_slabs_free(a);
    alloc_npools_free(a);
    alloc_index_free(&a->index);
    free(a->segs);
    free(a);
    return st;
}

/* ------------------------------------------------------------------ malloc */

/* Steps 3-6 of malloc: garbage collection, a new segment, then the two
 * release-and-retry rounds. */
static ms_status new_block(ms_alloc *a, ms_aparams *p, bool *found)
{
    if (a->cfg.flavour == MS_ALLOC_MINDSPORE)
        return alloc_mindspore_new_block(a, p, found);
    ms_status st = MS_OK;
    if (a->set_fraction && a->cfg.garbage_collection_threshold > 0.0)
        st = alloc_garbage_collect(a);
    if (st == MS_OK)
        st = alloc_alloc_block(a, p, false, found);
    if (st == MS_OK && !*found) {
        bool released = false;
        st = alloc_release_available(a, p, &released);
        if (st == MS_OK && released)
            st = alloc_alloc_block(a, p, false, found);
    }
    /* MindSpeed: before emptying the cache, any cached block of either pool
     * that the request may take (get_free_block_after_alloc). */
    if (st == MS_OK && !*found && a->cfg.flavour == MS_ALLOC_MINDSPEED)
        st = alloc_mindspeed_after_alloc(a, p, found);
    if (st == MS_OK && !*found) {
        st = alloc_release_cached(a);
        if (st == MS_OK)
            st = alloc_alloc_block(a, p, true, found);
    }
    return st;
}

static ms_status too_big(const ms_alloc *a, ms_diag *d)
{
    return ms_diag_set(d, MS_ENOMEM, "%s out of memory. Tried to allocate more than 1EB memory.",
                       a->cfg.flavour == MS_ALLOC_CUDA ? "CUDA" : "NPU");
}

static ms_status start_params(ms_alloc *a, uint64_t size, ms_stream *stream, int pool,
                              ms_aparams *p, ms_diag *d)
{
    ms_status st = alloc_index_reserve(&a->index);
    if (st == MS_OK)
        st = alloc_process_events(a);
    if (st == MS_OK)
        st = a->be->ops->stream_id(a->be->inst, stream, &p->stream_id);
    if (st != MS_OK)
        return ms_diag_set(d, st, "ms_alloc_malloc: %s", ms_strerror(st));
    if (p->stream_id >= MS_ATREE_MAX_STREAM) /* the block sets key streams in 16 bits */
        return ms_diag_set(d, MS_ERANGE, "ms_alloc_malloc: stream id %llu is not below %llu",
                           (unsigned long long)p->stream_id,
                           (unsigned long long)MS_ATREE_MAX_STREAM);
    ms_npool *np = a->pools[alloc_mindspeed_pool(a, pool)];
    p->size = alloc_round_request(a, size);
    p->stream = stream;
    /* MindSpore's pool keeps one best-fit map of buffers, whatever their
     * size. */
    p->pool = a->cfg.flavour == MS_ALLOC_MINDSPORE ? &np->large : alloc_npool_class(np, p->size);
    p->exact = np->opt.exact_segments && !p->pool->is_small;
    p->protect =
        a->cfg.flavour == MS_ALLOC_MINDSPEED && np->id == 0 && !p->pool->is_small && !a->in_forward;
    p->block = NULL;
    p->split = false;
    p->in_set = false;
    /* get_allocation_size: get_free_block needs it only for an exact
     * request; the others wait until no cached block fits. */
    if (p->exact)
        p->alloc_size = alloc_segment_size(p->size, true);
    return MS_OK;
}

/* Steps 2-6 of malloc when get_free_block found nothing. */
static ms_status no_free_block(ms_alloc *a, ms_aparams *p, bool *found)
{
    p->alloc_size = alloc_segment_size(p->size, p->exact);
    *found = p->pool->owner->id == 0 && alloc_borrow(a, p);
    if (*found)
        return MS_OK;
    return new_block(a, p, found);
}

ms_status ms_alloc_malloc(ms_alloc *a, uint64_t size, ms_stream *stream, int pool, uint64_t *addr,
                          ms_diag *d)
{
    if (!a || !stream || !addr || pool < 0 || pool >= a->n_pools)
        return ms_diag_set(d, MS_EINVAL, "ms_alloc_malloc: invalid argument");
    *addr = 0;
    if (size == 0)
        return MS_OK; /* a zero-byte tensor has no block */
    if (size >= ONE_EXA_BYTE)
        return too_big(a, d);
    ms_aparams p;
    ms_status st = start_params(a, size, stream, pool, &p, d);
    if (st != MS_OK)
        return st;
    /* No block, and no device, holds MS_ATREE_MAX_SIZE (128 PiB) or more:
     * such a request goes straight to the out-of-memory path. */
    bool found = p.size < MS_ATREE_MAX_SIZE && alloc_get_free_block(a, &p);
    bool taken = found;
    if (!found)
        st = no_free_block(a, &p, &found);
    if (st != MS_OK)
        return ms_diag_set(d, st, "ms_alloc_malloc: %s", ms_strerror(st));
    if (!found && a->cfg.flavour == MS_ALLOC_MINDSPORE)
        return alloc_mindspore_oom(a, &p, size, d);
    if (!found)
        return alloc_oom(a, &p, d);
    /* should_split, unless get_free_block's answer still holds. */
    bool aligned = a->npu_align && alloc_npu_align(a, &p);
    if (aligned || !taken)
        p.split = alloc_may_split(a, &p) && alloc_should_split(a, p.block, p.size);
    st = alloc_found_block(a, &p, size, addr);
    if (st != MS_OK)
        return ms_diag_set(d, st, "ms_alloc_malloc: %s", ms_strerror(st));
    return MS_OK;
}

/* -------------------------------------------------------------------- free */

ms_status ms_alloc_free(ms_alloc *a, uint64_t addr)
{
    if (!a)
        return MS_EINVAL;
    if (addr == 0)
        return MS_OK;
    ms_ablock *b = alloc_index_take(&a->index, addr);
    if (!b)
        return MS_EINVAL; /* "invalid device pointer" */
    b->allocated = false;
    int c = alloc_stat_class(b->pool);
    alloc_stat_dec(&a->stats.allocation, c, 1);
    alloc_stat_dec(&a->stats.allocated_bytes, c, b->size);
    alloc_emit(a, MS_AA_FREE_REQUESTED, b->addr, b->requested, b->stream_id, b->pool);
    if (b->size >= a->cfg.max_split_size)
        alloc_torch_stat_dec(&a->stats.oversize_allocations, 1);
    if (b->n_uses > 0)
        return alloc_insert_events(a, b);
    alloc_free_block(a, b);
    return MS_OK;
}

ms_status ms_alloc_empty_cache(ms_alloc *a)
{
    if (!a)
        return MS_EINVAL;
    return alloc_release_cached(a);
}
