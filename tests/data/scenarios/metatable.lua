-- Fixture: values hidden behind a metatable are not read (the loader uses raw
-- access, so no script code runs while the table is read), and a
-- metamethod that errors cannot take the loader down.
local hidden = { device = "ascend-910b" }
return setmetatable({
  model = setmetatable({ arch = "llama" }, { __index = function() error("boom") end }),
}, { __index = hidden, __pairs = function() error("boom") end })
