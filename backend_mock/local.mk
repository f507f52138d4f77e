# The mock NPU: backend.h on the discrete-event simulator (sim/).
noinst_LTLIBRARIES += backend_mock/libms_mock.la
backend_mock_libms_mock_la_SOURCES = \
	backend_mock/mock.c backend_mock/mock_private.h backend_mock/memory.c \
	backend_mock/address_space.c backend_mock/address_space.h
MS_PARTS += backend_mock/libms_mock.la

check_PROGRAMS += tests/unit/test_mock
TESTS += tests/unit/test_mock
tests_unit_test_mock_SOURCES = tests/unit/test_mock.c tests/unit/test_device_spec.h
tests_unit_test_mock_CFLAGS = $(TEST_CFLAGS)
tests_unit_test_mock_LDADD = backend_mock/libms_mock.la sim/libms_sim.la core/libms_base.la $(TEST_LIBS)
