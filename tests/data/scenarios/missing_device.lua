-- Fixture: a device with no device file anywhere.
return {
  device = "tpu-v9",
  model = { arch = "llama", num_layers = 2, hidden_size = 1024, num_attention_heads = 8,
            seq_length = 128, padded_vocab_size = 1024 },
}
