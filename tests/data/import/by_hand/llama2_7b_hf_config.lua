-- The model of meta-llama/Llama-2-7b-hf's config.json
-- (../llama2_7b_hf_config.json), written by hand in memsim's own keys, with
-- the training settings memsim import gives a model config (docs/
-- scenario-format.md, "Importing"): sequence 4096, flash attention, one
-- node of 8 H100s with TP 8 and sequence parallelism, the distributed
-- optimizer, micro-batch 1.  The model: 32 layers, hidden 4096, FFN 11008
-- (SiLU-gated), 32 heads (no GQA at 7B), RMSNorm, rope, untied output layer,
-- no biases, vocabulary 32000.
return {
  name = "llama2_7b_hf_config",
  device = "h100-80gb",
  model = {
    arch = "llama", num_layers = 32, hidden_size = 4096, ffn_hidden_size = 11008,
    num_attention_heads = 32, num_query_groups = 32, seq_length = 4096,
    padded_vocab_size = 32000, use_flash_attn = true,
  },
  parallel = {
    world_size = 8, tensor_model_parallel_size = 8, sequence_parallel = true,
    use_distributed_optimizer = true, micro_batch_size = 1,
  },
}
