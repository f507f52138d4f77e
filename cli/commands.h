/* The memsim subcommands, one file each, and what they share (private to
 * cli/).  argv[0] is the subcommand's own word.  Each returns the process
 * exit status (memsim.1, EXIT STATUS). */
#ifndef MEMSIM_CLI_COMMANDS_H
#define MEMSIM_CLI_COMMANDS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "memsim/report.h"
#include "memsim/run.h"
#include "memsim/scenario.h"

/* 0 done; 1 an error (message on stderr); 2 a usage error; 3 the run ran
 * out of memory (memsim run), or no configuration fitted (compare, sweep). */
enum { CLI_OK = 0, CLI_ERROR = 1, CLI_USAGE = 2, CLI_OOM = 3 };

#define CLI_MAX_SETS 64
#define CLI_MAX_POLICIES 16

int cli_run(int argc, char **argv);     /* cli/run.c */
int cli_replay(int argc, char **argv);  /* cli/replay.c */
int cli_compare(int argc, char **argv); /* cli/compare.c */
int cli_sweep(int argc, char **argv);   /* cli/sweep.c */
int cli_list(int argc, char **argv);    /* cli/list.c */
int cli_calibrate(int argc, char **argv); /* cli/calibrate.c */
int cli_validate(int argc, char **argv);  /* cli/validate.c */
int cli_profile_torch(int argc, char **argv); /* cli/profile_torch.c */
int cli_reproduce(int argc, char **argv);     /* cli/reproduce.c */
int cli_import(int argc, char **argv);        /* cli/import/import.c */

/* memsim run given a script or config (cli/import/import.c): what memsim does not
 * model of it, on stderr; nothing for a scenario file. */
void cli_import_note(const char *path, const char *const *sets, size_t n_sets);

/* ---- cli/suggest.c: what ships, and "did you mean" -------------------- */

#define CLI_MAX_NAMES 256

/* The *.lua files of a shipped data directory ("policies_lua", "scenarios",
 * "scenarios/devices"), without the suffix, sorted. */
typedef struct cli_names {
    char *name[CLI_MAX_NAMES];
    size_t n;
    char dir[4096];
} cli_names;

ms_status cli_names_list(const char *sub, cli_names *out);
void cli_names_free(cli_names *n);
/* The candidate nearest word (edit distance at most a third of its length,
 * or the same last dotted part), or NULL. */
const char *cli_closest(const char *word, const char *const *cands, size_t n);
/* Add "did you mean" to a message about an unknown --set key, or name the
 * shipped policies when a policy given by name is not one of them. */
void cli_explain(ms_diag *d, const char *policy);

/* ---- cli/execute.c: one scenario under one policy --------------------- */

typedef struct cli_job {
    const char *scenario;    /* path */
    const char *policy;      /* name or path; NULL: the scenario's own */
    const char *const *sets; /* --set KEY=VALUE overrides */
    size_t n_sets;
    const char *backend; /* NULL: mock */
    bool record;         /* keep the run record for the reports */
    FILE *settings_out;  /* MindFormers' settings lines; NULL: none */
    bool single_stage;   /* --stage K: run pipeline stage `stage` alone */
    int stage;
    bool verify; /* --verify: check swapped and recomputed bytes */
    bool no_fast_forward; /* --no-fast-forward: simulate every step */
    /* Told of each step as it runs (cli_progress_update); NULL: nothing. */
    ms_run_progress_fn progress;
    void *progress_user;
    bool quiet_policy; /* the policy's ctx:log goes nowhere */
} cli_job;

typedef struct cli_outcome {
    const ms_scenario *sc;
    ms_run *run;
    ms_run_summary *rows; /* one per stage, overrides filled in */
    size_t n_rows;
} cli_outcome;

/* Load the scenario and run it.  On failure d says why, prefixed with
 * "scenario: " or "run: " and with "did you mean" where it helps, and out
 * holds nothing to free. */
ms_status cli_execute(const cli_job *job, cli_outcome *out, ms_diag *d);
void cli_outcome_free(cli_outcome *o);
bool cli_outcome_oom(const cli_outcome *o);
/* The overrides as summary.csv records them: "k=v;k=v" in the order given. */
void cli_join_sets(const char *const *sets, size_t n, char *buf, size_t len);
/* results/<scenario>-<tag>, plus the overrides when there are any, so runs
 * of one scenario with different --set never share a folder. */
void cli_default_dir(const char *scenario, const char *tag, const char *const *sets, size_t n,
                     char *buf, size_t len);
/* Split "a,b,c" in place; -1 when there are more than max items or an item
 * is empty. */
int cli_split_list(char *s, const char **items, int max);
/* A positive count ("-j 4"); 0 when s is not one. */
int cli_parse_count(const char *s);
/* Online CPUs, at least 1. */
int cli_cpus(void);

