-- A small Mixtral-style MoE: 8 experts, top-2 routing, expert-parallel 2
-- over the 4 data-parallel ranks of a TP 2 layout.
return {
  device = "h100-80gb",
  model = {
    arch = "llama", num_layers = 2, hidden_size = 256, num_attention_heads = 4,
    num_query_groups = 2, seq_length = 256, padded_vocab_size = 1024,
    num_experts = 8,
  },
  parallel = { world_size = 8, tensor_model_parallel_size = 2, expert_model_parallel_size = 2 },
}
