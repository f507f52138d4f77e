/* No staging directory left behind by SIGINT, SIGTERM or SIGHUP
 * (cli/commands.h).  A run interrupted while writing once left a 115 MB
 * memory.csv.tmp; now its whole staging directory goes.
 *
 * The directory's name lives in this file's static buffer because a signal
 * handler can reach nothing else: it is the one piece of writable global
 * state in memsim, and only the handler and cli_cleanup_* touch it.  The
 * handler uses only async-signal-safe calls (fork, execve, waitpid, signal,
 * raise), removing the tree with rm -rf in a child. */
#include "commands.h"

#include <signal.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static char cleanup_dir[8192];
static volatile sig_atomic_t cleanup_armed;

static void remove_and_die(int sig)
{
    if (cleanup_armed) {
        cleanup_armed = 0;
        pid_t pid = fork();
        if (pid == 0) {
            char *const argv[] = {"rm", "-rf", "--", cleanup_dir, NULL};
            char *const envp[] = {NULL};
            execve("/bin/rm", argv, envp);
            _exit(127);
        }
        if (pid > 0)
            waitpid(pid, NULL, 0);
    }
    signal(sig, SIG_DFL);
    raise(sig);
}

static void set_handlers(void (*handler)(int))
{
    static const int sigs[] = {SIGINT, SIGTERM, SIGHUP};
    for (size_t i = 0; i < sizeof sigs / sizeof sigs[0]; i++) {
        struct sigaction sa;
        memset(&sa, 0, sizeof sa);
        sa.sa_handler = handler;
        sigemptyset(&sa.sa_mask);
        sigaction(sigs[i], &sa, NULL);
    }
}

void cli_cleanup_on_signal(const char *dir)
{
    cleanup_armed = 0;
    if (dir == NULL || strlen(dir) >= sizeof cleanup_dir) {
        set_handlers(SIG_DFL);
        return;
    }
    memcpy(cleanup_dir, dir, strlen(dir) + 1);
    cleanup_armed = 1;
    set_handlers(remove_and_die);
}

void cli_cleanup_forget(void)
{
    cleanup_armed = 0;
    set_handlers(SIG_DFL);
}
