-- Fixture: the device file (devices/bad-device.lua next to this file) has a
-- misspelt key.
return {
  device = "bad-device",
  model = { arch = "llama", num_layers = 2, hidden_size = 1024, num_attention_heads = 8,
            seq_length = 128, padded_vocab_size = 1024 },
}
