/* The device the simulator's unit tests reason about: round figures so every
 * expected time can be derived by hand (1 PFLOP/s bf16, 1 TB/s HBM, 10 GB/s
 * host link each way with 2 us latency, 1 us launch overhead, NVLink-like
 * 100 GB/s / 5 us intra-node and 25 GB/s / 20 us inter-node links). */
#ifndef MEMSIM_TEST_DEVICE_SPEC_H
#define MEMSIM_TEST_DEVICE_SPEC_H

#include <string.h>

#include "memsim/backend.h"
#include "memsim/device.h"

static inline ms_device_spec spec_base(void)
{
    ms_device_spec s;
    memset(&s, 0, sizeof s);
    strcpy(s.name, "unit");
    s.hbm_bytes = 1ULL << 30;
    s.hbm_bw = 1e12;
    s.peak_flops[MS_DTYPE_BF16] = 1e15;
    s.peak_flops[MS_DTYPE_FP16] = 1e15;
    s.peak_flops[MS_DTYPE_FP32] = 1e14;
    s.h2d_bw = (ms_curve){.n = 1, .x = {0}, .y = {1e10}};
    s.d2h_bw = (ms_curve){.n = 1, .x = {0}, .y = {1e10}};
    s.host_link_latency_ns = 2000;
    s.launch_overhead_ns = 1000;
    s.kernel_overhead_ns = 0;
    s.launch_queue_depth = 1024;
    s.devices_per_node = 8;
    s.intra_node_bw = 1e11;
    s.intra_node_latency_ns = 5000;
    s.inter_node_bw = 2.5e10;
    s.inter_node_latency_ns = 20000;
    return s;
}

static inline ms_kernel matmul(double flops)
{
    return (ms_kernel){.name = "matmul", .cls = MS_KC_MATMUL, .dtype = MS_DTYPE_BF16,
                       .flops = flops};
}

#endif
