bin_PROGRAMS += memsim
memsim_SOURCES = cli/main.c cli/run.c cli/replay.c cli/profile_torch.c cli/commands.h
memsim_LDADD = libmemsim.la
