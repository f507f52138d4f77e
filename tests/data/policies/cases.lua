-- Test fixture (tests/unit/test_policy.c): plan() runs case number
-- profile.step, so one file covers every ctx check.  Line numbers are
-- asserted by the test: append new cases at the end.
local saved_ctx
local cases = {}
cases[0] = function(p, ctx) ctx:swap(3) end
cases[1] = function(p, ctx) ctx:swap(6, { out_after = 4, in_before = 6, prefetch = 0 }) end
cases[2] = function(p, ctx)
  ctx:swap(16, { out_after = 0, in_before = 10, prefetch = 2 })
  ctx:keep(4)
  ctx:recompute(1)
end
cases[3] = function(p, ctx) ctx:swap(17) end
cases[4] = function(p, ctx) ctx:swap(3, { out_after = 0 }) end
cases[5] = function(p, ctx) ctx:swap(3, { out_after = 5, in_before = 4 }) end
cases[6] = function(p, ctx) ctx:swap(16) end
cases[7] = function(p, ctx) ctx:swap(3, { prefech = 2 }) end
cases[8] = function(p, ctx) ctx:swap(3, { prefetch = -1 }) end
cases[9] = function(p, ctx) ctx:swap(3, { in_before = 11 }) end
cases[10] = function(p, ctx) ctx:recompute(3) end
cases[11] = function(p, ctx) ctx:keep("x") end
cases[12] = function(p, ctx) ctx:swap(3.5) end
cases[13] = function(p, ctx) saved_ctx = ctx; ctx:keep(0) end
cases[14] = function(p, ctx) saved_ctx:keep(1) end
cases[15] = function(p, ctx) p.step = 99 end
cases[16] = function(p, ctx) p.tensors[1].bytes = 0 end
cases[17] = function(p, ctx) ctx:keep(2); ctx:stable() end
cases[18] = function(p, ctx) ctx:simulate() end
cases[19] = function(p, ctx)
  assert(getmetatable(ctx) == "ctx" and getmetatable(p) == "read-only")
  assert(not pcall(setmetatable, p, {}))
  for _ = 1, 2000 do ctx:log("%s", string.rep("x", 99)) end
end
cases[20] = function(p, ctx) ctx:log("%d", "nope") end
cases[21] = function(p, ctx) for i = 1, 1e9 do ctx:keep(0) end end
cases[22] = function(p, ctx)
  ctx:swap(3)
  ctx:swap(3, { in_before = 8 })
end
cases[23] = function(p, ctx)
  ctx:simulate({ { kind = "swap", tensor = 3 }, { kind = "keep", tensor = 4 },
                 { kind = "swap", tensor = 3, in_before = 8 } })
end
cases[24] = function(p, ctx)
  ctx:recompute(0)
  ctx:simulate(nil, { steps = 2 })
  ctx:simulate({}, {})
end
cases[25] = function(p, ctx) ctx:simulate(nil, { steps = 0 }) end
cases[26] = function(p, ctx) ctx:simulate(nil, { steps = 1.5 }) end
cases[27] = function(p, ctx) ctx:simulate(nil, { steps = 9 }) end
cases[28] = function(p, ctx) ctx:simulate(nil, 2) end
cases[29] = function(p, ctx) ctx:swap(10, { out_after = 0, in_before = 10 }) end
cases[30] = function(p, ctx) ctx:simulate({}, { capacity = 4096, steps = 2 }) end
cases[31] = function(p, ctx) ctx:simulate({}, { capacity = 0 }) end
cases[32] = function(p, ctx) ctx:simulate({}, { capacity = 1 << 44 }) end
cases[33] = function(p, ctx) ctx:simulate({}, { capacity = 4096.5 }) end
cases[34] = function(p, ctx) ctx:simulate({}, { step = 2 }) end
cases[35] = function(p, ctx) ctx:simulate({}, { [1] = 2 }) end
-- Packed plans: the same decisions as the list, simulated and applied.
cases[36] = function(p, ctx)
  local list = { { kind = "swap", tensor = 3, prefetch = 2 }, { kind = "recompute", segment = 2 },
                 { kind = "keep", tensor = 4 } }
  local packed = ctx:pack(list)
  ctx:log("packed n=%d str=%s", #packed, tostring(packed))
  ctx:simulate(list)
  ctx:simulate(packed)
  ctx:apply(packed)
  ctx:apply({ { kind = "keep", tensor = 5 } })
end
cases[37] = function(p, ctx)
  local once = ctx:pack({ { kind = "swap", tensor = 3 } })
  ctx:apply(once)
  ctx:apply(once)
end
local swap3_recompute9 = { { kind = "swap", tensor = 3 }, { kind = "recompute", segment = 9 } }
cases[38] = function(p, ctx) ctx:pack(swap3_recompute9) end
cases[39] = function(p, ctx) ctx:apply(7) end

return {
  plan = function(profile, ctx)
    cases[profile.step](profile, ctx)
  end,
  pool = function(t)
    if saved_ctx then saved_ctx:keep(0) end
    return nil
  end,
}
