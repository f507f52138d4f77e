-- Hostile: a to-be-closed variable whose __close never returns, inside a
-- plan that also never returns: the budget must still stop it.
return {
  plan = function(profile, ctx)
    local guard <close> = setmetatable({}, { __close = function() while true do end end })
    while true do end
  end,
}
