/* Statistics as torch.cuda.memory_stats() reports them: every stat is
 * {current, peak, allocated, freed} and is kept for the aggregate and for the
 * pool class (small/large) of the block set a block belongs to.  The update
 * helpers are inline in allocator_internal.h, which keeps the classes and
 * the aggregate's peak (ms_astat); here the aggregate is laid out for the
 * reads, and the resets (resetPeakStats, resetAccumulatedStats). */

#include "allocator_internal.h"

static void fill_stat(const ms_astat *s, ms_stat out[MS_STAT_TYPES])
{
    out[MS_STAT_ALL] = (ms_stat){alloc_stat_current(s), s->all_peak,
                                 s->allocated[0] + s->allocated[1], s->freed[0] + s->freed[1]};
    for (int c = 0; c < 2; c++)
        out[MS_STAT_SMALL_POOL + c] =
            (ms_stat){s->current[c], s->peak[c], s->allocated[c], s->freed[c]};
}

void alloc_stats_fill(const ms_astats *s, ms_alloc_stats *out)
{
    fill_stat(&s->allocation, out->allocation);
    fill_stat(&s->segment, out->segment);
    fill_stat(&s->active, out->active);
    fill_stat(&s->inactive_split, out->inactive_split);
    fill_stat(&s->allocated_bytes, out->allocated_bytes);
    fill_stat(&s->reserved_bytes, out->reserved_bytes);
    fill_stat(&s->active_bytes, out->active_bytes);
    fill_stat(&s->inactive_split_bytes, out->inactive_split_bytes);
    fill_stat(&s->requested_bytes, out->requested_bytes);
    out->oversize_allocations = s->oversize_allocations;
    out->oversize_segments = s->oversize_segments;
    out->num_alloc_retries = s->num_alloc_retries;
    out->num_ooms = s->num_ooms;
    out->num_sync_all_streams = s->num_sync_all_streams;
    out->num_device_alloc = s->num_device_alloc;
    out->num_device_free = s->num_device_free;
    out->max_split_size = s->max_split_size;
}

ms_alloc_stats ms_alloc_get_stats(const ms_alloc *a)
{
    ms_alloc_stats out = {0};
    if (a != NULL)
        alloc_stats_fill(&a->stats, &out);
    return out;
}

ms_alloc_totals ms_alloc_current(const ms_alloc *a)
{
    if (a == NULL)
        return (ms_alloc_totals){0};
    return (ms_alloc_totals){(uint64_t)alloc_stat_current(&a->stats.allocated_bytes),
                             (uint64_t)alloc_stat_current(&a->stats.reserved_bytes),
                             (uint64_t)alloc_stat_current(&a->stats.active_bytes)};
}

#define N_POOL_STATS 9

static void pool_stats(ms_astats *s, ms_astat *out[N_POOL_STATS])
{
    ms_astat *stats[N_POOL_STATS] = {&s->allocation,     &s->segment,
                                     &s->active,         &s->inactive_split,
                                     &s->allocated_bytes, &s->reserved_bytes,
                                     &s->active_bytes,   &s->inactive_split_bytes,
                                     &s->requested_bytes};
    for (int i = 0; i < N_POOL_STATS; i++)
        out[i] = stats[i];
}

ms_status ms_alloc_reset_peak_stats(ms_alloc *a)
{
    if (!a)
        return MS_EINVAL;
    ms_astat *stats[N_POOL_STATS];
    pool_stats(&a->stats, stats);
    for (int i = 0; i < N_POOL_STATS; i++) {
        ms_astat *s = stats[i];
        s->peak[0] = s->current[0];
        s->peak[1] = s->current[1];
        s->all_peak = alloc_stat_current(s);
    }
    a->stats.oversize_allocations.peak = a->stats.oversize_allocations.current;
    a->stats.oversize_segments.peak = a->stats.oversize_segments.current;
    return MS_OK;
}

ms_status ms_alloc_reset_accumulated_stats(ms_alloc *a)
{
    if (!a)
        return MS_EINVAL;
    ms_astat *stats[N_POOL_STATS];
    pool_stats(&a->stats, stats);
    for (int i = 0; i < N_POOL_STATS; i++)
        for (int c = 0; c < 2; c++)
            stats[i]->allocated[c] = stats[i]->freed[c] = 0;
    a->stats.oversize_allocations.allocated = a->stats.oversize_allocations.freed = 0;
    a->stats.oversize_segments.allocated = a->stats.oversize_segments.freed = 0;
    a->stats.num_alloc_retries = 0;
    a->stats.num_ooms = 0;
    a->stats.num_sync_all_streams = 0;
    a->stats.num_device_alloc = 0;
    a->stats.num_device_free = 0;
    return MS_OK;
}
