/* memsim: the device backend interface.
 *
 * It mirrors the device runtimes (Ascend ACL, CUDA) so both a real runtime and
 * the mock NPU implement it naturally.  A backend is a table of function
 * pointers plus an opaque instance, one per device (one host thread driving
 * one device); devices open together as a group (below).  Backends register
 * by name: "mock", "npu", "cuda".
 *
 * Clocks: now() is the host clock of the thread driving this device (virtual
 * in the mock, real on hardware).  Async calls (memcpy_async, launch,
 * event_record, stream_wait_event) enqueue device work and return; each costs
 * the device's launch overhead of host time, and blocks only when the
 * stream's launch queue is full.  Blocking calls (synchronize) advance the host
 * clock to the device time of completion.  An event is complete only once
 * device time has reached it: the host may run far ahead of the device.
 *
 * Out of memory is MS_ENOMEM, never an abort. */
#ifndef MEMSIM_BACKEND_H
#define MEMSIM_BACKEND_H

#include <stdbool.h>
#include <stdint.h>

#include "memsim/device.h"
#include "memsim/status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct ms_stream ms_stream; /* defined by each backend */
typedef struct ms_event ms_event;   /* defined by each backend */

typedef enum ms_kernel_class {
    MS_KC_MATMUL = 0,
    MS_KC_ATTENTION,
    MS_KC_ELEMENTWISE,
    MS_KC_NORM,
    MS_KC_COMM,
    MS_KC_COUNT
} ms_kernel_class;

typedef enum ms_comm_kind {
    MS_COMM_NONE = 0,
    MS_COMM_ALLREDUCE,
    MS_COMM_ALLGATHER,
    MS_COMM_REDUCE_SCATTER,
    MS_COMM_ALLTOALL,
    MS_COMM_BROADCAST,
    MS_COMM_SEND,
    MS_COMM_RECV,
    MS_COMM_COUNT
} ms_comm_kind;

typedef enum ms_link_kind { MS_LINK_INTRA_NODE = 0, MS_LINK_INTER_NODE } ms_link_kind;

/* An abstract kernel: what the cost model needs, nothing executable. */
typedef struct ms_kernel {
    const char *name;     /* e.g. "matmul", "flash_attention_fwd" */
    ms_kernel_class cls;
    ms_dtype dtype;
    double flops;         /* floating-point operations */
    double bytes;         /* HBM bytes read + written */
    int64_t shape[4];     /* informational (m, n, k, batch for a matmul) */
    /* Collectives and p2p (cls == MS_KC_COMM); on a matmul, the tensor-
     * parallel collective it overlaps chunk by chunk (Megatron's
     * --tp-comm-overlap, Transformer Engine's userbuffers), or NONE. */
    ms_comm_kind comm;
    int group_size;       /* ranks in the collective */
    ms_link_kind link;
    double comm_bytes;    /* the full (gathered / reduced) buffer, as nccl-tests count it */
    int peer;             /* p2p: the other device's index */
    int tag;              /* p2p: matches a SEND with its RECV */
    /* Inter-node collectives: ranks of the group on each node (0 or 1: one).
     * NCCL/HCCL run one channel per NIC, so a group with k ranks a node
     * crosses between nodes on k NICs at once. */
    int ranks_per_node;
} ms_kernel;

typedef enum ms_copy_kind { MS_COPY_H2D = 0, MS_COPY_D2H, MS_COPY_D2D } ms_copy_kind;

/* One finished piece of device work, reported to a tracer with device times.
 * tag is the caller's (the executor passes its op or tensor id). */
typedef struct ms_work_record {
    uint64_t tag;
    bool is_copy;
    ms_copy_kind copy_kind;   /* when is_copy */
    const char *name;         /* kernel name, or "memcpy" */
    uint64_t stream_id;
    int64_t start_ns;
    int64_t end_ns;
    uint64_t bytes;
} ms_work_record;

typedef void (*ms_work_tracer)(void *user, const ms_work_record *rec);

/* ---- a simulation's state as bytes (fast-forward) ---------------------------
 * Everything that decides how a simulated device goes on from a quiet moment
 * (between steps), written with every time relative to the simulation's
 * clock: two moments whose bytes are equal evolve alike, one shifted in time
 * from the other.  lib/run compares the moments that start consecutive steps
 * and, when equal, skips the repeat exactly (ms_group_advance).  Writers
 * append; the first failure to grow is kept in st and ends the writing.
 * A moment may also be written over the last one, each byte compared with
 * the one it replaces (ms_state_sig_rewrite): one buffer instead of two. */
typedef struct ms_state_sig {
    uint8_t *bytes;
    size_t n, cap;
    ms_status st;
    /* Rewriting: the last moment's length, whether it was whole, and
     * whether a byte written since differs from the one it replaced. */
    size_t old_n;
    bool rewriting, old_whole, differs;
    bool checking; /* compared, not kept (ms_state_sig_check) */
} ms_state_sig;

