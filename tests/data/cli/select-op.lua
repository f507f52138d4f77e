-- Test scenario: a 2-layer llama (llama2-7B widths) at TP 8 without
-- sequence parallelism, selecting a single op for recompute (MindFormers'
-- select_recompute with a pattern inside a module).
return {
  name = "select-op",
  device = "ascend-910b",
  model = { arch = "llama", num_layers = 2, hidden_size = 4096, ffn_hidden_size = 11008,
            num_attention_heads = 32, seq_length = 4096, padded_vocab_size = 32000,
            use_flash_attn = true },
  parallel = { world_size = 8, tensor_model_parallel_size = 8, sequence_parallel = false,
               micro_batch_size = 4, global_batch_size = 8 },
  recompute_config = { recompute = false, select_recompute = { "feed_forward\\.w1\\.matmul" } },
  steps = 2,
  seed = 1,
}
