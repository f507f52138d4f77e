/* Calibrating the compute side: overheads, HBM efficiency by size, GEMM
 * efficiency by shape, fused attention by shape (calibrate.c). */
#include "calibrate_parts.h"

#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include <gsl/gsl_interp.h>

#include "fit.h"

void cal_log(const cal_ctx *c, const char *fmt, ...)
{
    if (c->log == NULL)
        return;
    va_list ap;
    va_start(ap, fmt);
    fputs("calibrate: ", c->log);
    vfprintf(c->log, fmt, ap);
    fputc('\n', c->log);
    va_end(ap);
}

ms_status cal_overheads(cal_ctx *c)
{
    double kernel = 0, launch = 0;
    ms_kernel empty = cal_stream_kernel(0);
    ms_status st = cal_time_kernel(c->cb, &empty, &kernel);
    if (st == MS_OK)
        st = cal_time_launch(c->cb, &launch);
    if (st != MS_OK)
        return st;
    c->spec->kernel_overhead_ns = kernel;
    c->spec->launch_overhead_ns = launch;
    c->res->launch = 0; /* measured directly, nothing fitted */
    cal_log(c, "kernel overhead %.3f us, launch overhead %.3f us", kernel / 1e3, launch / 1e3);
    return MS_OK;
}

/* ---- HBM ------------------------------------------------------------- */

/* The HBM efficiency at `bytes` on the curve just measured, interpolated as
 * the simulator will read it from the device file (sim/curve.c: GSL's
 * Steffen method, monotone between points, through three points or more;
 * linear through two; clamped at the ends). */
static double hbm_eff_at(const ms_curve *cv, double bytes)
{
    if (cv->n == 1 || bytes <= cv->x[0])
        return cv->y[0];
    if (bytes >= cv->x[cv->n - 1])
        return cv->y[cv->n - 1];
    const gsl_interp_type *type = cv->n == 2 ? gsl_interp_linear : gsl_interp_steffen;
    gsl_interp *in = gsl_interp_alloc(type, (size_t)cv->n);
    /* The sizes are doublings, so init cannot fail (GSL's handler would
     * abort on sizes out of order). */
    double eff = cv->y[0];
    if (in != NULL && gsl_interp_init(in, cv->x, cv->y, (size_t)cv->n) == 0)
        eff = gsl_interp_eval(in, cv->x, cv->y, bytes, NULL);
    gsl_interp_free(in);
    return eff;
}

double cal_memory_ns(const cal_ctx *c, double bytes)
{
    const ms_curve *cv = &c->spec->hbm_eff;
    if (cv->n == 0 || !(bytes > 0))
        return 0;
    return bytes / (c->spec->hbm_bw * hbm_eff_at(cv, bytes)) * 1e9;
}

ms_status cal_hbm(cal_ctx *c)
{
    /* 4 KiB to 2 GiB: a point per doubling (every other one when quick),
     * straight into the device file's curve. */
    ms_curve *cv = &c->spec->hbm_eff;
    int step = c->quick ? 2 : 1, n = 0;
    for (int e = 12; e <= 31 && n < MS_CURVE_MAX; e += step) {
        double bytes = ldexp(1, e), ns = 0;
        ms_kernel k = cal_stream_kernel(bytes);
        ms_status st = cal_time_kernel(c->cb, &k, &ns);
        if (st != MS_OK)
            return st;
        double t = ns - c->spec->kernel_overhead_ns;
        /* Small buffers that stay in cache can beat the HBM data sheet. */
        double eff = t > 0 ? bytes / (t * 1e-9) / c->spec->hbm_bw : 1;
        cv->x[n] = bytes;
        cv->y[n++] = eff > 1 ? 1 : eff;
    }
    cv->n = n;
    c->res->hbm = 0; /* an interpolation table: exact at its points */
    cal_log(c, "HBM: %d sizes, %.1f%% of %.0f GB/s at %.0f MiB", n, 100 * cv->y[n - 1],
            c->spec->hbm_bw / 1e9, cv->x[n - 1] / 1048576);
    return MS_OK;
}

/* ---- GEMM ------------------------------------------------------------ */

#define MAX_SHAPES 1024

typedef struct gemm_obs {
    int dt_slot; /* index among the fitted dtypes */
    double m, n, k, flops, peak, ns;
} gemm_obs;

typedef struct gemm_fit {
    const cal_ctx *c;
    gemm_obs *obs;
    size_t n_obs;
    int n_dt;
} gemm_fit;

static double sat(double x, double half)
{
    return x / (x + half);
}

