-- Fixture (tests/unit/test_torch_step.c): offloads the first tensor while
-- the program is the first the policy met (profile.program_id 1), so the
-- decisions say which program the policy saw.
return {
  name = "torch_program_id",
  plan = function(profile, ctx)
    if profile.program_id == 1 then
      ctx:swap(profile.tensors[1].id)
    end
  end,
}
