/* No staging directory left behind by SIGINT, SIGTERM or SIGHUP
 * (cli/commands.h).  A run interrupted while writing once left a 115 MB
 * memory.csv.tmp; now its whole staging directory goes.
 *
 * The directory's name lives in this file's static buffer because a signal
 * handler can reach nothing else: it is the one piece of writable global
 * state in memsim, and only the handler and the functions below touch it.  The
 * handler uses only async-signal-safe calls (fork, execve, waitpid, signal,
 * raise), removing the tree with rm -rf in a child.
 *
 * The directory exists from its mkdir on, so a signal that lands before the
 * handler knows its name, or while it is being renamed into place, would
 * leave it (or half a swap) behind: tests/cli.sh's SIGTERM 20 ms into a run
 * once found a .memsim-tmp- folder in CI.  cli_output_open and
 * cli_output_close therefore hold the three signals, blocked, across those
 * steps; one that came meanwhile is delivered as they return, with the
 * directory either armed, in place, or gone. */
#include "commands.h"

#include <signal.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static const int cleanup_sigs[] = {SIGINT, SIGTERM, SIGHUP};
enum { N_CLEANUP_SIGS = sizeof cleanup_sigs / sizeof cleanup_sigs[0] };

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
    for (size_t i = 0; i < N_CLEANUP_SIGS; i++) {
        struct sigaction sa;
        memset(&sa, 0, sizeof sa);
        sa.sa_handler = handler;
        sigemptyset(&sa.sa_mask);
        sigaction(cleanup_sigs[i], &sa, NULL);
    }
}

/* While set, the three signals remove dir before the process dies of the
 * signal; NULL: nothing to remove. */
static void cleanup_on_signal(const char *dir)
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

/* Block the three signals; *was receives the mask to restore. */
static void hold_signals(sigset_t *was)
{
    sigset_t block;
    sigemptyset(&block);
    for (size_t i = 0; i < N_CLEANUP_SIGS; i++)
        sigaddset(&block, cleanup_sigs[i]);
    sigprocmask(SIG_BLOCK, &block, was);
}

ms_status cli_output_open(const char *final_dir, ms_report_dir **rd, ms_diag *d)
{
    sigset_t was;
    hold_signals(&was);
    ms_status st = ms_report_dir_open(final_dir, rd, d);
    if (st == MS_OK)
        cleanup_on_signal(ms_report_dir_path(*rd));
    sigprocmask(SIG_SETMASK, &was, NULL);
    return st;
}

ms_status cli_output_close(ms_report_dir *rd, bool keep, ms_diag *d)
{
    if (rd == NULL)
        return ms_diag_set(d, MS_EINVAL, "cli_output_close: no output directory");
    sigset_t was;
    hold_signals(&was);
    ms_status st = keep ? ms_report_dir_commit(rd, d) : ms_report_dir_abort(rd);
    cleanup_on_signal(NULL);
    sigprocmask(SIG_SETMASK, &was, NULL);
    return st;
}