/* x: log max per dtype slot, then log m_half, n_half, k_half. */
static ms_status gemm_residuals(const double *x, void *user, double *f)
{
    const gemm_fit *g = user;
    double mh = exp(x[g->n_dt]), nh = exp(x[g->n_dt + 1]), kh = exp(x[g->n_dt + 2]);
    for (size_t i = 0; i < g->n_obs; i++) {
        const gemm_obs *o = &g->obs[i];
        double eff = exp(x[o->dt_slot]) * sat(o->m, mh) * sat(o->n, nh) * sat(o->k, kh);
        double t = o->flops / (o->peak * eff) * 1e9 + g->c->spec->kernel_overhead_ns;
        f[i] = log(t / o->ns);
    }
    return MS_OK;
}

static const ms_dtype gemm_dtypes[] = {MS_DTYPE_BF16, MS_DTYPE_FP16, MS_DTYPE_FP32, MS_DTYPE_FP8};
#define N_GEMM_DTYPES (sizeof gemm_dtypes / sizeof gemm_dtypes[0])

/* Whether the device runs GEMMs of dt as dt.  A real device without FP8
 * tensor cores (or cuBLASLt) runs an FP8 GEMM as fp16 (backend_npu/proxy.c):
 * timing it would fit the fp16 ceiling under FP8's name, so that dtype keeps
 * the base file's value and says so. */
static bool runs_natively(const cal_ctx *c, ms_dtype dt)
{
    ms_kernel k = cal_gemm_kernel(dt, 4096, 4096, 4096);
    ms_dtype runs_as = dt;
    ms_status st = ms_backend_matmul_dtype(c->cb->b, &k, &runs_as);
    if (st == MS_OK && runs_as == dt)
        return true;
    cal_log(c, "GEMM %s: %s; gemm.%s not measured (kept %.4f)", ms_dtype_name(dt),
            st == MS_OK ? "the device runs it in another dtype" : "the backend cannot say how it runs",
            ms_dtype_name(dt), c->spec->gemm.max[dt]);
    return false;
}

/* Time the grid; keep the shapes whose time is clearly compute's. */
static ms_status gemm_measure(cal_ctx *c, gemm_fit *g, int *slot_dt)
{
    static const double full[] = {256, 512, 1024, 2048, 4096, 8192};
    static const double quick[] = {256, 1024, 4096};
    const double *sizes = c->quick ? quick : full;
    int ns = c->quick ? 3 : 6;
    for (size_t di = 0; di < N_GEMM_DTYPES; di++) {
        ms_dtype dt = gemm_dtypes[di];
        double peak = c->spec->peak_flops[dt];
        if (!(peak > 0) || !runs_natively(c, dt))
            continue;
        int slot = g->n_dt++;
        slot_dt[slot] = dt;
        for (int a = 0; a < ns; a++)
            for (int b = 0; b < ns; b++)
                for (int e = 0; e < ns; e++) {
                    ms_kernel k = cal_gemm_kernel(dt, sizes[a], sizes[b], sizes[e]);
                    double t = 0;
                    ms_status st = cal_time_kernel(c->cb, &k, &t);
                    if (st != MS_OK)
                        return st;
                    double compute = t - c->spec->kernel_overhead_ns;
                    if (compute < 1.5 * cal_memory_ns(c, k.bytes) || g->n_obs >= MAX_SHAPES)
                        continue;
                    g->obs[g->n_obs++] =
                        (gemm_obs){slot, sizes[a], sizes[b], sizes[e], k.flops, peak, t};
                }
    }
    return MS_OK;
}

static void log_gemm_fit(const cal_ctx *c, size_t n_obs, const int *slot_dt, int n_dt, double rms)
{
    char maxima[128] = "";
    size_t used = 0;
    for (int s = 0; s < n_dt && used < sizeof maxima; s++)
        used += (size_t)snprintf(maxima + used, sizeof maxima - used, "%s %s %.4f", s ? "," : "",
                                 ms_dtype_name((ms_dtype)slot_dt[s]), c->spec->gemm.max[slot_dt[s]]);
    cal_log(c, "GEMM: %zu compute-bound shapes, max%s, halves %.1f %.1f %.1f, RMS %.2e", n_obs,
            maxima, c->spec->gemm.m_half, c->spec->gemm.n_half, c->spec->gemm.k_half, rms);
}

