/* memsim reproduce, a folder of its own (prefix rp_): the command
 * (reproduce.c), the seed configurations and their rows (rows.c), the
 * tables written as CSV and as the seed section of docs/validation.md
 * (section.c).  Private to cli/. */
#ifndef MEMSIM_CLI_REPRODUCE_REPRODUCE_H
#define MEMSIM_CLI_REPRODUCE_REPRODUCE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "memsim/status.h"

#define RP_MAX_RUNS 48
#define RP_MAX_SETS 2
#define RP_TABLES 3
#define RP_COLS 12
#define RP_ROWS 9

/* What one run gave, over its pipeline stages, as summary.csv has it. */
typedef struct rp_figures {
    double step_ms;         /* the slowest stage's */
    uint64_t peak_reserved; /* the largest stage's */
    uint64_t gap_at_peak;   /* reserved - allocated at the peak, the largest */
    bool oom;               /* any stage ran out of memory */
} rp_figures;

typedef struct rp_run {
    const char *scenario;              /* shipped name, e.g. "llama2-7b" */
    const char *policy;                /* shipped name */
    const char *sets[RP_MAX_SETS + 1]; /* --set overrides, NULL-terminated */
    char path[4096];                   /* found by cli/reproduce/reproduce.c */
    rp_figures fig;
} rp_run;

typedef struct rp_plan {
    rp_run runs[RP_MAX_RUNS];
    size_t n_runs;
    bool quick;       /* without the llama2-70B rows */
    char notes[4096]; /* results/reference/notes.md, shipped */
} rp_plan;

/* One results/reference table: cells as the CSV and the section print them. */
typedef struct rp_table {
    const char *file; /* "seed000_adaptive_memory.csv" */
    const char *const *cols;
    int n_cols, n_rows;
    char cell[RP_ROWS][RP_COLS][64];
} rp_table;

/* The runs of every seed configuration, in the order they are made. */
void rp_plan_build(rp_plan *p, bool quick);
/* The three tables (seed 000, 002, 001) from the runs' figures. */
void rp_tables_fill(const rp_plan *p, rp_table t[RP_TABLES]);

/* dir/t->file through libcsv, whole or not at all. */
ms_status rp_table_write_csv(const rp_table *t, const char *dir, ms_diag *d);
/* The seed section: every table as Markdown, then the notes file. */
ms_status rp_section_write(const char *path, const rp_table *t, size_t n, const char *notes,
                           ms_diag *d);
/* Replace doc's marked seed section with the one in section (or append it). */
ms_status rp_section_splice(const char *doc, const char *section, ms_diag *d);

#endif
