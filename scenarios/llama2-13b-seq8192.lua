-- Llama 2 13B pretraining on one node of 8 Ascend 910B NPUs, sequence 8192
-- (seed 001, the MindSpeed memory-fragmentation feature's table, row 3:
-- seq-length=8192, micro-batch-size=4, global-batch-size=16, TP=8, PP=1,
-- DP=1, flash attention, 8 NPUs).
--
-- Model: Touvron et al. 2023, "Llama 2", Table 1 / the released 13B config:
-- 40 layers, hidden 5120, 40 heads (no GQA at 13B), SwiGLU 13824, RMSNorm,
-- RoPE, vocabulary 32000, untied output layer.  Sequence parallelism on
-- with TP 8 (MindSpeed's llama2 scripts pass --sequence-parallel).
return {
  name = "llama2-13b-seq8192",
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
    world_size = 8,
    tensor_model_parallel_size = 8,
    pipeline_model_parallel_size = 1,
    sequence_parallel = true,
    micro_batch_size = 4,
    global_batch_size = 16,
  },
  allocator = { conf = "expandable_segments:False", flavour = "npu" },
  policy = "none",
  steps = 3,
  seed = 1,
}
