-- Test fixture: a table with no hook at all.
return { name = "empty", pools = { long = { lendable = true } } }
