-- Fine-grained activation swap, MindFormers' default policy (seed 003,
-- "示例一：默认SWAP策略"): swap on with neither layer_swap nor op_swap swaps
-- flash attention's saved outputs in every layer, prefetching them
-- default_prefetch = 10 ops before their backward use.  MindFormers logs
--   Set op_swap at layer 0: attention.flash_attention, value=10
--   ... (layers 0 to 3)
--
-- Model and layout: MindFormers' configs/llama2/pretrain_llama2_7b.yaml with
-- model_config.num_layers cut to 4 as the example does (hidden 4096, 32
-- heads, vocabulary 32000, seq_length 4096, fp16, use_flash_attention True;
-- parallel_config data_parallel 8, model_parallel 1, pipeline_stage 1;
-- batch_size 1 with gradient_accumulation_steps 8: global batch 64, 8
-- micro-batches; enable_parallel_optimizer True: the distributed optimizer).
-- Run `memsim run` on it to see those lines.
return {
  name = "llama2-7b-swap-default",
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
    default_prefetch = 10,
  },
  -- MindFormers runs on MindSpore's dynamic memory pool (seed 003: static
  -- graph, memory_optimize_level O0), which frees a swapped block once its
  -- copy is done; not PyTorch's caching allocator.
  allocator = { conf = "", flavour = "mindspore" },
  policy = "none",
  steps = 3,
  seed = 1,
}
