# lib/run: a whole run (stages, steps, OOM relaunch) through backend.h, and
# fitting a scenario to a real device.
noinst_LTLIBRARIES += lib/run/libms_run.la
lib_run_libms_run_la_SOURCES = lib/run/run.c lib/run/run_fit.c lib/run/run_fit.h \
	lib/run/run_internal.h lib/run/fast_forward.c
MS_PARTS += lib/run/libms_run.la
