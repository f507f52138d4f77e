/* No staging directory, nor a file's .tmp, left behind by SIGINT, SIGTERM
 * or SIGHUP (cli/commands.h).  A run interrupted while writing once left a
 * 115 MB memory.csv.tmp; now its whole staging directory goes.
 *
 * The paths live in this file's static buffers because a signal
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
 * directory either armed, in place, or gone.  A single file written as
 * .tmp beside its final name (cli_tmp_file_*) has a slot of its own, so a
 * --snapshot written while the run's folder is armed loses neither. */
#include "commands.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static const int cleanup_sigs[] = {SIGINT, SIGTERM, SIGHUP};
enum { N_CLEANUP_SIGS = sizeof cleanup_sigs / sizeof cleanup_sigs[0] };

/* What a signal removes: the run's staging folder, and a file being
 * written beside its final name (replay's --csv, run's --snapshot). */
enum { SLOT_FOLDER, SLOT_FILE, N_SLOTS };
static char cleanup_path[N_SLOTS][8192];
static volatile sig_atomic_t cleanup_armed[N_SLOTS];

static void remove_and_die(int sig)
{
    char *argv[3 + N_SLOTS + 1] = {"rm", "-rf", "--"};
    int n = 3;
    for (int i = 0; i < N_SLOTS; i++)
        if (cleanup_armed[i]) {
            cleanup_armed[i] = 0;
            argv[n++] = cleanup_path[i];
        }
    if (n > 3) {
        pid_t pid = fork();
        if (pid == 0) {
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

/* While a slot holds a path, the three signals remove it before the process
 * dies of the signal; NULL empties the slot.  A path too long for the slot
 * is not armed (best effort: the next run of that name removes a stale
 * staging folder, report_dir.c).  Called with the signals held. */
static void cleanup_on_signal(int slot, const char *path)
{
    cleanup_armed[slot] = 0;
    if (path != NULL && strlen(path) < sizeof cleanup_path[slot]) {
        memcpy(cleanup_path[slot], path, strlen(path) + 1);
        cleanup_armed[slot] = 1;
    }
    bool any = false;
    for (int i = 0; i < N_SLOTS; i++)
        any = any || cleanup_armed[i];
    set_handlers(any ? remove_and_die : SIG_DFL);
}

void cli_cleanup_forget(void)
{
    for (int i = 0; i < N_SLOTS; i++)
        cleanup_armed[i] = 0;
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
        cleanup_on_signal(SLOT_FOLDER, ms_report_dir_path(*rd));
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
    cleanup_on_signal(SLOT_FOLDER, NULL);
    sigprocmask(SIG_SETMASK, &was, NULL);
    return st;
}

void cli_tmp_file_arm(const char *tmp)
{
    /* tmp NULL: disarm. */
    sigset_t was;
    hold_signals(&was);
    cleanup_on_signal(SLOT_FILE, tmp);
    sigprocmask(SIG_SETMASK, &was, NULL);
}

int cli_tmp_file_finish(const char *tmp, const char *path, bool keep)
{
    sigset_t was;
    hold_signals(&was);
    int rc = keep ? rename(tmp, path) : 0;
    int err = errno;
    if (!keep || rc != 0)
        remove(tmp);
    cleanup_on_signal(SLOT_FILE, NULL);
    sigprocmask(SIG_SETMASK, &was, NULL);
    errno = err;
    return rc;
}
