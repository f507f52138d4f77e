# Unit tests of the shared pieces, and the end-to-end tests of the memsim command.
check_PROGRAMS += tests/unit/test_sandbox
TESTS += tests/unit/test_sandbox
tests_unit_test_sandbox_SOURCES = tests/unit/test_sandbox.c
tests_unit_test_sandbox_CFLAGS = $(TEST_CFLAGS)
tests_unit_test_sandbox_LDADD = core/libms_base.la $(TEST_LIBS)
