-- GPT-175B trimmed to 8 layers on one node of 8 Ascend 910B NPUs, TP 2 PP 4
-- with 2 virtual stages (seed 000: MindSpeed's adaptive memory
-- optimization, third table: seq-length 8192, micro-batch-size 2,
-- global-batch-size 8, TP 2, PP 4, VPP 2, DP 1, CP 1, 8 layers, hidden
-- 12288; 86.10 TFLOP/s with adaptive memory optimization vs 75.10 with full
-- recompute of 1 layer, +14.65%).
--
-- Model as in gpt-175b-trimmed-tp2pp4.lua.  VPP 2 over 2 layers a stage is
-- one layer a virtual stage (num_layers_per_virtual_pipeline_stage = 1):
-- stage s holds layers s and 4 + s.  4 micro-batches a step, divisible by
-- PP as Megatron's interleaved schedule requires.  With m = p the first
-- stage's warmup ((p-1) x 2 + (v-1) x p = 10 steps) covers all m v = 8
-- chunk passes: all 4 micro-batches are in flight at once, fewer than the
-- p (1 + (p-1)/(p v)) = 5.5 Megatron's formula assumes.
-- Compare: memsim run scenarios/gpt-175b-trimmed-tp2pp4vpp2.lua --policy full_recompute --policy adaptive_memory
return {
  name = "gpt-175b-trimmed-tp2pp4vpp2",
  device = "ascend-910b",
  model = {
    arch = "gpt",
    num_layers = 8,
    hidden_size = 12288,
    ffn_hidden_size = 49152,
    num_attention_heads = 96,
    seq_length = 8192,
    padded_vocab_size = 50432,
    normalization = "LayerNorm",
    position_embedding_type = "learned_absolute",
    use_flash_attn = true,
    hidden_dropout = 0.1,
    attention_dropout = 0.1,
    dtype = "bf16",
  },
  parallel = {
    world_size = 8,
    tensor_model_parallel_size = 2,
    pipeline_model_parallel_size = 4,
    num_layers_per_virtual_pipeline_stage = 1,
    context_parallel_size = 1,
    sequence_parallel = true,
    micro_batch_size = 2,
    global_batch_size = 8,
  },
  allocator = { conf = "expandable_segments:False", flavour = "npu" },
  policy = "none",
  steps = 3,
  seed = 1,
}
