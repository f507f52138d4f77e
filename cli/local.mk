bin_PROGRAMS += memsim
memsim_SOURCES = cli/main.c cli/run.c cli/replay.c cli/calibrate.c cli/validate.c cli/commands.h
memsim_LDADD = libmemsim.la
