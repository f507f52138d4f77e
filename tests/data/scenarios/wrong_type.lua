-- Fixture: num_layers given as a string.
return {
  device = "ascend-910b",
  model = { arch = "llama", num_layers = "32", hidden_size = 1024, num_attention_heads = 8,
            seq_length = 128, padded_vocab_size = 1024 },
}
