# backend_mock: the mock NPU, backend.h on the simulator (sim/), and the
# cooperative host threads that let several pipeline stages share one
# virtual clock; its functional mode keeps real bytes for data checks.
noinst_LTLIBRARIES += backend_mock/libms_mock.la
backend_mock_libms_mock_la_SOURCES = \
	backend_mock/mock.h backend_mock/mock.c backend_mock/mock_private.h backend_mock/memory.c \
	backend_mock/address_space.c backend_mock/address_space.h \
	backend_mock/cohost.c backend_mock/cohost.h backend_mock/group.c backend_mock/functional.c \
	backend_mock/state.c
MS_PARTS += backend_mock/libms_mock.la
