-- Megatron's GPT 22B on one node of 8 A100 80GB GPUs.
--
-- Model and layout: Korthikanti et al. 2022, "Reducing Activation
-- Recomputation in Large Transformer Models" (arXiv:2205.05198), Table 3,
-- the 22B row: 48 layers, hidden 6144, 64 heads, sequence 2048, tensor
-- parallel 8, no pipeline; their vocabulary 51200 (GPT-2's 50257 padded by
-- Megatron); sequence parallelism on, no flash attention (as in the paper).
-- The batch is our choice: micro-batch 4, global 16 (4 micro-batches).
--
-- Per layer the paper's count gives s b h (34 + 5 a s / h) / t = 885 MB of
-- saved activations with SP (48 layers: 42.5 GB), on top of 18 bytes x
-- 22.1B / 8 = 49.7 GB of weights, grads and Adam state: without selective
-- recompute this does not fit in 80 GB, which is the paper's point; with it
-- (34 s b h / t = 214 MB a layer) it does.
return {
  name = "gpt-22b",
  device = "a100-80gb",
  model = {
    arch = "gpt",
    num_layers = 48,
    hidden_size = 6144,
    ffn_hidden_size = 24576,
    num_attention_heads = 64,
    seq_length = 2048,
    padded_vocab_size = 51200,
    normalization = "LayerNorm",
    use_flash_attn = false,
    hidden_dropout = 0.1,
    attention_dropout = 0.1,
    dtype = "bf16",
  },
  parallel = {
    world_size = 8,
    tensor_model_parallel_size = 8,
    pipeline_model_parallel_size = 1,
    sequence_parallel = true,
    micro_batch_size = 4,
    global_batch_size = 16,
  },
  allocator = { conf = "", flavour = "cuda" },
  policy = "none",
  steps = 3,
  seed = 1,
}
