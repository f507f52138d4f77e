-- Test fixture: reads every tensor of the profile (each entry object is
-- made on first read and kept, in the policy's heap).
return {
  plan = function(profile, ctx)
    local n = 0
    for _, t in ipairs(profile.tensors) do n = n + t.bytes end
    return n
  end,
}
