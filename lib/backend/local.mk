# lib/backend: opening a backend by name (the registry: one entry per backend
# configure built, as Redis's ae.c picks ae_epoll.c or ae_kqueue.c) and
# the device groups that run several devices' host threads together.
noinst_LTLIBRARIES += lib/backend/libms_backend.la
lib_backend_libms_backend_la_SOURCES = lib/backend/registry.c
MS_PARTS += lib/backend/libms_backend.la
