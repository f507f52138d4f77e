/* memsim: calibrating device files and validating the time model.
 *
 * Calibration measures a device through backend.h (the same calls the
 * executor makes: kernels by class and shape, copies, collectives, events)
 * and fits the device file's parameters to what it measured with GSL:
 * nonlinear least squares for the parametric forms (GEMM and fused
 * attention efficiency by shape, the overlap slowdown), interpolation
 * tables for the curves (HBM efficiency, host-link bandwidth, network
 * efficiency by message size), and the latencies and overheads directly.
 * On the mock it measures the mock's own model and must give it back.
 *
 * Validation runs the rows of public measurement tables (the CSV files in
 * validation/: a configuration and what was measured) and puts predicted and measured
 * side by side; it may first fit named device parameters on the rows marked
 * "train" (docs/validation.md). */
#ifndef MEMSIM_CALIBRATE_H
#define MEMSIM_CALIBRATE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#include "memsim/device.h"
#include "memsim/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Where a device file's values came from (written into its provenance
 * section).  Empty strings are left out. */
typedef struct ms_device_provenance {
    char source[512];  /* "memsim calibrate on cuda:0", "fitted to ..." */
    char date[32];     /* ISO 8601, UTC */
    char device[128];  /* the runtime's device name */
    char driver[128];  /* driver / runtime version */
    char command[512]; /* the command line that produced the file */
} ms_device_provenance;

/* RMS relative error of each fit over its own measurements (a negative
 * value: not fitted, left out of the file). */
typedef struct ms_fit_residuals {
    double gemm, flash_attention, hbm, h2d, d2h, intra_node, inter_node, launch, overlap;
    double copy_with_compute; /* copy time with compute beside it / alone (a ratio) */
    double validation;        /* RMS log error of the train rows of memsim validate */
} ms_fit_residuals;

/* All residuals "not fitted". */
MS_API ms_fit_residuals ms_fit_residuals_none(void);

/* Write spec as a device file (the format of scenarios/devices/, which
 * ms_device_load reads back), with its provenance and residuals.  Written to
 * PATH.tmp and renamed: never a half-written file. */
MS_API ms_status ms_device_write(const char *path, const ms_device_spec *spec,
                                 const ms_device_provenance *prov, const ms_fit_residuals *res,
                                 ms_diag *d);

/* ---- calibration ---------------------------------------------------- */

typedef struct ms_calibrate_options {
    const char *backend; /* "mock", "cuda", "npu" (backend.h's registry) */
    int ordinal;         /* the physical device (cuda:N) */
    /* The device's data sheet: peak FLOP/s, HBM bandwidth and capacity,
     * links and topology, which no benchmark separates from efficiency; on
     * the mock also the model it runs.  Required. */
    const ms_device_spec *base;
    /* Fewer shapes and repeats (the tests): every part is still fitted. */
    bool quick;
    FILE *log; /* progress lines; NULL: none */
} ms_calibrate_options;

/* Measure and fit; *out gets base with every measured part replaced, res
 * the residual of each fit.  A part the backend cannot run (collectives on a
 * single device without a communicator: MS_EUNSUPPORTED) keeps base's values
 * and stays "not fitted" in res. */
MS_API ms_status ms_calibrate(const ms_calibrate_options *opt, ms_device_spec *out,
                              ms_fit_residuals *res, ms_diag *d);

/* ---- validation ----------------------------------------------------- */

typedef struct ms_validation ms_validation;

/* Load tables (CSV through libcsv).  Columns: id, source, split (train or
 * test), scenario (a scenario file, relative to the table), optional policy,
 * flops_formula (with a TFLOP/s column: "model" or "megatron_sc21"), notes,
 * the measured figures measured_step_time_s, measured_tflops_per_device,
 * measured_peak_memory_gib (at least one a row, each > 0), and any other
 * column names a scenario field ("model.hidden_size") set on that row.
 * Errors name the table, the row and the column. */
MS_API ms_status ms_validation_load(const char *const *tables, size_t n_tables, ms_validation **out,
                                    ms_diag *d);
MS_API ms_status ms_validation_free(ms_validation *v);

/* Fit named device parameters ("gemm.fp16", "overlap.compute_slowdown", or
 * "DEVICE:gemm.fp16" for one device) on the train rows by nonlinear least
 * squares of log(predicted / measured); the fitted values then apply to
 * every row.  Needs at least as many train rows as parameters. */
MS_API ms_status ms_validation_fit(ms_validation *v, const char *const *params, size_t n_params,
                                   FILE *log, ms_diag *d);
/* Run every row (after a fit: with the fitted values). */
MS_API ms_status ms_validation_run(ms_validation *v, FILE *log, ms_diag *d);
/* Per row predicted, measured and error; then mean and max |error| per
 * table and split, and the fitted parameters with their standard errors. */
MS_API ms_status ms_validation_print(const ms_validation *v, FILE *out);
MS_API ms_status ms_validation_write_csv(const ms_validation *v, const char *path, ms_diag *d);
/* Write each device the fit changed, as DIR/NAME.lua. */
MS_API ms_status ms_validation_write_devices(const ms_validation *v, const char *dir,
                                             const char *command, ms_diag *d);

/* Names of the device parameters validate can fit, one per line. */
MS_API void ms_device_param_list(FILE *out);

#ifdef __cplusplus
}
#endif
#endif
