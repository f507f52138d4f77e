# lib/workload: the step program of one device (models, layers, MoE, CP,
# pipeline schedules, optimizer) and what follows from it.
noinst_LTLIBRARIES += lib/workload/libms_workload.la
lib_workload_libms_workload_la_SOURCES = \
	lib/workload/workload.c lib/workload/workload_ops.c lib/workload/workload_layer.c \
	lib/workload/workload_model.c lib/workload/workload_optimizer.c lib/workload/model_math.c \
	lib/workload/workload_build.h lib/workload/workload_model.h lib/workload/workload_check.c \
	lib/workload/workload_pipeline.c lib/workload/workload_cp.c lib/workload/workload_moe.c \
	lib/workload/workload_memory.c lib/workload/workload_facts.c
MS_PARTS += lib/workload/libms_workload.la
EXTRA_DIST += docs/memory-formulas.md
