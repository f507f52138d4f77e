/* memsim: the mock NPU, backend.h implemented on the discrete-event simulator.
 * Several mock devices may share one engine (one virtual device timeline).
 *
 * Behaviour beyond backend.h:
 * - Host clock: every call first runs the engine up to this host's clock.
 *   launch, memcpy_async, event_record and stream_wait_event cost
 *   spec->launch_overhead_ns of host time; their work is visible to the
 *   device at the end of the call.  launch/memcpy_async block (the host clock
 *   moves to when a slot frees) only while the stream already holds
 *   spec->launch_queue_depth kernels/copies not yet started (event records
 *   and waits take no slot).  Memory calls, queries and now() cost no host
 *   time.
 * - Blocking calls (stream/event/device_synchronize, a full launch queue) run
 *   the engine until done and move the host clock to that device time;
 *   MS_EDEADLOCK if the engine runs dry first (e.g. a RECV whose SEND is never
 *   issued), nothing changed.
 * - Several devices on one engine: see ms_simhost in sim.h.  A blocking call
 *   that would have to run the engine past another device's host clock
 *   returns MS_EAGAIN (nothing issued, host parked): drive the other device
 *   and retry the call.  Call mock_set_host_idle() for a device whose
 *   host has nothing to issue for now (e.g. its step is done), or the others
 *   will keep getting MS_EAGAIN.  For exact timings, always drive the device
 *   whose host clock (now()) is smallest.
 * - event_query is true once device time has reached the event, never
 *   earlier; a never-recorded event is complete (as cudaEventQuery).
 *   event_elapsed_ns: MS_EINVAL if an event was never recorded, MS_EAGAIN
 *   while either is incomplete.  Events and streams belong to one device:
 *   passing another device's is MS_EINVAL.
 * - stream_destroy returns at once; queued work still runs (as
 *   cudaStreamDestroy).  Stream ids count from 0 per device in creation order.
 * - Memory: device segments (sizes rounded up to 512 B) and mapped ranges
 *   count against spec->hbm_bytes; over capacity is MS_ENOMEM with nothing
 *   changed.  Addresses are deterministic: first fit, lowest address, reused
 *   after free, 512-byte aligned; device d's segments and reservations live at
 *   0x7f0000000000 + d * 2^44, its pinned host memory 2^43 above.  mem_map /
 *   mem_unmap need a range inside one reservation, not already mapped /
 *   fully mapped (else MS_EINVAL); va_release of a reservation with mapped
 *   pages is MS_EINVAL.  Pinned host memory is bounded by
 *   spec->host_pinned_bytes (0: unlimited).  Copies do not check addresses.
 * - The tracer is called from inside the engine (possibly during another
 *   device's call), in completion order; it must not call the backend.
 * - No jitter is modeled: the seed is kept for future use. */
#ifndef MEMSIM_BACKEND_MOCK_H
#define MEMSIM_BACKEND_MOCK_H

#include "memsim/backend.h"
#include "sim/sim.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Create a mock device on engine; *out is freed by ms_backend_close().
 * device must be unique on the engine (0 <= device < 32768); the spec is
 * validated (ms_device_spec_validate) and copied.  Close every mock on an
 * engine before sim_destroy(engine). */
ms_status mock_create(ms_sim *engine, const ms_device_spec *spec, int device, uint64_t seed,
                      ms_backend **out);
/* The "mock" entry of the backend registry (backend.h's device groups): the
 * group owns one engine, a mock per device and, with several devices, the
 * cooperative host threads (cohost.h) that interleave their hosts. */
ms_group_open_fn mock_group_open;
/* b prices its kernels from with's table of remembered prices from now on.
 * Both must be mocks on one engine made from one spec (a group's devices):
 * a price is a function of the spec's cost model and the kernel alone, so
 * sharing changes no result.  with must outlive b's last launch. */
ms_status mock_share_prices(ms_backend *b, ms_backend *with);
/* This device's host thread has nothing to issue until its next call: it
 * stops bounding how far other devices' hosts may run the shared engine.
 * Its next call resumes it at max(its clock, the engine's clock). */
ms_status mock_set_host_idle(ms_backend *b);
/* This device's host will issue again: it bounds the others from now, at
 * max(its clock, the engine's), not from its first call (sim_host_resume). */
ms_status mock_set_host_active(ms_backend *b);
/* This device's host clock, read without entering the backend: unlike now(),
 * it neither catches the engine up nor wakes a parked host, so a scheduler
 * of several hosts can look at every clock without disturbing them.
 * *parked (may be NULL): the host's last call returned MS_EAGAIN and what it
 * waits for has not happened since, so retrying it now is pointless. */
ms_status mock_host_clock(const ms_backend *b, int64_t *ns, bool *parked);
/* sim_host_clock_moves of its host (0 for a backend that is not a mock). */
uint64_t mock_host_clock_moves(const ms_backend *b);
/* The index a cooperative scheduler knows b's host by, and the indices of
 * the hosts of b's engine whose clock or parked state changed since the
 * last call (at most max into hosts; returns how many changed). */
ms_status mock_set_host_tag(ms_backend *b, int tag);
size_t mock_host_changes(const ms_backend *b, int *hosts, size_t max);
/* The functional mode: from now on every device segment, reservation and
 * pinned host buffer holds real bytes in host memory, copies move them (when
 * the simulator finishes each copy, in device time), and malloc_host returns
 * real host addresses; sets b->carries_data.  Kernels touch no data.  Call it
 * before anything is allocated or any stream is created (else MS_EINVAL).
 * A copy that finds its source or destination unallocated when it runs is
 * a sticky fault: every later call returns MS_EHAZARD and
 * mock_data_fault_message() says what happened. */
ms_status mock_enable_data(ms_backend *b);
/* The host memory the functional mode may hold (default: half of what the
 * host has available when the mode starts); beyond it a copy or pinned
 * allocation is a sticky fault that says so.  For tests. */
ms_status mock_data_set_host_budget(ms_backend *b, uint64_t bytes);
const char *mock_data_fault_message(const ms_backend *b); /* "" when none */
/* The simulated device behind a mock (HBM peak, cost model, engine).
 * MS_EINVAL if b is not a mock. */
ms_status mock_simdev(const ms_backend *b, ms_simdev **out);
/* The mock's part of a quiet moment's state (state.c): its address spaces;
 * the engine's part is the group's (sim_state_write).  MS_EUNSUPPORTED in
 * the functional mode. */
ms_status mock_state_write(const ms_backend *b, ms_state_sig *sig);

#ifdef __cplusplus
}
#endif
#endif
