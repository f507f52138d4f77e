-- Test fixture: runaway scripts, one per profile.step.
local cases = {}
cases[0] = function() while true do end end
cases[1] = function() return #string.rep("x", 1 << 30) end
cases[2] = function() local t = {} for i = 1, math.huge do t[i] = i end end
cases[3] = function() local function f(n) return f(n + 1) + 1 end return f(1) end
cases[4] = function() local s = "x" while true do s = s .. s end end
cases[5] = function()
  local n = 0
  for i = 1, 200000 do n = n + i end
  return n
end

return {
  plan = function(profile, ctx)
    cases[profile.step]()
  end,
}
