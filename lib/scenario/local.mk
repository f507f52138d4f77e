# lib/scenario: scenario and device files (Lua tables in a sandbox) loaded,
# validated and overridden; Megatron and MindFormers recompute/swap settings
# and the pipeline layout normalised; training scripts, MindFormers/NeMo
# YAML and Hugging Face configs imported.
noinst_LTLIBRARIES += lib/scenario/libms_scenario.la
lib_scenario_libms_scenario_la_SOURCES = \
	lib/scenario/scenario.c lib/scenario/scenario_table.c lib/scenario/scenario_override.c \
	lib/scenario/scenario_validate.c lib/scenario/device_file.c lib/scenario/scenario_table.h \
	lib/scenario/scenario_load.h lib/scenario/scenario_layout.c lib/scenario/scenario_pattern.c \
	lib/scenario/scenario_recompute.c lib/scenario/scenario_swap.c lib/scenario/memory_config.h \
	lib/scenario/scenario_settings.c lib/scenario/scenario_megatron.c \
	lib/scenario/import/import.h lib/scenario/import/import.c lib/scenario/import/import_doc.c \
	lib/scenario/import/import_shell.h lib/scenario/import/import_shell.c \
	lib/scenario/import/import_expand.c lib/scenario/import/import_megatron.c \
	lib/scenario/import/import_nemo.c lib/scenario/import/import_tree.c \
	lib/scenario/import/import_mindformers.c lib/scenario/import/import_hf.c
# memsim import reads YAML and JSON through libyaml.
lib_scenario_libms_scenario_la_LIBADD = $(YAML_LIBS)
MS_PARTS += lib/scenario/libms_scenario.la
EXTRA_DIST += docs/scenario-format.md
