# Scenario files (Lua tables in a sandbox), device files, and the workload
# builder that turns a scenario into the step program of one device.
noinst_LTLIBRARIES += core/libms_scenario.la core/libms_workload.la
core_libms_scenario_la_SOURCES = \
	core/scenario.c core/scenario_table.c core/scenario_override.c core/scenario_validate.c \
	core/device_file.c core/scenario_table.h core/scenario_load.h
core_libms_workload_la_SOURCES = \
	core/workload.c core/workload_ops.c core/workload_layer.c core/workload_model.c \
	core/workload_optimizer.c core/model_math.c core/workload_build.h core/workload_model.h \
	core/workload_check.c core/workload_pipeline.c core/workload_cp.c core/workload_moe.c \
	core/workload_memory.c
MS_PARTS += core/libms_scenario.la core/libms_workload.la

check_PROGRAMS += tests/unit/test_scenario tests/unit/test_workload tests/unit/test_workload_pipeline \
	tests/unit/test_workload_layout
TESTS += tests/unit/test_scenario tests/unit/test_workload tests/unit/test_workload_pipeline \
	tests/unit/test_workload_layout

tests_unit_test_scenario_SOURCES = tests/unit/test_scenario.c
tests_unit_test_scenario_CFLAGS = $(TEST_CFLAGS)
tests_unit_test_scenario_LDADD = core/libms_scenario.la core/libms_base.la $(TEST_LIBS)

tests_unit_test_workload_SOURCES = tests/unit/test_workload.c
tests_unit_test_workload_CFLAGS = $(TEST_CFLAGS)
tests_unit_test_workload_LDADD = core/libms_workload.la core/libms_scenario.la core/libms_base.la \
	$(TEST_LIBS)

tests_unit_test_workload_pipeline_SOURCES = tests/unit/test_workload_pipeline.c
tests_unit_test_workload_pipeline_CFLAGS = $(TEST_CFLAGS)
tests_unit_test_workload_pipeline_LDADD = core/libms_workload.la core/libms_scenario.la \
	core/libms_base.la $(TEST_LIBS)

# Loads scenarios (the loader, its recompute/swap settings and the builder
# call one another), so it links the whole library.
tests_unit_test_workload_layout_SOURCES = tests/unit/test_workload_layout.c
tests_unit_test_workload_layout_CFLAGS = $(TEST_CFLAGS)
tests_unit_test_workload_layout_LDADD = libmemsim.la $(TEST_LIBS)

EXTRA_DIST += docs/scenario-format.md docs/memory-formulas.md \
	tests/data/scenarios/syntax_error.lua tests/data/scenarios/unknown_key.lua \
	tests/data/scenarios/negative_size.lua tests/data/scenarios/heads_tp.lua \
	tests/data/scenarios/missing_device.lua tests/data/scenarios/bad_device.lua \
	tests/data/scenarios/devices/bad-device.lua tests/data/scenarios/runaway.lua \
	tests/data/scenarios/not_a_table.lua tests/data/scenarios/wrong_type.lua \
	tests/data/scenarios/metatable.lua tests/data/scenarios/sandbox_escape.lua

# Recompute and swap settings (Megatron's recompute arguments, MindFormers'
# recompute_config and swap_config) and the pipeline layout (parallel.offset,
# pp_interleave_num): read by the scenario loader; printed as MindFormers logs
# them and turned into decisions by core/memory_config.c.
core_libms_scenario_la_SOURCES += core/scenario_layout.c core/scenario_pattern.c \
	core/scenario_recompute.c core/scenario_swap.c core/memory_config.h
noinst_LTLIBRARIES += core/libms_memory_config.la
core_libms_memory_config_la_SOURCES = core/memory_config.c core/memory_config.h
MS_PARTS += core/libms_memory_config.la

check_PROGRAMS += tests/unit/test_memory_config
TESTS += tests/unit/test_memory_config
tests_unit_test_memory_config_SOURCES = tests/unit/test_memory_config.c
tests_unit_test_memory_config_CFLAGS = $(TEST_CFLAGS)
tests_unit_test_memory_config_LDADD = core/libms_memory_config.la core/libms_workload.la \
	core/libms_scenario.la core/libms_base.la $(TEST_LIBS)
EXTRA_DIST += tests/data/scenarios/mc_formative48.lua tests/data/scenarios/mc_bad_length.lua \
	tests/data/scenarios/mc_unknown_regex.lua tests/data/scenarios/mc_wrong_type.lua \
	tests/data/scenarios/moe_small.lua
