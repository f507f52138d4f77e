-- MindFormers' recompute_config example (seed 003, "YAML 参数配置"): 48
-- layers, pp_interleave_num 2, pipeline_stage 5, offset
-- [[0,1,1,1,1],[1,1,1,1,0]], every form of the three options.  memsim must
-- print MindFormers' three "Formative" lines exactly.  Small layer sizes:
-- only the op names matter here.
return {
  device = "ascend-910b",
  model = {
    arch = "llama", num_layers = 48, hidden_size = 256, ffn_hidden_size = 512,
    num_attention_heads = 4, seq_length = 256, padded_vocab_size = 1024,
    use_flash_attn = true,
  },
  parallel = {
    world_size = 5, pipeline_model_parallel_size = 5, pp_interleave_num = 2,
    micro_batch_size = 1, global_batch_size = 5, -- 5 micro-batches: one per stage
    offset = { {0, 1, 1, 1, 1}, {1, 1, 1, 1, 0} },
  },
  recompute_config = {
    recompute = { {2, 1, 0, 0, 0}, {1, 0, 0, 0, 0} },
    -- YAML keeps the dict's order; a Lua table does not, so the ordered
    -- form (a list of one-entry tables) states it.
    select_recompute = {
      { ["feed_forward\\.w1\\.activation\\.silu"] = true },
      { ["feed_forward\\.mul"] = true },
      { ["feed_forward\\.w1\\.matmul"] = { {1, 0, 0, 0, 0}, {2, 1, 0, 0, 0} } },
      { ["feed_forward\\.w3\\.matmul"] = {2, 1, 0, 0, 0} },
    },
    select_comm_recompute = { "ffn_norm\\.norm", "attention_norm\\.norm" },
  },
}
