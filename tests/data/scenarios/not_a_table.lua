-- Fixture: a scenario must return a table.
return 42
