-- Hostile: the same tensor swapped twice in one plan (the first tensor that
-- can be swapped at all, then again).
return {
  plan = function(profile, ctx)
    for _, t in ipairs(profile.tensors) do
      if pcall(ctx.swap, ctx, t.id) then
        ctx:swap(t.id)
        return
      end
    end
  end,
}
