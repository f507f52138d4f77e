-- Test fixture: ctx:simulate with the decisions so far and with an explicit
-- candidate; the next decision depends on the figures that come back.
return {
  name = "simulate_test",
  pools = { long = {} },
  plan = function(profile, ctx)
    ctx:recompute(0)
    local a = ctx:simulate()
    ctx:log("a peak_allocated=%d peak_reserved=%d step_time=%d oom=%s",
            a.peak_allocated, a.peak_reserved, a.step_time, tostring(a.oom))
    local b = ctx:simulate({
      { kind = "swap", tensor = 3, in_before = 8, prefetch = 2 },
      { kind = "keep", tensor = 4 },
      { kind = "recompute", segment = 2 },
    })
    ctx:log("b peak_allocated=%d peak_reserved=%d step_time=%d oom=%s",
            b.peak_allocated, b.peak_reserved, b.step_time, tostring(b.oom))
    if b.step_time < a.step_time then
      ctx:swap(3)
    end
  end,
  pool = function(t)
    return t.saved and "long" or nil
  end,
}
