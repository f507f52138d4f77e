-- GPT-175B trimmed to 8 layers on one node of 8 Ascend 910B NPUs, TP 2 PP 4
-- (seed 000: MindSpeed's adaptive memory optimization, second table:
-- seq-length 8192, micro-batch-size 3, global-batch-size 9, TP 2, PP 4,
-- DP 1, CP 1, 8 layers, hidden 12288; 76.30 TFLOP/s with adaptive memory
-- optimization vs 66.50 with full recompute of 1 layer, +14.17%).
--
-- Model as in gpt-175b-trimmed-tp8.lua (GPT-3 175B's layer, Megatron GPT
-- defaults, 8 layers); the vocabulary padded to a multiple of 128 x TP =
-- 256: 50432.  Two layers a stage, 3 micro-batches a step: fewer than the 4
-- stages, so 1F1B's first stage holds 3 micro-batches, not 4 (Megatron's
-- formula discounts by min(1, m/p) the same way).  Flash attention and
-- sequence parallelism assumed on, bf16.  Stages 0-3 hold ranks 0-1, 2-3,
-- 4-5, 6-7: all p2p stays in the node.
-- Compare: memsim run scenarios/gpt-175b-trimmed-tp2pp4.lua --policy full_recompute --policy adaptive_memory
return {
  name = "gpt-175b-trimmed-tp2pp4",
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
    context_parallel_size = 1,
    sequence_parallel = true,
    micro_batch_size = 3,
    global_batch_size = 9,
  },
  allocator = { conf = "expandable_segments:False", flavour = "npu" },
  policy = "none",
  steps = 3,
  seed = 1,
}
