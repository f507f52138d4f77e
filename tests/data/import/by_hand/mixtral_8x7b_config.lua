-- The model of mistralai/Mixtral-8x7B-v0.1's config.json
-- (../mixtral_8x7b_config.json), written by hand in memsim's own keys, with
-- the training settings memsim import gives a model config (sequence 4096,
-- flash attention, TP 8 with sequence parallelism, the distributed optimizer,
-- micro-batch 1; tests/import.sh runs it on 64 GPUs with EP 8).  The model:
-- 32 layers, hidden 4096, 8 experts of FFN 14336 (SiLU-gated), top-2
-- routing, 32 heads in 8 query groups, RMSNorm, rope, untied output layer,
-- no biases, no attention dropout, vocabulary 32000.
return {
  name = "mixtral_8x7b_config",
  device = "h100-80gb",
  model = {
    arch = "llama", num_layers = 32, hidden_size = 4096, ffn_hidden_size = 14336,
    num_attention_heads = 32, num_query_groups = 8, seq_length = 4096,
    padded_vocab_size = 32000, use_flash_attn = true, attention_dropout = 0.0,
    num_experts = 8, moe_router_topk = 2,
  },
  parallel = {
    world_size = 8, tensor_model_parallel_size = 8, sequence_parallel = true,
    use_distributed_optimizer = true, micro_batch_size = 1,
  },
}
