-- NeMo's GPT3 models as NVIDIA benchmarked them on DGX H100 with FP8
-- (NeMo 24.07 container): the base of the GPT3 rows of
-- validation/nemo-h100-fp8.csv, which override the model size and the
-- parallel layout per row.  The file states the GPT3 5B row (64 GPUs).
--
-- Source of the figures: NVIDIA/NeMo docs/source/performance/
-- performance_summary.md at 070a0bb168d405d653b9734c0017cf5078e77c0d,
-- "Pretraining" table (FP8, NeMo 24.07, DGX-H100).  The table's Nemotron
-- rows are not in the validation table: Nemotron's MLP is a squared-ReLU
-- MLP, which memsim does not build (GeLU or SwiGLU only).
--
-- Model, from NVIDIA/NeMo-Framework-Launcher launcher_scripts/conf/training/
-- gpt3/{5b,20b,175b}.yaml (the training configs the launcher's example
-- scripts examples/training/gpt/h100/*_fp8_*.sh run with fp8=true; read at
-- f4761e62315b9b1b991f101fc2be34a872cda708 for 5b/20b and
-- 6c9e5c0da9cbaed8360b8824977a40fd3b15deff for 175b):
--   5B: 24 layers, hidden 4096, 32 heads, FFN 4h = 16384, seq 2048.
--   (20B: 44 / 6144 / 48 heads / 24576; 175B: 96 / 12288 / 96 / 49152,
--   set per row.)
-- Keys those configs leave unset take the defaults of NeMo's
-- megatron_gpt_model.py (mcore path): LayerNorm ('normalization' default
-- 'layernorm'), GeLU MLP ('activation' default 'gelu'), biases ('bias'
-- default True), learned absolute positions ('position_embedding_type'
-- default 'learned_absolute'), tied input/output embeddings
-- ('share_embeddings_and_output_weights' default True): memsim's gpt
-- defaults, stated here.
-- Vocabulary: GPT-2 BPE (tokenizer GPT2BPETokenizer), 50257 tokens, padded
-- by NeMo's _vocab_size_with_padding (megatron_base_model.py) to a
-- multiple of make_vocab_size_divisible_by (128) x TP: 50304 at TP 1 (this
-- file), 50432 at TP 2, 50688 at TP 4 (set per row).
-- Dropout 0: hidden_dropout and attention_dropout 0.0 in those configs
-- (NeMo-Framework-Launcher PR #153, 2023-11-03, "Remove dropout from GPT
-- models").  One stored version of the launcher's gpt3/5b.yaml and
-- 175b_fp8.yaml (00af8f261f73a3eda179c4e67a467d61792f54d3, undated) has 0.1
-- instead; which one the 24.07 container shipped was not established.
-- No activation recompute (activations_checkpoint_granularity null).
-- Attention: fp8 runs in Transformer Engine layers (NeMo's te_gpt layer
-- spec; the versions read say transformer_engine: False, but fp8 needs it
-- and the launcher's gpt3/5b_fp8_performance.yaml at
-- 1e46ac6c166ed1c83fb847faefcecc0c95b08c85 sets it True), whose
-- DotProductAttention runs a fused flash/cuDNN kernel; stated as
-- use_flash_attn = true (assumption: the config does not name the kernel).
-- bf16 mixed precision (trainer precision bf16, megatron_amp_O2); the FP8
-- format (hybrid: E4M3 forward, E5M2 backward, fp8_hybrid: True) is the
-- table's model.fp8 column.
--
-- Parallel: optim distributed_fused_adam (Apex's distributed Adam: optimizer
-- state sharded over data parallel) = use_distributed_optimizer; its
-- overlap_grad_sync: True = overlap_grad_reduce.  Sequence parallelism on
-- where TP > 1 (sequence_parallel: True in 20b/175b; NeMo turns it off at
-- TP 1), set per row.  Pipeline p2p: Megatron-core synchronizes the device
-- after p2p only with batch_p2p_comm (megatron/core/pipeline_parallel/
-- p2p_communication.py, `if config.batch_p2p_comm and
-- config.batch_p2p_sync`).  The 175B rows take overlap_p2p_comm: True,
-- batch_p2p_comm: False, as 175b_fp8.yaml (00af8f26) and 175b.yaml at
-- 056a90edf9140a32bfd39652509244e7db055651 set them: no sync,
-- batch_p2p_sync false (set per row).  Assumption: 175b.yaml at 6c9e5c0d
-- sets the opposite (overlap_p2p_comm False, batch_p2p_comm True, which
-- syncs), and the 24.07 version was not found.  No scatter/gather of
-- pipeline tensors (removed from Megatron-core).
-- Grads in bf16: the example scripts' optim.grad_sync_dtype=bf16 (NeMo
-- then keeps and reduces bf16 main grads: grad_reduce_in_fp32 = false).
-- The parameter all-gather overlapped with the next forward: optim
-- overlap_param_sync: true (gpt3/5b.yaml 00af8f26, gpt3/20b.yaml 056a90ed,
-- llama2_70b.yaml 0446d2c0,
-- llama3_70b.yaml 3dd35614) = parallel.overlap_param_gather.
-- Not modelled: Transformer
-- Engine's tensor-parallel communication overlap (ub_tp_comm_overlap, on in
-- some 175B/20B config versions).
return {
  name = "nemo-h100-gpt",
  device = "h100-80gb",
  model = {
    arch = "gpt",
    num_layers = 24,
    hidden_size = 4096,
    ffn_hidden_size = 16384,
    num_attention_heads = 32,
    num_query_groups = 32,
    seq_length = 2048,
    padded_vocab_size = 50304,
    normalization = "LayerNorm",
    swiglu = false,
    untie_embeddings = false,
    add_bias_linear = true,
    position_embedding_type = "learned_absolute",
    use_flash_attn = true,
    hidden_dropout = 0.0,
    attention_dropout = 0.0,
    dtype = "bf16",
  },
  parallel = {
    world_size = 64,
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
    micro_batch_size = 4,
    global_batch_size = 2048,
  },
  allocator = { conf = "", flavour = "cuda" },
  report = { detail = "none" },
  policy = "none",
  steps = 2,
  seed = 1,
}
