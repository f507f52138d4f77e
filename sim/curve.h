/* sim/: a device curve y(x) made ready for fast, repeated evaluation. */
#ifndef MEMSIM_SIM_CURVE_H
#define MEMSIM_SIM_CURVE_H

#include <gsl/gsl_interp.h>

#include "memsim/device.h"
#include "memsim/status.h"

typedef struct ms_curve_interp {
    const ms_curve *c;   /* the points; must outlive the interpolant */
    double empty_value;  /* y when the curve has no points */
    gsl_interp *interp;  /* NULL for n <= 1 */
} ms_curve_interp;

/* Build the interpolant once (Steffen for n >= 3, linear for n == 2). */
ms_status sim_curve_interp_init(ms_curve_interp *ci, const ms_curve *c, double empty_value);
/* y(x), x clamped to [x0, xn]; never calls the GSL error handler. */
double sim_curve_interp_eval(const ms_curve_interp *ci, double x);
void sim_curve_interp_free(ms_curve_interp *ci);

#endif
