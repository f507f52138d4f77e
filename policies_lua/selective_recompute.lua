-- selective_recompute: Megatron-LM's --recompute-granularity selective.
--
-- What it reproduces (Korthikanti et al. 2022, "Reducing Activation
-- Recomputation in Large Transformer Models", section 5; Megatron-LM's
-- CheckpointFunction around core_attention): in every transformer layer of
-- every micro-batch only the attention core (QK^T, softmax, dropout,
-- softmax x V) is recomputed; it frees the 5 a s / h term of the per-layer
-- activations (s b h (34 + 5 a s / h) bytes) for a few percent of compute.
-- With flash attention the core keeps almost nothing, so the recompute
-- frees little: Megatron turns selective recompute off there, and so does
-- this policy (no decision when a layer's core segment saves under 1% of
-- what its layer saves).
local memsim = require("lib.memsim")

local function is_core(seg)
  local n = seg.name or ""
  return seg.parent ~= nil and (n:match("attention%.core$") or n:match("core_attention$"))
end

return {
  name = "selective_recompute",
  plan = function(profile, ctx)
    local n, bytes = 0, 0
    for _, seg in ipairs(profile.segments) do
      if is_core(seg) then
        local layer = profile.segments[seg.parent + 1]
        if seg.saved_bytes > 0.01 * layer.saved_bytes then
          ctx:recompute(seg.id)
          n, bytes = n + 1, bytes + seg.saved_bytes
        end
      end
    end
    if not profile.measured then
      ctx:log("stage %d: %d attention cores recomputed (%s)", profile.stage, n,
              memsim.format_bytes(bytes))
    end
    -- Depends only on the program.
    ctx:stable()
  end,
}
