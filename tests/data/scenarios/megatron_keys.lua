-- A gpt model stated in Megatron-LM's own argument names (tests/unit/
-- test_scenario_megatron.c sets the rest with overrides): the vocabulary is
-- given unpadded, as --vocab-size, for the loader to pad as Megatron does.
return {
  device = "a100-80gb",
  model = {
    arch = "gpt", num_layers = 2, hidden_size = 1024, num_attention_heads = 16,
    seq_length = 2048, vocab_size = 50257,
  },
  parallel = { world_size = 8, tensor_model_parallel_size = 8 },
}
