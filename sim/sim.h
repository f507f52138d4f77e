/* memsim: the discrete-event engine and the device models built on it.
 *
 * The engine owns one int64 nanosecond virtual clock and an event queue
 * ordered by (time, sequence), so simultaneous events run in the order they
 * were scheduled and every run is deterministic.  Device models (streams,
 * events, the compute engine, copy engines on a full-duplex host link, HBM
 * capacity, the cost model) live beside it in sim/.  Nothing here knows about
 * tensors or policies.
 *
 * Layers, bottom up:
 *   ms_sim        the engine: clock + event queue (engine.c).
 *   ms_cost_model op and copy times from a device spec (cost_model.c).
 *   ms_simdev     one simulated device on an engine: streams (ms_simstream),
 *                 events (ms_simevent), one compute engine, one comm link,
 *                 a D2H and an H2D copy engine, HBM capacity (device.c ...).
 *   ms_simhost    the virtual clock of one host thread driving a device, and
 *                 the conservative synchronisation of several such threads
 *                 on one engine (host.c).
 * backend_mock/ composes these into backend.h. */
#ifndef MEMSIM_SIM_H
#define MEMSIM_SIM_H

#include <stdbool.h>
#include <stdint.h>

#include "memsim/backend.h" /* ms_kernel, ms_copy_kind, ms_work_tracer only */
#include "memsim/device.h"
#include "memsim/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ======================================================================
 * The engine
 * ====================================================================== */

typedef struct ms_sim ms_sim;
typedef void (*ms_sim_fn)(ms_sim *sim, void *arg);

ms_status sim_create(ms_sim **out);
/* Frees the engine and its pending events.  MS_EINVAL (nothing freed) while
 * simulated devices or hosts are still attached: destroy them first. */
ms_status sim_destroy(ms_sim *sim);
ms_status sim_now(const ms_sim *sim, int64_t *now_ns);
/* Run fn(sim, arg) at virtual time at (>= now; earlier is MS_EINVAL).  No
 * allocation per event: the queue is one growable array (binary heap). */
ms_status sim_schedule(ms_sim *sim, int64_t at_ns, ms_sim_fn fn, void *arg);
/* Run every event with time <= until_ns; the clock ends at until_ns (a no-op
 * when until_ns <= now: the clock never goes back). */
ms_status sim_run_until(ms_sim *sim, int64_t until_ns);
/* Run the next event; *ran is false if the queue was empty. */
ms_status sim_step(ms_sim *sim, bool *ran);
/* Run until the queue is empty. */
ms_status sim_run(ms_sim *sim);
/* Time of the next pending event; *any is false (and *t_ns untouched) when
 * the queue is empty. */
ms_status sim_next_time(const ms_sim *sim, int64_t *t_ns, bool *any);
/* Remove every pending event with this fn and arg; *n_cancelled (may be NULL)
 * gets how many.  O(pending events): meant for teardown, not steady state. */
ms_status sim_cancel(ms_sim *sim, ms_sim_fn fn, void *arg, uint64_t *n_cancelled);
/* Counters: events run since creation, events pending now (either may be NULL). */
ms_status sim_stats(const ms_sim *sim, uint64_t *events_run, uint64_t *events_pending);

/* ======================================================================
 * The cost model
 * ====================================================================== */

typedef struct ms_cost_model ms_cost_model;

/* The curves of a device spec, as the cost model interpolates them. */
typedef enum ms_cost_curve {
    MS_CURVE_MATMUL_EFF = 0, /* FLOPs of one kernel -> fraction of peak */
    MS_CURVE_ATTENTION_EFF,  /* FLOPs of one kernel -> fraction of peak */
    MS_CURVE_HBM_EFF,        /* bytes of one kernel -> fraction of hbm_bw */
    MS_CURVE_H2D_BW,         /* bytes of one copy -> bytes per second */
    MS_CURVE_D2H_BW,
    MS_CURVE_INTRA_EFF, /* bytes of one collective -> fraction of intra_node_bw */
    MS_CURVE_INTER_EFF, /* bytes of one collective -> fraction of inter_node_bw */
    MS_CURVE_COUNT
} ms_cost_curve;

/* Validates spec (ms_device_spec_validate), copies it and builds the GSL
 * interpolants once.  Curves: Steffen (monotone, never overshoots) for n >= 3,
 * linear for n == 2, constant for n == 1, 1.0 for an empty efficiency curve;
 * x outside [x0, xn] is clamped to the end points. */
