-- Llama 3 8B pretraining on one node of 8 H100 80GB GPUs, sequence 8192.
--
-- Model: Meta's Llama 3 8B (the model card and the released
-- config.json): 32 layers, hidden 4096, 32 query heads in 8 key-value groups
-- (GQA), SwiGLU 14336, RMSNorm, RoPE, vocabulary 128256 (a multiple of 8,
-- no padding needed at TP 2), untied output layer, sequence 8192.
-- Layout: NVIDIA's published Llama 3 8B pretraining recipe on 8 H100s
-- (DGX Cloud benchmarking recipe: TP 1, PP 1, CP 2, micro-batch 1, global
-- batch 128, bf16) splits each sequence 2 ways with context parallelism,
-- which memsim does not build yet; this file splits it the same 2 ways with
-- TP 2 and sequence parallelism instead (DP 4, 32 micro-batches a step),
-- with flash attention and the distributed optimizer (NeMo's defaults).
return {
  name = "llama3-8b",
  device = "h100-80gb",
  model = {
    arch = "llama",
    num_layers = 32,
    hidden_size = 4096,
    ffn_hidden_size = 14336,
    num_attention_heads = 32,
    num_query_groups = 8,
    seq_length = 8192,
    padded_vocab_size = 128256,
    use_flash_attn = true,
    dtype = "bf16",
  },
  parallel = {
    world_size = 8,
    tensor_model_parallel_size = 2,
    pipeline_model_parallel_size = 1,
    sequence_parallel = true,
    use_distributed_optimizer = true,
    micro_batch_size = 1,
    global_batch_size = 128,
  },
  allocator = { conf = "", flavour = "cuda" },
  policy = "none",
  steps = 3,
  seed = 1,
}
