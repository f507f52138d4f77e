/* memsim: the caching allocator model.
 *
 * Reproduces PyTorch's CUDA caching allocator (c10/cuda/CUDACachingAllocator)
 * and its Ascend twin (NPUCachingAllocator) rule by rule; see
 * ../shared/reference/caching-allocator.md and docs/allocator.md.  It sits on
 * an ms_backend's malloc_device / mem_map, so it runs over the mock NPU, a real
 * device, or a trace replay alike.  Addresses are device addresses. */
#ifndef MEMSIM_ALLOCATOR_H
#define MEMSIM_ALLOCATOR_H

#include <stdbool.h>
#include <stdint.h>

#include "memsim/backend.h"
#include "memsim/status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct ms_alloc ms_alloc;

/* CUDA: c10's CUDACachingAllocator.  NPU: torch_npu's NPUCachingAllocator
 * (32 bytes of padding, its OOM text).  MINDSPEED: MindSpeed's
 * memory-fragmentation allocator, the pluggable allocator that replaces
 * torch_npu's (no padding; a default and a lifetime pool searched in
 * MindSpeed's multi-level order; large default blocks protected outside the
 * forward pass; the first forward's tensors long-lived).  MINDSPORE:
 * MindSpore's dynamic memory pool (DynamicMemPoolBestFit: best fit over
 * 512-byte aligned buffers of 1 GiB blocks that are never given back). */
typedef enum ms_alloc_flavour {
    MS_ALLOC_CUDA = 0,
    MS_ALLOC_NPU,
    MS_ALLOC_MINDSPEED,
    MS_ALLOC_MINDSPORE
} ms_alloc_flavour;

/* "cuda", "npu", "mindspeed", "mindspore" (NULL for an unknown value). */
MS_API const char *ms_alloc_flavour_name(ms_alloc_flavour f);
/* The flavour named s: MS_EINVAL for an unknown name. */
MS_API ms_status ms_alloc_flavour_parse(const char *s, ms_alloc_flavour *out);

#define MS_ALLOC_BANDS 16

typedef struct ms_alloc_config {
    ms_alloc_flavour flavour;
    uint64_t max_split_size;          /* UINT64_MAX: unlimited (default) */
    uint64_t max_non_split_rounding;  /* default 20 MiB */
    unsigned roundup_power2_divisions[MS_ALLOC_BANDS]; /* per band; 0: plain */
    double garbage_collection_threshold; /* 0: off */
    bool expandable_segments;
    double memory_fraction;           /* 0: unset (set_per_process_memory_fraction) */
    bool release_lock_on_malloc;      /* accepted, no effect on the model */
    bool pinned_use_host_register;    /* accepted, no effect on the model */
    unsigned pinned_num_register_threads; /* accepted (power of 2, <= 128), no effect */
} ms_alloc_config;

/* The defaults of the given flavour. */
MS_API ms_status ms_alloc_config_default(ms_alloc_flavour flavour, ms_alloc_config *cfg);
/* Apply a PYTORCH_CUDA_ALLOC_CONF-style string ("expandable_segments:True,
 * max_split_size_mb:128,roundup_power2_divisions:[256:1,>:4]") on top of cfg.
 * An unknown key or bad value is MS_EINVAL naming the key and its offset. */
MS_API ms_status ms_alloc_config_parse(const char *conf, ms_alloc_config *cfg, ms_diag *d);

/* round_size of the flavour (NPU: +32 bytes first, then the same rounding). */
MS_API ms_status ms_alloc_config_round_size(const ms_alloc_config *cfg, uint64_t size, uint64_t *rounded);
/* get_allocation_size: the segment a rounded request opens (2 MiB, 20 MiB or
 * a multiple of 2 MiB); exact: the exact_segments rule for large requests. */
MS_API ms_status ms_alloc_config_allocation_size(const ms_alloc_config *cfg, uint64_t rounded, bool exact,
                                          uint64_t *segment);
/* PyTorch's format_size: "N bytes" up to 1024, else KiB/MiB/GiB with two
 * decimals.  Writes at most len bytes including the terminator. */
