/* memsim calibrate: measure a device through backend.h and fit its device
 * file (calibrate.h).  The measurements, in order, each using the ones
 * before it:
 *   kernel overhead    an empty kernel;
 *   launch overhead    host time of async launches;
 *   HBM efficiency     streaming kernels by size -> an interpolation table;
 *   GEMM by shape      a grid of (M, N, K) per dtype -> max[dtype] and the
 *                      half-saturation sizes by nonlinear least squares, on
 *                      the compute-bound shapes;
 *   fused attention    a grid of (sequence, head dim) -> max and halves;
 *   host link          copies by size and direction -> latency and a
 *                      bandwidth table, and a copy beside a GEMM -> the
 *                      copy slowdown;
 *   networks           collectives by size on each link -> latency, an
 *                      efficiency table, each kind relative to all-reduce;
 *   overlap            a GEMM beside a long all-reduce -> the slowdown.
 * Peak FLOP/s, HBM and link bandwidths stay the data sheet's (the base
 * spec): a benchmark measures what fraction of them is reached. */
#include "cal_internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "calibrate_parts.h"
#include "memsim/backend.h"

typedef struct cal_run {
    const ms_calibrate_options *opt;
    ms_device_spec *out;
    ms_fit_residuals *res;
    ms_device_group *g;
    ms_diag *d;
} cal_run;

static ms_status measure_all(cal_bench *cb, cal_run *r)
{
    cal_ctx c = {.cb = cb,
                 .spec = r->out,
                 .res = r->res,
                 .quick = r->opt->quick,
                 .log = r->opt->log,
                 .d = r->d};
    ms_status st = cal_overheads(&c);
    if (st == MS_OK)
        st = cal_hbm(&c);
    if (st == MS_OK)
        st = cal_gemm(&c);
    if (st == MS_OK)
        st = cal_flash(&c);
    if (st == MS_OK)
        st = cal_host_link(&c);
    if (st == MS_OK)
        st = cal_networks(&c);
    if (st == MS_OK)
        st = cal_overlap(&c);
    return st;
}

static ms_status body(void *user, int device)
{
    cal_run *r = user;
    ms_backend *b = ms_group_device(r->g, device);
    if (b == NULL)
        return MS_EINTERNAL;
    /* A spacer of ~20 ms at the data sheet's peak hides any host issue time. */
    double peak = r->opt->base->peak_flops[MS_DTYPE_BF16];
    cal_bench cb;
    ms_status st =
        cal_bench_open(&cb, b, r->opt->quick ? 3 : 10, (peak > 0 ? peak : 1e14) * 0.02, r->d);
    if (st == MS_OK)
        st = measure_all(&cb, r);
    cal_bench_close(&cb);
    return st;
}

ms_status ms_calibrate(const ms_calibrate_options *opt, ms_device_spec *out, ms_fit_residuals *res,
                       ms_diag *d)
{
    if (opt == NULL || opt->base == NULL || opt->backend == NULL || out == NULL || res == NULL)
        return ms_diag_set(d, MS_EINVAL, "ms_calibrate: NULL argument");
    ms_status st = ms_device_spec_validate(opt->base, d);
    if (st != MS_OK)
        return st;
    *out = *opt->base;
    *res = ms_fit_residuals_none();
    ms_group_config cfg = {.spec = opt->base, .n_devices = 1, .ordinal = opt->ordinal, .seed = 1};
    cal_run r = {.opt = opt, .out = out, .res = res, .d = d};
    st = ms_group_open(opt->backend, &cfg, &r.g, d);
    if (st != MS_OK)
        return st;
    st = ms_group_run(r.g, body, &r);
    ms_group_close(r.g);
    if (st == MS_OK)
        st = ms_device_spec_validate(out, d);
    return st;
}
