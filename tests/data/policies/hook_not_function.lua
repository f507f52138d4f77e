-- Test fixture: hooks must be functions.
return { name = "broken", plan = "recompute everything" }
