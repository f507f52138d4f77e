-- Test fixture: several bad pool declarations and a table as a pool name.
-- Whatever order next() visits them in (Lua seeds its hashes per state, and
-- tables hash by address), the policy is rejected with the same message.
local key = setmetatable({}, { __tostring = function() return "fast" end })
return {
  pools = { ["zz top"] = {}, ["a a"] = {}, c = { x = 1, y = 2 }, [key] = {} },
  pool = function(t) return "default" end,
}
