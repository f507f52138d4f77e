/* lib/run: the run's structures, shared by run.c and fast_forward.c.
 * Nothing outside lib/run includes this. */
#ifndef MEMSIM_RUN_INTERNAL_H
#define MEMSIM_RUN_INTERNAL_H

#include "memsim/exec.h"
#include "memsim/run.h"

/* How a run's executors check and break schedules (ms_run_options). */
typedef struct ms_exec_checks {
    bool verify;
    ms_exec_fault fault;
} ms_exec_checks;

/* One stage: its program and the device that runs it. */
typedef struct ms_stage {
    ms_program *program;
    ms_program_view view;
    ms_backend *backend; /* the group's device */
    ms_alloc *alloc;
    ms_exec *exec;
    ms_op_profile *prof;
    ms_plan plan, prev_plan, oom_plan;
    ms_plan declared; /* what the scenario's recompute/swap settings decide */
    ms_profile profile;
    ms_step_result res;
    bool setup_oom;
    bool cancelled;                        /* its step was abandoned for another stage's OOM */
    int64_t earlier_ooms, earlier_retries; /* allocator counts of devices relaunched */
    int step;
    ms_diag diag; /* the stage's own, since stages run interleaved */
    /* Fast-forward: the plan of the step its state was taken before, and
     * the allocator counts that step added. */
    ms_plan ff_plan;
    int64_t ff_retries_before, ff_ooms_before;
    int64_t ff_retries, ff_ooms;
} ms_stage;

/* A candidate plan runs one step of one stage on a fresh mock device (a RECV
 * from a stage that is not simulated costs its transfer time), so a policy
 * can search without disturbing the real run, whatever backend that run is
 * on.  The device keeps the stage's own index: with index 0, a later stage's
 * sends and receives to stage 0 would find itself as their peer and wait
 * forever. */
typedef struct ms_sim_ctx {
    const ms_scenario *sc;
    ms_stage *stage;
    int index;
    ms_policy *policy;
} ms_sim_ctx;

/* Fast-forward (fast_forward.c): the state before the last step simulated
 * and what it takes to repeat that step. */
typedef struct run_ff {
    bool enabled;
    /* `sig` holds the state taken before step `from`, which then ran
     * cleanly (no OOM, no rescue, no stage abandoned). */
    bool armed;
    /* The state now is that one shifted by delta_ns: with the same plans,
     * the next step repeats step `from` again. */
    bool repeating;
    int from;
    int64_t before_ns, delta_ns;
    /* The state before step `from`; the next one is written over it,
     * compared as it goes. */
    ms_state_sig sig;
} run_ff;

struct ms_run {
    const ms_scenario *sc;
    int n;           /* stages run */
    int first_stage; /* the pipeline stage of stages[0] */
    ms_exec_checks checks;
    ms_run_notes notes;
    ms_stage *stages;
    ms_program_view *views;
    ms_run_summary *summaries;
    ms_run_record *record;
    ms_policy *policy;
    const char *backend;
    ms_device_group *group;
    const ms_scenario *owned_sc; /* the scenario scaled to fit a real device */
    ms_sim_ctx *simctx;
    double *times_ms;
    int done_steps;
    /* The detail's estimate (ms_run_detail): every step's so far, and the
     * part of it the record holds now. */
    uint64_t all_bytes, counted_bytes;
    int steps_run; /* simulated, whether they completed or ran out of memory */
    ms_run_progress_fn progress;
    void *progress_user;
    run_ff ff;
};

/* run.c */
/* *copy: sc on a device with `bytes` of memory (ctx:simulate's capacity,
 * and run_fit's question whether a stage fits what a real device has free). */
const ms_scenario *run_on_memory(const ms_scenario *sc, uint64_t bytes, ms_scenario *copy);

/* fast_forward.c */
void run_ff_start(ms_run *r, bool enabled);
void run_ff_free(ms_run *r);
/* Before step `step`: whether it repeats the last one exactly (*repeat),
 * having taken the state when it cannot tell yet. */
ms_status run_ff_check(ms_run *r, int step, bool *repeat, ms_diag *d);
/* After a simulated step: whether its state may prove a repeat. */
void run_ff_after_step(ms_run *r, int step);
/* Step `step` as the repeat of the last: clocks, results, record rows. */
ms_status run_ff_repeat(ms_run *r, int step, ms_diag *d);

#endif
