/* Dtypes and the sanity rules of a device spec. */
#include "memsim/device.h"

#include <string.h>

static const struct {
    const char *name;
    const char *alias;
    size_t size;
} dtypes[MS_DTYPE_COUNT] = {
    [MS_DTYPE_FP32] = {"fp32", "float32", 4},
    [MS_DTYPE_FP16] = {"fp16", "float16", 2},
    [MS_DTYPE_BF16] = {"bf16", "bfloat16", 2},
    [MS_DTYPE_FP8] = {"fp8", "float8", 1},
    [MS_DTYPE_INT8] = {"int8", "bool", 1},
};

size_t ms_dtype_size(ms_dtype t)
{
    if ((unsigned)t >= MS_DTYPE_COUNT)
        return 0;
    return dtypes[t].size;
}

const char *ms_dtype_name(ms_dtype t)
{
    if ((unsigned)t >= MS_DTYPE_COUNT)
        return "?";
    return dtypes[t].name;
}

ms_status ms_dtype_parse(const char *name, ms_dtype *out)
{
    if (name == NULL || out == NULL)
        return MS_EINVAL;
    for (int i = 0; i < MS_DTYPE_COUNT; i++) {
        if (strcmp(name, dtypes[i].name) == 0 || strcmp(name, dtypes[i].alias) == 0) {
            *out = (ms_dtype)i;
            return MS_OK;
        }
    }
    return MS_ENOENT;
}

static ms_status check_curve(const ms_curve *c, const char *field, bool is_efficiency, ms_diag *d)
{
    if (c->n < 0 || c->n > MS_CURVE_MAX)
        return ms_diag_set(d, MS_ERANGE, "device field '%s': %d points (expected 0..%d)", field,
                           c->n, MS_CURVE_MAX);
    for (int i = 0; i < c->n; i++) {
        if (!(c->y[i] > 0) || (is_efficiency && c->y[i] > 1.0))
            return ms_diag_set(d, MS_ERANGE, "device field '%s': point %d has y=%g (expected %s)",
                               field, i + 1, c->y[i], is_efficiency ? "0 < y <= 1" : "y > 0");
        if (!(c->x[i] >= 0) || (i > 0 && !(c->x[i] > c->x[i - 1])))
            return ms_diag_set(d, MS_ERANGE,
                               "device field '%s': x values must be >= 0 and strictly ascending "
                               "(point %d)", field, i + 1);
    }
    return MS_OK;
}

static bool in_range(double v, double lo, double hi)
{
    return v >= lo && v <= hi;
}

/* The GEMM and attention models, the collective efficiencies and the
 * overlap slowdown: zero means "not modeled" everywhere (device.h). */
static ms_status check_models(const ms_device_spec *s, ms_diag *d)
{
    const ms_gemm_model *g = &s->gemm;
    for (int i = 0; i < MS_DTYPE_COUNT; i++)
        if (!in_range(g->max[i], 0, 1))
            return ms_diag_set(d, MS_ERANGE, "device '%s': gemm.%s must be in [0, 1] (got %g)",
                               s->name, ms_dtype_name((ms_dtype)i), g->max[i]);
    if (!in_range(g->m_half, 0, 1e9) || !in_range(g->n_half, 0, 1e9) ||
        !in_range(g->k_half, 0, 1e9))
        return ms_diag_set(d, MS_ERANGE,
                           "device '%s': gemm m_half, n_half and k_half must be "
                           "in [0, 1e9]",
                           s->name);
    const ms_attention_model *a = &s->flash;
    if (!in_range(a->max, 0, 1) || !in_range(a->executed_fraction, 0, 1) ||
        !in_range(a->seq_half, 0, 1e9) || !in_range(a->head_dim_half, 0, 1e9))
        return ms_diag_set(d, MS_ERANGE,
                           "device '%s': flash_attention max and "
                           "executed_fraction must be in [0, 1], seq_half and head_dim_half in "
                           "[0, 1e9]",
                           s->name);
    for (int i = 0; i < MS_COMM_KINDS; i++)
        if (!in_range(s->collective_eff[i], 0, 16))
            return ms_diag_set(d, MS_ERANGE,
                               "device '%s': a collective efficiency must be in "
                               "[0, 16] (got %g)",
                               s->name, s->collective_eff[i]);
    if (!in_range(s->overlap_compute_slowdown, 0, 10))
        return ms_diag_set(d, MS_ERANGE,
                           "device '%s': overlap.compute_slowdown must be in "
                           "[0, 10] (got %g)",
                           s->name, s->overlap_compute_slowdown);
    if (!in_range(s->overlap_copy_slowdown, 0, 10))
        return ms_diag_set(d, MS_ERANGE,
                           "device '%s': overlap.copy_slowdown must be in "
                           "[0, 10] (got %g)",
                           s->name, s->overlap_copy_slowdown);
    return MS_OK;
}

