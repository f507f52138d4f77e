# The unit tests of each part and the end-to-end tests of the memsim command.
# A test links the parts it tests (convenience libraries, internals
# included); tests of the public API alone link libmemsim.
TEST_CFLAGS = $(AM_CFLAGS) $(CHECK_CFLAGS)
TEST_LIBS = $(CHECK_LIBS) $(GSL_LIBS) $(LUA_LIBS) $(CSV_LIBS) -lm
# Every part, in link order (a part before those it calls).
TEST_ALL_PARTS = lib/run/libms_run.la lib/exec/libms_exec.la lib/policy/libms_policy.la \
	lib/report/libms_report.la lib/replay/libms_replay.la lib/alloc/libms_alloc.la \
	lib/workload/libms_workload.la lib/scenario/libms_scenario.la lib/backend/libms_backend.la \
	$(NPU_RUNTIME_PARTS) backend_npu/libms_npu.la backend_mock/libms_mock.la sim/libms_sim.la \
	lib/base/libms_base.la
EXTRA_DIST += tests/data tests/golden tests/configure_cuda.sh

# lib/base
check_PROGRAMS += tests/unit/test_sandbox
tests_unit_test_sandbox_SOURCES = tests/unit/test_sandbox.c
tests_unit_test_sandbox_CFLAGS = $(TEST_CFLAGS)
tests_unit_test_sandbox_LDADD = lib/base/libms_base.la $(TEST_LIBS)

# sim/ and backend_mock/
check_PROGRAMS += tests/unit/test_sim tests/unit/test_mock
tests_unit_test_sim_SOURCES = tests/unit/test_sim.c tests/unit/test_device_spec.h
tests_unit_test_sim_CFLAGS = $(TEST_CFLAGS)
tests_unit_test_sim_LDADD = sim/libms_sim.la lib/base/libms_base.la $(TEST_LIBS)
tests_unit_test_mock_SOURCES = tests/unit/test_mock.c tests/unit/test_device_spec.h
tests_unit_test_mock_CFLAGS = $(TEST_CFLAGS)
tests_unit_test_mock_LDADD = backend_mock/libms_mock.la sim/libms_sim.la lib/base/libms_base.la \
	$(TEST_LIBS)

# lib/alloc.  A fake device for the allocator's tests and benchmark: a bump
# allocator with a capacity, streams, and events that complete when the test
# says.
ALLOC_FAKE = tests/unit/test_allocator_fake.c tests/unit/test_allocator_fake.h
ALLOC_FIXTURE = $(ALLOC_FAKE) tests/unit/test_allocator_fixture.c tests/unit/test_allocator_fixture.h
ALLOC_TEST_LIBS = lib/alloc/libms_alloc.la lib/base/libms_base.la $(TEST_LIBS)
check_PROGRAMS += tests/unit/test_allocator_conf tests/unit/test_allocator \
	tests/unit/test_allocator_expandable tests/unit/test_allocator_model \
	tests/unit/test_allocator_traces tests/unit/test_allocator_mindspeed
tests_unit_test_allocator_conf_SOURCES = tests/unit/test_allocator_conf.c
tests_unit_test_allocator_conf_CFLAGS = $(TEST_CFLAGS)
tests_unit_test_allocator_conf_LDADD = $(ALLOC_TEST_LIBS)
tests_unit_test_allocator_SOURCES = tests/unit/test_allocator.c $(ALLOC_FIXTURE)
tests_unit_test_allocator_CFLAGS = $(TEST_CFLAGS)
tests_unit_test_allocator_LDADD = $(ALLOC_TEST_LIBS)
tests_unit_test_allocator_expandable_SOURCES = tests/unit/test_allocator_expandable.c \
	$(ALLOC_FIXTURE)
tests_unit_test_allocator_expandable_CFLAGS = $(TEST_CFLAGS)
tests_unit_test_allocator_expandable_LDADD = $(ALLOC_TEST_LIBS)
tests_unit_test_allocator_mindspeed_SOURCES = tests/unit/test_allocator_mindspeed.c \
	$(ALLOC_FIXTURE)
