-- Test fixture: on_oom swaps the tensor whose allocation failed when it
-- cannot fit at all; the profile comes as the third argument.
return {
  name = "on_oom_test",
  on_oom = function(request, ctx, profile)
    if request.bytes + request.allocated > request.capacity then
      local t = profile.tensors[request.tensor + 1]
      ctx:swap(t.id)
    end
  end,
}
