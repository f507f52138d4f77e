/* memsim: the executor and a whole run.
 *
 * The executor issues a step program through a backend: it allocates outputs
 * (in the pool the policy names), launches on the op's stream, frees at last
 * use, and applies decisions: swap-out is a D2H copy on a swap stream after
 * the tensor is ready, its device block returned (record-stream) only when
 * the copy completes; swap-in is an H2D copy started `prefetch` ops before the
 * consumer, which waits on its event; recompute drops a segment's saved
 * tensors after forward and re-issues its ops before the first backward use.
 * A tensor is in one state: on device, in flight, on host, dropped.  Reading a
 * tensor that is not on device, or getting a block that a copy still reads,
 * is MS_EHAZARD, never silent. */
#ifndef MEMSIM_EXEC_H
#define MEMSIM_EXEC_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "memsim/allocator.h"
#include "memsim/backend.h"
#include "memsim/policy.h"
#include "memsim/report.h"
#include "memsim/scenario.h"
#include "memsim/workload.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct ms_exec ms_exec;

/* A deliberately broken schedule, to prove that the data check (verify)
 * and the executor's own checks catch it: for tests only. */
typedef enum ms_exec_fault {
    MS_FAULT_NONE = 0,
    /* A swap-out copy does not wait for the tensor's producer: it may copy
     * the block before the tensor is written. */
    MS_FAULT_SWAP_OUT_UNORDERED,
    /* A recompute allocates the tensors it should re-make but issues none of
     * the segment's ops. */
    MS_FAULT_RECOMPUTE_SKIPPED,
    /* A swap-out frees its block without record_stream on the swap-out
     * stream: the allocator may hand the block out while the copy still
     * reads it, which the executor's hazard check must stop. */
    MS_FAULT_SWAP_OUT_UNRECORDED,
} ms_exec_fault;

typedef struct ms_exec_config {
    const ms_program_view *program;
    ms_backend *backend;
    ms_alloc *alloc;
    ms_policy *policy;        /* may be NULL: default pool, no decisions */
    ms_run_record *record;    /* may be NULL */
    const ms_device_spec *device;
    /* TORCH_NCCL_AVOID_RECORD_STREAMS: collectives hand their buffers back in
     * stream order (the compute stream waits for each collective, as
     * work.wait() does) instead of through record_stream. */
    bool avoid_record_streams;
    int pipeline_size;        /* stages; p2p peers are neighbours on this ring */
    /* Megatron's batch_p2p_sync: the host synchronizes the device after each
     * run of pipeline sends and receives (ms_parallel_config). */
    bool batch_p2p_sync;
    /* Record nothing of the setup (persistent allocations, pool choices):
     * a relaunched job's setup is already in the record once. */
    bool quiet_setup;
    /* The data check (memsim run --verify): every tensor that is swapped out
     * or recomputed is filled with a deterministic pattern when produced and
     * compared when first used after it comes back; a mismatch fails the
     * step (MS_EHAZARD) naming the tensor and the op.  Needs a backend that
     * carries data (MS_EUNSUPPORTED otherwise).  The fills and checks are
     * extra copies: a verified run's times are not the run's. */
    bool verify;
    ms_exec_fault fault; /* tests only */
    /* An allocation that fails inside a step swaps idle tensors out
     * synchronously and retries (SmartSwap's and adaptive memory's OOM
     * interception; ms_policy_rescues_oom) instead of ending the step. */
    bool rescue_oom;
    /* MindSpore's swap: the device block of a swapped-out tensor is released
     * `prefetch` ops after its copy starts (the host waiting for the copy if
     * it has not finished) and is reusable at once, instead of PyTorch's
     * record_stream release when the copy's event is next polled. */
    bool release_after_copy;
} ms_exec_config;

/* Result of one step. */
typedef struct ms_step_result {
    bool oom;
    int32_t oom_op;
    uint32_t oom_tensor;      /* the tensor whose allocation failed */
    uint64_t oom_bytes;       /* its size */
    char oom_message[MS_DIAG_MAX];
    int64_t step_time_ns;
    uint64_t peak_allocated;
    uint64_t peak_reserved;
    uint64_t peak_active;
    uint64_t reserved_minus_allocated_at_peak;
    uint64_t peak_activation_bytes;
    uint64_t swapped_bytes;
    uint32_t recomputed_ops;
    int64_t start_ns;          /* host clock when the step began */
    int64_t end_ns;            /* host clock when the device finished it */
    int64_t compute_busy_ns;   /* device time the compute stream was busy */
    /* Device time the compute stream sat idle waiting for a pipeline
     * receive: in each gap before a kernel, the part until the p2p receive
     * of one of its inputs completed.  The pipeline bubble inside the step. */
    int64_t pipeline_wait_ns;
    uint64_t verified_tensors; /* verify: checks that passed this step */
    uint64_t verified_bytes;
    ms_rescue_stats rescued;   /* in-step OOM rescues (rescue_oom) */
} ms_step_result;

/* Create the executor: streams, and the persistent tensors (weights, grads,
 * optimizer state) allocated once.  An OOM here is reported in *setup_oom
 * (with the message in d), not as a failure of the call. */
MS_API ms_status ms_exec_create(const ms_exec_config *cfg, ms_exec **out, bool *setup_oom, ms_diag *d);
MS_API ms_status ms_exec_destroy(ms_exec *e);
/* Run one step under plan (NULL: no decisions); fills the op profile
 * (n == program n_ops) used by the policy's next plan(). */
MS_API ms_status ms_exec_step(ms_exec *e, int step, const ms_plan *plan, ms_op_profile *profile,
                       ms_step_result *res, ms_diag *d);
/* The peaks of a step that did not finish (cancelled: another pipeline
 * stage ran out of memory): allocator peaks, the gap at the allocated peak
 * and the activation peak reached so far.  Other fields are left alone. */
MS_API ms_status ms_exec_partial_peaks(const ms_exec *e, ms_step_result *res);
/* Between steps: the executor's part of the state (backend.h, ms_state_sig):
 * its allocator, every tensor's runtime state, copies still tracked.  Equal
 * states, equal plans and equal group states make equal steps.
 * MS_EUNSUPPORTED with the data check or on a backend that cannot say. */
MS_API ms_status ms_exec_state_write(const ms_exec *e, ms_state_sig *sig);

#ifdef __cplusplus
}
#endif
#endif
