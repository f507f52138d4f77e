-- Mixtral 8x7B pretraining on 4 nodes of 8 H100 80GB GPUs.
--
-- Model: Mistral AI, "Mixtral of Experts" (Jiang et al. 2024,
-- arXiv:2401.04088) and the released config.json: 32 layers, hidden 4096,
-- 32 heads in 8 key-value groups, every MLP a mixture of 8 SwiGLU experts
-- of 14336 with top-2 routing, RMSNorm, RoPE, vocabulary 32000, untied
-- output layer: 46.7B parameters, 12.9B active per token.
-- Layout: Megatron-LM's recommended training layout for it
-- (examples/mixtral/README.md: "TP1EP8PP4"), with the all-to-all token
-- dispatcher, the distributed optimizer and bf16 of its example script;
-- 32 GPUs make DP 8, so each DP rank holds one expert of each of its 8
-- layers (EP 8) and an expert's grads are reduced over DP / EP = 1 rank.
-- No token dropping (moe_expert_capacity_factor 0: Megatron's default
-- None).  Sequence 4096, micro-batch 1, global batch 256: 32 micro-batches.
return {
  name = "mixtral-8x7b",
  device = "h100-80gb",
  model = {
    arch = "llama",
    num_layers = 32,
    hidden_size = 4096,
    ffn_hidden_size = 14336,
    num_attention_heads = 32,
    num_query_groups = 8,
    seq_length = 4096,
    padded_vocab_size = 32000,
    normalization = "RMSNorm",
    swiglu = true,
    untie_embeddings = true,
    use_flash_attn = true,
    dtype = "bf16",
    num_experts = 8,
    moe_router_topk = 2,
    moe_ffn_hidden_size = 14336,
    moe_expert_capacity_factor = 0,
  },
  parallel = {
    world_size = 32,
    tensor_model_parallel_size = 1,
    pipeline_model_parallel_size = 4,
    expert_model_parallel_size = 8,
    context_parallel_size = 1,
    sequence_parallel = false,
    use_distributed_optimizer = true,
    micro_batch_size = 1,
    global_batch_size = 256,
  },
  allocator = { conf = "", flavour = "cuda" },
  policy = "none",
  steps = 3,
  seed = 1,
}