/* One CSV field after a comma (none before the first), as every memsim CSV
 * writes it (docs/csv-schemas.md): a plain token bare, anything else
 * through libcsv's quoting (cli/sweep.c). */
void cli_csv_field(FILE *f, bool *first, const char *s);
/* Close f, written as tmp, and rename it to path; on any failure remove tmp. */
ms_status cli_file_commit(FILE *f, const char *tmp, const char *path, ms_diag *d);

/* ---- cli/signals.c: no staging directory left by a signal ------------- */

/* In a worker process: die of those signals without cleaning up (the
 * parent owns the directory). */
void cli_cleanup_forget(void);
/* ms_report_dir_open with the directory armed for cleanup (SIGINT, SIGTERM
 * and SIGHUP remove it before the process dies of the signal), and
 * ms_report_dir_commit (keep) or _abort with it disarmed, each with those
 * signals held until it is done, so none lands between making (or moving)
 * the directory and arming (or disarming) its cleanup. */
ms_status cli_output_open(const char *final_dir, ms_report_dir **rd, ms_diag *d);
ms_status cli_output_close(ms_report_dir *rd, bool keep, ms_diag *d);
/* A single file written as tmp beside its final path: while armed, those
 * signals remove tmp (NULL disarms).  cli_tmp_file_finish renames tmp to
 * path (keep) or removes it, then disarms, with the signals held; it
 * returns rename's result, errno set on failure, tmp removed then too. */
void cli_tmp_file_arm(const char *tmp);
int cli_tmp_file_finish(const char *tmp, const char *path, bool keep);

/* ---- cli/configs.c: many runs, in worker processes -------------------- */

/* One configuration of a sweep or a what-if: a policy and overrides. */
typedef struct cli_config {
    const char *policy;
    const char *sets[CLI_MAX_SETS];
    size_t n_sets;
} cli_config;

/* What a configuration gave, over all its pipeline stages: a plain struct,
 * so that worker processes and MPI ranks pass it as bytes. */
typedef struct cli_result {
    int32_t status; /* MS_OK: the figures hold; else error says why */
    char error[MS_DIAG_MAX];
    char policy[128]; /* the policy's own name */
    int32_t stages;
    uint8_t oom;
    int32_t oom_stage, oom_step;
    uint64_t capacity;
    uint64_t peak_allocated, peak_reserved, peak_activation; /* the largest stage's */
    uint64_t fragmentation; /* reserved - allocated at the allocated peak */
    double step_time_ms;
    double tokens_per_s;    /* global batch x sequence per step time */
    double mfu;             /* the lowest stage's */
    double bubble_fraction; /* the largest stage's */
    uint64_t swapped_bytes; /* per step, summed over stages */
    uint64_t recomputed_ops;
    int64_t num_ooms, num_alloc_retries;
} cli_result;

/* Run cfgs[i] of the scenario into out[i] with `jobs` worker processes (1:
 * in this process); each run keeps no record.  `only` (NULL: all) picks
 * the configurations to run here (MPI ranks split a sweep).  A progress bar
 * goes to stderr when progress is set.  Configurations that fail to load or
 * run are results with their error, not failures of the call. */
ms_status cli_run_configs(const char *scenario, const char *backend, const cli_config *cfgs,
                          size_t n, const bool *only, int jobs, bool progress, cli_result *out,
                          ms_diag *d);
/* The index of the best configuration that fits (most tokens per second;
 * then the least peak reserved; then the first), or -1. */
long cli_best_fit(const cli_result *r, size_t n);

/* ---- cli/execute.c: progress on stderr --------------------------------- */

/* "\r[####......] text", redrawn in place on a terminal. */
void cli_progress_bar(FILE *out, size_t done, size_t total, const char *text);

/* A run's progress: nothing for its first second (MEMSIM_PROGRESS_AFTER_MS
 * milliseconds), then a bar on a terminal, else a line a state ("memsim
 * run: LABEL: step 2 of 3, simulating (4.2 s)").  cli_progress_update is an
 * ms_run_progress_fn (cli_job.progress, with the cli_progress as its user).
 * Start gives NULL when it cannot start, and NULL is a progress that shows
 * nothing. */
typedef struct cli_progress cli_progress;

cli_progress *cli_progress_start(const char *label);
void cli_progress_update(void *user, const ms_run_progress *state);
void cli_progress_stop(cli_progress *p);

/* ---- cli/oom_report.c ------------------------------------------------- */

/* Why a run ran out of memory: the op and tensor that failed, the largest
 * live tensors and the fragmentation at that instant, from the run's record;
 * with `advice`, which shipped policy or allocator setting would have
 * fitted, found by simulating each (with `jobs` workers). */
ms_status cli_oom_report(FILE *out, const cli_job *job, const cli_outcome *o, bool advice, int jobs,
                         ms_diag *d);

#endif
