# lib/base: what every layer shares and that depends on nothing of ours:
# status codes and diagnostics, dtype and device-spec facts, the Lua sandbox,
# growable arrays, the printf-free decimal writer, closing a backend handle,
# address maps and pools of fixed-size objects.
noinst_LTLIBRARIES += lib/base/libms_base.la
lib_base_libms_base_la_SOURCES = \
	lib/base/status.c lib/base/device_spec.c lib/base/sandbox.c lib/base/sandbox.h \
	lib/base/growable.h lib/base/decimal.h lib/base/backend_handle.c \
	lib/base/range_set.c lib/base/range_set.h lib/base/addr_map.c lib/base/addr_map.h \
	lib/base/obj_pool.c lib/base/obj_pool.h lib/base/obj_fifo.c lib/base/obj_fifo.h \
	lib/base/data_path.c \
	lib/base/units.h lib/base/state_sig.c
MS_PARTS = lib/base/libms_base.la
