# The public headers, one per seam: what they declare is libmemsim's API.
memsimincludedir = $(includedir)/memsim
memsiminclude_HEADERS = \
	include/memsim/status.h include/memsim/device.h include/memsim/backend.h \
	include/memsim/allocator.h include/memsim/scenario.h include/memsim/workload.h \
	include/memsim/policy.h include/memsim/trace.h include/memsim/exec.h include/memsim/run.h \
	include/memsim/report.h include/memsim/calibrate.h include/memsim/memsim.h \
	include/memsim/torch.h
