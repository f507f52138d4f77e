-- recompute_config.recompute as per-stage counts, one entry short: two
-- pipeline stages need two counts.
return {
  device = "ascend-910b",
  model = {
    arch = "llama", num_layers = 4, hidden_size = 256, num_attention_heads = 4,
    seq_length = 256, padded_vocab_size = 1024,
  },
  parallel = { world_size = 2, pipeline_model_parallel_size = 2 },
  recompute_config = { recompute = {1} },
}
