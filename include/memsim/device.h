/* memsim: what a device is, as the cost model and the mock NPU need it.
 *
 * A device file (scenarios/devices/NAME.lua) is loaded into an
 * ms_device_spec by the scenario loader (scenario.h).  The simulator (sim.h)
 * turns it into times; nothing here knows about tensors or policies. */
#ifndef MEMSIM_DEVICE_H
#define MEMSIM_DEVICE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "memsim/status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum ms_dtype {
    MS_DTYPE_FP32 = 0,
    MS_DTYPE_FP16,
    MS_DTYPE_BF16,
    MS_DTYPE_FP8,
    MS_DTYPE_INT8, /* also bool masks: one byte an element */
    MS_DTYPE_COUNT
} ms_dtype;

/* Bytes per element (4, 2, 2, 1, 1); 0 for an invalid dtype. */
MS_API size_t ms_dtype_size(ms_dtype t);
/* "fp32", "fp16", "bf16", "fp8", "int8". */
MS_API const char *ms_dtype_name(ms_dtype t);
/* Parse a dtype name (also accepts "float32", "float16", "bfloat16"). */
MS_API ms_status ms_dtype_parse(const char *name, ms_dtype *out);

#define MS_CURVE_MAX 32

/* A piecewise curve y(x), x strictly ascending, interpolated by sim/ with GSL
 * (Steffen, which never overshoots, so efficiencies stay within their points);
 * clamped to the end points outside [x0, xn].  n == 0 means "constant 1.0"
 * for efficiencies. */
typedef struct ms_curve {
    int n;
    double x[MS_CURVE_MAX];
    double y[MS_CURVE_MAX];
} ms_curve;

typedef struct ms_device_spec {
    char name[64];
    /* Memory. */
    uint64_t hbm_bytes;          /* device memory the process may use */
    double hbm_bw;               /* bytes per second, peak */
    uint64_t host_pinned_bytes;  /* pinned host memory available for swap */
    /* Compute: dense peak FLOP/s per dtype (0 = unsupported dtype). */
    double peak_flops[MS_DTYPE_COUNT];
    ms_curve matmul_eff;    /* x: FLOPs of one kernel -> fraction of peak */
    ms_curve attention_eff; /* x: FLOPs of one kernel -> fraction of peak */
    ms_curve hbm_eff;       /* x: bytes moved by one kernel -> fraction of hbm_bw */
    /* Host link (PCIe / HCCS to host), full duplex: one curve per direction. */
    ms_curve h2d_bw;             /* x: bytes of one copy -> bytes per second */
    ms_curve d2h_bw;
    double host_link_latency_ns; /* fixed cost of one copy */
    /* Runtime. */
    double launch_overhead_ns;   /* host time of one async runtime call */
    double kernel_overhead_ns;   /* device time added to every kernel */
    int launch_queue_depth;      /* async launches a stream holds before blocking */
    /* Interconnect for collectives and pipeline p2p (alpha-beta). */
    int devices_per_node;
    double intra_node_bw;        /* bytes per second per device */
    double intra_node_latency_ns;
    double inter_node_bw;
    double inter_node_latency_ns;
} ms_device_spec;

/* Check that a spec is usable (positive capacity, bandwidths, ascending
 * curves); on failure names the offending field in d. */
MS_API ms_status ms_device_spec_validate(const ms_device_spec *spec, ms_diag *d);

#ifdef __cplusplus
}
#endif
#endif
