/* lib/calibrate: the measurement-and-fit steps of ms_calibrate (private;
 * calibrate.c says their order). */
#ifndef MEMSIM_CAL_PARTS_H
#define MEMSIM_CAL_PARTS_H

#include <stdbool.h>
#include <stdio.h>

#include "bench.h"
#include "memsim/calibrate.h"

typedef struct cal_ctx {
    cal_bench *cb;
    ms_device_spec *spec; /* the base, updated part by part */
    ms_fit_residuals *res;
    bool quick;
    FILE *log;
    ms_diag *d;
} cal_ctx;

ms_status cal_overheads(cal_ctx *c);
ms_status cal_hbm(cal_ctx *c);
ms_status cal_gemm(cal_ctx *c);
ms_status cal_flash(cal_ctx *c);
ms_status cal_host_link(cal_ctx *c);
ms_status cal_networks(cal_ctx *c);
ms_status cal_overlap(cal_ctx *c);

/* Memory time (ns) of a kernel moving bytes, from the HBM measurements. */
double cal_memory_ns(const cal_ctx *c, double bytes);
void cal_log(const cal_ctx *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#endif
