# lib/replay: trace import and replay (docs/replay.md): the data-only pickle
# decoder, the snapshot model (pickle or CSV), the starting-state rebuild,
# the replay's answering backend and the replay/compare driver.
noinst_LTLIBRARIES += lib/replay/libms_replay.la
lib_replay_libms_replay_la_SOURCES = \
	lib/replay/pickle.c lib/replay/pickle.h lib/replay/snapshot.c lib/replay/replay.c \
	lib/replay/replay_start.c lib/replay/replay_start.h lib/replay/replay_backend.c
MS_PARTS += lib/replay/libms_replay.la
EXTRA_DIST += docs/replay.md
