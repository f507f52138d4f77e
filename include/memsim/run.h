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
    const char *backend;       /* "mock" (default) */
    bool record;               /* keep the run record for CSV reports */
    /* Where to print the scenario's recompute and swap settings as
     * MindFormers logs them, once the programs are built; NULL: nowhere. */
    FILE *settings_out;
} ms_run_options;

typedef struct ms_run ms_run;

MS_API ms_status ms_run_execute(const ms_scenario *sc, const ms_run_options *opt, ms_run **out,
                         ms_diag *d);
MS_API ms_status ms_run_free(ms_run *r);
/* One summary per pipeline stage (n == pipeline_model_parallel_size). */
MS_API const ms_run_summary *ms_run_summaries(const ms_run *r, size_t *n);
MS_API const ms_run_summary *ms_run_summary_get(const ms_run *r); /* stage 0 */
/* NULL when the run kept no record (report.detail = "none"). */
MS_API const ms_run_record *ms_run_record_get(const ms_run *r);
/* The step program of every stage, indexed by device. */
MS_API const ms_program_view *ms_run_program_views(const ms_run *r, size_t *n);

#ifdef __cplusplus
}
#endif
#endif
