-- The job of Megatron-LM's examples/gpt3/train_gpt3_175b_distributed.sh
-- (../train_gpt3_175b_distributed.sh), written by hand in memsim's own keys,
-- for tests/import.sh to check `memsim import` against.  GPT-3 175B: 96
-- layers, hidden 12288, 96 heads, sequence 2048, fp16; Megatron's GPT
-- defaults (LayerNorm, GeLU MLP of 4h, learned positions, biases, dropout
-- 0.1, tied embeddings).  The GPT-2 BPE vocabulary (50257) padded to a
-- multiple of 128 x TP 8 = 1024: 51200.  --attention-backend auto: fused
-- attention.  With --fp16 and no --accumulate-allreduce-grads-in-fp32
-- Megatron keeps the main grads in fp16; no --overlap-grad-reduce.  TP 8,
-- PP 16 on 128 GPUs (the script's NUM_NODES=1 is to be changed for it),
-- micro-batch 1, global batch 1536.
return {
  name = "train_gpt3_175b_distributed",
  device = "h100-80gb",
  model = {
    arch = "gpt", num_layers = 96, hidden_size = 12288, num_attention_heads = 96,
    ffn_hidden_size = 4 * 12288, seq_length = 2048, padded_vocab_size = 51200,
    use_flash_attn = true, dtype = "fp16",
  },
  parallel = {
    world_size = 128, tensor_model_parallel_size = 8, pipeline_model_parallel_size = 16,
    micro_batch_size = 1, global_batch_size = 1536,
    overlap_grad_reduce = false, grad_reduce_in_fp32 = false,
  },
}
