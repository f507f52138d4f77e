/* lib/calibrate: what its files share (private to the folder). */
#ifndef MEMSIM_CAL_INTERNAL_H
#define MEMSIM_CAL_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>

#include "memsim/calibrate.h"
#include "memsim/device.h"

/* A scalar of a device file, in the file's units (GB/s, TFLOP/s, us,
 * fractions), bound to its ms_device_spec member (device_params.c); or the
 * level of one of its tables ("hbm_efficiency.level"), which is no key of
 * the file: it scales the table the file holds. */
typedef struct cal_param {
    const char *name; /* the device file's path: "gemm.fp16", "launch_overhead_us" */
    size_t offset;    /* of the double (or, for a level, the ms_curve) in ms_device_spec */
    double scale;     /* spec units per file unit */
    double lo, hi;    /* allowed range, file units (hi: INFINITY if none) */
    bool level;       /* the table's largest value; setting it scales every value */
} cal_param;

const cal_param *cal_param_find(const char *name);
const cal_param *cal_param_at(size_t i); /* NULL past the end */
double cal_param_get(const cal_param *p, const ms_device_spec *s);
void cal_param_set(const cal_param *p, ms_device_spec *s, double v);

#endif
