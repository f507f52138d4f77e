-- Offload every saved MLP activation of 256 KiB or more to host memory
-- until backward.  The same file runs in `memsim run` (the simulator names
-- Llama's MLP feed_forward, a PyTorch GPT's module path says mlp) and in a
-- PyTorch step through memsim_torch (docs/torch.md).
local memsim = require("lib.memsim")

local function in_mlp(name)
  return name:find("%.mlp%.") ~= nil or name:find("%.feed_forward%.") ~= nil
end

return {
  name = "offload_mlp",
  plan = function(profile, ctx)
    for _, t in ipairs(memsim.tensors(profile, { kind = "activation", saved = true,
                                                 min_bytes = 256 * 1024 })) do
      if in_mlp(t.name) then
        ctx:swap(t.id)
      end
    end
    ctx:stable()
  end,
}
