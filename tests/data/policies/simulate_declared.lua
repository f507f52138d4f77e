-- Test fixture: ctx:simulate sees the scenario's declared decisions after
-- the candidate, as the step does, until the policy replaces them.
return {
  name = "simulate_declared",
  plan = function(profile, ctx)
    if profile.step ~= -1 then return end
    local with = ctx:simulate({})
    ctx:replace_declared()
    local without = ctx:simulate({})
    ctx:log("declared=%d with=%d without=%d", #profile.declared, with.peak_allocated,
            without.peak_allocated)
  end,
}
