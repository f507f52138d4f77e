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

/* Slots of ms_device_spec.collective_eff: ms_comm_kind values (backend.h),
 * MS_COMM_NONE unused. */
#define MS_COMM_KINDS 8

/* A piecewise curve y(x), x strictly ascending, interpolated by sim/ with GSL
 * (Steffen, which never overshoots, so efficiencies stay within their points);
 * clamped to the end points outside [x0, xn].  n == 0 means "constant 1.0"
 * for efficiencies. */
typedef struct ms_curve {
    int n;
    double x[MS_CURVE_MAX];
    double y[MS_CURVE_MAX];
} ms_curve;

/* GEMM efficiency by shape.  A matmul of M x N x K (shape[0..2], times a
 * batch shape[3] folded into M) reaches
 *     eff = max[dtype] * M/(M + m_half) * N/(N + n_half) * K/(K + k_half)
 * of the dtype's peak: small dimensions leave tiles and SMs idle (the
 * saturation form of Calculon's and Roofline-style GEMM models).  max[dtype]
 * == 0 (or a kernel without a shape) falls back to matmul_eff by FLOPs. */
typedef struct ms_gemm_model {
    double max[MS_DTYPE_COUNT];
    double m_half, n_half, k_half; /* elements */
} ms_gemm_model;

/* Fused (flash) attention by shape (shape[0] = query length, shape[2] = head
 * dim): eff = max * sq/(sq + seq_half) * d/(d + head_dim_half) of the peak on
 * the FLOPs the kernel executes, executed_fraction x the FLOPs it counts (a
 * causal kernel skips the masked half of the score blocks; 0 means 1).
 * max == 0 falls back to attention_eff by FLOPs. */
typedef struct ms_attention_model {
    double max;
    double seq_half, head_dim_half; /* elements */
    double executed_fraction;
} ms_attention_model;

/* The most device memory a run or a simulation may be given: the mock's
 * address window for device memory (backend_mock/memory.c). */
#define MS_MAX_DEVICE_MEMORY (1ULL << 43)

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
    /* The fraction of a link's bandwidth one collective of x bytes (the full
     * buffer) reaches: protocol and pipelining losses of small messages and
     * the algorithm's efficiency on large ones (empty: 1). */
    ms_curve intra_node_eff;
    ms_curve inter_node_eff;
    /* Intra-node links form a full mesh (Ascend HCCS) rather than a switch
     * (NVSwitch): a collective among n of the node's P devices uses n - 1 of
     * each device's P - 1 links, so it gets (n - 1) / (P - 1) of
     * intra_node_bw; a p2p transfer gets one link. */
    bool intra_node_mesh;
    /* Bus bandwidth of each collective kind relative to an all-reduce's on
     * the same link and size (MS_COMM_SEND also prices RECV; 0 means 1). */
    double collective_eff[MS_COMM_KINDS];
    /* Compute kernels run this fraction slower while a collective moves data
     * on the same device (NCCL/HCCL kernels take SMs/AI cores and HBM
     * bandwidth: Calculon's "processor_usage"). */
    double overlap_compute_slowdown;
    /* Host copies move their bytes this fraction slower while a compute
     * kernel runs on the device (both draw on HBM, and on some devices on
     * the same DMA engines); memsim calibrate measures it with an H2D
     * beside a long GEMM. */
    double overlap_copy_slowdown;
    ms_gemm_model gemm;
    ms_attention_model flash;
} ms_device_spec;

/* Check that a spec is usable (positive capacity, bandwidths, ascending
 * curves); on failure names the offending field in d. */
MS_API ms_status ms_device_spec_validate(const ms_device_spec *spec, ms_diag *d);

#ifdef __cplusplus
}
#endif
#endif
