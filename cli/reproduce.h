/* memsim reproduce (cli/reproduce.c): the seed configurations and their
 * rows (cli/reproduce_rows.c), the tables written as CSV and as the seed
 * section of docs/validation.md (cli/reproduce_section.c).  Private to
 * cli/. */
#ifndef MEMSIM_CLI_REPRODUCE_H
#define MEMSIM_CLI_REPRODUCE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "memsim/status.h"

#define CLI_RP_MAX_RUNS 32
#define CLI_RP_MAX_SETS 2
#define CLI_RP_TABLES 3
#define CLI_RP_COLS 9
#define CLI_RP_ROWS 9

/* What one run gave, over its pipeline stages, as summary.csv has it. */
typedef struct cli_rp_figures {
    double step_ms;         /* the slowest stage's */
    uint64_t peak_reserved; /* the largest stage's */
    uint64_t gap_at_peak;   /* reserved - allocated at the peak, the largest */
    bool oom;               /* any stage ran out of memory */
} cli_rp_figures;

typedef struct cli_rp_run {
    const char *scenario;                  /* shipped name, e.g. "llama2-7b" */
    const char *policy;                    /* shipped name */
    const char *sets[CLI_RP_MAX_SETS + 1]; /* --set overrides, NULL-terminated */
    char path[4096];                       /* found by cli/reproduce.c */
    cli_rp_figures fig;
} cli_rp_run;

typedef struct cli_rp_plan {
    cli_rp_run runs[CLI_RP_MAX_RUNS];
    size_t n_runs;
    bool quick;       /* without the llama2-70B rows */
    char notes[4096]; /* results/reference/notes.md, shipped */
} cli_rp_plan;

/* One results/reference table: cells as the CSV and the section print them. */
typedef struct cli_rp_table {
    const char *file; /* "seed000_adaptive_memory.csv" */
    const char *const *cols;
    int n_cols, n_rows;
    char cell[CLI_RP_ROWS][CLI_RP_COLS][64];
} cli_rp_table;

/* The runs of every seed configuration, in the order they are made. */
void cli_rp_plan_build(cli_rp_plan *p, bool quick);
/* The three tables (seed 000, 002, 001) from the runs' figures. */
void cli_rp_tables_fill(const cli_rp_plan *p, cli_rp_table t[CLI_RP_TABLES]);

/* dir/t->file through libcsv, whole or not at all. */
ms_status cli_rp_table_write_csv(const cli_rp_table *t, const char *dir, ms_diag *d);
/* The seed section: every table as Markdown, then the notes file. */
ms_status cli_rp_section_write(const char *path, const cli_rp_table *t, size_t n, const char *notes,
                               ms_diag *d);
/* Replace doc's marked seed section with the one in section (or append it). */
ms_status cli_rp_section_splice(const char *doc, const char *section, ms_diag *d);

#endif
