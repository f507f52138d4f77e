/* Nonlinear least squares through GSL's gsl_multifit_nlinear (trust region,
 * Levenberg-Marquardt), the one fitting routine of calibrate and validate.
 * GSL's error handler aborts by default; every call here is checked instead
 * and the handler is off while fitting. */
#include "fit.h"

#include <math.h>
#include <stdbool.h>
#include <stdlib.h>

#include <gsl/gsl_errno.h>
#include <gsl/gsl_multifit_nlinear.h>

typedef struct nls_ctx {
    cal_residual_fn fn;
    void *user;
    size_t n_par;
    ms_status st;
    int evaluations;
    double *scratch; /* n residuals: GSL may hand f a strided vector (a column of J) */
} nls_ctx;

static int gsl_f(const gsl_vector *x, void *params, gsl_vector *f)
{
    nls_ctx *c = params;
    c->evaluations++;
    double xs[64];
    for (size_t j = 0; j < c->n_par; j++)
        xs[j] = gsl_vector_get(x, j);
    c->st = c->fn(xs, c->user, c->scratch);
    if (c->st != MS_OK)
        return GSL_EBADFUNC;
    for (size_t i = 0; i < f->size; i++) {
        if (!isfinite(c->scratch[i]))
            return GSL_EBADFUNC;
        gsl_vector_set(f, i, c->scratch[i]);
    }
    return GSL_SUCCESS;
}

double cal_rms(const double *v, size_t n)
{
    if (n == 0)
        return 0;
    double ss = 0;
    for (size_t i = 0; i < n; i++)
        ss += v[i] * v[i];
    return sqrt(ss / (double)n);
}

static void standard_errors(gsl_multifit_nlinear_workspace *w, size_t n_obs, size_t n_par,
                            double rms, double *out)
{
    gsl_matrix *covar = gsl_matrix_alloc(n_par, n_par);
    if (covar == NULL)
        return;
    gsl_matrix *J = gsl_multifit_nlinear_jac(w);
    double dof = n_obs > n_par ? (double)(n_obs - n_par) : 1;
    double s2 = rms * rms * (double)n_obs / dof;
    bool ok = gsl_multifit_nlinear_covar(J, 0.0, covar) == GSL_SUCCESS;
    for (size_t j = 0; j < n_par; j++)
        out[j] = ok ? sqrt(fabs(gsl_matrix_get(covar, j, j)) * s2) : NAN;
    gsl_matrix_free(covar);
}

ms_status cal_nls(cal_residual_fn fn, void *user, size_t n_par, size_t n_obs, double *x,
                  double h_df, int max_iter, cal_nls_result *res, ms_diag *d)
{
    if (fn == NULL || x == NULL || n_par == 0 || n_par > 64 || n_obs < n_par || res == NULL)
        return ms_diag_set(d, MS_EINVAL, "fit: %zu observations for %zu parameters", n_obs, n_par);
    nls_ctx c = {.fn = fn, .user = user, .n_par = n_par, .scratch = calloc(n_obs, sizeof(double))};
    if (c.scratch == NULL)
        return ms_diag_set(d, MS_ENOMEM, "fit: out of memory");
    gsl_multifit_nlinear_fdf fdf = {
        .f = gsl_f, .df = NULL, .fvv = NULL, .n = n_obs, .p = n_par, .params = &c};
    gsl_multifit_nlinear_parameters p = gsl_multifit_nlinear_default_parameters();
    p.h_df = h_df;
    gsl_error_handler_t *old = gsl_set_error_handler_off();
    gsl_multifit_nlinear_workspace *w =
        gsl_multifit_nlinear_alloc(gsl_multifit_nlinear_trust, &p, n_obs, n_par);
    ms_status st = w != NULL ? MS_OK : MS_ENOMEM;
    gsl_vector_view xv = gsl_vector_view_array(x, n_par);
    int info = 0, gst = GSL_SUCCESS;
    if (st == MS_OK && gsl_multifit_nlinear_init(&xv.vector, &fdf, w) != GSL_SUCCESS)
        st = c.st != MS_OK ? c.st : MS_ERANGE;
    if (st == MS_OK) {
        double xtol = res->xtol > 0 ? res->xtol : 1e-9;
        gst =
            gsl_multifit_nlinear_driver((size_t)max_iter, xtol, 1e-9, 1e-12, NULL, NULL, &info, w);
        if (c.st != MS_OK)
            st = c.st;
    }
    if (st == MS_OK) {
        gsl_vector *sol = gsl_multifit_nlinear_position(w);
        for (size_t j = 0; j < n_par; j++)
            x[j] = gsl_vector_get(sol, j);
        gsl_vector *f = gsl_multifit_nlinear_residual(w);
        res->rms = cal_rms(f->data, n_obs);
        res->iterations = (int)gsl_multifit_nlinear_niter(w);
        res->evaluations = c.evaluations;
        if (res->stderr_x != NULL)
            standard_errors(w, n_obs, n_par, res->rms, res->stderr_x);
        /* Out of iterations is a result, not an error: its residual says how
         * good it is. */
        (void)gst;
    }
    if (w != NULL)
        gsl_multifit_nlinear_free(w);
    free(c.scratch);
    gsl_set_error_handler(old);
    if (st != MS_OK && d != NULL && d->msg[0] == '\0')
        ms_diag_set(d, st, "fit: the model could not be evaluated (%s)", ms_strerror(st));
    return st;
}
