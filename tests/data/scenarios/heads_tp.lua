-- Fixture: 30 attention heads do not split over tensor parallel 4.
return {
  device = "ascend-910b",
  model = { arch = "gpt", num_layers = 2, hidden_size = 3840, num_attention_heads = 30,
            seq_length = 128, padded_vocab_size = 1024 },
  parallel = { tensor_model_parallel_size = 4, world_size = 4 },
}
