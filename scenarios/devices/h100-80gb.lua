-- NVIDIA H100 80GB SXM5 (DGX H100 / HGX H100: 8 GPUs a node).
--
-- Data sheet (NVIDIA H100 Tensor Core GPU datasheet, SXM column): 80 GB HBM3
-- at 3.35 TB/s; 989 TFLOP/s dense BF16/FP16 tensor core (1,979 with
-- sparsity), 67 TFLOP/s FP32, 1,979 TFLOP/s dense FP8; NVLink 4: 900 GB/s
-- total, 450 GB/s each way; PCIe 5.0 x16: 64 GB/s each way nominal, about
-- 50 GB/s reached by pinned copies.  nvidia-smi reports 81559 MiB.  Nodes:
-- 8 x 400 Gb/s NDR InfiniBand, one per GPU.
--
-- NOT CALIBRATED ON HARDWARE: no H100 was available when the time model
-- was validated (docs/validation.md).  Only gemm.fp8 is fitted, on a public
-- table (validation/nemo-h100-fp8.csv, below).  On an H100, measure this
-- file with
--   memsim calibrate --backend cuda --device scenarios/devices/h100-80gb.lua \
--     --out scenarios/devices/h100-80gb.lua
-- (it keeps the data-sheet figures below and replaces the curves, the
-- GEMM/attention shape models, the latencies and overheads; FP8 GEMMs are
-- timed on cuBLASLt, so gemm.fp8 becomes a measurement).
--
-- MODELING ASSUMPTIONS TO CALIBRATE (not measurements): the efficiency and
-- bandwidth curves, the latencies and overheads.
return {
  name = "h100-80gb",
  hbm_bytes = 81559 * 1048576,
  hbm_bandwidth_gbs = 3350,
  host_pinned_gib = 200,            -- DGX H100: 2 TB host RAM for 8 GPUs
  peak_tflops = { bf16 = 989, fp16 = 989, fp32 = 67, fp8 = 1979, int8 = 1979 },
  matmul_efficiency = {
    {1e8, 0.25}, {1e9, 0.40}, {1e10, 0.58}, {1e11, 0.68}, {1e12, 0.74}, {1e13, 0.77},
  },
  attention_efficiency = {
    {1e8, 0.18}, {1e9, 0.32}, {1e10, 0.48}, {1e11, 0.58}, {1e12, 0.62},
  },
  -- FP8 GEMMs by shape (Transformer Engine's, as NeMo trains with them):
  -- fp8 fitted on the train rows of validation/nemo-h100-fp8.csv (NVIDIA's
  -- NeMo 24.07 FP8 pretraining table on DGX H100; docs/validation.md):
  --   memsim validate validation/nemo-h100-fp8.csv --fit h100-80gb:gemm.fp8
  -- gave 0.5547 +- 0.039 (RMS log error 0.082 on the 4 train rows).  It is
  -- an effective ceiling: it also carries what the model lacks on those
  -- runs (TE's amax/scale updates, NeMo's tensor-parallel communication
  -- overlap, ...).  The half-saturation sizes are the A100 file's
  -- (assumptions).  bf16/fp16 keep matmul_efficiency (no gemm entry: no
  -- public bf16 H100 table was at hand).
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
  intra_node_bandwidth_gbs = 450,   -- NVLink 4 via NVSwitch, each way
  intra_node_latency_us = 6,
  inter_node_bandwidth_gbs = 50,    -- NDR InfiniBand 400 Gb/s per GPU
  inter_node_latency_us = 12,
  -- Where the fitted value came from (memsim validate --write-devices).
  provenance = {
    source = "memsim validate: fitted gemm.fp8 on the train rows of validation/nemo-h100-fp8.csv",
    date = "2026-11-24T21:47:00Z",
    device = "h100-80gb",
    command = "memsim validate validation/nemo-h100-fp8.csv --fit h100-80gb:gemm.fp8",
  },
  residuals = { validation = 0.0818 },
}
