-- Test fixture: a policy must return a table of hooks.
return 42
