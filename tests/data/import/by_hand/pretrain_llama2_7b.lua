-- The job of MindFormers' configs/llama2/pretrain_llama2_7b.yaml
-- (../pretrain_llama2_7b.yaml), written by hand in memsim's own keys.
-- MindFormers' llama 7B: 32 layers, hidden 4096, 32 heads, FFN 2/3 x 4h
-- rounded up to 256 (11008; memsim's llama default), sequence 4096,
-- vocabulary 32000 (not padded), flash attention; computes in fp16 with
-- fp16 parameters, so fp16 gradients.  8 NPUs: data parallel 8, with the
-- parallel optimizer (sharded optimizer state); batch 1 with 8 gradient
-- accumulation steps (no pipeline): global batch 64.  MindSpore's memory
-- pool, capped at max_device_memory 58GB (MindSpore's GB are GiB).  The
-- recompute_config as written there.
return {
  name = "pretrain_llama2_7b",
  device = "ascend-910b",
  device_memory = "58GiB",
  model = {
    arch = "llama", num_layers = 32, hidden_size = 4096, num_attention_heads = 32,
    seq_length = 4096, padded_vocab_size = 32000, use_flash_attn = true, dtype = "fp16",
  },
  parallel = {
    world_size = 8, tensor_model_parallel_size = 1, pipeline_model_parallel_size = 1,
    sequence_parallel = false, use_distributed_optimizer = true, grad_reduce_in_fp32 = false,
    micro_batch_size = 1, global_batch_size = 64, offset = 0,
  },
  allocator = { flavour = "mindspore" },
  recompute_config = {
    recompute = false, select_recompute = false, parallel_optimizer_comm_recompute = false,
    mp_comm_recompute = true, recompute_slice_activation = true,
  },
}
