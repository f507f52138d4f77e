-- Test fixture: pool() names a pool that is not declared.
return {
  pools = { long = { exact_segments = true } },
  pool = function(t)
    return t.saved and "lng" or "default"
  end,
}
