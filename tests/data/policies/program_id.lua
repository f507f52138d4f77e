-- Test fixture: logs profile.program_id and how many segments the program has.
return {
  name = "program_id",
  plan = function(profile, ctx)
    ctx:log("program %d segments %d", profile.program_id, #profile.segments)
  end,
}
