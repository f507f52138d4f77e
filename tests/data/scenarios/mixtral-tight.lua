-- Test: mixtral-8x7b (scenarios/mixtral-8x7b.lua) on an H100 with 83.35% of
-- its memory (devices/h100-tight.lua), where stage 0 without decisions fits
-- one step from an empty cache and runs out of memory in the second, from
-- the first's (ctx:simulate with steps = 2 sees it).
return {
  name = "mixtral-tight",
  device = "h100-tight",
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
