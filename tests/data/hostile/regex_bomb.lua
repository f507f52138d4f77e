-- Hostile: nested bounded repetitions in a MindFormers op pattern, which
-- glibc's regcomp would expand into gigabytes over tens of seconds.
return {
  device = "ascend-910b",
  model = {
    arch = "llama", num_layers = 2, hidden_size = 256, num_attention_heads = 4,
    seq_length = 256, padded_vocab_size = 1024,
  },
  recompute_config = { select_recompute = { [ [[((((a{1,255}){1,255}){1,255}){1,255})]] ] = true } },
}
