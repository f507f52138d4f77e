-- Fixture: a misspelt key inside model.
return {
  device = "ascend-910b",
  model = { arch = "llama", num_layers = 2, hiden_size = 1024, num_attention_heads = 8,
            seq_length = 128, padded_vocab_size = 1024 },
}
