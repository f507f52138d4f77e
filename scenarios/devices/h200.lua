-- NVIDIA H200 SXM (HGX H200: 8 GPUs a node).
--
-- Data sheet (NVIDIA H200 Tensor Core GPU datasheet, SXM column): 141 GB
-- HBM3e at 4.8 TB/s; the same Hopper compute as the H100 SXM: 989 TFLOP/s
-- dense BF16/FP16, 67 TFLOP/s FP32, 1,979 TFLOP/s dense FP8; NVLink 4 at
-- 450 GB/s each way; PCIe 5.0 x16.  nvidia-smi reports 143771 MiB.
--
-- NOT CALIBRATED: no H200 was available when the time model was validated
-- (docs/validation.md), and no public table in validation/ runs on one.  On
-- an H200, measure this file with
--   memsim calibrate --backend cuda --device scenarios/devices/h200.lua \
--     --out scenarios/devices/h200.lua
-- (it keeps the data-sheet figures below and replaces the curves, the
-- GEMM/attention shape models, the latencies and overheads; FP8 GEMMs are
-- timed on cuBLASLt, so gemm.fp8 becomes a measurement).
--
-- MODELING ASSUMPTIONS TO CALIBRATE (not measurements): the efficiency and
-- bandwidth curves, the latencies and overheads, the FP8 GEMM ceiling
-- (taken from the H100 file; the larger HBM bandwidth makes memory-bound
-- kernels relatively faster).
return {
  name = "h200",
  hbm_bytes = 143771 * 1048576,
  hbm_bandwidth_gbs = 4800,
  host_pinned_gib = 200,
  peak_tflops = { bf16 = 989, fp16 = 989, fp32 = 67, fp8 = 1979, int8 = 1979 },
  matmul_efficiency = {
    {1e8, 0.25}, {1e9, 0.40}, {1e10, 0.58}, {1e11, 0.68}, {1e12, 0.74}, {1e13, 0.77},
  },
  attention_efficiency = {
    {1e8, 0.18}, {1e9, 0.32}, {1e10, 0.48}, {1e11, 0.58}, {1e12, 0.62},
  },
  -- FP8 GEMMs: the H100 file's fitted ceiling (validation/nemo-h100-fp8.csv;
  -- docs/validation.md), carried over because the H200 has the H100's
  -- compute (the same GH100 tensor cores and clocks); an assumption for
  -- the H200, not a fit on it.  The half sizes are the A100 file's.
  gemm = { fp8 = 0.5547, m_half = 128, n_half = 128, k_half = 64 },
  hbm_efficiency = {
    {65536, 0.06}, {1048576, 0.35}, {16777216, 0.75}, {268435456, 0.88},
  },
  h2d_bandwidth = {
    {4096, 1.5}, {65536, 12.0}, {1048576, 32.0}, {16777216, 46.0}, {268435456, 50.0},
  },
  d2h_bandwidth = {
    {4096, 1.5}, {65536, 12.0}, {1048576, 32.0}, {16777216, 46.0}, {268435456, 50.0},
  },
  host_link_latency_us = 8,
  launch_overhead_us = 5,
  kernel_overhead_us = 2,
  launch_queue_depth = 1024,
  devices_per_node = 8,
  intra_node_bandwidth_gbs = 450,
  intra_node_latency_us = 6,
  inter_node_bandwidth_gbs = 50,
  inter_node_latency_us = 12,
}