MS_API ms_status ms_state_sig_put(ms_state_sig *s, const void *p, size_t n);
MS_API ms_status ms_state_sig_u64(ms_state_sig *s, uint64_t v);
/* Empty it for the next moment, keeping the room. */
MS_API ms_status ms_state_sig_reset(ms_state_sig *s);
/* Empty it for the next moment, written over this one and compared with it
 * as it goes (ms_state_sig_same_as_before). */
MS_API ms_status ms_state_sig_rewrite(ms_state_sig *s);
MS_API ms_status ms_state_sig_free(ms_state_sig *s);
MS_API bool ms_state_sig_equal(const ms_state_sig *a, const ms_state_sig *b);
/* As ms_state_sig_rewrite, for a moment nothing will be compared with
 * after: it is compared, not kept (the last moment stays the one the next
 * rewrite or check compares with), and the writing ends at the first byte
 * that differs (MS_EMISMATCH, kept in st), where the rest would only be
 * written to be thrown away. */
MS_API ms_status ms_state_sig_check(ms_state_sig *s);
/* After ms_state_sig_rewrite (or _check) and a whole writing: the moment
 * written is the one it replaced, byte for byte (false if either writing
 * failed or a check ended it). */
MS_API bool ms_state_sig_same_as_before(const ms_state_sig *s);

typedef struct ms_backend_ops {
    const char *name;
    ms_status (*destroy)(void *inst);
    /* Memory. Addresses are device (or pinned host) virtual addresses. */
    ms_status (*mem_get_info)(void *inst, uint64_t *free_bytes, uint64_t *total_bytes);
    ms_status (*malloc_device)(void *inst, uint64_t bytes, uint64_t *addr);
    ms_status (*free_device)(void *inst, uint64_t addr);
    ms_status (*malloc_host)(void *inst, uint64_t bytes, uint64_t *addr);
    ms_status (*free_host)(void *inst, uint64_t addr);
    /* Virtual memory for expandable segments (cuMemAddressReserve / cuMemMap):
     * reserving costs no capacity; mapping does, page by page. */
    ms_status (*va_reserve)(void *inst, uint64_t bytes, uint64_t *addr);
    ms_status (*va_release)(void *inst, uint64_t addr);
    ms_status (*mem_map)(void *inst, uint64_t addr, uint64_t bytes);
    ms_status (*mem_unmap)(void *inst, uint64_t addr, uint64_t bytes);
    /* Streams. Lower priority number = higher priority, as in CUDA. */
    ms_status (*stream_create)(void *inst, int priority, ms_stream **out);
    ms_status (*stream_destroy)(void *inst, ms_stream *s);
    ms_status (*stream_synchronize)(void *inst, ms_stream *s);
    /* A small stable number per stream (creation order), for orderings that
     * must be deterministic across runs. */
    ms_status (*stream_id)(void *inst, const ms_stream *s, uint64_t *id);
    /* Events. */
    ms_status (*event_create)(void *inst, ms_event **out);
    ms_status (*event_destroy)(void *inst, ms_event *e);
    ms_status (*event_record)(void *inst, ms_event *e, ms_stream *s);
    ms_status (*event_query)(void *inst, ms_event *e, bool *complete);
    ms_status (*event_synchronize)(void *inst, ms_event *e);
    ms_status (*event_elapsed_ns)(void *inst, ms_event *start, ms_event *end, int64_t *ns);
    ms_status (*stream_wait_event)(void *inst, ms_stream *s, ms_event *e);
    /* Work. */
    ms_status (*memcpy_async)(void *inst, uint64_t dst, uint64_t src, uint64_t bytes,
                              ms_copy_kind kind, ms_stream *s, uint64_t tag);
    ms_status (*launch)(void *inst, const ms_kernel *k, ms_stream *s, uint64_t tag);
    ms_status (*device_synchronize)(void *inst);
    /* Host clock in nanoseconds. */
    ms_status (*now)(void *inst, int64_t *ns);
    /* Report each finished kernel and copy (NULL fn: stop).  The mock reports
     * as device time passes; a real backend reports when it can time the work
     * (events, at the latest at the next synchronize). */
    ms_status (*set_tracer)(void *inst, ms_work_tracer fn, void *user);
    /* The backend's own account of its last failure (the runtime's message,
     * the mock's data fault), "" when it has none.  May be NULL. */
    const char *(*last_error)(void *inst);
    /* Simulators only (NULL elsewhere): what a later wait on e depends on
     * (whether it was recorded, whether that completed), for the executor's
     * part of a state (ms_state_sig).  MS_EAGAIN: its work is still in flight. */
    ms_status (*event_state)(void *inst, const ms_event *e, ms_state_sig *sig);
    /* The dtype a matmul of k's dtype and shape (m, n, k) runs in on this
     * device: its own on the mock, which models every dtype; on a real one
     * what its GEMM library runs (an FP8 GEMM needs Hopper or Ada and cuBLASLt;
     * elsewhere it runs as fp16, backend_npu/proxy.c).  May be NULL: a
     * backend that cannot say (ms_backend_matmul_dtype answers
     * MS_EUNSUPPORTED). */
    ms_status (*matmul_dtype)(void *inst, const ms_kernel *k, ms_dtype *runs_as);
} ms_backend_ops;

