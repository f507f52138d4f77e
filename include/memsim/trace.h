/* memsim: import and replay of real PyTorch memory snapshots.
 *
 * torch.cuda.memory._record_memory_history() + _snapshot() produce a dict
 * pickled with protocol 4 (see ../shared/reference/caching-allocator.md,
 * "Memory snapshots").  memsim reads it with its own data-only pickle decoder
 * (never executing anything), turns it into an ms_snapshot, and replays the
 * recorded allocations and frees through the caching-allocator model
 * (allocator.h) to measure how closely the model predicts the real
 * allocator's segment traffic, peak and OOM.  A plain CSV trace
 * (action,addr,size,stream,time_us[,device_free]) is accepted as well.
 * docs/replay.md is the user manual. */
#ifndef MEMSIM_TRACE_H
#define MEMSIM_TRACE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "memsim/allocator.h"
#include "memsim/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------------------
 * Pickle: a safe decoder for protocols 2-5, data opcodes only.
 *
 * Opcodes that import or call code (GLOBAL, STACK_GLOBAL, REDUCE, BUILD, INST,
 * OBJ, NEWOBJ, NEWOBJ_EX, EXT1/2/4, PERSID, BINPERSID, NEXT_BUFFER,
 * READONLY_BUFFER) are rejected with an error naming the opcode and its byte
 * offset; so is every malformed input (truncation, bad protocol, stack
 * underflow, bad memo index, limits).  Values live as long as their
 * ms_pickle document.  Memoised values are shared, exactly as Python shares
 * the objects, so a value may be reachable along several paths (or, for a
 * self-containing list, along a cycle): walk with a depth bound.
 * ------------------------------------------------------------------------ */

typedef struct ms_pickle ms_pickle;             /* a decoded document */
typedef struct ms_pickle_value ms_pickle_value; /* one value inside it */

typedef enum ms_pickle_kind {
    MS_PK_NONE = 0,
    MS_PK_BOOL,
    MS_PK_INT,       /* fits int64_t */
    MS_PK_BIGINT,    /* an int beyond int64_t: kept as its pickled bytes */
    MS_PK_FLOAT,
    MS_PK_STR,       /* UTF-8 as pickled */
    MS_PK_BYTES,
    MS_PK_BYTEARRAY,
    MS_PK_LIST,
    MS_PK_TUPLE,
    MS_PK_DICT,
    MS_PK_SET,
    MS_PK_FROZENSET,
    MS_PK_COUNT
} ms_pickle_kind;

typedef struct ms_pickle_limits {
    size_t max_depth;  /* open MARKs at once, and nesting of tuples (hashed
                          keys); default 256 */
    size_t max_stack;  /* values on the stack; default 1 << 24 */
    size_t max_memo;   /* highest memo index + 1; default 1 << 24 */
    size_t max_values; /* values created by the whole document; default 1 << 26 */
    size_t max_compare; /* deep comparisons of equal-hash dict keys / set
                           elements; default 1 << 20 */
} ms_pickle_limits;

MS_API ms_status ms_pickle_limits_default(ms_pickle_limits *lim);
/* Decode len bytes.  lim NULL: the defaults.  On error *out is NULL and d
 * says what was wrong and at which byte offset. */
MS_API ms_status ms_pickle_decode(const void *data, size_t len, const ms_pickle_limits *lim,
                           ms_pickle **out, ms_diag *d);
MS_API ms_status ms_pickle_free(ms_pickle *p);

/* Pure accessors: the top-level value; a value's kind (MS_PK_COUNT for
 * NULL); a kind's Python name ("dict", "int", ...). */
MS_API const ms_pickle_value *ms_pickle_root(const ms_pickle *p);
MS_API ms_pickle_kind ms_pickle_kind_of(const ms_pickle_value *v);
MS_API const char *ms_pickle_kind_name(ms_pickle_kind k);

/* Length: items of a container, bytes of a str/bytes/bytearray/bigint. */
MS_API ms_status ms_pickle_len(const ms_pickle_value *v, size_t *n);
/* Item i of a list, tuple, set or frozenset (sets keep insertion order). */
MS_API ms_status ms_pickle_item(const ms_pickle_value *v, size_t i, const ms_pickle_value **out);
/* Entry i of a dict, in insertion order. */
MS_API ms_status ms_pickle_dict_item(const ms_pickle_value *v, size_t i, const ms_pickle_value **key,
                              const ms_pickle_value **val);
/* The value under a str key; MS_ENOENT when absent, MS_EINVAL if v is not a
 * dict. */
MS_API ms_status ms_pickle_dict_get(const ms_pickle_value *dict, const char *key,
                             const ms_pickle_value **out);