ms_status ms_device_spec_validate(const ms_device_spec *s, ms_diag *d)
{
    if (s == NULL)
        return ms_diag_set(d, MS_EINVAL, "no device spec");
    if (s->hbm_bytes == 0)
        return ms_diag_set(d, MS_ERANGE, "device '%s': hbm capacity must be > 0", s->name);
    if (!(s->hbm_bw > 0))
        return ms_diag_set(d, MS_ERANGE, "device '%s': hbm bandwidth must be > 0", s->name);
    bool any_peak = false;
    for (int i = 0; i < MS_DTYPE_COUNT; i++) {
        if (s->peak_flops[i] < 0)
            return ms_diag_set(d, MS_ERANGE, "device '%s': peak %s FLOP/s must be >= 0", s->name,
                               ms_dtype_name((ms_dtype)i));
        any_peak |= s->peak_flops[i] > 0;
    }
    if (!any_peak)
        return ms_diag_set(d, MS_ERANGE, "device '%s': no dtype has a peak FLOP/s", s->name);
    if (s->h2d_bw.n == 0 || s->d2h_bw.n == 0)
        return ms_diag_set(d, MS_ERANGE, "device '%s': host link bandwidth curves are required",
                           s->name);
    ms_status st;
    if ((st = check_curve(&s->matmul_eff, "matmul_efficiency", true, d)) != MS_OK ||
        (st = check_curve(&s->attention_eff, "attention_efficiency", true, d)) != MS_OK ||
        (st = check_curve(&s->hbm_eff, "hbm_efficiency", true, d)) != MS_OK ||
        (st = check_curve(&s->h2d_bw, "h2d_bandwidth", false, d)) != MS_OK ||
        (st = check_curve(&s->d2h_bw, "d2h_bandwidth", false, d)) != MS_OK)
        return st;
    if ((st = check_curve(&s->intra_node_eff, "intra_node_efficiency", true, d)) != MS_OK ||
        (st = check_curve(&s->inter_node_eff, "inter_node_efficiency", true, d)) != MS_OK ||
        (st = check_models(s, d)) != MS_OK)
        return st;
    if (s->launch_overhead_ns < 0 || s->kernel_overhead_ns < 0 || s->host_link_latency_ns < 0 ||
        s->intra_node_latency_ns < 0 || s->inter_node_latency_ns < 0)
        return ms_diag_set(d, MS_ERANGE, "device '%s': latencies and overheads must be >= 0",
                           s->name);
    if (s->launch_queue_depth < 1)
        return ms_diag_set(d, MS_ERANGE, "device '%s': launch_queue_depth must be >= 1", s->name);
    if (s->devices_per_node < 1 || !(s->intra_node_bw > 0) || !(s->inter_node_bw > 0))
        return ms_diag_set(d, MS_ERANGE,
                           "device '%s': devices_per_node and link bandwidths must be > 0",
                           s->name);
    return MS_OK;
}
