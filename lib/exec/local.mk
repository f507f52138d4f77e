# lib/exec: the executor, which issues a step program through a backend and
# applies a plan's decisions, and its data check (--verify).
noinst_LTLIBRARIES += lib/exec/libms_exec.la
lib_exec_libms_exec_la_SOURCES = lib/exec/exec.c lib/exec/exec_schedule.c lib/exec/exec_actions.h \
	lib/exec/exec_verify.c lib/exec/exec_verify.h lib/exec/exec_spans.c lib/exec/exec_spans.h
MS_PARTS += lib/exec/libms_exec.la
