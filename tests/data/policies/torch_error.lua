-- Plans once, then fails: the second plan() raises at line 12.
local calls = 0

return {
  name = "torch_error",
  plan = function(profile, ctx)
    calls = calls + 1
    for _, t in ipairs(profile.tensors) do
      if t.kind == "activation" then ctx:swap(t.id) end
    end
    if calls == 2 then
      error("deliberate failure")
    end
  end,
}
