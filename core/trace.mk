# Trace import and replay (docs/replay.md): the data-only pickle decoder,
# the snapshot model (pickle or CSV), the starting-state rebuild, the replay
# backend and the replay/compare driver.
noinst_LTLIBRARIES += core/libms_trace.la
core_libms_trace_la_SOURCES = core/pickle.c core/pickle.h core/snapshot.c \
	core/replay.c core/replay_start.c core/replay_start.h core/replay_backend.c
MS_PARTS += core/libms_trace.la

check_PROGRAMS += tests/unit/test_pickle tests/unit/test_replay
TESTS += tests/unit/test_pickle tests/unit/test_replay
tests_unit_test_pickle_SOURCES = tests/unit/test_pickle.c
tests_unit_test_pickle_CFLAGS = $(TEST_CFLAGS)
tests_unit_test_pickle_LDADD = core/libms_trace.la core/libms_base.la $(TEST_LIBS)
tests_unit_test_replay_SOURCES = tests/unit/test_replay.c
tests_unit_test_replay_CFLAGS = $(TEST_CFLAGS)
tests_unit_test_replay_LDADD = core/libms_trace.la core/libms_alloc.la core/libms_base.la \
	$(TEST_LIBS)

# Small synthetic traces; the real snapshots stay in ../shared/traces.
EXTRA_DIST += tests/fuzz/fuzz_pickle.c tests/fuzz/fuzz_replay.c docs/replay.md \
	tests/data/traces/basic.csv tests/data/traces/deferred.csv \
	tests/data/traces/unknown-free.csv tests/data/traces/oom.csv \
	tests/data/traces/small.pickle tests/data/traces/contradict.pickle \
	tests/data/traces/expandable.pickle \
	tests/data/traces/make_small_pickle.py
