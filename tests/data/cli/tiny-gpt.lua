-- A small gpt scenario for fast end-to-end tests (2 layers, seq 512).
return {
  name = "tiny-gpt",
  device = "a100-80gb",
  model = { arch = "gpt", num_layers = 2, hidden_size = 1024, num_attention_heads = 16,
            seq_length = 512, padded_vocab_size = 32000 },
  parallel = { world_size = 2, tensor_model_parallel_size = 2, sequence_parallel = true,
               micro_batch_size = 2, global_batch_size = 4 },
  steps = 3,
  seed = 7,
}
