-- Hostile: a pattern match that backtracks for ages inside one C call,
-- where the instruction hook never runs.
local s = string.rep("a", 200000)
return { name = string.find(s, string.rep("a-", 40) .. "b") and "x" or "y" }