typedef struct ms_backend {
    const ms_backend_ops *ops;
    void *inst;
    int device; /* device index within the run */
    /* Copies move real bytes and pinned host addresses (malloc_host) are
     * host pointers the caller may read and write: true on a real runtime
     * and on the mock opened functional; what a data check (--verify)
     * needs. */
    bool carries_data;
} ms_backend;

/* Destroy the instance and free b.  Not for a group's devices: the group
 * closes those. */
MS_API ms_status ms_backend_close(ms_backend *b);
/* The dtype a matmul kernel k (cls MS_KC_MATMUL) runs in on b (the
 * backend's matmul_dtype): what calibrate asks before it times a dtype, so
 * that an FP8 GEMM run as fp16 is never fitted as FP8.  MS_EUNSUPPORTED
 * where the backend cannot say. */
MS_API ms_status ms_backend_matmul_dtype(const ms_backend *b, const ms_kernel *k,
                                         ms_dtype *runs_as);

/* ---- device groups ----------------------------------------------------------
 * A run drives several devices at once (the stages of a pipeline), each from
 * its own host thread, as a training job does.  A group opens them together
 * on one backend and runs one body per device's host thread until every body
 * has returned.  How the threads interleave is the backend's business: the
 * mock runs them as coroutines on one virtual clock (always the host whose
 * clock is smallest, so a run is deterministic), a real backend as the
 * hardware lets them.  Code above backend.h never knows which. */

typedef struct ms_group_config {
    const ms_device_spec *spec; /* required: the mock's model of every device; copied */
    int n_devices;              /* >= 1 */
    /* Index of the group's device 0 among the run's devices: p2p peers are
     * run indices, and a one-stage group standing in for stage k must not
     * find itself as its own peer. */
    int first_device;
    int ordinal;                /* real backends: the physical device of device 0 (cuda:N) */
    uint64_t seed;              /* seed for any modeled jitter */
    /* The mock keeps real bytes in host memory (its functional mode, for a
     * data check); real backends always carry data. */
    bool functional;
} ms_group_config;

/* One device's host thread: the body returns when that device's work is
 * issued (and, if it synchronizes, done). */
typedef ms_status (*ms_group_body)(void *user, int device);

typedef struct ms_group_ops {
    const char *name;
    /* body(user, i) for every device, interleaved as the backend requires;
     * returns the first error by device index, or MS_OK. */
    ms_status (*run)(void *inst, ms_group_body body, void *user);
    /* From inside a body: every call of another device that waits, or comes
     * to wait, for work this device will now never issue returns
     * MS_ECANCELED (a stage that ran out of memory stops issuing). */
    ms_status (*cancel)(void *inst);
    ms_status (*destroy)(void *inst); /* the devices and the group itself */
    /* Simulators only (NULL elsewhere): between two runs, the state of every
     * device and host thread of the group (ms_state_sig); MS_EAGAIN when work
     * or an engine event is still pending.  *now_ns: the clock the times
     * in it are relative to. */
    ms_status (*state_write)(void *inst, ms_state_sig *sig, int64_t *now_ns);
    /* Move every clock and every time the group holds by delta_ns, as if
     * the group had repeated what it last ran, which left it in this same
     * state shifted by delta_ns. */
    ms_status (*advance)(void *inst, int64_t delta_ns);
} ms_group_ops;

typedef struct ms_device_group {
    const ms_group_ops *ops;
    void *inst;
    int n_devices;
    ms_backend **devices;       /* owned by the instance */
} ms_device_group;

/* How a backend opens a group (one per registry entry). */
typedef ms_status ms_group_open_fn(const ms_group_config *cfg, ms_device_group **out, ms_diag *d);

/* Open a group on the backend registered under name: "mock" always, "cuda"
 * and "npu" where configure built them.  An unknown or unbuilt name is an
 * error that lists the backends this build has. */
MS_API ms_status ms_group_open(const char *backend, const ms_group_config *cfg, ms_device_group **out,
                        ms_diag *d);
MS_API ms_status ms_group_close(ms_device_group *g);
/* Device i's handle (NULL when out of range); valid until the group closes. */
MS_API ms_backend *ms_group_device(const ms_device_group *g, int i);
MS_API ms_status ms_group_run(ms_device_group *g, ms_group_body body, void *user);
MS_API ms_status ms_group_cancel(ms_device_group *g);
/* The group's state (see ms_state_sig) and its clock; MS_EUNSUPPORTED on a
 * real device, MS_EAGAIN while anything is in flight. */
MS_API ms_status ms_group_state_write(ms_device_group *g, ms_state_sig *sig, int64_t *now_ns);
MS_API ms_status ms_group_advance(ms_device_group *g, int64_t delta_ns);
/* The backends this build has, comma-separated ("mock, cuda"). */
MS_API const char *ms_backend_names(void);

#ifdef __cplusplus
}
#endif
#endif
