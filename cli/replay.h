/* memsim replay: the subcommand (cli/replay.c). */
#ifndef MEMSIM_CLI_REPLAY_H
#define MEMSIM_CLI_REPLAY_H

/* argv[0] is the word "replay".  Returns the process exit status: 0 done,
 * 1 an error (message on stderr), 2 a usage error. */
int ms_cli_replay(int argc, char **argv);

#endif
