-- A small llama with MindFormers' default swap (flash attention's outputs of
-- every layer, prefetched two ops ahead), for the real-backend tests: small
-- enough that the ACL test double (host memory, host threads) runs a step
-- in well under a second.
return {
  name = "tiny-llama-swap",
  device = "h100-80gb",
  model = {
    arch = "llama",
    num_layers = 8,
    hidden_size = 512,
    ffn_hidden_size = 1376,
    num_attention_heads = 8,
    seq_length = 512,
    padded_vocab_size = 8192,
    use_flash_attn = true,
    dtype = "bf16",
  },
  parallel = {
    world_size = 1,
    micro_batch_size = 1,
    global_batch_size = 2,
  },
  swap_config = { swap = true, default_prefetch = 2 },
  policy = "none",
  steps = 2,
  seed = 3,
}
