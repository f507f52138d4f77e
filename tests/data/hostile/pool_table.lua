-- Hostile: a table (with a metatable) as a pool name, beside good ones; the
-- verdict must not depend on next()'s order, which changes run to run.
local key = setmetatable({}, { __tostring = function() return "fast" end })
return {
  pools = { fast = {}, [key] = {}, slow = { exact_segments = true } },
  pool = function(t) return "default" end,
}
