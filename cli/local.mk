bin_PROGRAMS += memsim
memsim_SOURCES = cli/main.c cli/replay.c cli/replay.h
memsim_LDADD = libmemsim.la