MS_API ms_status ms_alloc_format_size(uint64_t size, char *buf, size_t len);

/* One statistic, as torch.cuda.memory_stats() reports it. */
typedef struct ms_stat {
    int64_t current;
    int64_t peak;
    int64_t allocated;
    int64_t freed;
} ms_stat;

enum { MS_STAT_ALL = 0, MS_STAT_SMALL_POOL, MS_STAT_LARGE_POOL, MS_STAT_TYPES };

typedef struct ms_alloc_stats {
    ms_stat allocation[MS_STAT_TYPES];
    ms_stat segment[MS_STAT_TYPES];
    ms_stat active[MS_STAT_TYPES];
    ms_stat inactive_split[MS_STAT_TYPES];
    ms_stat allocated_bytes[MS_STAT_TYPES];
    ms_stat reserved_bytes[MS_STAT_TYPES];
    ms_stat active_bytes[MS_STAT_TYPES];
    ms_stat inactive_split_bytes[MS_STAT_TYPES];
    ms_stat requested_bytes[MS_STAT_TYPES];
    ms_stat oversize_allocations;
    ms_stat oversize_segments;
    int64_t num_alloc_retries;
    int64_t num_ooms;
    int64_t num_sync_all_streams;
    int64_t num_device_alloc;
    int64_t num_device_free;
    int64_t max_split_size;
} ms_alloc_stats;

/* What the allocator did, for reports and replay comparison.  Names follow
 * the snapshot trace actions. */
typedef enum ms_alloc_action {
    MS_AA_ALLOC = 0,
    MS_AA_FREE_REQUESTED,
    MS_AA_FREE_COMPLETED,
    MS_AA_SEGMENT_ALLOC,
    MS_AA_SEGMENT_FREE,
    MS_AA_SEGMENT_MAP,
    MS_AA_SEGMENT_UNMAP,
    MS_AA_OOM,
    MS_AA_COUNT
} ms_alloc_action;

MS_API const char *ms_alloc_action_name(ms_alloc_action a); /* "alloc", "segment_map", ... */

/* For MS_AA_OOM, as in the snapshot's oom entry: addr is the device's free
 * bytes and size the rounded request. */
typedef struct ms_alloc_event {
    ms_alloc_action action;
    uint64_t addr;
    uint64_t size;      /* requested size for alloc/free, segment size for segments */
    uint64_t stream_id;
    int pool;           /* named pool id */
    /* memory_stats() "all" current values once the event has taken effect
     * (an alloc counted, a segment's bytes reserved or given back), so that
     * an observer tracing every event need not copy the whole stats. */
    uint64_t allocated, reserved, active;
} ms_alloc_event;

typedef void (*ms_alloc_observer)(void *user, const ms_alloc_event *ev);

/* Options of a named pool (pool 0 is "default", created with the allocator). */
typedef struct ms_pool_options {
    /* Lifetime pools (memory-fragmentation feature): every block is its own
     * segment of exactly the request rounded up to 2 MiB, never split and
     * never packed into 20 MiB segments. */
    bool exact_segments;
    /* Idle blocks of this pool may serve requests of the default pool while
     * borrowing is enabled (ms_alloc_set_borrowing). */
    bool lendable;
} ms_pool_options;

MS_API ms_status ms_alloc_create(ms_backend *be, const ms_alloc_config *cfg, ms_alloc **out);
MS_API ms_status ms_alloc_destroy(ms_alloc *a);

/* Allocate size bytes for use on stream in pool; on out of memory returns
 * MS_ENOMEM with the exact CUDA or NPU message in d.  Size 0 gives address 0
 * and no block.  The backend's stream ids must be below 65536 (MS_ERANGE). */
MS_API ms_status ms_alloc_malloc(ms_alloc *a, uint64_t size, ms_stream *stream, int pool, uint64_t *addr,
                          ms_diag *d);
MS_API ms_status ms_alloc_free(ms_alloc *a, uint64_t addr);
/* The block at addr is also used on stream s: its free waits for s's work. */
MS_API ms_status ms_alloc_record_stream(ms_alloc *a, uint64_t addr, ms_stream *s);
MS_API ms_status ms_alloc_empty_cache(ms_alloc *a);
/* memory_stats() (zeros for NULL). */
MS_API ms_alloc_stats ms_alloc_get_stats(const ms_alloc *a);
/* The "all" current allocated, reserved and active bytes of get_stats, for
 * callers that sample them per op. */