/* Typed reads; MS_EINVAL when the kind does not fit.  as_int accepts int and
 * bool (a Python bool is an int) and gives MS_ERANGE for a bigint; as_float
 * accepts float, int and bool; as_str gives a NUL-terminated string (which
 * may also contain NULs: use len); as_bytes accepts bytes, bytearray and
 * bigint (little-endian two's complement, as LONG1/LONG4 carry it). */
MS_API ms_status ms_pickle_as_int(const ms_pickle_value *v, int64_t *out);
MS_API ms_status ms_pickle_as_float(const ms_pickle_value *v, double *out);
MS_API ms_status ms_pickle_as_bool(const ms_pickle_value *v, bool *out);
MS_API ms_status ms_pickle_as_str(const ms_pickle_value *v, const char **s, size_t *len);
MS_API ms_status ms_pickle_as_bytes(const ms_pickle_value *v, const uint8_t **b, size_t *len);

/* ------------------------------------------------------------------------
 * Snapshot: segments, per-device traces and allocator settings.
 * ------------------------------------------------------------------------ */

/* The first eight match ms_alloc_action value for value. */
typedef enum ms_trace_action {
    MS_TA_ALLOC = 0,
    MS_TA_FREE_REQUESTED,
    MS_TA_FREE_COMPLETED,
    MS_TA_SEGMENT_ALLOC,
    MS_TA_SEGMENT_FREE,
    MS_TA_SEGMENT_MAP,
    MS_TA_SEGMENT_UNMAP,
    MS_TA_OOM,
    MS_TA_SNAPSHOT,
    MS_TA_USER_DEFINED, /* torch >= 2.5 user annotations; not replayed */
    MS_TA_COUNT
} ms_trace_action;

/* "alloc", "free_requested", ..., "user_defined"; NULL when out of range. */
MS_API const char *ms_trace_action_name(ms_trace_action a);
MS_API ms_status ms_trace_action_parse(const char *name, ms_trace_action *out);

typedef struct ms_trace_event {
    ms_trace_action action;
    uint64_t addr;        /* 0 for oom */
    uint64_t size;        /* requested size (alloc/free), segment size
                             (segment_*), rounded request (oom) */
    uint64_t stream;      /* the recorded stream handle (0: default stream) */
    int64_t time_us;
    bool has_device_free; /* oom: device_free is the driver's free memory */
    uint64_t device_free;
} ms_trace_event;

typedef enum ms_block_state {
    MS_BLOCK_INACTIVE = 0,
    MS_BLOCK_ACTIVE_ALLOCATED,
    MS_BLOCK_ACTIVE_PENDING_FREE
} ms_block_state;

typedef struct ms_snapshot_block {
    uint64_t addr;
    uint64_t size;
    uint64_t requested;
    ms_block_state state;
} ms_snapshot_block;

/* For an expandable segment, one entry per contiguous mapped range, as
 * PyTorch's snapshot() reports it. */
typedef struct ms_snapshot_segment {
    int device;
    uint64_t addr;
    uint64_t total_size;
    uint64_t allocated_size;
    uint64_t active_size;
    uint64_t requested_size;
    uint64_t stream;
    bool is_large;       /* segment_type "large" (else "small") */
    bool is_expandable;
    int64_t pool_id[2];  /* segment_pool_id; (0, 0) is the default pool */
    const ms_snapshot_block *blocks; /* in address order */
    size_t n_blocks;
} ms_snapshot_segment;

typedef struct ms_snapshot_settings {
    bool recorded;               /* false: the snapshot had none (CSV) */
    const char *alloc_conf;      /* PYTORCH_CUDA_ALLOC_CONF as recorded ("" if unset) */
    int64_t max_split_size;      /* bytes; -1: unlimited */
    double garbage_collection_threshold;
    bool expandable_segments;
    /* By band (index floor(log2 size) - 20); the snapshot keys them by MiB
     * ("1", "2", ..., "32768"). */
    unsigned roundup_power2_divisions[MS_ALLOC_BANDS];
    /* Which allocator wrote it, when the snapshot says (memsim run
     * --snapshot writes "memsim_flavour"; PyTorch's own snapshots do not). */
    bool has_flavour;
    ms_alloc_flavour flavour;
} ms_snapshot_settings;

typedef struct ms_snapshot ms_snapshot;

/* Load a snapshot: a pickle (content starting with the PROTO opcode 0x80,
 * or a name ending in .pickle / .pkl), else a CSV trace
 * (action,addr,size,stream,time_us[,device_free]): one device (0), no
 * segments, no settings.  Errors name the file and the key path / CSV line
 * and field. */
MS_API ms_status ms_snapshot_load(const char *path, ms_snapshot **out, ms_diag *d);
/* The same from memory; name is used in messages and for the .pickle rule. */
MS_API ms_status ms_snapshot_load_buffer(const void *data, size_t len, const char *name,
                                  ms_snapshot **out, ms_diag *d);
MS_API ms_status ms_snapshot_free(ms_snapshot *s);

