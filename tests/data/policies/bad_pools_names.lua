-- Test fixture: bad pool declarations, checked in name order.
return {
  pools = { zz = { exact_segments = "yes" }, ["a a"] = {}, c = { y = 1, x = 2 } },
  pool = function(t) return "default" end,
}
