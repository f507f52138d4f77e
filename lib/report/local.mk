# lib/report: the run record and what is written from it (CSV through
# libcsv, the Chrome trace, SVG plots, the console summary).
noinst_LTLIBRARIES += lib/report/libms_report.la
lib_report_libms_report_la_SOURCES = \
	lib/report/record.c lib/report/report_csv.c lib/report/report_trace.c \
	lib/report/report_svg.c lib/report/report_svg.h lib/report/csv_out.c lib/report/csv_out.h \
	lib/report/report_clock.c lib/report/report_internal.h lib/report/report_dir.c \
	lib/report/report_snapshot.c lib/report/pickle_out.c lib/report/pickle_out.h \
	lib/report/report_size.c
MS_PARTS += lib/report/libms_report.la