tests_unit_test_allocator_mindspeed_CFLAGS = $(TEST_CFLAGS)
tests_unit_test_allocator_mindspeed_LDADD = $(ALLOC_TEST_LIBS)
tests_unit_test_allocator_model_SOURCES = tests/unit/test_allocator_model.c $(ALLOC_FAKE)
tests_unit_test_allocator_model_CFLAGS = $(TEST_CFLAGS)
tests_unit_test_allocator_model_LDADD = $(ALLOC_TEST_LIBS)
# Replays of real PyTorch memory snapshots (extract.py documents the source).
tests_unit_test_allocator_traces_SOURCES = tests/unit/test_allocator_traces.c
tests_unit_test_allocator_traces_CFLAGS = $(TEST_CFLAGS)
tests_unit_test_allocator_traces_LDADD = $(ALLOC_TEST_LIBS)

# lib/replay (small synthetic traces here; the real snapshots stay in
# ../shared/traces)
check_PROGRAMS += tests/unit/test_pickle tests/unit/test_replay
tests_unit_test_pickle_SOURCES = tests/unit/test_pickle.c
tests_unit_test_pickle_CFLAGS = $(TEST_CFLAGS)
tests_unit_test_pickle_LDADD = lib/replay/libms_replay.la lib/base/libms_base.la $(TEST_LIBS)
tests_unit_test_replay_SOURCES = tests/unit/test_replay.c
tests_unit_test_replay_CFLAGS = $(TEST_CFLAGS)
tests_unit_test_replay_LDADD = lib/replay/libms_replay.la $(ALLOC_TEST_LIBS)

# lib/scenario and lib/workload
check_PROGRAMS += tests/unit/test_scenario tests/unit/test_workload tests/unit/test_workload_pipeline \
	tests/unit/test_workload_layout tests/unit/test_workload_repeat
tests_unit_test_scenario_SOURCES = tests/unit/test_scenario.c
tests_unit_test_scenario_CFLAGS = $(TEST_CFLAGS)
tests_unit_test_scenario_LDADD = lib/scenario/libms_scenario.la lib/base/libms_base.la $(TEST_LIBS)
# Megatron-LM's argument names in a scenario (issue 38).
check_PROGRAMS += tests/unit/test_scenario_megatron
tests_unit_test_scenario_megatron_SOURCES = tests/unit/test_scenario_megatron.c
tests_unit_test_scenario_megatron_CFLAGS = $(TEST_CFLAGS)
tests_unit_test_scenario_megatron_LDADD = lib/workload/libms_workload.la lib/scenario/libms_scenario.la \
	lib/base/libms_base.la $(TEST_LIBS)
# memsim import's readers (issue 38); tests/import.sh runs real scripts and configs.
check_PROGRAMS += tests/unit/test_import
tests_unit_test_import_SOURCES = tests/unit/test_import.c
tests_unit_test_import_CFLAGS = $(TEST_CFLAGS)
tests_unit_test_import_LDADD = lib/scenario/libms_scenario.la lib/base/libms_base.la $(TEST_LIBS)
WORKLOAD_TEST_LIBS = lib/workload/libms_workload.la lib/scenario/libms_scenario.la \
	lib/base/libms_base.la $(TEST_LIBS)
tests_unit_test_workload_SOURCES = tests/unit/test_workload.c
tests_unit_test_workload_CFLAGS = $(TEST_CFLAGS)
tests_unit_test_workload_LDADD = $(WORKLOAD_TEST_LIBS)
tests_unit_test_workload_pipeline_SOURCES = tests/unit/test_workload_pipeline.c
tests_unit_test_workload_pipeline_CFLAGS = $(TEST_CFLAGS)
tests_unit_test_workload_pipeline_LDADD = $(WORKLOAD_TEST_LIBS)
tests_unit_test_workload_repeat_SOURCES = tests/unit/test_workload_repeat.c
tests_unit_test_workload_repeat_CFLAGS = $(TEST_CFLAGS)
tests_unit_test_workload_repeat_LDADD = $(WORKLOAD_TEST_LIBS)
tests_unit_test_workload_layout_SOURCES = tests/unit/test_workload_layout.c
tests_unit_test_workload_layout_CFLAGS = $(TEST_CFLAGS)
tests_unit_test_workload_layout_LDADD = $(TEST_ALL_PARTS) $(TEST_LIBS)

