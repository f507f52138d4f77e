# What every layer shares: status codes and diagnostics, dtypes and device
# specs, decision plans.
noinst_LTLIBRARIES += core/libms_base.la
core_libms_base_la_SOURCES = core/status.c core/device.c core/plan.c core/backend_close.c \
	core/lua_sandbox.c core/lua_sandbox.h
MS_PARTS = core/libms_base.la
