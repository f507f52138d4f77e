-- Test fixture (tests/unit/test_policy.c): keeps every profile by
-- program_id and reads some later, to show that each program's view is made
-- once, on its first read, and what the view of a retired program answers.
local kept = {}
local calls = 0

return {
  name = "view_kept",
  plan = function(profile, ctx)
    calls = calls + 1
    local earlier = kept[profile.program_id]
    kept[profile.program_id] = profile
    if calls == 2 then
      ctx:log("call 2 program %d first %s", profile.program_id, profile.ops[1].name)
    elseif calls == 3 then
      ctx:log("call 3 program %d same %s ops %d", profile.program_id,
              tostring(earlier.ops == profile.ops), #earlier.ops)
    elseif calls == 4 then
      ctx:log("call 4 program %d kept 1 ops %d", profile.program_id, #kept[1].ops)
    elseif calls == 5 then
      local ok, err = pcall(function() return #kept[3].ops end)
      ctx:log("call 5 program %d kept 2 %s kept 3 %s: %s", profile.program_id,
              kept[2].ops[1].name, tostring(ok), err)
    end
  end,
}
