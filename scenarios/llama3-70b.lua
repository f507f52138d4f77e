-- Llama 3 70B pretraining on 4 nodes of 8 H100 80GB GPUs, sequence 8192.
--
-- Model: Meta's Llama 3 70B (the model card and the released config.json):
-- 80 layers, hidden 8192, 64 query heads in 8 key-value groups (GQA),
-- SwiGLU 28672, RMSNorm, RoPE, vocabulary 128256 -- padded by Megatron to a
-- multiple of 128 x TP = 512: 128512 -- untied output layer.
-- Layout: NeMo's llama3_70b pretraining recipe
-- (nemo/collections/llm/recipes/llama3_70b.py): TP 4, PP 4, virtual
-- pipeline 5 (20 layers a stage in 5 chunks of 4), CP 2, sequence
-- parallelism, sequence 8192, micro-batch 1, global batch 512, bf16, the
-- distributed optimizer, flash attention.  32 GPUs make DP 1: 512
-- micro-batches a step.  A stage is TP 4 x CP 2 = 8 ranks, one node.
return {
  name = "llama3-70b",
  device = "h100-80gb",
  model = {
    arch = "llama",
    num_layers = 80,
    hidden_size = 8192,
    ffn_hidden_size = 28672,
    num_attention_heads = 64,
    num_query_groups = 8,
    seq_length = 8192,
    padded_vocab_size = 128512,
    normalization = "RMSNorm",
    swiglu = true,
    untie_embeddings = true,
    use_flash_attn = true,
    dtype = "bf16",
  },
  parallel = {
    world_size = 32,
    tensor_model_parallel_size = 4,
    pipeline_model_parallel_size = 4,
    num_layers_per_virtual_pipeline_stage = 4,
    context_parallel_size = 2,
    sequence_parallel = true,
    use_distributed_optimizer = true,
    micro_batch_size = 1,
    global_batch_size = 512,
  },
  allocator = { conf = "", flavour = "cuda" },
  policy = "none",
  steps = 3,
  seed = 1,
}
