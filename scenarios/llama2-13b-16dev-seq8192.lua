-- Llama 2 13B pretraining on two nodes of 8 Ascend 910B NPUs (16 NPUs),
-- sequence 8192 (seed 001, the MindSpeed memory-fragmentation feature's
-- table, row 6: seq-length=8192, micro-batch-size=2, global-batch-size=16,
-- TP=8, PP=1, flash attention, 16 NPUs).
--
-- The seed's row says DP=1, but 16 NPUs at TP 8 and PP 1 make two
-- data-parallel replicas: memsim takes the NPU count (DP 2, so 16 / (2 x 2)
-- = 4 micro-batches a step); set parallel.world_size=8 for DP 1.
--
-- Model: Touvron et al. 2023, "Llama 2", Table 1 / the released 13B config:
-- 40 layers, hidden 5120, 40 heads, SwiGLU 13824, RMSNorm, RoPE, vocabulary
-- 32000, untied output layer.  Sequence parallelism on with TP 8.
return {
  name = "llama2-13b-16dev-seq8192",
  device = "ascend-910b",
  model = {
    arch = "llama",
    num_layers = 40,
    hidden_size = 5120,
    ffn_hidden_size = 13824,
    num_attention_heads = 40,
    num_query_groups = 40,
    seq_length = 8192,
    padded_vocab_size = 32000,
    use_flash_attn = true,
    dtype = "bf16",
  },
  parallel = {
    world_size = 16,
    tensor_model_parallel_size = 8,
    pipeline_model_parallel_size = 1,
    sequence_parallel = true,
    micro_batch_size = 2,
    global_batch_size = 16,
  },
  allocator = { conf = "expandable_segments:False", flavour = "npu" },
  policy = "none",
  steps = 3,
  seed = 1,
}
