-- Test fixture: an error raised in plan() at line 5.
return {
  plan = function(profile, ctx)
    local layer = profile.segments[1]
    return layer.no_such_field.x
  end,
}
