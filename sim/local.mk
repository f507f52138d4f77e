# The discrete-event engine, the device models and the cost model.
noinst_LTLIBRARIES += sim/libms_sim.la
sim_libms_sim_la_SOURCES = \
	sim/engine.c sim/sim_private.h \
	sim/curve.c sim/curve.h sim/cost_model.c \
	sim/device_model.h sim/device.c sim/work_pool.c sim/stream.c sim/device_event.c \
	sim/serial_engine.c sim/copy_engine.c sim/p2p.c \
	sim/host.c
MS_PARTS += sim/libms_sim.la

check_PROGRAMS += tests/unit/test_sim
TESTS += tests/unit/test_sim
tests_unit_test_sim_SOURCES = tests/unit/test_sim.c tests/unit/test_device_spec.h
tests_unit_test_sim_CFLAGS = $(TEST_CFLAGS)
tests_unit_test_sim_LDADD = sim/libms_sim.la core/libms_base.la $(TEST_LIBS)
