-- Test fixture: the floor memsim_optimal searches down to, none on a device
-- whose memory never runs out (ctx:simulate's largest capacity), on stage 0;
-- its step time and peaks go to the log.
return {
  name = "floor",
  plan = function(profile, ctx)
    if profile.stage ~= 0 or profile.step > 0 then return end
    local r = ctx:simulate({}, { capacity = 1 << 43 })
    ctx:log("floor: oom=%s time=%d allocated=%d reserved=%d", tostring(r.oom), r.step_time,
            r.peak_allocated, r.peak_reserved)
  end,
}
