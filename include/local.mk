memsimincludedir = $(includedir)/memsim
memsiminclude_HEADERS = \
	include/memsim/status.h include/memsim/device.h include/memsim/sim.h \
	include/memsim/backend.h include/memsim/backend_mock.h include/memsim/allocator.h \
	include/memsim/scenario.h include/memsim/workload.h include/memsim/policy.h \
	include/memsim/trace.h include/memsim/exec.h include/memsim/report.h \
	include/memsim/memsim.h
memsiminclude_HEADERS += include/memsim/memory_config.h
