# The executor, whole runs and their reports.
noinst_LTLIBRARIES += core/libms_exec.la
core_libms_exec_la_SOURCES = core/exec.c core/exec_schedule.c core/exec_actions.h \
	core/run.c core/record.c core/report_csv.c core/report_trace.c core/report_svg.c \
	core/report_svg.h core/csv_out.c core/csv_out.h core/decimal.h core/growable.h \
	core/backend_registry.c core/cohost.c core/cohost.h
MS_PARTS += core/libms_exec.la
