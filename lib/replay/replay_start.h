/* Private to the replay: the allocator state when a trace began, rebuilt
 * backwards from the snapshot's final segments, and the replay backend. */
#ifndef MEMSIM_CORE_REPLAY_START_H
#define MEMSIM_CORE_REPLAY_START_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "memsim/allocator.h"
#include "memsim/backend.h"
#include "memsim/trace.h"

/* One segment (or, for expandable segments, one mapped range) as it stood
 * when the trace began.  blocks tile [addr, addr + size) in address order. */
typedef struct ms_start_segment {
    uint64_t addr;
    uint64_t size;
    uint64_t stream;
    bool is_large;
    bool expandable;
    ms_seed_block *blocks;
    uint32_t n_blocks;
} ms_start_segment;

typedef struct ms_start_state {
    ms_start_segment *segs; /* in address order */
    size_t n_segs;
    uint64_t reserved;      /* sum of segment sizes */
    uint64_t allocated;     /* sum of allocated block sizes */
    /* reserved[i]: reserved bytes after trace event i, rebuilt from the
     * segment events (n_events entries); peak: its maximum (and the start). */
    uint64_t *reserved_after;
    uint64_t peak_reserved;
} ms_start_state;

/* Rebuild device dev's starting state from the snapshot's segments and its
 * trace, walking the trace backwards (reference/caching-allocator.md: "the
 * starting state is the final segments minus what the trace added plus what
 * it freed").  cfg gives the rounding rules needed to size the blocks the
 * trace frees but never allocated.  A trace that contradicts the segments is
 * MS_EMISMATCH naming the event index. */
ms_status rpl_start_state_build(const ms_snapshot *s, int dev, const ms_alloc_config *cfg,
                                ms_start_state *out, ms_diag *d);
ms_status rpl_start_state_free(ms_start_state *st);

/* round_size() of the caching allocator (reference "Sizes"), needed to size
 * blocks the trace frees without having allocated them. */
uint64_t rpl_start_round_size(const ms_alloc_config *cfg, uint64_t size);

/* ---- the replay backend (replay_backend.c) ---- */

typedef struct ms_rb ms_rb;

/* A backend whose memory is what the trace says: capacity bytes the
 * allocator may hold (total reported as total), fresh addresses from
 * fresh_base up. */
ms_status rpl_backend_create(uint64_t capacity, uint64_t total, uint64_t fresh_base,
                             ms_backend **be, ms_rb **rb);
/* Memory that exists before the replay (imported segments): a device
 * allocation, or a mapped range of an expandable segment. */
ms_status rpl_backend_account(ms_rb *rb, uint64_t addr, uint64_t size, bool mapped);
/* The recorded stream handles (strictly ascending), given once before any
 * stream is asked for; a stream's id is its handle's rank. */
ms_status rpl_backend_set_stream_handles(ms_rb *rb, const uint64_t *handles, size_t n);
/* The stream of a recorded handle (MS_ENOENT: not declared). */
ms_status rpl_backend_stream(ms_rb *rb, uint64_t handle, ms_stream **out);
/* A side stream for a deferred free, whose events recorded from now on
 * complete once the replay reaches trace event complete_at (SIZE_MAX:
 * never); none of its earlier events completes later than that. */
ms_status rpl_backend_side_stream(ms_rb *rb, size_t complete_at, ms_stream **out);
/* The replay is at trace event index (events up to it have happened). */
ms_status rpl_backend_set_cursor(ms_rb *rb, size_t index, int64_t time_us);
/* Recorded segment events just before the request being replayed: a
 * malloc_device / va_reserve of a matching size takes the recorded address
 * when it is free.  n == 0 clears. */
ms_status rpl_backend_set_hints(ms_rb *rb, const ms_trace_event *ev, size_t n);

#endif