ms_status sim_cost_model_create(const ms_device_spec *spec, ms_cost_model **out);
ms_status sim_cost_model_destroy(ms_cost_model *cm);
/* The spec the model was built from (its own copy). */
ms_status sim_cost_model_spec(const ms_cost_model *cm, const ms_device_spec **spec);
/* y of one curve at x (clamped).  Pure: safe to call concurrently. */
ms_status sim_cost_curve_eval(const ms_cost_model *cm, ms_cost_curve which, double x, double *y);

/* Device time of a kernel running alone, rounded to the nearest ns.
 *   compute classes: max(flops / (peak[dtype] x eff),
 *                        bytes / (hbm_bw x hbm_eff(bytes))) + kernel_overhead_ns
 *   with eff the GEMM model by shape (MATMUL; matmul_eff by FLOPs without
 *   one), the fused attention model by shape (ATTENTION: flops x
 *   executed_fraction / (peak x eff); attention_eff by FLOPs without one),
 *   1.0 otherwise (device.h);
 *   MS_KC_COMM: the alpha-beta formula of k->comm on k->link (see
 *   cost_model.c; B = k->comm_bytes, the full buffer; the bandwidth is the
 *   link's x its efficiency at B x the kind's relative efficiency x the mesh
 *   share; group_size 1 costs 0).
 * MS_EUNSUPPORTED when flops > 0 and the device has no peak for k->dtype;
 * MS_EINVAL for a negative size or a malformed comm kernel. */
ms_status sim_cost_kernel_ns(const ms_cost_model *cm, const ms_kernel *k, int64_t *ns);
/* The two parts of a collective or p2p transfer (sim_cost_kernel_ns is
 * their sum): *latency_ns, the alpha terms (integer ns, not shared), and
 * *transfer_ns, exclusive link time that concurrent transfers on the same
 * link share. */
ms_status sim_cost_comm_parts(const ms_cost_model *cm, const ms_kernel *k, int64_t *latency_ns,
                              double *transfer_ns);
/* Device time of one copy running alone:
 *   H2D/D2H: host_link_latency_ns + bytes / bw(bytes), bw from the direction's curve;
 *   D2D: 2 x bytes / (hbm_bw x hbm_eff(2 x bytes)) + kernel_overhead_ns (a copy
 *        kernel on the compute engine reads and writes every byte). */
ms_status sim_cost_copy_ns(const ms_cost_model *cm, ms_copy_kind kind, uint64_t bytes, int64_t *ns);
/* The two parts of an H2D/D2H copy: *latency_ns (integer ns, not shared) and
 * *transfer_ns (exclusive link time, fractional; shared by concurrent copies). */
ms_status sim_cost_copy_parts(const ms_cost_model *cm, ms_copy_kind kind, uint64_t bytes,
                              int64_t *latency_ns, double *transfer_ns);

/* ======================================================================
 * A simulated device
 * ====================================================================== */

typedef struct ms_simdev ms_simdev;
typedef struct ms_simstream ms_simstream;
typedef struct ms_simevent ms_simevent;

/* Attach device number index (unique per engine, 0 <= index < 32768) to sim.
 * The spec is copied.  Several devices may share one engine; p2p SEND/RECV
 * kernels between attached devices rendezvous (see sim_stream_launch). */
ms_status sim_dev_create(ms_sim *sim, const ms_device_spec *spec, int index, ms_simdev **out);
/* Detach and free: pending work is dropped (its engine events cancelled, no
 * tracer calls); streams and events still open are freed with it. */
ms_status sim_dev_destroy(ms_simdev *d);
ms_status sim_dev_engine(const ms_simdev *d, ms_sim **sim);
ms_status sim_dev_cost_model(const ms_simdev *d, const ms_cost_model **cm);
/* Called once per finished kernel and copy, in completion order, from inside
 * the engine (the callee must not call back into this device).  The record's
 * name is the kernel's name pointer (or "memcpy"); bytes is k->bytes for
 * compute kernels, k->comm_bytes for comm kernels, the size for copies. */
ms_status sim_dev_set_tracer(ms_simdev *d, ms_work_tracer fn, void *user);
/* True when no stream of the device (destroyed ones included) holds work. */
ms_status sim_dev_idle(const ms_simdev *d, bool *idle);
/* MS_OK, or the sticky error of a failure inside an engine callback (out of
 * memory growing the event queue): the simulation of d is then incomplete. */
