-- The job of NeMo-Framework-Launcher's
-- launcher_scripts/conf/training/llama/llama2_7b.yaml (../nemo_llama2_7b.yaml),
-- written by hand in memsim's own keys.  Llama 2 7B on Megatron-core (NeMo):
-- 32 layers, hidden 4096, FFN 11008 (fast-swiglu), 32 heads, RMSNorm, rope,
-- no biases, untied output layer, no dropout; sequence 4096; Llama 2's
-- 32000 tokens (the sentencepiece model NeMo reads), padded to a multiple
-- of 128 x TP 1 (unchanged).  bf16, flash attention.  16 nodes of 8 GPUs,
-- TP 1, PP 1, Megatron-core's distributed optimizer with overlapped grad
-- reduction and param gather, micro-batch 1, global batch 2048.
return {
  name = "nemo_llama2_7b",
  device = "h100-80gb",
  model = {
    arch = "gpt", num_layers = 32, hidden_size = 4096, ffn_hidden_size = 11008,
    num_attention_heads = 32, seq_length = 4096, padded_vocab_size = 32000,
    normalization = "RMSNorm", swiglu = true, position_embedding_type = "rope",
    add_bias_linear = false, untie_embeddings = true, hidden_dropout = 0.0,
    attention_dropout = 0.0, use_flash_attn = true, dtype = "bf16",
  },
  parallel = {
    world_size = 128, tensor_model_parallel_size = 1, pipeline_model_parallel_size = 1,
    sequence_parallel = false, use_distributed_optimizer = true, overlap_grad_reduce = true,
    overlap_param_gather = true, micro_batch_size = 1, global_batch_size = 2048,
  },
}
