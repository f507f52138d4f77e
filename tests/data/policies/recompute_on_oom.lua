-- Test fixture: no decisions until a step runs out of memory, then recompute
-- every layer of the stage that did (a pipeline is relaunched to try it).
local memsim = require("lib.memsim")

return {
  name = "recompute_on_oom",
  on_oom = function(request, ctx, profile)
    for seg in memsim.layer_segments(profile) do
      ctx:recompute(seg.id)
    end
  end,
}
