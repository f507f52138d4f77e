-- none: make no decisions.
--
-- The baseline every other policy is compared with: the caching allocator
-- alone, every tensor in the default pool, nothing swapped or recomputed.
return {
  name = "none",
  plan = function(profile, ctx)
    -- The plan never changes, so the executor may stop asking.
    ctx:stable()
  end,
}
