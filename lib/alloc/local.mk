# lib/alloc: the caching allocator (PyTorch CUDACachingAllocator / torch_npu
# NPUCachingAllocator reproduced rule by rule; docs/allocator.md).
noinst_LTLIBRARIES += lib/alloc/libms_alloc.la
lib_alloc_libms_alloc_la_SOURCES = \
	lib/alloc/allocator.c lib/alloc/allocator_blocks.c lib/alloc/allocator_conf.c \
	lib/alloc/allocator_events.c lib/alloc/allocator_expandable.c lib/alloc/allocator_index.c \
	lib/alloc/allocator_mindspeed.c lib/alloc/allocator_mindspore.c \
	lib/alloc/allocator_oom.c lib/alloc/allocator_pools.c lib/alloc/allocator_segments.c \
	lib/alloc/allocator_snapshot.c lib/alloc/allocator_stats.c lib/alloc/allocator_state.c lib/alloc/allocator_tree.c \
	lib/alloc/allocator_internal.h lib/alloc/allocator_tree.h
MS_PARTS += lib/alloc/libms_alloc.la
EXTRA_DIST += docs/allocator.md
