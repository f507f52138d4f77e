# sim: the discrete-event engine and the device models (streams, events,
# compute, links of the host and the networks, p2p, cost model).  Depends on lib/base
# only; knows nothing of tensors or policies.  Private to the mock backend.
noinst_LTLIBRARIES += sim/libms_sim.la
sim_libms_sim_la_SOURCES = \
	sim/sim.h sim/engine.c sim/sim_private.h \
	sim/curve.c sim/curve.h sim/cost_model.c \
	sim/device_model.h sim/device.c sim/stream.c sim/device_event.c \
	sim/serial_engine.c sim/link_engine.c sim/p2p.c \
	sim/host.c sim/sim_state.c
MS_PARTS += sim/libms_sim.la
