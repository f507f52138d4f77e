-- Fine-grained activation swap mixed with recompute (seed 003, "示例四：细粒度
-- 激活值SWAP与重计算混用"): example three's op_swap plus select_recompute of the
-- feed-forward block in layers 0 and 3.  With swap on, MindFormers reads
-- recompute options as layer indices.  Recompute wins where both apply; here
-- they do not overlap (feed_forward is swapped in layers 1 and 2 only).
-- MindFormers logs
--   Set select recompute at layer 0: feed_forward
--   Set op_swap at layer 0: .attention, value=20
--   Set op_swap at layer 1: .attention, value=20, .feed_forward, value=15
--   Set op_swap at layer 2: .attention, value=20, .feed_forward, value=15
--   Set select recompute at layer 3: feed_forward
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
  name = "llama2-7b-swap-recompute",
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
    select_recompute = { feed_forward = {0, 3} },
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
