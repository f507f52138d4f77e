-- Hostile: a scenario whose table carries a never-returning finalizer.
local t = {
  device = "a100-80gb",
  model = { arch = "gpt", num_layers = 2, hidden_size = 1024, num_attention_heads = 16,
            seq_length = 512, padded_vocab_size = 32000 },
  parallel = { world_size = 2, tensor_model_parallel_size = 2, micro_batch_size = 2,
               global_batch_size = 4 },
  steps = 1,
}
return setmetatable(t, { __gc = function() while true do end end })
