-- Fixture: a syntax error on line 4 (a missing comma).
return {
  device = "ascend-910b",
  model = { arch = "llama" num_layers = 2 },
}
