-- Test fixture: recompute every layer on even steps only, so no two
-- consecutive steps run the same plan (fast-forward must simulate each).
local memsim = require("lib.memsim")

return {
  name = "alternate",
  plan = function(profile, ctx)
    if profile.step % 2 == 1 then
      for seg in memsim.layer_segments(profile) do
        ctx:recompute(seg.id)
      end
    end
  end,
}
