-- Fixture: a scenario that never returns; the sandbox's budget stops it.
local n = 0
while true do
  n = n + 1
end
