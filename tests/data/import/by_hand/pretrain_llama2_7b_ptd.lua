-- The job of MindSpeed-LLM's examples/mcore/llama2/pretrain_llama2_7b_ptd.sh
-- (../pretrain_llama2_7b_ptd.sh), written by hand in memsim's own keys.
-- Llama 2 7B on Megatron-core (MindSpeed-LLM): 32 layers, hidden 4096, FFN
-- 11008 (SwiGLU), 32 heads, RMSNorm, rope, no biases, untied output layer,
-- no dropout; sequence 4096; Llama 2's 32000 tokens, padded to a multiple of
-- 1 x TP 1 (unchanged).  bf16, flash attention.  8 Ascend NPUs, TP 1
-- (sequence parallelism off), PP 2, the distributed optimizer with
-- overlapped grad reduction, micro-batch 1, global batch 256; torch_npu's
-- allocator with expandable segments (PYTORCH_NPU_ALLOC_CONF).
return {
  name = "pretrain_llama2_7b_ptd",
  device = "ascend-910b",
  model = {
    arch = "gpt", num_layers = 32, hidden_size = 4096, ffn_hidden_size = 11008,
    num_attention_heads = 32, seq_length = 4096, padded_vocab_size = 32000,
    normalization = "RMSNorm", swiglu = true, position_embedding_type = "rope",
    add_bias_linear = false, untie_embeddings = true, hidden_dropout = 0.0,
    attention_dropout = 0.0, use_flash_attn = true, dtype = "bf16",
  },
  parallel = {
    world_size = 8, tensor_model_parallel_size = 1, pipeline_model_parallel_size = 2,
    sequence_parallel = false, use_distributed_optimizer = true, overlap_grad_reduce = true,
    micro_batch_size = 1, global_batch_size = 256,
  },
  allocator = { conf = "expandable_segments:True" },
}
