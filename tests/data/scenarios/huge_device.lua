-- Fixture: the device file (devices/huge-device.lua next to this file) has
-- more memory than the mock's 8 TiB window for device memory holds.
return {
  device = "huge-device",
  model = { arch = "llama", num_layers = 2, hidden_size = 1024, num_attention_heads = 8,
            seq_length = 128, padded_vocab_size = 1024 },
}
