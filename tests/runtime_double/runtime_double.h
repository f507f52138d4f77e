/* What the test doubles of device runtimes share (tests/acl_double/,
 * tests/cuda_double/; tests only): device memory as host memory with a
 * capacity per device, each stream a thread of its own that runs its tasks
 * in order (copies move real bytes, after a delay if one is set; fills
 * zero a GEMM's output; event records stamp the host clock; waits block
 * the stream), a random pause before each task if asked for, and the
 * counts of what is live, so that a test can check that the code under
 * test released everything.
 *
 * A double keeps one rd_runtime in its state struct and passes it to every
 * call; what is specific to its runtime's API (handles, status codes,
 * messages, the rules it refuses calls for) stays in the double.  The
 * controls (rd_set_jitter, rd_set_copy_delay, rd_jitter_from_env) take the
 * runtime's lock; everything else wants it held, and what waits lets it go
 * while it waits. */
#ifndef MEMSIM_TEST_RUNTIME_DOUBLE_H
#define MEMSIM_TEST_RUNTIME_DOUBLE_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define RD_MAX_DEVICES 16
#define RD_HOST (-1)       /* a block's device: pinned host memory */
#define RD_ANY_DEVICE (-2) /* in a look-up: any device's, not the host's */

/* Copies by direction, numbered as aclrtMemcpyKind and cudaMemcpyKind are. */
typedef enum rd_copy_kind { RD_H2H, RD_H2D, RD_D2H, RD_D2D, RD_COPY_KINDS } rd_copy_kind;

typedef struct rd_block {
    char *p;
    size_t size;
    int device; /* RD_HOST: pinned host memory */
    struct rd_block *next;
} rd_block;

typedef struct rd_event {
    int device;
    uint64_t issued, done; /* records issued and completed */
    int64_t done_ns;       /* the host clock when the last record ran */
    unsigned pending;      /* queued records and waits that name it */
    bool destroyed;        /* freed by the last of them */
    struct rd_event *next;
} rd_event;

typedef struct rd_task rd_task;

typedef struct rd_stream {
    struct rd_runtime *rt;
    int device;
    unsigned seed; /* the stream's own jitter sequence */
    pthread_t thread;
    rd_task *head, *tail;
    bool busy, quit;
    struct rd_stream *next;
} rd_stream;

/* What a double reports, under the names both doubles' stats use. */
typedef struct rd_counts {
    uint64_t device_bytes, device_allocs, host_bytes, host_allocs; /* live */
    uint64_t streams, events;                                      /* live */
    uint64_t host_allocs_made;                /* since rd_configure: pinned allocations */
    uint64_t bytes_h2d, bytes_d2h, bytes_d2d; /* since rd_configure: copied */
} rd_counts;

/* Copy c's counts into a double's stats s, whose fields have their names. */
#define RD_COUNTS_INTO(s, c)                                                                       \
    ((s).device_bytes = (c).device_bytes, (s).device_allocs = (c).device_allocs,                   \
     (s).host_bytes = (c).host_bytes, (s).host_allocs = (c).host_allocs,                           \
     (s).streams = (c).streams, (s).events = (c).events,                                           \
     (s).host_allocs_made = (c).host_allocs_made, (s).bytes_h2d = (c).bytes_h2d,                   \
     (s).bytes_d2h = (c).bytes_d2h, (s).bytes_d2d = (c).bytes_d2d)

typedef struct rd_runtime {
    pthread_mutex_t mu;
    pthread_cond_t cv; /* a task queued or finished, a stream told to quit */
    int n_devices;
    uint64_t hbm, used[RD_MAX_DEVICES];
    rd_block *blocks;
    rd_stream *streams;
    rd_event *events;
    rd_counts count;
    unsigned jitter_us, jitter_seed, streams_made; /* rd_set_jitter */
    unsigned copy_delay_us[RD_COPY_KINDS];         /* rd_set_copy_delay */
} rd_runtime;

/* One device of 1 GiB until the double is configured. */
#define RD_RUNTIME_INIT                                                                            \
    {                                                                                              \
        .mu = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER, .n_devices = 1,           \
        .hbm = 1ull << 30                                                                          \
    }

/* ---- controls (they take the lock) ---------------------------------------- */

/* Every stream pauses a random 0 .. max_us microseconds before each of its
 * tasks (0: none), each stream with its own sequence from seed. */
