-- SmartSwap's first reported case, the TP 8 side (seed 002, MindSpeed
-- SmartSwap, "使用效果" 1: llama2 on 8 NPUs, PP 1, sequence 8K, 32 layers;
-- moving from TP 8 to TP 1 and letting SmartSwap keep memory in bounds gave
-- +25% throughput).  The pair is scenarios/llama2-smartswap-tp8.lua and
-- scenarios/llama2-smartswap-tp1.lua; compare them with --policy smart_swap.
--
-- Model: Llama 2 7B (32 layers; Touvron et al. 2023, Table 1 / the released
-- config: hidden 4096, 32 heads, SwiGLU 11008, RMSNorm, RoPE, vocabulary
-- 32000).  Not stated by the seed, our choice: micro-batch 1, global batch
-- 16 (here 16 micro-batches per DP rank), bf16, flash attention, the
-- distributed optimizer (MindSpeed's llama2 scripts pass
-- --use-distributed-optimizer), sequence parallelism with TP > 1.
return {
  name = "llama2-smartswap-tp8",
  device = "ascend-910b",
  model = {
    arch = "llama",
    num_layers = 32,
    hidden_size = 4096,
    ffn_hidden_size = 11008,
    num_attention_heads = 32,
    num_query_groups = 32,
    seq_length = 8192,
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
  allocator = { conf = "", flavour = "npu" },
  policy = "none",
  steps = 3,
  seed = 1,
}
