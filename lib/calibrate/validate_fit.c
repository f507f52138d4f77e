/* memsim validate --fit: named device parameters fitted on the train rows
 * by nonlinear least squares of log(predicted / measured), each parameter
 * kept inside its range by a transform (log above a lower bound, logistic
 * between two); standard errors from the Jacobian at the solution. */
#include "validation.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fit.h"

static double to_value(const cal_param *p, double x)
{
    if (isinf(p->hi))
        return p->lo + exp(x);
    return p->lo + (p->hi - p->lo) / (1 + exp(-x));
}

static double to_x(const cal_param *p, double v)
{
    if (isinf(p->hi))
        return log(v - p->lo);
    double u = (v - p->lo) / (p->hi - p->lo);
    return log(u / (1 - u));
}

/* d value / d x, for the standard errors. */
static double slope(const cal_param *p, double x)
{
    if (isinf(p->hi))
        return exp(x);
    double e = exp(-x);
    return (p->hi - p->lo) * e / ((1 + e) * (1 + e));
}

typedef struct fit_ctx {
    ms_validation *v;
    val_row **train;
    size_t n_train;
    FILE *log;
    ms_diag *d;
} fit_ctx;

static ms_status residuals(const double *x, void *user, double *f)
{
    fit_ctx *c = user;
    ms_validation *v = c->v;
    for (size_t j = 0; j < v->n_fit; j++)
        v->fit[j].value = to_value(v->fit[j].p, x[j]);
    ms_status st = val_rows_run(v, c->train, c->n_train, NULL);
    if (st != MS_OK)
        return ms_diag_set(c->d, st, "validate --fit: cannot start the row threads");
    for (size_t i = 0; i < c->n_train; i++) {
        val_row *r = c->train[i];
        double e;
        if (!val_row_error(r, &e))
            return ms_diag_set(c->d, MS_ERANGE,
                               "validate --fit: train row %s cannot be "
                               "predicted at these values: %s",
                               r->id, r->error);
        f[i] = log1p(e);
    }
    if (c->log != NULL) {
        fprintf(c->log, "validate --fit: RMS %.5f at", cal_rms(f, c->n_train));
        for (size_t j = 0; j < v->n_fit; j++)
            fprintf(c->log, " %s=%.5g", v->fit[j].p->name, v->fit[j].value);
        fputc('\n', c->log);
    }
    return MS_OK;
}

/* "DEVICE:name" or "name" -> a fit parameter, its start the device's value. */
static ms_status parse_param(const ms_validation *v, const char *spec, val_fit_param *out,
                             ms_diag *d)
{
    memset(out, 0, sizeof *out);
    const char *colon = strchr(spec, ':'), *name = colon ? colon + 1 : spec;
    if (colon != NULL)
        snprintf(out->device, sizeof out->device, "%.*s", (int)(colon - spec), spec);
    out->p = cal_param_find(name);
    if (out->p == NULL)
        return ms_diag_set(d, MS_ENOENT,
                           "validate --fit: unknown device parameter '%s' (memsim "
                           "validate --list-params lists them)",
                           name);
    for (size_t i = 0; i < v->n_rows; i++) {
        const val_row *r = &v->rows[i];
        if (!r->train || (out->device[0] && strcmp(out->device, r->sc->device.name) != 0))
            continue;
        double val = cal_param_get(out->p, &r->sc->device);
        if (!(val > out->p->lo) || !(val < out->p->hi))
            return ms_diag_set(d, MS_ERANGE,
                               "validate --fit: %s is %g in device '%s'; a fit "
                               "starts strictly inside (%g, %g): set a starting value in the "
                               "device file",
                               name, val, r->sc->device.name, out->p->lo, out->p->hi);
        out->value = val;
        return MS_OK;
    }
    return ms_diag_set(d, MS_ENOENT, "validate --fit: no train row uses device '%s'",
                       out->device[0] ? out->device : "(any)");
}

static ms_status collect_train(fit_ctx *c)
{
    ms_validation *v = c->v;
    c->train = calloc(v->n_rows ? v->n_rows : 1, sizeof *c->train);
    if (c->train == NULL)
        return MS_ENOMEM;
    for (size_t i = 0; i < v->n_rows; i++)
        if (v->rows[i].train)
            c->train[c->n_train++] = &v->rows[i];
    if (c->n_train < v->n_fit)
        return ms_diag_set(c->d, MS_ERANGE, "validate --fit: %zu train rows for %zu parameters",
                           c->n_train, v->n_fit);
    return MS_OK;
}

ms_status ms_validation_fit(ms_validation *v, const char *const *params, size_t n_params, FILE *log,
                            ms_diag *d)
{
    if (v == NULL || params == NULL || n_params == 0)
        return ms_diag_set(d, MS_EINVAL, "validate --fit: no parameters");
    free(v->fit);
    v->n_fit = 0;
    v->fit = calloc(n_params, sizeof *v->fit);
    double *x = calloc(n_params, sizeof *x), *se = calloc(n_params, sizeof *se);
    fit_ctx c = {.v = v, .log = log, .d = d};
    ms_status st = v->fit != NULL && x != NULL && se != NULL ? MS_OK : MS_ENOMEM;
    for (size_t j = 0; st == MS_OK && j < n_params; j++) {
        val_fit_param fp;
        st = parse_param(v, params[j], &fp, d);
        /* Not applied until the fit starts: the start reads the devices. */
        if (st == MS_OK) {
            x[j] = to_x(fp.p, fp.value);
            v->fit[v->n_fit++] = fp;
        }
    }
    if (st == MS_OK)
        st = collect_train(&c);
    cal_nls_result res = {.stderr_x = se, .xtol = 1e-3};
    if (st == MS_OK)
        st = cal_nls(residuals, &c, v->n_fit, c.n_train, x, 1e-3, 30, &res, d);
    for (size_t j = 0; st == MS_OK && j < v->n_fit; j++) {
        v->fit[j].value = to_value(v->fit[j].p, x[j]);
        v->fit[j].std_error = se[j] * slope(v->fit[j].p, x[j]);
    }
    if (st == MS_OK) {
        v->fit_rms = res.rms;
        v->fit_evaluations = res.evaluations;
    } else {
        v->n_fit = 0; /* a failed fit changes nothing */
    }
    free(x);
    free(se);
    free(c.train);
    return st;
}
