-- The job of Megatron-LM's examples/mixtral/train_mixtral_8x7b_distributed.sh
-- (../train_mixtral_8x7b_distributed.sh), written by hand in memsim's own
-- keys.  Mixtral 8x7B: 32 layers, hidden 4096, 8 experts of FFN 14336
-- (SwiGLU), top-2 routing, 32 heads in 8 query groups, RMSNorm, rope, no
-- biases, untied output layer, no dropout; sequence 4096; Llama 2's
-- tokenizer (32000, a multiple of 128).  bf16, fused attention.  4 nodes
-- of 8 GPUs (SLURM_NNODES=4), TP 1 (sequence parallelism off), PP 4, EP 8,
-- the distributed optimizer with overlapped grad reduction and param
-- gather, micro-batch 1, global batch 256.
return {
  name = "train_mixtral_8x7b_distributed",
  device = "h100-80gb",
  model = {
    arch = "gpt", num_layers = 32, hidden_size = 4096, ffn_hidden_size = 14336,
    num_attention_heads = 32, num_query_groups = 8, seq_length = 4096,
    padded_vocab_size = 32000, normalization = "RMSNorm", swiglu = true,
    position_embedding_type = "rope", add_bias_linear = false, untie_embeddings = true,
    hidden_dropout = 0.0, attention_dropout = 0.0, use_flash_attn = true, dtype = "bf16",
    num_experts = 8, moe_router_topk = 2,
  },
  parallel = {
    world_size = 32, tensor_model_parallel_size = 1, pipeline_model_parallel_size = 4,
    expert_model_parallel_size = 8, sequence_parallel = false,
    use_distributed_optimizer = true, overlap_grad_reduce = true, overlap_param_gather = true,
    micro_batch_size = 1, global_batch_size = 256,
  },
}
