-- A policy for tests/python/test_memsim_torch.py (and `memsim run`):
-- offload the saved activations of the MLPs that are 64 KiB or more,
-- recompute the layer named layers.1.
local memsim = require("lib.memsim")

return {
  name = "torch_swap",
  plan = function(profile, ctx)
    for _, t in ipairs(memsim.tensors(profile, { kind = "activation", saved = true,
                                                 name = "%.mlp%.", min_bytes = 65536 })) do
      ctx:swap(t.id)
    end
    for _, s in ipairs(profile.segments) do
      if s.name == "layers.1" then
        ctx:recompute(s.id)
      end
    end
  end,
}
