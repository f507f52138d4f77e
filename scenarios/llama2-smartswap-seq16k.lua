-- SmartSwap's second reported case (seed 002, MindSpeed SmartSwap, "使用效果"
-- 2: llama2 on 8 NPUs, PP 1, sequence 16K, 40 layers; turning full
-- recompute off and letting SmartSwap keep memory in bounds gave +28%).
-- This file has full recompute on, in MindFormers' words
-- (recompute_config.recompute = true: every layer); the other side is
--   memsim run scenarios/llama2-smartswap-seq16k.lua --set recompute_config.recompute=false --policy smart_swap
-- (Megatron's words for the same: recompute = { recompute_granularity =
-- "full", recompute_method = "uniform", recompute_num_layers = 1 }).
--
-- Model: 40 layers is Llama 2 13B (Touvron et al. 2023, Table 1 / the
-- released config: hidden 5120, 40 heads, SwiGLU 13824, RMSNorm, RoPE,
-- vocabulary 32000).  Not stated by the seed, our choice: TP 8 with
-- sequence parallelism (16K tokens of a 13B model need it on 64 GiB NPUs),
-- micro-batch 1, global batch 16, bf16, flash attention, the distributed
-- optimizer.
return {
  name = "llama2-smartswap-seq16k",
  device = "ascend-910b",
  model = {
    arch = "llama",
    num_layers = 40,
    hidden_size = 5120,
    ffn_hidden_size = 13824,
    num_attention_heads = 40,
    num_query_groups = 40,
    seq_length = 16384,
    padded_vocab_size = 32000,
    use_flash_attn = true,
    dtype = "bf16",
  },
  parallel = {
    world_size = 8,
    tensor_model_parallel_size = 8,
    pipeline_model_parallel_size = 1,
    sequence_parallel = true,
    use_distributed_optimizer = true,
    micro_batch_size = 1,
    global_batch_size = 16,
  },
  recompute_config = { recompute = true },
  allocator = { conf = "", flavour = "npu" },
  policy = "none",
  steps = 3,
  seed = 1,
}
