-- Offloads the activations saved by the forward op that took longest in the
-- measured step: the tests' proof that plan() sees the figures measured in
-- PyTorch (tests/python/test_memsim_torch.py, tests/unit/test_torch_step.c).
return {
  name = "torch_measured",
  plan = function(profile, ctx)
    assert(profile.measured, "the profile is not measured")
    assert(profile.step_time and profile.step_time > 0, "no step time")
    local saves = {}
    for _, t in ipairs(profile.tensors) do
      if t.kind == "activation" and t.producer then
        saves[t.producer] = true
      end
    end
    local longest, best = nil, -1
    for _, op in ipairs(profile.ops) do
      if op.phase == "forward" and saves[op.id] and op.finish - op.start > best then
        longest, best = op.id, op.finish - op.start
      end
    end
    for _, t in ipairs(profile.tensors) do
      if t.kind == "activation" and t.producer == longest then
        ctx:swap(t.id)
      end
    end
    ctx:stable()
  end,
}
