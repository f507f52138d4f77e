-- Offload every MLP activation of 256 KiB or more to host memory until
-- backward; recompute the segments the training script wrapped
-- (--recompute).  The same file runs in `memsim run` (docs/torch.md).
local memsim = require("lib.memsim")

return {
  name = "offload_mlp",
  plan = function(profile, ctx)
    for _, t in ipairs(memsim.tensors(profile, { kind = "activation", saved = true,
                                                 name = "%.mlp%.", min_bytes = 256 * 1024 })) do
      ctx:swap(t.id)
    end
    for s in memsim.layer_segments(profile) do
      ctx:recompute(s.id)
    end
    ctx:stable()
  end,
}