ms_status sim_dev_fault(const ms_simdev *d);

/* HBM capacity: bytes charged against spec->hbm_bytes.  A charge that would
 * exceed capacity is MS_ENOMEM and changes nothing. */
ms_status sim_dev_hbm_charge(ms_simdev *d, uint64_t bytes);
ms_status sim_dev_hbm_uncharge(ms_simdev *d, uint64_t bytes); /* > used: MS_EINVAL */
ms_status sim_dev_hbm_usage(const ms_simdev *d, uint64_t *used, uint64_t *peak, uint64_t *capacity);

/* Streams: FIFO queues of device work.  Items on one stream run strictly in
 * order; an item starts at max(issue time, previous item's end, waited
 * events, its resource being free).  Kernels of the compute classes and D2D
 * copies serialise on the compute engine, MS_KC_COMM kernels on the comm
 * link; when several streams have a ready item for one of them, the lower
 * priority number wins, then the earlier-ready item, then the earlier issued.
 * H2D and D2H copies run on their direction's copy engine: concurrent copies
 * share its bandwidth equally (processor sharing), after a per-copy latency. */
ms_status sim_stream_create(ms_simdev *d, int priority, ms_simstream **out);
/* As cudaStreamDestroy: returns at once; the stream is freed by the device
 * once its queued work has run. */
ms_status sim_stream_destroy(ms_simstream *s);

typedef struct ms_simstream_info {
    uint64_t id;          /* creation order on its device, from 0 */
    int priority;
    uint32_t queued;      /* items not completed (event records and waits included) */
    uint32_t not_started; /* kernels and copies not yet started (launch-queue slots) */
    int64_t last_done_ns; /* completion time of its latest completed item (0: none) */
} ms_simstream_info;
ms_status sim_stream_info_get(const ms_simstream *s, ms_simstream_info *out);

/* Enqueue work visible to the device at issue_ns.  An issue time before the
 * engine's clock starts the item no earlier than the clock (nothing runs in
 * the past).  The kernel is copied, except its name, which must stay valid
 * until the tracer has seen the kernel finish (program-owned or static).
 * Comm kernels: SEND runs on the comm link for its alpha-beta time; a RECV
 * whose peer device is attached to the same engine does not occupy the link:
 * it waits for the matching SEND (same peer pair and tag, FIFO) to finish and
 * completes then (an eager send: the sender never waits for the receiver, so
 * pipeline stages that order their sends and receives differently cannot
 * deadlock each other).  A RECV from an unattached peer costs its alpha-beta
 * time on the link, like a collective. */
ms_status sim_stream_launch(ms_simstream *s, const ms_kernel *k, int64_t issue_ns, uint64_t tag);
/* The same with the device time already known (priced by the caller with
 * sim_cost_kernel_ns, or measured on hardware for a replay): dur_ns >= 0. */
ms_status sim_stream_launch_timed(ms_simstream *s, const ms_kernel *k, int64_t dur_ns,
                                  int64_t issue_ns, uint64_t tag);
ms_status sim_stream_copy(ms_simstream *s, ms_copy_kind kind, uint64_t bytes, int64_t issue_ns,
                          uint64_t tag);
/* Event record: e completes when the stream's work issued before it is done.
 * Re-recording replaces the capture, as in CUDA; a wait issued earlier keeps
 * waiting for the capture it saw. */
ms_status sim_stream_record(ms_simstream *s, ms_simevent *e, int64_t issue_ns);
/* The stream's later work waits for e's latest capture; a no-op when e was
 * never recorded (as in CUDA).  e must belong to the same device. */
ms_status sim_stream_wait_event(ms_simstream *s, ms_simevent *e, int64_t issue_ns);

/* Events (CUDA/ACL events).  Destroying an event with a pending capture is
 * fine: the capture lives until its stream reaches it. */
ms_status sim_event_create(ms_simdev *d, ms_simevent **out);
ms_status sim_event_destroy(ms_simevent *e);
/* *recorded: ever recorded; *complete: its latest capture has run (true when
 * never recorded, as cudaEventQuery); *time_ns: device time of completion
 * (valid when recorded and complete).  Any output may be NULL. */
ms_status sim_event_status(const ms_simevent *e, bool *recorded, bool *complete, int64_t *time_ns);

