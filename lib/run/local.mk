# lib/run: a whole run (stages, steps, OOM relaunch) through backend.h.
noinst_LTLIBRARIES += lib/run/libms_run.la
lib_run_libms_run_la_SOURCES = lib/run/run.c
MS_PARTS += lib/run/libms_run.la