/* Number of device traces (devices with an empty trace included). */
MS_API int ms_snapshot_devices(const ms_snapshot *s);
MS_API ms_status ms_snapshot_trace(const ms_snapshot *s, int device, const ms_trace_event **events,
                            size_t *n);
/* Whether the snapshot has its final segments (a pickle).  A CSV trace has
 * none: its replay starts from an empty allocator instead of rebuilding the
 * starting state from the end. */
MS_API bool ms_snapshot_has_segments(const ms_snapshot *s);
/* Segments of every device, in snapshot order (*n of them). */
MS_API const ms_snapshot_segment *ms_snapshot_segments(const ms_snapshot *s, size_t *n);
MS_API const ms_snapshot_settings *ms_snapshot_settings_get(const ms_snapshot *s);
/* The allocator configuration the snapshot ran with: flavour defaults, then
 * the recorded PYTORCH_CUDA_ALLOC_CONF, then the explicit settings fields. */
MS_API ms_status ms_snapshot_alloc_config(const ms_snapshot *s, ms_alloc_flavour flavour,
                                   ms_alloc_config *cfg, ms_diag *d);

/* ------------------------------------------------------------------------
 * Replay through the allocator model, and comparison with the recording.
 * ------------------------------------------------------------------------ */

typedef struct ms_replay_options {
    /* NULL: the recorded settings.  Else a PYTORCH_CUDA_ALLOC_CONF string
     * applied on top of the flavour defaults (a what-if replay). */
    const char *alloc_conf;
    ms_alloc_flavour flavour;   /* default MS_ALLOC_CUDA */
    int device;                 /* -1 (default): every device with events */
    const char *csv_path;       /* memory time series (docs/replay.md), written as
                                   the replay goes; NULL: none */
    bool csv_append;            /* add rows, without a header, to csv_path */
    const char *label;          /* its "config" column; NULL: alloc_conf or "recorded" */
    /* Device memory the allocator may use.  0 (default): derived from the
     * device's oom event (reserved then + device_free); else taken from
     * another device's oom, or 1 TiB, and reported as unknown. */
    uint64_t capacity;
} ms_replay_options;

MS_API ms_status ms_replay_options_default(ms_replay_options *o);

/* Recorded vs predicted counts of one segment action. */
typedef struct ms_replay_count {
    uint64_t recorded;
    uint64_t predicted;
    uint64_t matched;   /* same action, same size, same event index */
} ms_replay_count;

typedef struct ms_replay_divergence {
    bool found;
    size_t index;               /* trace event index */
    ms_trace_action action;     /* the recorded action there (or predicted) */
    uint64_t recorded_size;     /* 0: nothing recorded at that index */
    uint64_t predicted_size;    /* 0: nothing predicted */
    char what[200];             /* one line for humans */
} ms_replay_divergence;

typedef struct ms_replay_device_result {
    int device;
    size_t n_events;
    size_t n_replayed;           /* alloc/free/oom events driven through the model */
    /* Indexed by action - MS_TA_SEGMENT_ALLOC: alloc, free, map, unmap. */
    ms_replay_count seg[4];
    double agreement_pct;        /* matched / (recorded + unmatched predicted) */
    uint64_t allocs;             /* recorded allocs the model served */
    uint64_t allocs_same_addr;   /* ... at the recorded address */
    uint64_t start_reserved;     /* reconstructed state when the trace began */
    uint64_t start_allocated;
    uint64_t peak_reserved_recorded;
    uint64_t peak_reserved_predicted;
    uint64_t peak_allocated_predicted;
    /* reserved - allocated where the predicted reserved peaked. */
    uint64_t fragmentation_at_peak;
    uint64_t capacity;           /* what the replay backend offered */
    bool capacity_known;
    size_t release_points;       /* empty_cache points taken from the trace */
    bool oom_recorded;
    size_t oom_recorded_index;   /* first recorded oom */
    bool oom_predicted;
    size_t oom_predicted_index;  /* first request the model could not serve */
    bool oom_same_event;
    ms_replay_divergence first;            /* first segment / oom divergence */
    ms_replay_divergence first_placement;  /* first alloc at another address */
} ms_replay_device_result;

typedef struct ms_replay_result {
    size_t n_devices;
    ms_replay_device_result *dev; /* owned; ms_replay_result_free */
} ms_replay_result;

/* Replay.  A trace that cannot be replayed (a free of an address never
 * allocated, a start state that contradicts the trace) is MS_EMISMATCH with
 * the device and event index in d.  Divergences of the model from the
 * recording are results, not errors. */
MS_API ms_status ms_replay_run(const ms_snapshot *s, const ms_replay_options *opt, ms_replay_result *out,
                        ms_diag *d);
MS_API ms_status ms_replay_result_free(ms_replay_result *r);

#ifdef __cplusplus
}
#endif
#endif
