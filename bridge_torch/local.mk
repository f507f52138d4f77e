# bridge_torch: memsim inside a PyTorch (torch_npu) training job.
# libmemsim_alloc.so is a plugin for torch.cuda.memory.CUDAPluggableAllocator
# (and torch_npu's NPUPluggableAllocator): memsim's caching allocator over
# the runtime layer of backend_npu.  It carries its own copy of memsim's
# parts and exports only memsim_* (the plugin's functions), so it loads
# into a Python process without libmemsim.
noinst_LTLIBRARIES += bridge_torch/libms_bridge.la
bridge_torch_libms_bridge_la_SOURCES = bridge_torch/bridge.h bridge_torch/memsim_alloc.h bridge_torch/bridge_device.c \
	bridge_torch/bridge_trace.c bridge_torch/bridge_alloc.c bridge_torch/memsim_alloc.c
bridge_torch_libms_bridge_la_LIBADD = -lpthread
lib_LTLIBRARIES += bridge_torch/libmemsim_alloc.la
bridge_torch_libmemsim_alloc_la_SOURCES =
bridge_torch_libmemsim_alloc_la_LIBADD = bridge_torch/libms_bridge.la $(MS_PARTS) $(GSL_LIBS) \
	$(LUA_LIBS) $(CSV_LIBS) -lm -lpthread
bridge_torch_libmemsim_alloc_la_LDFLAGS = -avoid-version -export-symbols-regex '^memsim_'
include_HEADERS = bridge_torch/memsim_alloc.h

# The C side of memsim_torch (include/memsim/torch.h): part of libmemsim.
noinst_LTLIBRARIES += bridge_torch/libms_torch.la
bridge_torch_libms_torch_la_SOURCES = bridge_torch/torch_step.c bridge_torch/torch_profile.c
MS_PARTS += bridge_torch/libms_torch.la

# memsim_torch: plain Python over libmemsim (ctypes), no build step.
memsim_torchdir = $(pkgdatadir)/python/memsim_torch
dist_memsim_torch_DATA = bridge_torch/python/memsim_torch/__init__.py
EXTRA_DIST += bridge_torch/python/examples/train_small.py \
	bridge_torch/python/examples/offload_mlp.lua bridge_torch/python/examples/validate_gpu.py
