# The shipped policies, installed under $(pkgdatadir)/policies_lua/ (the
# directory ms_policy_load resolves bare names in and require() reads from).
nobase_dist_pkgdata_DATA += \
	policies_lua/none.lua \
	policies_lua/full_recompute.lua \
	policies_lua/lifetime_pools.lua \
	policies_lua/smart_swap.lua \
	policies_lua/adaptive_memory.lua \
	policies_lua/selective_recompute.lua \
	policies_lua/offload_layers.lua \
	policies_lua/swap_attention.lua \
	policies_lua/dtr.lua \
	policies_lua/memsim_optimal.lua \
	policies_lua/lib/memsim.lua
