# (fragment: add this part's sources, tests and data here)