typedef struct ms_alloc_totals {
    uint64_t allocated, reserved, active;
} ms_alloc_totals;
MS_API ms_alloc_totals ms_alloc_current(const ms_alloc *a);
MS_API ms_status ms_alloc_reset_peak_stats(ms_alloc *a);
/* The allocator's part of a quiet moment's state (backend.h, ms_state_sig):
 * segments, blocks, pools and outstanding stream events. */
MS_API ms_status ms_alloc_state_write(const ms_alloc *a, ms_state_sig *sig);
MS_API ms_status ms_alloc_set_observer(ms_alloc *a, ms_alloc_observer fn, void *user);

MS_API ms_status ms_alloc_pool_create(ms_alloc *a, const char *name, const ms_pool_options *opt,
                               int *pool);
MS_API ms_status ms_alloc_pool_find(const ms_alloc *a, const char *name, int *pool);
/* While enabled, default-pool requests may take idle blocks of lendable pools
 * (the executor enables it outside the forward pass). */
MS_API ms_status ms_alloc_set_borrowing(ms_alloc *a, bool enabled);
/* The framework's phase, as MindSpeed's memory recorder sees it: true while
 * one micro-batch's forward through the transformer layers runs (each
 * false -> true is a new forward).  Sets borrowing to !in_forward; the
 * MINDSPEED flavour also uses it for its lifetime rules. */
MS_API ms_status ms_alloc_set_forward(ms_alloc *a, bool in_forward);

/* Visit every segment and block (for segments.csv and snapshots). */
typedef struct ms_block_info {
    uint64_t segment_addr;
    uint64_t segment_size;
    uint64_t addr;
    uint64_t size;
    uint64_t requested;
    bool allocated;
    uint64_t stream_id;
    int pool;
    bool expandable;
    bool pending_free; /* freed, waiting on record_stream events (active_pending_free) */
    bool small;        /* segment_type 'small' (small pool) */
} ms_block_info;
typedef void (*ms_block_visitor)(void *user, const ms_block_info *b);
MS_API ms_status ms_alloc_visit_blocks(const ms_alloc *a, ms_block_visitor fn, void *user);

/* Trace replay: recreate a segment as it stood when a trace began (the
 * snapshot's final segments minus what the trace added plus what it freed).
 * blocks tile [addr, addr + size) in address order.  The backend is not asked
 * for the memory: the caller's backend accounts for it. */
typedef struct ms_seed_block {
    uint64_t addr;
    uint64_t size;
    uint64_t requested;
    bool allocated;
} ms_seed_block;
MS_API ms_status ms_alloc_import_segment(ms_alloc *a, uint64_t addr, uint64_t size, ms_stream *stream,
                                  bool expandable, const ms_seed_block *blocks, uint32_t n_blocks);

/* The same with the snapshot's segment_type and a named pool spelled out
 * (ms_alloc_import_segment infers small = a 2 MiB ordinary segment, or an
 * expandable range that is not a whole number of 20 MiB pages; pool 0). */
typedef struct ms_seed_segment {
    uint64_t addr;
    uint64_t size;
    ms_stream *stream;
    bool expandable;
    bool small;
    int pool;
    const ms_seed_block *blocks;
    uint32_t n_blocks;
} ms_seed_segment;
MS_API ms_status ms_alloc_import_seed(ms_alloc *a, const ms_seed_segment *seg);

/* torch.cuda.set_per_process_memory_fraction at run time (0 <= f <= 1):
 * allowed = f * total device memory from mem_get_info. */
MS_API ms_status ms_alloc_set_memory_fraction(ms_alloc *a, double fraction);
/* torch.cuda.reset_accumulated_memory_stats: zero allocated/freed counters
 * and the event counts. */
MS_API ms_status ms_alloc_reset_accumulated_stats(ms_alloc *a);

#ifdef __cplusplus
}
#endif
#endif
