-- Fixture: a negative layer count.
return {
  device = "ascend-910b",
  model = { arch = "gpt", num_layers = -4, hidden_size = 1024, num_attention_heads = 8,
            seq_length = 128, padded_vocab_size = 1024 },
}