# lib/policy (with the scenario's declared settings)
check_PROGRAMS += tests/unit/test_policy tests/unit/test_memory_config
tests_unit_test_policy_SOURCES = tests/unit/test_policy.c
tests_unit_test_policy_CFLAGS = $(TEST_CFLAGS)
tests_unit_test_policy_LDADD = lib/policy/libms_policy.la lib/alloc/libms_alloc.la $(WORKLOAD_TEST_LIBS)
tests_unit_test_memory_config_SOURCES = tests/unit/test_memory_config.c
tests_unit_test_memory_config_CFLAGS = $(TEST_CFLAGS)
tests_unit_test_memory_config_LDADD = lib/policy/libms_policy.la lib/alloc/libms_alloc.la $(WORKLOAD_TEST_LIBS)

# lib/exec, lib/run, lib/report and the memsim command
check_PROGRAMS += tests/unit/test_exec tests/unit/test_run tests/unit/test_report_svg
tests_unit_test_exec_SOURCES = tests/unit/test_exec.c tests/unit/test_device_spec.h
tests_unit_test_exec_CFLAGS = $(TEST_CFLAGS)
tests_unit_test_exec_LDADD = $(TEST_ALL_PARTS) $(TEST_LIBS)
tests_unit_test_run_SOURCES = tests/unit/test_run.c
tests_unit_test_run_CFLAGS = $(TEST_CFLAGS)
tests_unit_test_run_LDADD = $(TEST_ALL_PARTS) $(TEST_LIBS)
# report.max_bytes and a run's progress (issue 13).
check_PROGRAMS += tests/unit/test_fast_forward
tests_unit_test_fast_forward_SOURCES = tests/unit/test_fast_forward.c tests/unit/test_paths.h \
	tests/unit/test_device_spec.h tests/unit/test_rows.h
tests_unit_test_fast_forward_CFLAGS = $(TEST_CFLAGS)
tests_unit_test_fast_forward_LDADD = $(TEST_ALL_PARTS) $(TEST_LIBS)
check_PROGRAMS += tests/unit/test_report_limit
tests_unit_test_report_limit_SOURCES = tests/unit/test_report_limit.c tests/unit/test_paths.h \
	tests/unit/test_rows.h
tests_unit_test_report_limit_CFLAGS = $(TEST_CFLAGS)
tests_unit_test_report_limit_LDADD = $(TEST_ALL_PARTS) $(TEST_LIBS)
# The end-to-end test runs the memsim program.
EXTRA_tests_unit_test_run_DEPENDENCIES = memsim$(EXEEXT)
tests_unit_test_report_svg_SOURCES = tests/unit/test_report_svg.c
tests_unit_test_report_svg_CFLAGS = $(TEST_CFLAGS)
tests_unit_test_report_svg_LDADD = $(TEST_ALL_PARTS) $(TEST_LIBS)

# lib/exec's data check (--verify) on the mock's functional mode
check_PROGRAMS += tests/unit/test_verify
tests_unit_test_verify_SOURCES = tests/unit/test_verify.c tests/unit/test_paths.h
tests_unit_test_verify_CFLAGS = $(TEST_CFLAGS)
tests_unit_test_verify_LDADD = $(TEST_ALL_PARTS) $(TEST_LIBS)
EXTRA_tests_unit_test_verify_DEPENDENCIES = memsim$(EXEEXT)

