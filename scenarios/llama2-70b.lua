-- Llama 2 70B pretraining on 4 nodes of 8 Ascend 910B NPUs (seed 001, the
-- MindSpeed memory-fragmentation feature's llama2-70B row: seq-length 4096,
-- micro-batch-size 2, global-batch-size 1024, TP 8, PP 4, DP 1, flash
-- attention, 32 NPUs).
--
-- Model: Touvron et al. 2023, "Llama 2: Open Foundation and Fine-Tuned Chat
-- Models", Table 1 / the released config: 80 layers, hidden 8192, 64 heads
-- in 8 key-value groups (GQA), SwiGLU 28672, RMSNorm, RoPE, vocabulary
-- 32000, untied output layer; 68.98B parameters.  Sequence parallelism on
-- (MindSpeed's llama2-70B script uses it), bf16.  20 layers a stage, 512
-- micro-batches a step in 1F1B (the first stage holds 4 at its peak).  Each
-- stage is one node (TP 8 x DP 1 = 8 ranks): every p2p crosses nodes.
return {
  name = "llama2-70b",
  device = "ascend-910b",
  model = {
    arch = "llama",
    num_layers = 80,
    hidden_size = 8192,
    ffn_hidden_size = 28672,
    num_attention_heads = 64,
    num_query_groups = 8,
    seq_length = 4096,
    padded_vocab_size = 32000,
    normalization = "RMSNorm",
    swiglu = true,
    untie_embeddings = true,
    use_flash_attn = true,
    hidden_dropout = 0.0,
    attention_dropout = 0.0,
    dtype = "bf16",
  },
  parallel = {
    world_size = 32,
    tensor_model_parallel_size = 8,
    pipeline_model_parallel_size = 4,
    context_parallel_size = 1,
    sequence_parallel = true,
    use_distributed_optimizer = false,
    micro_batch_size = 2,
    global_batch_size = 1024,
  },
  allocator = { conf = "expandable_segments:False", flavour = "npu" },
  -- 1.57 M ops a step: per-op detail (ops.csv, memory.csv, trace.json) of
  -- the last step only, about 1.8 GB; that is over the default
  -- report.max_bytes (512 MiB), so only summary.csv is written unless
  -- --set report.max_bytes=2GiB.
  report = { detail = "last" },
  policy = "none",
  steps = 3,
  seed = 1,
}
