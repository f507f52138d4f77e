/* The memsim subcommands, one file each (private to cli/).  argv[0] is the
 * subcommand's own word.  Each returns the process exit status: 0 done,
 * 1 an error (message on stderr), 2 a usage error. */
#ifndef MEMSIM_CLI_COMMANDS_H
#define MEMSIM_CLI_COMMANDS_H

int cli_run(int argc, char **argv);    /* cli/run.c */
int cli_replay(int argc, char **argv); /* cli/replay.c */
int cli_profile_torch(int argc, char **argv); /* cli/profile_torch.c */

#endif
