# Benchmarks: built by `make`, never run by `make check` (bench/README.md).
noinst_PROGRAMS += bench/bench_alloc
bench_bench_alloc_SOURCES = bench/bench_alloc.c tests/unit/test_allocator_fake.c \
	tests/unit/test_allocator_fake.h
bench_bench_alloc_LDADD = lib/replay/libms_replay.la lib/alloc/libms_alloc.la lib/base/libms_base.la $(GSL_LIBS) \
	$(LUA_LIBS) $(CSV_LIBS) -lm
EXTRA_DIST += bench/README.md

# Simulation speed of whole runs (issue 4's llama2-70B target); not run by
# make check.  See bench/README.md for the command and recorded figures.
noinst_PROGRAMS += bench/bench_run
bench_bench_run_SOURCES = bench/bench_run.c bench/heap_rate.c bench/heap_rate.h
# The engine's heap is timed directly (sim/ is internal to libmemsim).
bench_bench_run_LDADD = libmemsim.la sim/libms_sim.la lib/base/libms_base.la -lm

# Does the state repeat inside a step (issue 13)?  Scripts run by hand; see
# bench/README.md, "Does the state repeat inside a step?".
EXTRA_DIST += bench/layout_period.sh bench/layout_period.patch bench/timeline_period.py
# Every timed target of issue 13 in one sitting, with verdicts (bench/README.md).
EXTRA_DIST += bench/issue13_targets.sh
