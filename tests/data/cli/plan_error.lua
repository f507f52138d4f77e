-- A policy whose plan hook fails on its third line: the run must stop with
-- this file's name and line.
return { name = "plan_error", plan = function(profile, ctx)
  local segments = profile.segments
  error("this policy is broken on purpose")
end }
