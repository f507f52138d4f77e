/* lib/calibrate: the validation tables and their rows (private). */
#ifndef MEMSIM_CAL_VALIDATION_H
#define MEMSIM_CAL_VALIDATION_H

#include <stdbool.h>
#include <stddef.h>

#include "cal_internal.h"
#include "memsim/calibrate.h"
#include "memsim/scenario.h"

/* How a source counts TFLOP/s. */
typedef enum val_formula {
    VAL_FLOPS_NONE = 0,
    VAL_FLOPS_MODEL,        /* Megatron-LM's num_floating_point_operations: no recompute */
    VAL_FLOPS_MEGATRON_SC21 /* Narayanan et al. 2021, Eq. 3: the recompute forward counted */
} val_formula;

typedef struct val_row {
    int table; /* index into ms_validation.tables */
    int row;   /* data row, 1-based (the header is row 0) */
    char id[128];
    char source[512];
    bool train;
    char scenario[4096];
    char policy[256];
    char **sets;        /* "field=value" of the scenario-field columns */
    char **set_columns; /* their column names */
    size_t n_sets;
    double meas_time_s, meas_tflops, meas_mem_gib; /* 0: not measured */
    val_formula formula;
    const ms_scenario *sc;
    /* Results of the last run. */
    bool ran;
    double pred_time_s, pred_tflops, pred_mem_gib;
    char error[MS_DIAG_MAX];
} val_row;

/* One fitted parameter: a device (or every device: "") and a scalar. */
typedef struct val_fit_param {
    char device[64];
    const cal_param *p;
    double value, std_error;
} val_fit_param;

struct ms_validation {
    char **tables;
    size_t n_tables;
    val_row *rows;
    size_t n_rows;
    val_fit_param *fit;
    size_t n_fit;
    double fit_rms;
    int fit_evaluations;
};

/* validate_table.c: read one table's rows into v (appending). */
ms_status val_table_load(struct ms_validation *v, const char *path, ms_diag *d);
void val_rows_free(struct ms_validation *v);

/* validate.c: run one row with the current fit applied; the row keeps its
 * error text when it cannot be predicted (an OOM, a policy error). */
ms_status val_row_run(const struct ms_validation *v, val_row *r, ms_diag *d);
/* Run rows on MEMSIM_JOBS threads (default: the online CPUs). */
ms_status val_rows_run(const struct ms_validation *v, val_row **rows, size_t n, FILE *log);
int val_jobs(void);
/* The row's primary figure: step time when measured, else TFLOP/s. */
bool val_row_error(const val_row *r, double *err);

#endif