# backend_npu.  The ACL runtime layer is built against the test double in
# tests/acl_double/ (CANN cannot be installed here), with a registry that
# lists "npu"; the CUDA layer's test skips (77) without a GPU.  Both
# runtimes' doubles are built on tests/runtime_double/ (memory, stream
# threads, events).
RUNTIME_DOUBLE = tests/runtime_double/runtime_double.c tests/runtime_double/runtime_double.h
ACL_DOUBLE = tests/acl_double/acl_double.c tests/acl_double/acl_double.h \
	tests/acl_double/include/acl/acl.h tests/acl_double/include/aclnn/acl_meta.h \
	tests/acl_double/include/aclnnop/aclnn_batch_matmul.h $(RUNTIME_DOUBLE)
NPU_CHECKS = tests/unit/test_npu_checks.h tests/unit/test_paths.h
check_PROGRAMS += tests/unit/test_backend_cli
tests_unit_test_backend_cli_SOURCES = tests/unit/test_backend_cli.c tests/unit/test_paths.h
tests_unit_test_backend_cli_CFLAGS = $(TEST_CFLAGS)
tests_unit_test_backend_cli_LDADD = $(TEST_LIBS)
EXTRA_tests_unit_test_backend_cli_DEPENDENCIES = memsim$(EXEEXT)
if !WITH_ASCEND
check_PROGRAMS += tests/unit/test_npu_acl
tests_unit_test_npu_acl_SOURCES = tests/unit/test_npu_acl.c $(NPU_CHECKS) backend_npu/acl.c \
	lib/backend/registry.c $(ACL_DOUBLE)
tests_unit_test_npu_acl_CPPFLAGS = $(AM_CPPFLAGS) -I$(top_srcdir)/tests/acl_double/include \
	-I$(top_srcdir)/tests/acl_double -I$(top_srcdir)/tests/runtime_double -DMS_WITH_ASCEND
tests_unit_test_npu_acl_CFLAGS = $(TEST_CFLAGS) -pthread
tests_unit_test_npu_acl_LDADD = $(TEST_ALL_PARTS) $(TEST_LIBS) -lpthread
else
EXTRA_DIST += tests/unit/test_npu_acl.c $(ACL_DOUBLE)
endif
# The CUDA layer runs on a GPU in test_npu_cuda (it skips without one) and
# everywhere on the test double of libcudart, cuBLAS and cuBLASLt in
# tests/cuda_double/: one shared module, not installed, that cuda.c
# dlopens in their place (test_npu_cuda_double sets MEMSIM_CUDART,
# MEMSIM_CUBLAS and MEMSIM_CUBLASLT to it).  -rpath makes libtool build it
# shared; the test does not link it.
CUDA_DOUBLE = tests/cuda_double/cuda_double.c tests/cuda_double/cuda_double.h $(RUNTIME_DOUBLE)
if WITH_CUDA
check_PROGRAMS += tests/unit/test_npu_cuda
tests_unit_test_npu_cuda_SOURCES = tests/unit/test_npu_cuda.c $(NPU_CHECKS)
tests_unit_test_npu_cuda_CFLAGS = $(TEST_CFLAGS)
tests_unit_test_npu_cuda_LDADD = $(TEST_ALL_PARTS) $(TEST_LIBS)
check_LTLIBRARIES = tests/cuda_double/libcuda_double.la
tests_cuda_double_libcuda_double_la_SOURCES = $(CUDA_DOUBLE)
tests_cuda_double_libcuda_double_la_CPPFLAGS = $(AM_CPPFLAGS) $(CUDA_CPPFLAGS) \
	-I$(top_srcdir)/tests/runtime_double
tests_cuda_double_libcuda_double_la_CFLAGS = $(TEST_CFLAGS) -pthread
tests_cuda_double_libcuda_double_la_LDFLAGS = -module -avoid-version -rpath /nowhere
tests_cuda_double_libcuda_double_la_LIBADD = -lpthread
check_PROGRAMS += tests/unit/test_npu_cuda_double
tests_unit_test_npu_cuda_double_SOURCES = tests/unit/test_npu_cuda_double.c $(NPU_CHECKS)
tests_unit_test_npu_cuda_double_CPPFLAGS = $(AM_CPPFLAGS) -I$(top_srcdir)/tests/cuda_double \
	-DCUDA_DOUBLE_SO='"$(abs_top_builddir)/tests/cuda_double/.libs/libcuda_double.so"'
