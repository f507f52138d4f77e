-- Test fixture: ctx:simulate of the plan so far (nothing) over one step,
-- over two in a row (and each of those steps), and over two on a device
-- with twice the memory, on stage 0; the figures go to the log.
return {
  name = "simulate_steps",
  plan = function(profile, ctx)
    if profile.stage ~= 0 or profile.step > 0 then return end
    local one = ctx:simulate(nil)
    local two = ctx:simulate(nil, { steps = 2 })
    local big = ctx:simulate(nil, { steps = 2, capacity = 2 * profile.device.hbm_bytes })
    ctx:log("one: oom=%s reserved=%d two: oom=%s reserved=%d big: oom=%s reserved=%d",
            tostring(one.oom), one.peak_reserved, tostring(two.oom), two.peak_reserved,
            tostring(big.oom), big.peak_reserved)
    local s1, s2 = two.steps[1], two.steps[#two.steps]
    ctx:log("steps: n=%d first=%d time=%d last=%d oom=%s", #two.steps, s1.peak_reserved,
            s1.step_time, s2.peak_reserved, tostring(s2.oom))
    ctx:log("one time=%d", one.step_time)
  end,
}
