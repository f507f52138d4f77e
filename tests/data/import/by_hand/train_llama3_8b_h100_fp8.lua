-- The job of Megatron-LM's examples/llama/train_llama3_8b_h100_fp8.sh
-- (../train_llama3_8b_h100_fp8.sh), written by hand in memsim's own keys.
-- Llama 3 8B: 32 layers, hidden 4096, FFN 14336 (SwiGLU), 32 heads in 8
-- query groups, RMSNorm, rope, no biases, untied output layer, no dropout;
-- sequence 8192; the mock data's vocabulary 128256 (a multiple of 128 x TP 1
-- already).  bf16 with FP8 (hybrid) GEMMs, grads reduced in bf16; fused
-- attention.  8 GPUs, TP 1 (so Megatron turns --sequence-parallel off), the
-- distributed optimizer with overlapped grad reduction and param gather,
-- micro-batch 1, global batch 128.
return {
  name = "train_llama3_8b_h100_fp8",
  device = "h100-80gb",
  model = {
    arch = "gpt", num_layers = 32, hidden_size = 4096, ffn_hidden_size = 14336,
    num_attention_heads = 32, num_query_groups = 8, seq_length = 8192,
    padded_vocab_size = 128256, normalization = "RMSNorm", swiglu = true,
    position_embedding_type = "rope", add_bias_linear = false, untie_embeddings = true,
    hidden_dropout = 0.0, attention_dropout = 0.0, use_flash_attn = true,
    dtype = "bf16", fp8 = "hybrid",
  },
  parallel = {
    world_size = 8, tensor_model_parallel_size = 1, context_parallel_size = 1,
    sequence_parallel = false, use_distributed_optimizer = true,
    overlap_grad_reduce = true, overlap_param_gather = true, grad_reduce_in_fp32 = false,
    micro_batch_size = 1, global_batch_size = 128,
  },
}
