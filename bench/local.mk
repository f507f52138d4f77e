# Benchmarks: built by `make`, never run by `make check` (bench/README.md).
noinst_PROGRAMS += bench/bench_alloc
bench_bench_alloc_SOURCES = bench/bench_alloc.c tests/unit/test_allocator_fake.c \
	tests/unit/test_allocator_fake.h
bench_bench_alloc_LDADD = core/libms_alloc.la core/libms_base.la $(GSL_LIBS) $(LUA_LIBS) -lm
EXTRA_DIST += bench/README.md
