# Shipped scenarios and device files, installed under $(pkgdatadir)/scenarios
# (the loader's MS_DATADIR fallback) and found in the source tree by tests.
nobase_dist_pkgdata_DATA += \
	scenarios/llama2-7b.lua scenarios/gpt-22b.lua \
	scenarios/devices/ascend-910b.lua scenarios/devices/a100-80gb.lua \
	scenarios/devices/h100-80gb.lua scenarios/devices/h200.lua
