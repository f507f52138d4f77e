-- Llama 2 7B pretraining on one node of 8 Ascend 910B NPUs (seed 001, the
-- MindSpeed memory-fragmentation feature's llama2 7B setting).
--
-- Model: Touvron et al. 2023, "Llama 2: Open Foundation and Fine-Tuned Chat
-- Models", Table 1 / the released config: 32 layers, hidden 4096, 32 heads
-- (no GQA at 7B), SwiGLU MLP 11008, RMSNorm, RoPE, vocabulary 32000, untied
-- output layer.  Parallel layout as in seed 001: TP 8 with sequence
-- parallelism, no pipeline, DP 1; sequence 4096, micro-batch 4, global 16.
return {
  name = "llama2-7b",
  device = "ascend-910b",
  model = {
    arch = "llama",
    num_layers = 32,
    hidden_size = 4096,
    ffn_hidden_size = 11008,
    num_attention_heads = 32,
    num_query_groups = 32,
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