ms_status cal_gemm(cal_ctx *c)
{
    gemm_fit g = {.c = c, .obs = calloc(MAX_SHAPES, sizeof(gemm_obs))};
    if (g.obs == NULL)
        return MS_ENOMEM;
    int slot_dt[N_GEMM_DTYPES] = {0};
    ms_status st = gemm_measure(c, &g, slot_dt);
    double x[N_GEMM_DTYPES + 3];
    if (st == MS_OK && (g.n_dt == 0 || g.n_obs < (size_t)g.n_dt + 3))
        st = ms_diag_set(c->d, MS_ERANGE, "calibrate: too few compute-bound GEMM shapes (%zu)",
                         g.n_obs);
    if (st == MS_OK) {
        /* Start: each dtype's best observed efficiency, halves of 128. */
        for (int s = 0; s < g.n_dt; s++)
            x[s] = log(0.05);
        for (size_t i = 0; i < g.n_obs; i++) {
            const gemm_obs *o = &g.obs[i];
            double eff = o->flops / (o->peak * (o->ns - c->spec->kernel_overhead_ns) * 1e-9);
            if (log(eff * 1.05) > x[o->dt_slot])
                x[o->dt_slot] = log(eff * 1.05);
        }
        x[g.n_dt] = x[g.n_dt + 1] = x[g.n_dt + 2] = log(128);
        cal_nls_result r = {0};
        st = cal_nls(gemm_residuals, &g, (size_t)g.n_dt + 3, g.n_obs, x, 1e-6, 200, &r, c->d);
        if (st == MS_OK) {
            for (int s = 0; s < g.n_dt; s++)
                c->spec->gemm.max[slot_dt[s]] = fmin(exp(x[s]), 1.0);
            c->spec->gemm.m_half = exp(x[g.n_dt]);
            c->spec->gemm.n_half = exp(x[g.n_dt + 1]);
            c->spec->gemm.k_half = exp(x[g.n_dt + 2]);
            c->res->gemm = r.rms;
            log_gemm_fit(c, g.n_obs, slot_dt, g.n_dt, r.rms);
        }
    }
    free(g.obs);
    return st;
}

/* ---- fused attention ------------------------------------------------- */

typedef struct flash_obs {
    double seq, dim, flops, ns;
} flash_obs;

typedef struct flash_fit {
    const cal_ctx *c;
    flash_obs obs[64];
    size_t n_obs;
    double peak, executed;
} flash_fit;

static ms_status flash_residuals(const double *x, void *user, double *f)
{
    const flash_fit *g = user;
    for (size_t i = 0; i < g->n_obs; i++) {
        const flash_obs *o = &g->obs[i];
        double eff = exp(x[0]) * sat(o->seq, exp(x[1])) * sat(o->dim, exp(x[2]));
        double t = o->flops * g->executed / (g->peak * eff) * 1e9 + g->c->spec->kernel_overhead_ns;
        f[i] = log(t / o->ns);
    }
    return MS_OK;
}

ms_status cal_flash(cal_ctx *c)
{
    static const double seqs[] = {512, 1024, 2048, 4096, 8192, 16384};
    static const double dims[] = {64, 128, 256};
    flash_fit g = {.c = c, .peak = c->spec->peak_flops[MS_DTYPE_BF16]};
    /* Whether the kernel skips masked blocks is the kernel's, not measured. */
    g.executed = c->spec->flash.executed_fraction > 0 ? c->spec->flash.executed_fraction : 1;
    if (!(g.peak > 0))
        return MS_OK;
    for (size_t a = 0; a < 6; a += c->quick ? 2 : 1)
        for (size_t b = 0; b < 3; b++) {
            ms_kernel k = cal_flash_kernel(MS_DTYPE_BF16, seqs[a], dims[b], 32);
            double t = 0;
            ms_status st = cal_time_kernel(c->cb, &k, &t);
            if (st != MS_OK)
                return st;
            if (t - c->spec->kernel_overhead_ns < 1.5 * cal_memory_ns(c, k.bytes))
                continue;
            g.obs[g.n_obs++] = (flash_obs){seqs[a], dims[b], k.flops, t};
        }
    if (g.n_obs < 4)
        return ms_diag_set(c->d, MS_ERANGE, "calibrate: too few compute-bound attention shapes");
    double x[3] = {log(0.5), log(256), log(32)};
    for (size_t i = 0; i < g.n_obs; i++) {
        double eff = g.obs[i].flops * g.executed /
                     (g.peak * (g.obs[i].ns - c->spec->kernel_overhead_ns) * 1e-9);
        if (log(eff * 1.05) > x[0])
            x[0] = log(eff * 1.05);
    }
    cal_nls_result r = {0};
    ms_status st = cal_nls(flash_residuals, &g, 3, g.n_obs, x, 1e-6, 200, &r, c->d);
    if (st != MS_OK)
        return st;
    c->spec->flash = (ms_attention_model){.max = fmin(exp(x[0]), 1.0),
                                          .seq_half = exp(x[1]),
                                          .head_dim_half = exp(x[2]),
                                          .executed_fraction = c->spec->flash.executed_fraction};
    c->res->flash_attention = r.rms;
    cal_log(c,
            "flash attention: %zu shapes, max %.4f, seq half %.1f, head dim half %.2f, "
            "RMS %.2e",
            g.n_obs, c->spec->flash.max, c->spec->flash.seq_half, c->spec->flash.head_dim_half,
            r.rms);
    return MS_OK;
}
