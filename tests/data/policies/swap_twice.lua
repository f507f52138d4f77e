-- Swaps one tensor twice in one plan: refused by ctx:swap.
return {
  plan = function(profile, ctx)
    ctx:swap(3)
    ctx:swap(3, { prefetch = 2 })
  end,
}
