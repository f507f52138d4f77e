bin_PROGRAMS += memsim
memsim_SOURCES = cli/main.c
memsim_LDADD = libmemsim.la
