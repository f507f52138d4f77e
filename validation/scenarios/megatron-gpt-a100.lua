-- The GPT models of Megatron-LM's scaling studies on NVIDIA Selene
-- (DGX A100 80GB nodes: 8 GPUs on NVSwitch, 8 x 200 Gb/s HDR InfiniBand).
-- The base of the rows of validation/megatron-ptdp-a100.csv and
-- validation/korthikanti-a100.csv, which override the model size and the
-- parallel layout per row.  Shared by both papers: GPT (LayerNorm, GeLU 4h
-- MLP, learned positions, tied embeddings, biases, dropout 0.1), sequence
-- 2048, vocabulary 51200, fp16 mixed precision, no flash attention (both
-- papers predate it; Megatron's fused scaled-masked softmax is the
-- unfused path here).
return {
  name = "megatron-gpt-a100",
  device = "a100-80gb",
  model = {
    arch = "gpt",
    num_layers = 24,
    hidden_size = 2304,
    num_attention_heads = 24,
    seq_length = 2048,
    padded_vocab_size = 51200,
    normalization = "LayerNorm",
    use_flash_attn = false,
    hidden_dropout = 0.1,
    attention_dropout = 0.1,
    dtype = "fp16",
  },
  parallel = {
    world_size = 8,
    tensor_model_parallel_size = 8,
    pipeline_model_parallel_size = 1,
    sequence_parallel = false,
    micro_batch_size = 1,
    global_batch_size = 8,
  },
  allocator = { conf = "", flavour = "cuda" },
  report = { detail = "none" },
  policy = "none",
  steps = 1,
  seed = 1,
}
