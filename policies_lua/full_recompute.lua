-- full_recompute: recompute every transformer layer of every micro-batch.
--
-- Megatron-LM's --recompute-granularity full with every layer its own
-- checkpoint: --recompute-method uniform --recompute-num-layers 1, which
-- checkpoints the same layers as --recompute-method block with
-- --recompute-num-layers set to all the layers of the stage.  Each layer keeps
-- only its input (2*s*b*h bytes, /t with sequence parallelism: Korthikanti
-- et al. 2022) and re-runs its forward before its backward.  Module segments
-- inside a layer (the attention core) are covered by their layer, so only
-- layer segments (no parent) are chosen.
local memsim = require("lib.memsim")

return {
  name = "full_recompute",
  plan = function(profile, ctx)
    for seg in memsim.layer_segments(profile) do
      ctx:recompute(seg.id)
    end
    -- The choice depends only on the program, not on measurements.
    ctx:stable()
  end,
}
