# Scenario files (Lua tables in a sandbox), device files, and the workload
# builder that turns a scenario into the step program of one device.
noinst_LTLIBRARIES += core/libms_scenario.la core/libms_workload.la
core_libms_scenario_la_SOURCES = \
	core/scenario.c core/scenario_table.c core/scenario_override.c core/scenario_validate.c \
	core/device_file.c core/scenario_table.h core/scenario_load.h
core_libms_workload_la_SOURCES = \
	core/workload.c core/workload_ops.c core/workload_layer.c core/workload_model.c \
	core/workload_optimizer.c core/model_math.c core/workload_build.h core/workload_model.h
MS_PARTS += core/libms_scenario.la core/libms_workload.la

check_PROGRAMS += tests/unit/test_scenario tests/unit/test_workload
TESTS += tests/unit/test_scenario tests/unit/test_workload

tests_unit_test_scenario_SOURCES = tests/unit/test_scenario.c
tests_unit_test_scenario_CFLAGS = $(TEST_CFLAGS)
tests_unit_test_scenario_LDADD = core/libms_scenario.la core/libms_base.la $(TEST_LIBS)

tests_unit_test_workload_SOURCES = tests/unit/test_workload.c
tests_unit_test_workload_CFLAGS = $(TEST_CFLAGS)
tests_unit_test_workload_LDADD = core/libms_workload.la core/libms_base.la $(TEST_LIBS)

EXTRA_DIST += docs/scenario-format.md \
	tests/data/scenarios/syntax_error.lua tests/data/scenarios/unknown_key.lua \
	tests/data/scenarios/negative_size.lua tests/data/scenarios/heads_tp.lua \
	tests/data/scenarios/missing_device.lua tests/data/scenarios/bad_device.lua \
	tests/data/scenarios/devices/bad-device.lua tests/data/scenarios/runaway.lua \
	tests/data/scenarios/not_a_table.lua tests/data/scenarios/wrong_type.lua \
	tests/data/scenarios/metatable.lua tests/data/scenarios/sandbox_escape.lua
