-- Test fixture: ctx:simulate of the plan so far (nothing) over one step and
-- over two in a row, on stage 0; the figures go to the log.
return {
  name = "simulate_steps",
  plan = function(profile, ctx)
    if profile.stage ~= 0 or profile.step > 0 then return end
    local one = ctx:simulate(nil)
    local two = ctx:simulate(nil, { steps = 2 })
    ctx:log("one: oom=%s reserved=%d two: oom=%s reserved=%d", tostring(one.oom),
            one.peak_reserved, tostring(two.oom), two.peak_reserved)
  end,
}
