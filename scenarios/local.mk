# Shipped scenarios and device files, installed under $(pkgdatadir)/scenarios
# (the loader's MS_DATADIR fallback) and found in the source tree by tests.
nobase_dist_pkgdata_DATA += \
	scenarios/llama2-7b.lua scenarios/gpt-22b.lua \
	scenarios/devices/ascend-910b.lua scenarios/devices/a100-80gb.lua \
	scenarios/devices/h100-80gb.lua scenarios/devices/h200.lua
# Seed 001's llama2 rows, seed 002's SmartSwap pairs, seed 003's swap
# examples, and Llama 3 8B (each file names its source).
nobase_dist_pkgdata_DATA += \
	scenarios/llama2-7b-seq6144.lua scenarios/llama2-13b-seq8192.lua \
	scenarios/llama2-13b-16dev-seq4096.lua scenarios/llama2-13b-16dev-seq6144.lua \
	scenarios/llama2-13b-16dev-seq8192.lua \
	scenarios/llama2-smartswap-tp8.lua scenarios/llama2-smartswap-tp1.lua \
	scenarios/llama2-smartswap-seq16k.lua \
	scenarios/llama2-7b-swap-default.lua scenarios/llama2-7b-layer-swap.lua \
	scenarios/llama2-7b-op-swap.lua scenarios/llama2-7b-swap-recompute.lua \
	scenarios/llama3-8b.lua
# Seed 000's three trimmed GPT-175B layouts, seed 001's llama2-70B rows, Llama 3
# 70B (NeMo's recipe: PP, VPP, CP) and Mixtral 8x7B (MoE); each file names
# its source.
nobase_dist_pkgdata_DATA += \
	scenarios/gpt-175b-trimmed-tp8.lua scenarios/gpt-175b-trimmed-tp2pp4.lua \
	scenarios/gpt-175b-trimmed-tp2pp4vpp2.lua scenarios/llama2-70b.lua \
	scenarios/llama2-70b-seq6144.lua scenarios/llama2-70b-seq8192.lua \
	scenarios/llama3-70b.lua scenarios/mixtral-8x7b.lua
