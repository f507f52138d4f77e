-- GPT-175B trimmed to 8 layers on one node of 8 Ascend 910B NPUs, TP 8
-- (seed 000: MindSpeed's adaptive memory optimization, first table:
-- seq-length 8192, micro-batch-size 10, global-batch-size 40, TP 8, PP 1,
-- DP 1, CP 1, 8 layers, hidden 12288; 165.90 TFLOP/s with adaptive memory
-- optimization vs 145.93 with full recompute, +13.68%).
--
-- Model: GPT-3 175B (Brown et al. 2020, "Language Models are Few-Shot
-- Learners", Table 2.1): hidden 12288, 96 heads, 4h GeLU MLP, LayerNorm,
-- learned absolute positions, tied embeddings, biases, dropout 0.1 -- the
-- Megatron GPT defaults; trimmed to 8 layers as the seed says.  Vocabulary:
-- GPT-2's 50257 padded by Megatron to a multiple of 128 x TP = 1024: 51200.
-- Assumed where the seed is silent: flash attention and sequence
-- parallelism on (MindSpeed's GPT scripts use both; sequence 8192 needs
-- flash attention), bf16.  4 micro-batches a step.
--
-- Megatron's theoretical memory for this layout (docs/memory-formulas.md):
-- 34.0 GB of weights and Adam state (memsim: 35.9 GB; the 100.7M-parameter
-- position embedding, whole on every TP rank, is not in Megatron's count)
-- and 37.0 GB of activations (memsim: 37.0 GB): over 64 GiB without a
-- memory policy, which is why the seed compares adaptive memory
-- optimization with full recompute.
-- Compare: memsim run scenarios/gpt-175b-trimmed-tp8.lua --policy full_recompute --policy adaptive_memory
return {
  name = "gpt-175b-trimmed-tp8",
  device = "ascend-910b",
  model = {
    arch = "gpt",
    num_layers = 8,
    hidden_size = 12288,
    ffn_hidden_size = 49152,
    num_attention_heads = 96,
    seq_length = 8192,
    padded_vocab_size = 51200,
    normalization = "LayerNorm",
    position_embedding_type = "learned_absolute",
    use_flash_attn = true,
    hidden_dropout = 0.1,
    attention_dropout = 0.1,
    dtype = "bf16",
  },
  parallel = {
    world_size = 8,
    tensor_model_parallel_size = 8,
    pipeline_model_parallel_size = 1,
    context_parallel_size = 1,
    sequence_parallel = true,
    micro_batch_size = 10,
    global_batch_size = 40,
  },
  allocator = { conf = "expandable_segments:False", flavour = "npu" },
  policy = "none",
  steps = 3,
  seed = 1,
}
