# Unit tests of the shared pieces, and the end-to-end tests of the memsim command.
check_PROGRAMS += tests/unit/test_sandbox
TESTS += tests/unit/test_sandbox
tests_unit_test_sandbox_SOURCES = tests/unit/test_sandbox.c
tests_unit_test_sandbox_CFLAGS = $(TEST_CFLAGS)
tests_unit_test_sandbox_LDADD = core/libms_base.la $(TEST_LIBS)

check_PROGRAMS += tests/unit/test_exec tests/unit/test_run
TESTS += tests/unit/test_exec tests/unit/test_run
tests_unit_test_exec_SOURCES = tests/unit/test_exec.c tests/unit/test_device_spec.h
tests_unit_test_exec_CFLAGS = $(TEST_CFLAGS)
tests_unit_test_exec_LDADD = libmemsim.la $(TEST_LIBS)
tests_unit_test_run_SOURCES = tests/unit/test_run.c
tests_unit_test_run_CFLAGS = $(TEST_CFLAGS)
tests_unit_test_run_LDADD = libmemsim.la $(TEST_LIBS)
# The end-to-end test runs the memsim program.
EXTRA_tests_unit_test_run_DEPENDENCIES = memsim$(EXEEXT)
EXTRA_DIST += tests/data/cli/plan_error.lua tests/data/cli/tiny-gpt.lua tests/data/policies/recompute_on_oom.lua tests/data/cli/select-op.lua
EXTRA_DIST += tests/golden/llama2-7b-none.summary.csv \
	tests/golden/gpt-175b-trimmed-tp2pp4vpp2-adaptive_memory.summary.csv \
	tests/golden/llama2-smartswap-tp1-smart_swap.summary.csv \
	tests/golden/mixtral-8x7b-none.summary.csv \
	tests/golden/llama2-7b-swap-recompute-none.summary.csv

# SVG plots of a run record (memory over time by tensor kind, stream timelines).
check_PROGRAMS += tests/unit/test_report_svg
TESTS += tests/unit/test_report_svg
tests_unit_test_report_svg_SOURCES = tests/unit/test_report_svg.c
tests_unit_test_report_svg_CFLAGS = $(TEST_CFLAGS)
tests_unit_test_report_svg_LDADD = libmemsim.la $(TEST_LIBS)