tests_unit_test_npu_cuda_double_CFLAGS = $(TEST_CFLAGS)
tests_unit_test_npu_cuda_double_LDADD = $(TEST_ALL_PARTS) $(TEST_LIBS) $(CUDA_LIBS)
EXTRA_tests_unit_test_npu_cuda_double_DEPENDENCIES = tests/cuda_double/libcuda_double.la
else
EXTRA_DIST += tests/unit/test_npu_cuda.c tests/unit/test_npu_cuda_double.c $(CUDA_DOUBLE)
endif

# lib/calibrate: memsim calibrate and memsim validate.
check_PROGRAMS += tests/unit/test_calibrate
tests_unit_test_calibrate_SOURCES = tests/unit/test_calibrate.c
tests_unit_test_calibrate_CFLAGS = $(TEST_CFLAGS)
tests_unit_test_calibrate_LDADD = lib/calibrate/libms_calibrate.la $(TEST_ALL_PARTS) $(TEST_LIBS)
EXTRA_tests_unit_test_calibrate_DEPENDENCIES = memsim$(EXEEXT)
# bridge_torch: the pluggable allocator on a host-memory double of the
# runtime layer; its traces replay in memsim replay.
check_PROGRAMS += tests/unit/test_bridge_alloc
tests_unit_test_bridge_alloc_SOURCES = tests/unit/test_bridge_alloc.c tests/unit/test_bridge_fake.c \
	tests/unit/test_bridge_fake.h
tests_unit_test_bridge_alloc_CFLAGS = $(TEST_CFLAGS)
tests_unit_test_bridge_alloc_LDADD = bridge_torch/libmemsim_alloc.la libmemsim.la $(TEST_LIBS)
EXTRA_tests_unit_test_bridge_alloc_DEPENDENCIES = memsim$(EXEEXT)
# include/memsim/torch.h, the C side of memsim_torch (public API only).
check_PROGRAMS += tests/unit/test_torch_step
tests_unit_test_torch_step_SOURCES = tests/unit/test_torch_step.c
tests_unit_test_torch_step_CFLAGS = $(TEST_CFLAGS)
tests_unit_test_torch_step_LDADD = libmemsim.la $(TEST_LIBS)
EXTRA_tests_unit_test_torch_step_DEPENDENCIES = memsim$(EXEEXT)
# memsim_torch on CPU tensors (python3-torch); skips without torch.
EXTRA_DIST += tests/torch.sh tests/python/test_memsim_torch.py

TESTS += $(check_PROGRAMS)

# DESIGN.md's layout rules on the tree and on the built library's exports.
TESTS += tests/layout.sh tests/torch.sh
EXTRA_DIST += tests/layout.sh

# The memsim command as a user meets it, and hostile input (each case stopped
# with a clear error within 20 s and 2 GiB).
TESTS += tests/cli.sh tests/hostile.sh tests/reproduce.sh
EXTRA_DIST += tests/cli.sh tests/hostile.sh tests/mpi_sweep.sh tests/reproduce.sh
# Fast-forward's contract: the same reports with and without it (issue 13);
# make check runs every shipped scenario under its own policy, make
# check-fast-forward (run by .ci/run) under every shipped policy too.
TESTS += tests/fast_forward.sh
EXTRA_DIST += tests/fast_forward.sh
.PHONY: check-fast-forward
check-fast-forward: memsim$(EXEEXT)
	MEMSIM_SRCDIR='$(abs_top_srcdir)' MEMSIM_BUILDDIR='$(abs_top_builddir)' \
		$(abs_top_srcdir)/tests/fast_forward.sh --all
