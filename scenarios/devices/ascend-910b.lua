-- Huawei Ascend 910B (as in the Atlas 800T A2 training server, 8 NPUs a node).
--
-- Data-sheet figures: 64 GiB HBM2e at about 1.6 TB/s; about 313 TFLOP/s
-- dense FP16/BF16 per NPU (Huawei Atlas 800T A2 product page / data sheet,
-- "Ascend 910B ... 313 TFLOPS FP16"; the figure varies by 910B bin, check
-- yours with npu-smi and a matmul benchmark).  Nodes: HCCS full mesh between
-- the 8 NPUs, 8 x 200 GbE RoCE to other nodes.
--
-- The host link: MindSpeed's SmartSwap plans with 25.6 GB/s host<->device
-- copies (mindspeed/core/memory/smart_swap), which is what the large-copy end
-- of the curves below uses.
--
-- MODELING ASSUMPTIONS TO CALIBRATE (not measurements): the efficiency and
-- bandwidth curves, the fp32 peak, the latencies and overheads.  Calibrate
-- them with memsim's calibration against profiles of your machine.
return {
  name = "ascend-910b",
  hbm_gib = 64,
  hbm_bandwidth_gbs = 1600,
  host_pinned_gib = 128,            -- pinned host RAM per NPU usable for swap (1.5 TB / 8, leaving room)
  peak_tflops = {
    bf16 = 313,
    fp16 = 313,
    fp32 = 78,                      -- assumption: no public dense fp32 figure; used for fp32 elementwise and optimizer ops
    int8 = 626,
  },
  -- Fraction of peak reached by one kernel of x FLOPs (Calculon-style table):
  -- small kernels are launch- and tail-bound, large GEMMs reach ~75%.
  matmul_efficiency = {
    {1e8, 0.30}, {1e9, 0.45}, {1e10, 0.60}, {1e11, 0.70}, {1e12, 0.75}, {1e13, 0.78},
  },
  attention_efficiency = {
    {1e8, 0.20}, {1e9, 0.35}, {1e10, 0.50}, {1e11, 0.58}, {1e12, 0.62},
  },
  -- Fraction of HBM bandwidth reached by one kernel moving x bytes.
  hbm_efficiency = {
    {65536, 0.08}, {1048576, 0.40}, {16777216, 0.75}, {268435456, 0.85},
  },
  -- Host copies of x bytes, GB/s per direction (pinned memory).
  h2d_bandwidth = {
    {4096, 1.0}, {65536, 8.0}, {1048576, 18.0}, {16777216, 24.0}, {268435456, 25.6},
  },
  d2h_bandwidth = {
    {4096, 1.0}, {65536, 8.0}, {1048576, 18.0}, {16777216, 24.0}, {268435456, 25.6},
  },
  host_link_latency_us = 10,
  launch_overhead_us = 10,          -- torch_npu eager dispatch of one op
  kernel_overhead_us = 3,
  launch_queue_depth = 1024,
  devices_per_node = 8,
  intra_node_topology = "mesh",
  intra_node_bandwidth_gbs = 196,   -- HCCS: 7 links to the other NPUs, ~28 GB/s each way
  intra_node_latency_us = 10,
  inter_node_bandwidth_gbs = 25,    -- one 200 GbE RoCE port per NPU
  inter_node_latency_us = 20,
  -- GEMM efficiency by shape (docs/validation.md).  bf16: fitted on the
  -- train rows of validation/mindspeed-910b.csv (seed 000, MindSpeed on
  -- 8 x 910B) together with collective_efficiency.send_recv below:
  --   memsim validate validation/mindspeed-910b.csv \
  --     --fit ascend-910b:gemm.bf16,ascend-910b:collective_efficiency.send_recv
  -- gave 0.805 +- 0.058 (RMS log error 0.031 on the 3 train rows); fp16 is
  -- taken equal (the data sheet gives both the same peak).  The
  -- half-saturation sizes are the A100 file's (assumptions: no public 910B
  -- GEMM sweep).  Recalibrate with `memsim calibrate --backend npu`.
  gemm = { bf16 = 0.805, fp16 = 0.805, fp32 = 0.78, m_half = 128, n_half = 128, k_half = 64 },
  -- Fused attention (MindSpeed's npu_fusion_attention): the old attention
  -- curve's large end, per counted FLOP (executed_fraction 1: the skipped
  -- causal blocks are not separated from the ceiling without a profile).
  -- Assumptions, to calibrate.
  flash_attention = { max = 0.62, seq_half = 512, head_dim_half = 16, executed_fraction = 1 },
  -- Bus bandwidth of each collective kind relative to an all-reduce's
  -- (1: the same).  send_recv prices the pipeline's p2p transfers; the fit
  -- above gave 0.0303 +- 0.0058.  That is NOT a measured HCCS p2p
  -- bandwidth (it leaves ~0.85 GB/s of a 28 GB/s link): it is an effective
  -- factor that carries the pipeline costs the model lacks on the seed's
  -- PP runs (docs/validation.md, "What the model does not capture").
  -- Replace it by a measured value (memsim calibrate --backend npu) when
  -- one exists.
  collective_efficiency = { send_recv = 0.0303 },
  -- Where the fitted values came from (memsim validate --write-devices).
  provenance = {
    source = "memsim validate: fitted gemm.bf16 collective_efficiency.send_recv on the train rows of validation/mindspeed-910b.csv",
    date = "2026-11-23T16:30:10Z",
    device = "ascend-910b",
    command = "memsim validate validation/mindspeed-910b.csv --fit ascend-910b:gemm.bf16,ascend-910b:collective_efficiency.send_recv",
  },
  residuals = { validation = 0.0307 },
}
