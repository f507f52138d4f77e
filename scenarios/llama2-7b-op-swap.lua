-- Fine-grained activation swap of chosen ops in chosen layers (seed 003,
-- "示例三：选择特定层的特定算子使能SWAP"): the attention block's saved outputs in
-- layers 0-2 (prefetch 20) and 3 (prefetch 10), the feed-forward block's in
-- layers 1-2 (prefetch 15).  MindFormers logs
--   Set op_swap at layer 0: .attention, value=20
--   Set op_swap at layer 1: .attention, value=20, .feed_forward, value=15
--   Set op_swap at layer 2: .attention, value=20, .feed_forward, value=15
--   Set op_swap at layer 3: .attention, value=10
--
-- Model and layout: MindFormers' configs/llama2/pretrain_llama2_7b.yaml with
-- model_config.num_layers cut to 4 as the example does (hidden 4096, 32
-- heads, vocabulary 32000, seq_length 4096, fp16, use_flash_attention True;
-- parallel_config data_parallel 8, model_parallel 1, pipeline_stage 1;
-- batch_size 1 with gradient_accumulation_steps 8: global batch 64, 8
-- micro-batches; enable_parallel_optimizer True: the distributed optimizer).
-- Run `memsim run` on it to see those lines.
return {
  name = "llama2-7b-op-swap",
  device = "ascend-910b",
  model = {
    arch = "llama",
    num_layers = 4,
    hidden_size = 4096,
    ffn_hidden_size = 11008,
    num_attention_heads = 32,
    seq_length = 4096,
    padded_vocab_size = 32000,
    use_flash_attn = true,
    dtype = "fp16",
  },
  parallel = {
    world_size = 8,
    tensor_model_parallel_size = 1,
    pipeline_model_parallel_size = 1,
    use_distributed_optimizer = true,
    micro_batch_size = 1,
    global_batch_size = 64,
  },
  recompute_config = {
    recompute = false,
    select_recompute = false,
    select_comm_recompute = false,
  },
  swap_config = {
    swap = true,
    op_swap = {
      { op_name = "attention", backward_prefetch = 20, layers = {0, 1, 2} },
      { op_name = "attention", backward_prefetch = 10, layers = {3} },
      { op_name = "feed_forward", backward_prefetch = 15, layers = {1, 2} },
    },
  },
  -- MindFormers runs on MindSpore's dynamic memory pool (seed 003: static
  -- graph, memory_optimize_level O0), which frees a swapped block once its
  -- copy is done; not PyTorch's caching allocator.
  allocator = { conf = "", flavour = "mindspore" },
  policy = "none",
  steps = 3,
  seed = 1,
}
