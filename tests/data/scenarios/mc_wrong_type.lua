-- swap_config.layer_swap's layers must be true, false or layer indices.
return {
  device = "ascend-910b",
  model = {
    arch = "llama", num_layers = 2, hidden_size = 256, num_attention_heads = 4,
    seq_length = 256, padded_vocab_size = 1024,
  },
  swap_config = { swap = true, layer_swap = { { backward_prefetch = 2, layers = "all" } } },
}