/* ======================================================================
 * Host threads
 * ====================================================================== */

/* The virtual clock of the host thread that drives one device.  Host time
 * runs ahead of device time; blocking waits run the engine.
 *
 * With several hosts on one engine the engine is advanced conservatively: a
 * host may run it only up to the clock of every other active host (they may
 * still issue work at their own time, which must not land in the engine's
 * past).  A wait that cannot finish within that bound parks its host and
 * returns MS_EAGAIN: the caller should drive another host and retry.  A parked
 * host does not hold the engine back; it becomes active again (at the device
 * time its condition became true) as soon as its condition holds, or at its
 * next call.  An idle host (sim_host_set_idle) does not hold the engine
 * back either; its next call resumes it at max(its clock, engine clock).  With
 * one host these rules reduce to: waits run the engine until done, or
 * MS_EDEADLOCK if it runs dry first. */
typedef struct ms_simhost ms_simhost;
/* A wait condition: true once what the host waits for has happened.  Called
 * after engine steps; must be cheap and must not touch the engine. */
typedef bool (*ms_simhost_cond)(const void *ctx);

ms_status sim_host_create(ms_sim *sim, ms_simhost **out); /* clock 0, active */
ms_status sim_host_destroy(ms_simhost *h);
ms_status sim_host_now(const ms_simhost *h, int64_t *ns);
/* *parked: h waits for a condition that has not held since it parked (it is
 * woken, and this turns false, after the engine step that makes it hold). */
ms_status sim_host_parked(const ms_simhost *h, bool *parked);
/* Host work of ns (>= 0) nanoseconds, e.g. the runtime's launch overhead. */
ms_status sim_host_advance(ms_simhost *h, int64_t ns);
/* Resume h if parked or idle, then run the engine up to min(h's clock, the
 * other active hosts' clocks).  Every host-side call starts with this. */
ms_status sim_host_catch_up(ms_simhost *h);
/* Every backend call's way in: d's fault if it has one, else h caught up
 * (sim_host_catch_up) and d's fault after that.  One call, where the mock
 * made three on every entry (the 70B step of bench/README.md: -1.1% of its
 * instructions). */
ms_status sim_host_enter(ms_simhost *h, const ms_simdev *d);
/* Run the engine until cond(ctx) holds; h's clock becomes max(clock, device
 * time at which it held).  MS_OK, MS_EAGAIN (h parked, see above; nothing
 * else changed), or MS_EDEADLOCK (the engine ran dry and no other host can
 * issue work: the condition can never hold). */
ms_status sim_host_wait(ms_simhost *h, ms_simhost_cond cond, const void *ctx);
/* h has nothing to issue until its next call: stop holding the engine back. */
ms_status sim_host_set_idle(ms_simhost *h);
/* An idle h will issue work again (the hosts start a new run together): it
 * holds the engine back from now, at max(its clock, the engine's), before
 * its first call.  Without this, the first host of a run to wait could run
 * the engine past the others' start while they still counted as idle, and
 * they would begin their work that much late. */
ms_status sim_host_resume(ms_simhost *h);
/* h's wait conditions read the state of device d only (its streams' queues
 * and its events' captures), so while d has not changed since a condition
 * was found false, the engine need not ask again.  Optional: an unwatched
 * host's condition is asked after every engine step. */
ms_status sim_host_watch(ms_simhost *h, ms_simdev *d);
/* How many times any host of h's engine has had its clock move forward: a
 * turn of one host that leaves it unchanged moved no clock at all. */
uint64_t sim_host_clock_moves(const ms_simhost *h);
/* A cooperative scheduler's index for h (0 by default). */
ms_status sim_host_set_tag(ms_simhost *h, int tag);
/* The tags of the hosts whose clock or parked state changed since the last
 * call, at most max of them into tags; returns how many changed (more than
 * max: look at every host).  Every host is listed at most once. */
size_t sim_hosts_drain_changes(ms_sim *sim, int *tags, size_t max);

/* Fast-forward (sim_state.c): the engine's state at a quiet moment, every
 * time relative to its clock (MS_EAGAIN when work, a parked host or an
 * event that decides something is pending), and the shift that makes it the
 * state one repeat later. */
ms_status sim_state_write(ms_sim *sim, ms_state_sig *sig);
ms_status sim_state_shift(ms_sim *sim, int64_t delta_ns);

#ifdef __cplusplus
}
#endif
#endif
