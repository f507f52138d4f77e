-- Test fixture: a syntax error at line 3.
return {
  plan = function(profile, ctx) ctx:keep(0) end end,
}
