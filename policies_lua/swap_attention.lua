-- swap_attention: MindSpeed's swap-attention (--swap-attention, with
-- --swap-modules "input_norm,self_attention,post_attention_norm" by
-- default; mindspeed/core/memory/swap_attention).
--
-- What it reproduces: in every transformer layer of every micro-batch the
-- activations the attention block saves for backward (its input norm, the
-- attention itself and the norm after it) are copied to host after their
-- forward use, and prefetched during backward one layer ahead (the
-- prefetch of layer l is launched when the backward of layer l + 1
-- starts), so the copies hide behind compute.  The MLP's activations stay
-- on device; --recompute-num-layers has no part here (this policy swaps
-- only).  Tensors under 1 MiB are not worth a copy and stay.
local memsim = require("lib.memsim")

local config = {
  modules = { "attention_norm", "attention", "ffn_norm",              -- llama naming
              "input_layernorm", "self_attention", "post_attention_layernorm" },
  min_bytes = 2^20,
}

local function in_modules(name)
  for _, m in ipairs(config.modules) do
    if name:find("%." .. m:gsub("%p", "%%%0") .. "%.") then return true end
  end
  return false
end

return {
  name = "swap_attention",
  plan = function(profile, ctx)
    local first, mb_first = memsim.backward_starts(profile)
    local n, bytes = 0, 0
    for _, t in ipairs(memsim.tensors(profile, { kind = "activation", saved = true,
                                                 min_bytes = config.min_bytes })) do
      if t.layer ~= nil and t.micro_batch ~= nil and in_modules(t.name or "")
          and t.last_forward_use ~= nil and t.first_backward_use ~= nil then
        memsim.swap_one_layer_ahead(ctx, t, first, mb_first)
        n, bytes = n + 1, bytes + t.bytes
      end
    end
    if not profile.measured then
      ctx:log("stage %d: %d attention-block tensors swapped, %s a step", profile.stage, n,
              memsim.format_bytes(bytes))
    end
    ctx:stable()
  end,
}