void rd_set_jitter(rd_runtime *rt, unsigned max_us, unsigned seed);
/* Every copy of one kind waits us microseconds on its stream before it
 * moves its bytes (0: none). */
void rd_set_copy_delay(rd_runtime *rt, rd_copy_kind kind, unsigned us);
/* rd_set_jitter from the environment variable var, MAX_US[:SEED], if set. */
void rd_jitter_from_env(rd_runtime *rt, const char *var);

/* ---- devices and memory (lock held) --------------------------------------- */

/* n_devices devices (clamped to 0 .. RD_MAX_DEVICES) of hbm_bytes each; the
 * counts since the last configure and the copy delays start again. */
void rd_configure(rd_runtime *rt, int n_devices, uint64_t hbm_bytes);
bool rd_device_ok(const rd_runtime *rt, int device);
/* The device's bytes not in a live block. */
uint64_t rd_free_bytes(const rd_runtime *rt, int device);
/* A block of size bytes (not 0), page-aligned and zeroed, on device
 * (RD_HOST: pinned host memory), counted; false if the device has not the
 * room or the host not the memory. */
bool rd_alloc(rd_runtime *rt, void **out, size_t size, int device);
/* The live block of device (RD_HOST: pinned host) that holds all of
 * [p, p + n), or NULL. */
rd_block *rd_block_holding(const rd_runtime *rt, const void *p, size_t n, int device);
/* The link to the live block of device (RD_HOST, or RD_ANY_DEVICE) that
 * starts at p, or NULL. */
rd_block **rd_block_at(rd_runtime *rt, const void *p, int device);
/* The link to a live block of device, or NULL. */
rd_block **rd_block_of(rd_runtime *rt, int device);
/* Unlink, uncount and free the block at *link; its size. */
size_t rd_free(rd_runtime *rt, rd_block **link);

/* ---- streams (lock held) --------------------------------------------------- */

/* Start s (zeroed by the caller) on device: its thread and its jitter
 * sequence; false if no thread could be made. */
bool rd_stream_start(rd_runtime *rt, rd_stream *s, int device);
/* Let s finish its work, then stop its thread; the caller frees s. */
void rd_stream_stop(rd_runtime *rt, rd_stream *s);
bool rd_stream_live(const rd_runtime *rt, const void *s);
/* A live stream of device, or NULL. */
rd_stream *rd_stream_of(const rd_runtime *rt, int device);
/* Wait until s has run everything queued on it. */
void rd_stream_sync(rd_runtime *rt, rd_stream *s);
/* Wait until the streams of device (every device: RD_ANY_DEVICE) have. */
void rd_device_sync(rd_runtime *rt, int device);

/* Whether a copy of kind's sides lie in live blocks of their kinds: the
 * host side pinned host memory, the device side device's. */
bool rd_copy_sides_live(const rd_runtime *rt, const void *dst, const void *src, size_t bytes,
                        rd_copy_kind kind, int device);
/* Queue on s, each false if out of memory: a copy with kind's delay,
 * counted; a fill with zeros (a GEMM's output); a record of ev (the event
 * completes when the stream reaches it); a wait for ev's last record. */
bool rd_enqueue_copy(rd_runtime *rt, rd_stream *s, void *dst, const void *src, size_t bytes,
                     rd_copy_kind kind);
bool rd_enqueue_fill(rd_runtime *rt, rd_stream *s, void *dst, size_t bytes);
bool rd_enqueue_record(rd_runtime *rt, rd_stream *s, rd_event *ev);
bool rd_enqueue_wait(rd_runtime *rt, rd_stream *s, rd_event *ev);

/* ---- events (lock held) ---------------------------------------------------- */

/* A live event of device; NULL: out of memory. */
rd_event *rd_event_create(rd_runtime *rt, int device);
/* No longer live; freed now, or by the last queued task that names it. */
void rd_event_destroy(rd_runtime *rt, rd_event *ev);
bool rd_event_live(const rd_runtime *rt, const void *ev);
/* A live event of device, or NULL. */
rd_event *rd_event_of(const rd_runtime *rt, int device);
/* Whether its last record has run (never recorded: complete). */
bool rd_event_complete(const rd_event *ev);
/* Wait until the records issued so far have run. */
void rd_event_sync(rd_runtime *rt, rd_event *ev);
/* Milliseconds from a's last record to b's; false if either has not run. */
bool rd_elapsed_ms(const rd_event *a, const rd_event *b, float *ms);

#endif
