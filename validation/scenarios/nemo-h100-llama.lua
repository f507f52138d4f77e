-- NeMo's Llama 2 and Llama 3 pretraining as NVIDIA benchmarked it on DGX
-- H100 with FP8 (NeMo 24.07 container): the base of the LLAMA rows of
-- validation/nemo-h100-fp8.csv, which override the model size and the
-- parallel layout per row.  The file states the LLAMA2-7B row (8 GPUs).
--
-- Source of the figures: NVIDIA/NeMo docs/source/performance/
-- performance_summary.md at 070a0bb168d405d653b9734c0017cf5078e77c0d,
-- "Pretraining" table (FP8, NeMo 24.07, DGX-H100).  The table's Nemotron
-- rows are not in the validation table: Nemotron's MLP is a squared-ReLU
-- MLP, which memsim does not build (GeLU or SwiGLU only).
--
-- Model: Touvron et al. 2023, "Llama 2", Table 1 / the released configs,
-- and Meta's Llama 3 model card / config.json, as the shipped
-- scenarios/llama2-7b.lua, llama2-13b-seq8192.lua, llama2-70b.lua,
-- llama3-8b.lua and llama3-70b.lua state them, and as NVIDIA/
-- NeMo-Framework-Launcher launcher_scripts/conf/training/llama/
-- llama2_{7b,13b,70b}.yaml and llama3_{8b,70b}.yaml set them (read at
-- 064e676963bd7632cb57f1abf575e1205dfcc390 for llama2_7b,
-- 0446d2c0603733cb7252ff36999b32b76e7cf1c4 for llama2_13b/70b,
-- 157ea78baebee339372e255aa8bfa29d49ca2980 for llama3_8b,
-- 3dd35614cf43b06711ad0eccaace3b6af0fc6a08 for llama3_70b):
--   Llama 2 7B: 32 layers, hidden 4096, 32 heads (no GQA), SwiGLU 11008,
--   seq 4096 (this file).  13B: 40 / 5120 / 40 heads / 13824.  70B: 80 /
--   8192 / 64 heads in 8 groups / 28672.  Llama 3 8B: 32 / 4096 / 32 heads
--   in 8 groups / 14336, seq 8192.  70B: 80 / 8192 / 64 in 8 / 28672, seq
--   8192 (set per row).
-- All: RMSNorm (normalization: rmsnorm), SwiGLU (activation: fast-swiglu),
-- no biases (bias: false), RoPE (position_embedding_type: rope), untied
-- output layer (share_embeddings_and_output_weights: false), dropout 0
-- (hidden/attention/ffn_dropout 0.0), no activation recompute
-- (activations_checkpoint_granularity null), flash attention
-- (use_flash_attention: true), bf16 mixed precision (trainer precision
-- bf16, megatron_amp_O2); the FP8 format (hybrid, the example scripts'
-- fp8_hybrid=True) is the table's model.fp8 column.
-- Vocabulary, padded by NeMo's _vocab_size_with_padding
-- (megatron_base_model.py) to a multiple of make_vocab_size_divisible_by
-- (128) x TP: Llama 2's SentencePiece 32000 stays 32000 at TP 1 (this
-- file) and becomes 32256 at TP 4; Llama 3's 128256 (NeMo's HF
-- AutoTokenizer wrapper reports len(tokenizer), auto_tokenizer.py) stays
-- 128256 at TP 1 and becomes 128512 at TP 4 (set per row).
--
-- Parallel: optim distributed_fused_adam (Apex) or mcore_distributed_optim
-- (llama3_70b): optimizer state sharded over data parallel =
-- use_distributed_optimizer; overlap_grad_sync: true = overlap_grad_reduce.
-- Sequence parallelism where TP > 1 (sequence_parallel: true in llama2_70b
-- and llama3_70b; NeMo turns it off at TP 1, megatron_base_model.py
-- _validate_and_override_config), set per row.  Context parallelism 2 for
-- Llama 3 (context_parallel_size: 2), set per row.  Pipeline p2p:
-- Megatron-core synchronizes the device after p2p only with batch_p2p_comm
-- (megatron/core/pipeline_parallel/p2p_communication.py, `if
-- config.batch_p2p_comm and config.batch_p2p_sync`).  llama2_70b and
-- llama3_70b set overlap_p2p_comm: true, batch_p2p_comm: false: no sync.
-- llama2_13b.yaml (0446d2c0, the version read) sets neither, so NeMo's
-- defaults apply there: Megatron-core's ModelParallelConfig batch_p2p_comm
-- True and NeMo's build_model_parallel_config batch_p2p_sync True: the
-- 13B row synchronizes (assumption: the 24.07 version of that file, which
-- ran it at TP 1 PP 4 VP 10, was not found).  Set per row.
-- Grads in bf16: the example scripts' optim.grad_sync_dtype=bf16 (NeMo
-- then keeps and reduces bf16 main grads: grad_reduce_in_fp32 = false).
-- The parameter all-gather overlapped with the next forward: optim
-- overlap_param_sync: true (gpt3/5b.yaml 00af8f26, gpt3/20b.yaml 056a90ed,
-- llama2_70b.yaml 0446d2c0,
-- llama3_70b.yaml 3dd35614) = parallel.overlap_param_gather.
-- Not modelled: Transformer
-- Engine's tensor-parallel communication overlap (ub_tp_comm_overlap: true
-- in llama3_70b), the deferred embedding wgrad (llama3_70b).
return {
  name = "nemo-h100-llama",
  device = "h100-80gb",
  model = {
    arch = "llama",
    num_layers = 32,
    hidden_size = 4096,
    ffn_hidden_size = 11008,
    num_attention_heads = 32,
    num_query_groups = 32,
    seq_length = 4096,
    padded_vocab_size = 32000,
    normalization = "RMSNorm",
    swiglu = true,
    untie_embeddings = true,
    add_bias_linear = false,
    position_embedding_type = "rope",
    use_flash_attn = true,
    hidden_dropout = 0.0,
    attention_dropout = 0.0,
    dtype = "bf16",
  },
  parallel = {
    world_size = 8,
    tensor_model_parallel_size = 1,
    pipeline_model_parallel_size = 1,
    context_parallel_size = 1,
    sequence_parallel = false,
    use_distributed_optimizer = true,
    overlap_grad_reduce = true,
    grad_reduce_in_fp32 = false,
    overlap_param_gather = true,
    batch_p2p_sync = false,
    scatter_gather_tensors_in_pipeline = false,
    micro_batch_size = 1,
    global_batch_size = 128,
  },
  allocator = { conf = "", flavour = "cuda" },
  report = { detail = "none" },
  policy = "none",
  steps = 2,
  seed = 1,
}
