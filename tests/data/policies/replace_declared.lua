-- Test fixture: takes over the scenario's declared recompute and swap
-- settings (profile.declared), keeping the recomputes and dropping the swaps.
return {
  name = "replace_declared",
  plan = function(profile, ctx)
    local kinds = {}
    for _, d in ipairs(profile.declared) do kinds[d.kind] = (kinds[d.kind] or 0) + 1 end
    ctx:log("declared recompute=%d swap=%d", kinds.recompute or 0, kinds.swap or 0)
    ctx:replace_declared()
    for _, d in ipairs(profile.declared) do
      if d.kind == "recompute" then ctx:recompute(d.segment) end
    end
  end,
}
