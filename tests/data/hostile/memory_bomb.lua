-- Hostile: a scenario that tries to take all memory.
local t = {}
for i = 1, 1e12 do t[i] = string.rep("x", 1 << 20) .. i end
return t
