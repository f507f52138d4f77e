-- A select_recompute pattern that matches no op of a llama layer (the MLP's
-- gate is feed_forward.w1, there is no w9): loads, then fails the check.
return {
  device = "ascend-910b",
  model = {
    arch = "llama", num_layers = 2, hidden_size = 256, num_attention_heads = 4,
    seq_length = 256, padded_vocab_size = 1024,
  },
  recompute_config = { select_recompute = { [ [[feed_forward\.w9]] ] = true } },
}