# memsim_optimal against every shipped policy on the llama2-70B seed rows
# (issue 12; about 15 minutes, so not in `make check`).
EXTRA_DIST += tests/optimal_70b.sh
.PHONY: check-optimal-70b
check-optimal-70b: memsim$(EXEEXT)
	MEMSIM_SRCDIR='$(abs_top_srcdir)' MEMSIM_BUILDDIR='$(abs_top_builddir)' \
		$(abs_top_srcdir)/tests/optimal_70b.sh
# Detail over report.max_bytes, and a run's progress on stderr (issue 13).
TESTS += tests/report_limit.sh
EXTRA_DIST += tests/report_limit.sh
# memsim import on real public training scripts and configs, each run beside
# the same job written by hand (issue 38).
TESTS += tests/import.sh
EXTRA_DIST += tests/import.sh
# Every example command of README.md, docs/, bench/README.md, --help and the
# man page runs (fewer steps; tests/docs_examples.sh says what it changes).
TESTS += tests/docs_examples.sh
EXTRA_DIST += tests/docs_examples.sh
# A sweep on two MPI ranks merges the CSV one process writes (--with-mpi).
if WITH_MPI
TESTS += tests/mpi_sweep.sh
endif

# The fuzz targets (pickle, snapshot replay, CSV traces, scenario loader),
# built by make with a driver of our own so any compiler builds them;
# `make fuzz-smoke` runs each from its corpus for FUZZ_SECONDS (CI runs it in
# the sanitizer build).  docs/replay.md, "Fuzzing", has the libFuzzer build.
FUZZ_LIBS = $(GSL_LIBS) $(LUA_LIBS) $(CSV_LIBS) -lm
FUZZ_TARGETS = tests/fuzz/fuzz_pickle tests/fuzz/fuzz_replay tests/fuzz/fuzz_csv_trace \
	tests/fuzz/fuzz_scenario
noinst_PROGRAMS += $(FUZZ_TARGETS)
tests_fuzz_fuzz_pickle_SOURCES = tests/fuzz/fuzz_pickle.c tests/fuzz/driver.c
tests_fuzz_fuzz_pickle_LDADD = lib/replay/libms_replay.la lib/base/libms_base.la $(FUZZ_LIBS)
tests_fuzz_fuzz_replay_SOURCES = tests/fuzz/fuzz_replay.c tests/fuzz/driver.c
tests_fuzz_fuzz_replay_LDADD = lib/replay/libms_replay.la lib/alloc/libms_alloc.la \
	lib/base/libms_base.la $(FUZZ_LIBS)
tests_fuzz_fuzz_csv_trace_SOURCES = tests/fuzz/fuzz_replay.c tests/fuzz/driver.c
tests_fuzz_fuzz_csv_trace_CPPFLAGS = $(AM_CPPFLAGS) -DFUZZ_AS_CSV
tests_fuzz_fuzz_csv_trace_LDADD = $(tests_fuzz_fuzz_replay_LDADD)
tests_fuzz_fuzz_scenario_SOURCES = tests/fuzz/fuzz_scenario.c tests/fuzz/driver.c
tests_fuzz_fuzz_scenario_LDADD = lib/scenario/libms_scenario.la lib/base/libms_base.la \
	$(FUZZ_LIBS)
FUZZ_SECONDS = 15
fuzz-smoke: $(FUZZ_TARGETS)
	tests/fuzz/fuzz_pickle -t $(FUZZ_SECONDS) -m 4096 $(srcdir)/tests/data/traces
	tests/fuzz/fuzz_replay -t $(FUZZ_SECONDS) -m 4096 $(srcdir)/tests/data/traces
	tests/fuzz/fuzz_csv_trace -t $(FUZZ_SECONDS) -m 4096 $(srcdir)/tests/data/traces
	MEMSIM_DATADIR=$(abs_top_srcdir) tests/fuzz/fuzz_scenario -t $(FUZZ_SECONDS) -m 8192 \
		$(srcdir)/tests/data/scenarios $(srcdir)/tests/data/cli/tiny-gpt.lua
.PHONY: fuzz-smoke
CLEANFILES += fuzz-last-input
