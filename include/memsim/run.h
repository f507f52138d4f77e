/* memsim: a whole run.
 *
 * A scenario and a policy become training steps on a group of devices (one
 * per pipeline stage, opened through backend.h's registry: the mock by
 * default), each stage with its own caching allocator and executor.  Before
 * every step the policy plans from each stage's last profile; an OOM ends
 * the run unless on_oom changes the decisions.  The result is one summary
 * per stage and, when asked, the run record the reports are written from. */
#ifndef MEMSIM_RUN_H
#define MEMSIM_RUN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#include "memsim/exec.h"
#include "memsim/report.h"
#include "memsim/scenario.h"
#include "memsim/status.h"
#include "memsim/workload.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Where a run is, for a progress display (ms_run_options.progress): the
 * library prints nothing itself. */
typedef enum ms_run_phase {
    MS_RUN_SETUP = 0,  /* step programs built, devices opened (seconds for 70B) */
    MS_RUN_PLANNING,   /* the policy plans step `step` (ctx:simulate searches) */
    MS_RUN_SIMULATING, /* step `step` runs on the devices */
    MS_RUN_DONE,       /* no step left; `step` is the steps run */
    MS_RUN_REPEATING   /* step `step` repeats the last exactly: replayed (fast-forward) */
} ms_run_phase;

typedef struct ms_run_progress {
    ms_run_phase phase;
    int step;     /* from 0 */
    int steps;    /* the scenario's steps */
    int repeated; /* steps replayed so far instead of simulated (fast-forward) */
} ms_run_progress;

typedef void (*ms_run_progress_fn)(void *user, const ms_run_progress *p);

/* A whole run: scenario + policy -> summary (+ record for reports). */
typedef struct ms_run_options {
    const char *policy;        /* path or shipped name; NULL: the scenario's */
    const char *policy_dir;    /* shipped policies directory; NULL: found */
    /* "mock" (default), "cuda", "cuda:N", "npu", "npu:N" (N: the physical
     * device, 0 by default). */
    const char *backend;
    bool record;               /* keep the run record for CSV reports */
    /* Where to print the scenario's recompute and swap settings as
     * MindFormers logs them, once the programs are built; NULL: nowhere. */
    FILE *settings_out;
    /* Run pipeline stage `stage` alone, on one device standing in for it
     * (its p2p peers are not run: a send costs its transfer, a receive
     * arrives when the device model says).  A real device runs one stage,
     * so a pipeline on cuda or npu needs it. */
    bool single_stage;
    int stage;
    /* The data check (ms_exec_config.verify); the mock runs functional. */
    bool verify;
    ms_exec_fault fault; /* tests only: a deliberately broken schedule */
    /* The --set overrides the scenario was loaded with: a real device that
     * cannot hold the scenario reloads it with a smaller model.num_layers
     * and these. */
    const char *const *overrides;
    size_t n_overrides;
    bool quiet_policy; /* the policy's ctx:log goes nowhere */
    /* Called on the run's thread as it sets up, as each step is planned and
     * simulated, and once at the end; NULL: not called. */
    ms_run_progress_fn progress;
    void *progress_user;
    /* Simulate every step, even one that repeats the last exactly (steady
     * state; see lib/run/fast_forward.c): the reports are the same bytes,
     * which is what this is for checking. */
    bool no_fast_forward;
} ms_run_options;

typedef struct ms_run ms_run;

/* The detail a run keeps against report.max_bytes.  The size is estimated
 * from the record as it grows (ms_report_detail_bytes), so nothing partial
 * is ever written: when every step's detail would exceed the limit the run
 * keeps the last step's alone (from the step the estimate crossed it on,
 * which also bounds its memory), and when even that step's would, the
 * reports are to be the summary alone.  The record itself stays (OOM
 * reports and --snapshot read it); `kept` says what to write. */
typedef struct ms_run_detail {
    ms_report_detail requested; /* report.detail */
    ms_report_detail kept;      /* what fits; == requested unless limited */
    bool limited;               /* the limit made kept less than requested */
    uint64_t max_bytes;         /* report.max_bytes; 0: no limit */
    uint64_t requested_bytes;   /* estimate of the detail requested */
    /* Estimate of the last step's detail (with the rows before the first
     * step), where the record keeps the last step alone; else 0. */
    uint64_t last_bytes;
    int last_step; /* the last step simulated; -1: none */
} ms_run_detail;

/* What a run adds to its summaries: the data check, a scaled model, and on a
 * real device the runtime's own account of its memory. */
typedef struct ms_run_notes {
    /* verify: checks that passed in the last step, over every stage run. */
    uint64_t verified_tensors;
    uint64_t verified_bytes;
    /* The device could not hold the scenario's layers: the run used
     * `layers` of `scenario_layers` (model.num_layers). */
    bool scaled;
    int layers, scenario_layers;
    /* Real devices: what mem-get-info said before the run's allocations
     * and after its last step, against what the caching allocator reserved
     * (a cross-check of the allocator's peak reserved: its segments are
     * cached, so at the end it still holds its peak unless it released
     * segments to retry an allocation). */
    bool device_memory_checked;
    uint64_t device_total, device_free_before, device_free_after;
    uint64_t reserved_after; /* the allocator's reserved bytes after the last step */
    /* The detail kept (with a record: ms_run_options.record). */
    ms_run_detail detail;
    /* Steps that repeated the one before exactly and were not simulated
     * again (fast-forward). */
    int fast_forwarded_steps;
} ms_run_notes;

MS_API ms_status ms_run_execute(const ms_scenario *sc, const ms_run_options *opt, ms_run **out,
                         ms_diag *d);
MS_API ms_status ms_run_free(ms_run *r);
/* One summary per pipeline stage (n == pipeline_model_parallel_size). */
MS_API const ms_run_summary *ms_run_summaries(const ms_run *r, size_t *n);
MS_API const ms_run_summary *ms_run_summary_get(const ms_run *r); /* stage 0 */
/* NULL when the run kept no record (report.detail = "none").  Write the
 * detail files from it only when ms_run_notes_get(r)->detail.kept is not
 * MS_DETAIL_NONE (report.max_bytes). */
MS_API const ms_run_record *ms_run_record_get(const ms_run *r);
MS_API const ms_run_notes *ms_run_notes_get(const ms_run *r);
/* The step program of every stage, indexed by device. */
MS_API const ms_program_view *ms_run_program_views(const ms_run *r, size_t *n);

#ifdef __cplusplus
}
#endif
#endif
