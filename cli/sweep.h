/* The grid of configurations that memsim sweep and memsim compare run, and
 * the MPI split (private to cli/). */
#ifndef MEMSIM_CLI_SWEEP_H
#define MEMSIM_CLI_SWEEP_H

#include "commands.h"

/* One --vary KEY=V1,V2,... */
typedef struct cli_axis {
    const char *key;
    const char *value[64];
    int n;
} cli_axis;

/* Policies (slowest) x axes (the first slowest): configuration i of n. */
typedef struct cli_grid {
    const char *policy[CLI_MAX_POLICIES]; /* NULL: the scenario's own */
    int n_policies;
    cli_axis axis[16];
    int n_axes;
    cli_config *cfg;
    size_t n;
    char (*set_buf)[512]; /* the "KEY=value" of each axis */
} cli_grid;

ms_status cli_grid_build(cli_grid *g, const char *const *sets, size_t n_sets, ms_diag *d);
void cli_grid_free(cli_grid *g);
/* The CSV (sweep.csv, compare.csv): written to PATH.tmp and renamed. */
ms_status cli_grid_write_csv(const char *path, const cli_grid *g, const cli_result *res,
                             ms_diag *d);
/* The table on the terminal. */
void cli_grid_print(FILE *out, const cli_grid *g, const cli_result *res);

typedef struct cli_grid_job cli_grid_job;
struct cli_grid_job {
    const char *command; /* "sweep", "compare": for messages */
    const char *scenario;
    const char *backend;
    const cli_grid *grid;
    int jobs;
    bool quiet;
    const char *out; /* the output folder */
    const char *csv_name;
    /* On rank 0, with every result: write and print; returns the exit status. */
    int (*finish)(const cli_grid_job *job, const cli_result *res);
};

/* The usual finish: the CSV into job->out (staged: the folder appears
 * whole), the table on stdout; 0 if some configuration fits, else 3. */
int cli_grid_finish(const cli_grid_job *job, const cli_result *res);

/* Run the grid (split across MPI ranks when launched by mpirun) and finish
 * on rank 0; every rank returns rank 0's exit status. */
int cli_grid_run(const cli_grid_job *job);

/* ---- cli/sweep_mpi.c -------------------------------------------------- */

typedef struct cli_mpi {
    int rank, size; /* 0 and 1 without MPI */
    bool active;    /* MPI_Init was called */
} cli_mpi;

/* MPI when this build has it and mpirun launched the process; else one
 * rank of one. */
ms_status cli_mpi_init(cli_mpi *m, ms_diag *d);
/* Rank 0 receives every rank's results (rank r ran configurations
 * r, r + size, ...) into res; every rank calls it with its own outcome
 * (local), and all fail if one did. */
ms_status cli_mpi_gather(const cli_mpi *m, ms_status local, cli_result *res, size_t n, ms_diag *d);
/* Every rank gets rank 0's rc; MPI_Finalize. */
int cli_mpi_finish(cli_mpi *m, int rc);

#endif
