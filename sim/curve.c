/* Device curves (efficiency by kernel size, bandwidth by copy size) are
 * interpolated with GSL.  Steffen's method is monotone between points, so an
 * efficiency never overshoots its neighbours (device.h); GSL's Steffen needs
 * three points, so two points are linear and one point is a constant. */
#include "curve.h"

ms_status sim_curve_interp_init(ms_curve_interp *ci, const ms_curve *c, double empty_value)
{
    if (ci == NULL || c == NULL || c->n < 0 || c->n > MS_CURVE_MAX)
        return MS_EINVAL;
    ci->c = c;
    ci->empty_value = empty_value;
    ci->interp = NULL;
    if (c->n <= 1)
        return MS_OK;
    for (int i = 1; i < c->n; i++) {
        /* gsl_interp_init would call the (aborting) GSL error handler. */
        if (!(c->x[i] > c->x[i - 1]))
            return MS_ERANGE;
    }
    const gsl_interp_type *type = c->n == 2 ? gsl_interp_linear : gsl_interp_steffen;
    ci->interp = gsl_interp_alloc(type, (size_t)c->n);
    if (ci->interp == NULL)
        return MS_ENOMEM;
    if (gsl_interp_init(ci->interp, c->x, c->y, (size_t)c->n) != 0) {
        gsl_interp_free(ci->interp);
        ci->interp = NULL;
        return MS_ERANGE;
    }
    return MS_OK;
}

double sim_curve_interp_eval(const ms_curve_interp *ci, double x)
{
    const ms_curve *c = ci->c;
    if (c->n == 0)
        return ci->empty_value;
    if (c->n == 1 || x <= c->x[0])
        return c->y[0];
    if (x >= c->x[c->n - 1])
        return c->y[c->n - 1];
    /* A NULL accelerator keeps evaluation pure (binary search each call). */
    return gsl_interp_eval(ci->interp, c->x, c->y, x, NULL);
}

void sim_curve_interp_free(ms_curve_interp *ci)
{
    if (ci != NULL && ci->interp != NULL) {
        gsl_interp_free(ci->interp);
        ci->interp = NULL;
    }
}
