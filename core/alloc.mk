# The caching allocator (PyTorch CUDACachingAllocator / torch_npu
# NPUCachingAllocator reproduced rule by rule; docs/allocator.md).
noinst_LTLIBRARIES += core/libms_alloc.la
core_libms_alloc_la_SOURCES = \
	core/allocator.c core/allocator_blocks.c core/allocator_conf.c \
	core/allocator_events.c core/allocator_expandable.c core/allocator_index.c \
	core/allocator_oom.c core/allocator_pools.c core/allocator_segments.c \
	core/allocator_snapshot.c core/allocator_stats.c core/allocator_tree.c \
	core/allocator_internal.h core/allocator_tree.h
MS_PARTS += core/libms_alloc.la
EXTRA_DIST += docs/allocator.md

# A fake device for the allocator's tests and benchmark: a bump allocator
# with a capacity, streams, and events that complete when the test says.
ALLOC_FAKE = tests/unit/test_allocator_fake.c tests/unit/test_allocator_fake.h
ALLOC_FIXTURE = $(ALLOC_FAKE) tests/unit/test_allocator_fixture.c tests/unit/test_allocator_fixture.h

check_PROGRAMS += tests/unit/test_allocator_conf tests/unit/test_allocator \
	tests/unit/test_allocator_expandable tests/unit/test_allocator_model \
	tests/unit/test_allocator_traces
TESTS += tests/unit/test_allocator_conf tests/unit/test_allocator \
	tests/unit/test_allocator_expandable tests/unit/test_allocator_model \
	tests/unit/test_allocator_traces

tests_unit_test_allocator_conf_SOURCES = tests/unit/test_allocator_conf.c
tests_unit_test_allocator_conf_CFLAGS = $(TEST_CFLAGS)
tests_unit_test_allocator_conf_LDADD = core/libms_alloc.la core/libms_base.la $(TEST_LIBS)

tests_unit_test_allocator_SOURCES = tests/unit/test_allocator.c $(ALLOC_FIXTURE)
tests_unit_test_allocator_CFLAGS = $(TEST_CFLAGS)
tests_unit_test_allocator_LDADD = core/libms_alloc.la core/libms_base.la $(TEST_LIBS)

tests_unit_test_allocator_expandable_SOURCES = tests/unit/test_allocator_expandable.c \
	$(ALLOC_FIXTURE)
tests_unit_test_allocator_expandable_CFLAGS = $(TEST_CFLAGS)
tests_unit_test_allocator_expandable_LDADD = core/libms_alloc.la core/libms_base.la $(TEST_LIBS)

tests_unit_test_allocator_model_SOURCES = tests/unit/test_allocator_model.c $(ALLOC_FAKE)
tests_unit_test_allocator_model_CFLAGS = $(TEST_CFLAGS)
tests_unit_test_allocator_model_LDADD = core/libms_alloc.la core/libms_base.la $(TEST_LIBS)

# Replays of real PyTorch memory snapshots (extract.py documents the source).
tests_unit_test_allocator_traces_SOURCES = tests/unit/test_allocator_traces.c
tests_unit_test_allocator_traces_CFLAGS = $(TEST_CFLAGS)
tests_unit_test_allocator_traces_LDADD = core/libms_alloc.la core/libms_base.la $(TEST_LIBS)
EXTRA_DIST += tests/data/allocator/extract.py tests/data/allocator/expandable-dev2.trace \
	tests/data/allocator/expandable-oom-dev1.trace tests/data/allocator/train-step.trace
