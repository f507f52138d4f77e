/* lib/calibrate: what its files share (private to the folder). */
#ifndef MEMSIM_CAL_INTERNAL_H
#define MEMSIM_CAL_INTERNAL_H

#include <stddef.h>

#include "memsim/calibrate.h"
#include "memsim/device.h"

/* A scalar of a device file, in the file's units (GB/s, TFLOP/s, us,
 * fractions), bound to its ms_device_spec member (device_params.c). */
typedef struct cal_param {
    const char *name; /* the device file's path: "gemm.fp16", "launch_overhead_us" */
    size_t offset;    /* of the double in ms_device_spec */
    double scale;     /* spec units per file unit */
    double lo, hi;    /* allowed range, file units (hi: INFINITY if none) */
} cal_param;

const cal_param *cal_param_find(const char *name);
const cal_param *cal_param_at(size_t i); /* NULL past the end */
double cal_param_get(const cal_param *p, const ms_device_spec *s);
void cal_param_set(const cal_param *p, ms_device_spec *s, double v);

#endif
