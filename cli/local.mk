# cli: the memsim command, one file per subcommand, with its man page and
# bash completion.
bin_PROGRAMS += memsim
memsim_SOURCES = cli/main.c cli/commands.h cli/run.c cli/replay.c cli/compare.c cli/sweep.c \
	cli/sweep.h cli/sweep_mpi.c cli/list.c cli/execute.c cli/configs.c cli/oom_report.c \
	cli/suggest.c cli/signals.c cli/calibrate.c cli/validate.c \
	cli/profile_torch.c cli/import/import.c cli/reproduce/reproduce.c cli/reproduce/reproduce.h \
	cli/reproduce/rows.c cli/reproduce/section.c
memsim_CFLAGS = $(AM_CFLAGS) $(MPI_CFLAGS)
memsim_LDADD = libmemsim.la $(CSV_LIBS) $(MPI_LIBS)
dist_man1_MANS = cli/memsim.1
bashcompletiondir = $(datadir)/bash-completion/completions
dist_bashcompletion_DATA = cli/completion/memsim
