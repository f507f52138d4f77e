/* lib/calibrate: least-squares fits with GSL (private). */
#ifndef MEMSIM_CAL_FIT_H
#define MEMSIM_CAL_FIT_H

#include <stddef.h>

#include "memsim/status.h"

/* f[0..n_obs) = residuals at parameters x[0..n_par); MS_OK or an error that
 * stops the fit. */
typedef ms_status (*cal_residual_fn)(const double *x, void *user, double *f);

typedef struct cal_nls_result {
    /* In: the relative step below which the fit stops (GSL's xtol; 0:
     * 1e-9, for the smooth functions of a calibration).  A fit through
     * whole simulations (validate --fit) stops at 1e-3: smaller steps are
     * far inside what the tables' figures resolve and cost minutes each. */
    double xtol;
    double rms;       /* of the residuals at the solution */
    double *stderr_x; /* caller's array of n_par, or NULL: standard errors of x */
    int iterations;
    int evaluations;
} cal_nls_result;

/* Nonlinear least squares (gsl_multifit_nlinear, trust region with
 * Levenberg-Marquardt steps, Jacobian by forward differences of relative
 * step h_df): x holds the start and gets the solution. */
ms_status cal_nls(cal_residual_fn fn, void *user, size_t n_par, size_t n_obs, double *x,
                  double h_df, int max_iter, cal_nls_result *res, ms_diag *d);

/* RMS of v[0..n). */
double cal_rms(const double *v, size_t n);

#endif
