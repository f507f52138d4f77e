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
} ms_run_options;

typedef struct ms_run ms_run;

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
} ms_run_notes;

MS_API ms_status ms_run_execute(const ms_scenario *sc, const ms_run_options *opt, ms_run **out,
                         ms_diag *d);
MS_API ms_status ms_run_free(ms_run *r);
/* One summary per pipeline stage (n == pipeline_model_parallel_size). */
MS_API const ms_run_summary *ms_run_summaries(const ms_run *r, size_t *n);
MS_API const ms_run_summary *ms_run_summary_get(const ms_run *r); /* stage 0 */
/* NULL when the run kept no record (report.detail = "none"). */
MS_API const ms_run_record *ms_run_record_get(const ms_run *r);
MS_API const ms_run_notes *ms_run_notes_get(const ms_run *r);
/* The step program of every stage, indexed by device. */
MS_API const ms_program_view *ms_run_program_views(const ms_run *r, size_t *n);

#ifdef __cplusplus
}
#endif
#endif
