/* The scalars of a device file by name, in the file's units: what memsim
 * validate --fit may fit and what the device-file writer writes.  The names
 * are the keys lib/scenario/device_file.c reads (the round-trip tests write
 * and load every one), except the tables' levels ("hbm_efficiency.level"),
 * which scale a table the file holds. */
#include "cal_internal.h"

#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "memsim/backend.h"

#define SPEC(member) offsetof(ms_device_spec, member)
#define GB 1e9
#define TFLOPS 1e12
#define US 1e3
#define ANY INFINITY
/* A table of fractions by size, moved as a whole.  Step times of public
 * runs say how fast a kind of kernel is in those runs, not how its speed
 * grows with size: a fit on them scales the table by one factor and keeps
 * its shape, which stays the assumption (or calibrate's measurement). */
#define LEVEL(member) SPEC(member), 1, 0, 1, true

static const cal_param params[] = {
    {"hbm_bandwidth_gbs", SPEC(hbm_bw), GB, 1e-3, ANY, false},
    {"peak_tflops.bf16", SPEC(peak_flops[MS_DTYPE_BF16]), TFLOPS, 0, ANY, false},
    {"peak_tflops.fp16", SPEC(peak_flops[MS_DTYPE_FP16]), TFLOPS, 0, ANY, false},
    {"peak_tflops.fp32", SPEC(peak_flops[MS_DTYPE_FP32]), TFLOPS, 0, ANY, false},
    {"peak_tflops.fp8", SPEC(peak_flops[MS_DTYPE_FP8]), TFLOPS, 0, ANY, false},
    {"peak_tflops.int8", SPEC(peak_flops[MS_DTYPE_INT8]), TFLOPS, 0, ANY, false},
    {"gemm.bf16", SPEC(gemm.max[MS_DTYPE_BF16]), 1, 0, 1, false},
    {"gemm.fp16", SPEC(gemm.max[MS_DTYPE_FP16]), 1, 0, 1, false},
    {"gemm.fp32", SPEC(gemm.max[MS_DTYPE_FP32]), 1, 0, 1, false},
    {"gemm.fp8", SPEC(gemm.max[MS_DTYPE_FP8]), 1, 0, 1, false},
    {"gemm.int8", SPEC(gemm.max[MS_DTYPE_INT8]), 1, 0, 1, false},
    {"gemm.m_half", SPEC(gemm.m_half), 1, 0, 1e9, false},
    {"gemm.n_half", SPEC(gemm.n_half), 1, 0, 1e9, false},
    {"gemm.k_half", SPEC(gemm.k_half), 1, 0, 1e9, false},
    {"flash_attention.max", SPEC(flash.max), 1, 0, 1, false},
    {"flash_attention.seq_half", SPEC(flash.seq_half), 1, 0, 1e9, false},
    {"flash_attention.head_dim_half", SPEC(flash.head_dim_half), 1, 0, 1e9, false},
    {"flash_attention.executed_fraction", SPEC(flash.executed_fraction), 1, 0, 1, false},
    {"host_link_latency_us", SPEC(host_link_latency_ns), US, 0, ANY, false},
    {"launch_overhead_us", SPEC(launch_overhead_ns), US, 0, ANY, false},
    {"kernel_overhead_us", SPEC(kernel_overhead_ns), US, 0, ANY, false},
    {"intra_node_bandwidth_gbs", SPEC(intra_node_bw), GB, 1e-3, ANY, false},
    {"intra_node_latency_us", SPEC(intra_node_latency_ns), US, 0, ANY, false},
    {"inter_node_bandwidth_gbs", SPEC(inter_node_bw), GB, 1e-3, ANY, false},
    {"inter_node_latency_us", SPEC(inter_node_latency_ns), US, 0, ANY, false},
    {"collective_efficiency.all_gather", SPEC(collective_eff[MS_COMM_ALLGATHER]), 1, 0, 16, false},
    {"collective_efficiency.reduce_scatter", SPEC(collective_eff[MS_COMM_REDUCE_SCATTER]), 1, 0,
     16, false},
    {"collective_efficiency.all_to_all", SPEC(collective_eff[MS_COMM_ALLTOALL]), 1, 0, 16, false},
    {"collective_efficiency.broadcast", SPEC(collective_eff[MS_COMM_BROADCAST]), 1, 0, 16, false},
    {"collective_efficiency.send_recv", SPEC(collective_eff[MS_COMM_SEND]), 1, 0, 16, false},
    {"overlap.compute_slowdown", SPEC(overlap_compute_slowdown), 1, 0, 10, false},
    {"overlap.copy_slowdown", SPEC(overlap_copy_slowdown), 1, 0, 10, false},
    {"hbm_efficiency.level", LEVEL(hbm_eff)},
    {"matmul_efficiency.level", LEVEL(matmul_eff)},
    {"attention_efficiency.level", LEVEL(attention_eff)},
};

#define N_PARAMS (sizeof params / sizeof params[0])

const cal_param *cal_param_find(const char *name)
{
    for (size_t i = 0; name != NULL && i < N_PARAMS; i++)
        if (strcmp(params[i].name, name) == 0)
            return &params[i];
    return NULL;
}

const cal_param *cal_param_at(size_t i)
{
    return i < N_PARAMS ? &params[i] : NULL;
}

static double curve_level(const ms_curve *c)
{
    double top = 0;
    for (int i = 0; i < c->n; i++)
        top = fmax(top, c->y[i]);
    return top;
}

double cal_param_get(const cal_param *p, const ms_device_spec *s)
{
    if (p->level)
        return curve_level((const ms_curve *)((const char *)s + p->offset));
    double v;
    memcpy(&v, (const char *)s + p->offset, sizeof v);
    return v / p->scale;
}

void cal_param_set(const cal_param *p, ms_device_spec *s, double v)
{
    if (p->level) {
        ms_curve *c = (ms_curve *)((char *)s + p->offset);
        double top = curve_level(c);
        for (int i = 0; top > 0 && i < c->n; i++)
            c->y[i] *= v / top;
        return;
    }
    double x = v * p->scale;
    memcpy((char *)s + p->offset, &x, sizeof x);
}

void ms_device_param_list(FILE *out)
{
    if (out == NULL)
        return;
    for (size_t i = 0; i < N_PARAMS; i++)
        fprintf(out, "%s\n", params[i].name);
}
