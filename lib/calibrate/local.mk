# lib/calibrate: memsim calibrate (microbenchmarks through backend.h, GSL
# fits, the device-file writer) and memsim validate (public measurement
# tables run side by side with the model, parameters fitted on train rows).
noinst_LTLIBRARIES += lib/calibrate/libms_calibrate.la
lib_calibrate_libms_calibrate_la_SOURCES = \
	lib/calibrate/cal_internal.h lib/calibrate/device_params.c lib/calibrate/device_writer.c \
	lib/calibrate/bench.h lib/calibrate/bench.c lib/calibrate/fit.h lib/calibrate/fit.c \
	lib/calibrate/calibrate_parts.h lib/calibrate/calibrate.c lib/calibrate/cal_compute.c \
	lib/calibrate/cal_links.c lib/calibrate/validation.h lib/calibrate/validate_table.c \
	lib/calibrate/validate.c lib/calibrate/validate_fit.c lib/calibrate/validate_out.c
MS_PARTS += lib/calibrate/libms_calibrate.la
EXTRA_DIST += validation
