-- Llama 2 7B pretraining on one node of 8 Ascend 910B NPUs, sequence 6144
-- (seed 001, the MindSpeed memory-fragmentation feature's table, row 2:
-- seq-length=6144, micro-batch-size=4, global-batch-size=16, TP=8, PP=1,
-- DP=1, flash attention, 8 NPUs).
--
-- Model: Touvron et al. 2023, "Llama 2", Table 1 / the released config: 32
-- layers, hidden 4096, 32 heads, SwiGLU 11008, RMSNorm, RoPE, vocabulary
-- 32000, untied output layer.  Sequence parallelism on with TP 8, as in
-- scenarios/llama2-7b.lua (the seed's row 1).
return {
  name = "llama2-7b-seq6144",
  device = "ascend-910b",
  model = {
    arch = "llama",
    num_layers = 32,
    hidden_size = 4096,
    ffn_hidden_size = 11008,
    num_attention_heads = 32,
    num_query_groups = 32,
    seq_length = 6144,
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
    world_size = 8,
    tensor_model_parallel_size = 8,
    pipeline_model_parallel_size = 1,
    context_parallel_size = 1,
    sequence_parallel = true,
    use_distributed_optimizer = false,
    micro_batch_size = 4,
    global_batch_size = 16,
  },
  allocator = { conf = "expandable_segments:False", flavour = "npu" },
  policy = "none",
  steps = 3,
  seed = 1,
}
