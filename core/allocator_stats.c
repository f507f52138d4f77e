/* Statistics as torch.cuda.memory_stats() reports them: every stat is
 * {current, peak, allocated, freed} and is kept for the aggregate and for the
 * pool class (small/large) of the block set a block belongs to.  The update
 * helpers are inline in allocator_internal.h; here are the reads and the
 * resets (resetPeakStats, resetAccumulatedStats). */

#include "allocator_internal.h"

ms_status ms_alloc_get_stats(const ms_alloc *a, ms_alloc_stats *out)
{
    if (!a || !out)
        return MS_EINVAL;
    *out = a->stats;
    return MS_OK;
}

ms_status ms_alloc_current(const ms_alloc *a, uint64_t *allocated, uint64_t *reserved,
                           uint64_t *active)
{
    if (!a)
        return MS_EINVAL;
    if (allocated)
        *allocated = (uint64_t)a->stats.allocated_bytes[MS_STAT_ALL].current;
    if (reserved)
        *reserved = (uint64_t)a->stats.reserved_bytes[MS_STAT_ALL].current;
    if (active)
        *active = (uint64_t)a->stats.active_bytes[MS_STAT_ALL].current;
    return MS_OK;
}

static void each_array(ms_alloc_stats *s, void (*fn)(ms_stat *))
{
    ms_stat *arrays[] = {s->allocation,   s->segment,         s->active,
                         s->inactive_split, s->allocated_bytes, s->reserved_bytes,
                         s->active_bytes, s->inactive_split_bytes, s->requested_bytes};
    for (size_t i = 0; i < sizeof arrays / sizeof arrays[0]; i++)
        for (int t = 0; t < MS_STAT_TYPES; t++)
            fn(&arrays[i][t]);
    fn(&s->oversize_allocations);
    fn(&s->oversize_segments);
}

static void reset_peak(ms_stat *s)
{
    s->peak = s->current;
}

static void reset_accumulated(ms_stat *s)
{
    s->allocated = 0;
    s->freed = 0;
}

ms_status ms_alloc_reset_peak_stats(ms_alloc *a)
{
    if (!a)
        return MS_EINVAL;
    each_array(&a->stats, reset_peak);
    return MS_OK;
}

ms_status ms_alloc_reset_accumulated_stats(ms_alloc *a)
{
    if (!a)
        return MS_EINVAL;
    each_array(&a->stats, reset_accumulated);
    a->stats.num_alloc_retries = 0;
    a->stats.num_ooms = 0;
    a->stats.num_sync_all_streams = 0;
    a->stats.num_device_alloc = 0;
    a->stats.num_device_free = 0;
    return MS_OK;
}
