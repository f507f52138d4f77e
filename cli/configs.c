/* Many configurations of one scenario, run in worker processes
 * (cli_run_configs; cli/commands.h).
 *
 * Each configuration is a whole run (its own Lua states, simulator and
 * allocators), so configurations are independent and a worker process per
 * CPU runs them side by side; the parent hands out one index at a time (a
 * 70B configuration takes seconds, a small one milliseconds) and stores each
 * result under its index, so the results never depend on the number of
 * workers or on which finished first. */
#include "commands.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static void aggregate(const cli_outcome *o, cli_result *r)
{
    const ms_scenario *sc = o->sc;
    r->stages = (int32_t)o->n_rows;
    r->oom_stage = r->oom_step = -1;
    snprintf(r->policy, sizeof r->policy, "%s", o->n_rows ? o->rows[0].policy : "");
    for (size_t i = 0; i < o->n_rows; i++) {
        const ms_run_summary *s = &o->rows[i];
        if (s->oom && !r->oom) {
            r->oom = 1;
            r->oom_stage = (int32_t)i;
            r->oom_step = s->oom_step;
        }
        r->capacity = s->capacity;
        r->peak_allocated =
            s->peak_allocated > r->peak_allocated ? s->peak_allocated : r->peak_allocated;
        r->peak_reserved =
            s->peak_reserved > r->peak_reserved ? s->peak_reserved : r->peak_reserved;
        r->peak_activation = s->peak_activation_bytes > r->peak_activation
                                 ? s->peak_activation_bytes
                                 : r->peak_activation;
        if (s->reserved_minus_allocated_at_peak > r->fragmentation)
            r->fragmentation = s->reserved_minus_allocated_at_peak;
        r->mfu = i == 0 || s->mfu < r->mfu ? s->mfu : r->mfu;
        r->bubble_fraction =
            s->bubble_fraction > r->bubble_fraction ? s->bubble_fraction : r->bubble_fraction;
        r->swapped_bytes += s->swapped_bytes;
        r->recomputed_ops += s->recomputed_ops;
        r->num_ooms += s->num_ooms;
        r->num_alloc_retries += s->num_alloc_retries;
    }
    r->step_time_ms = o->n_rows ? o->rows[0].step_time_ms : 0.0;
    double tokens = (double)sc->parallel.global_batch_size * (double)sc->model.seq_length;
    if (!r->oom && r->step_time_ms > 0)
        r->tokens_per_s = tokens / (r->step_time_ms / 1e3);
}

/* One configuration, summary only. */
static void run_one(const char *scenario, const char *backend, const cli_config *c, cli_result *r)
{
    memset(r, 0, sizeof *r);
    const char *sets[CLI_MAX_SETS + 1];
    size_t n = c->n_sets < CLI_MAX_SETS ? c->n_sets : CLI_MAX_SETS;
    memcpy(sets, c->sets, n * sizeof *sets);
    sets[n++] = "report.detail=none";
    cli_job job = {
        .scenario = scenario, .policy = c->policy, .sets = sets, .n_sets = n, .backend = backend};
    cli_outcome o;
    ms_diag d = {0};
    ms_status st = cli_execute(&job, &o, &d);
    r->status = st;
    if (st != MS_OK) {
        snprintf(r->error, sizeof r->error, "%s", d.msg[0] ? d.msg : ms_strerror(st));
        snprintf(r->policy, sizeof r->policy, "%s", c->policy ? c->policy : "");
        return;
    }
    aggregate(&o, r);
    cli_outcome_free(&o);
}

/* ---- progress --------------------------------------------------------- */

static void progress(bool on, size_t done, size_t total, int running)
{
    if (!on || total == 0)
        return;
    char text[96];
    int at = snprintf(text, sizeof text, "%zu/%zu configurations", done, total);
    if (running > 0 && at > 0 && (size_t)at < sizeof text)
        snprintf(text + at, sizeof text - (size_t)at, " (%d running)", running);
    cli_progress_bar(stderr, done, total, text);
    if (done == total)
        fputc('\n', stderr);
    fflush(stderr);
}

/* ---- workers ---------------------------------------------------------- */

static bool write_all(int fd, const void *buf, size_t n)
{
    const char *p = buf;
    while (n > 0) {
        ssize_t w = write(fd, p, n);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return false;
        p += w;
        n -= (size_t)w;
    }
    return true;
}

static bool read_all(int fd, void *buf, size_t n)
{
    char *p = buf;
    while (n > 0) {
        ssize_t r = read(fd, p, n);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            return false;
        p += r;
        n -= (size_t)r;
    }
    return true;
}

typedef struct worker {
    pid_t pid;
    int task;   /* parent writes indices here */
    int result; /* and reads (index, result) here */
    long busy;  /* the index it runs, or -1 */
} worker;

static void worker_main(const char *scenario, const char *backend, const cli_config *cfgs, size_t n,
                        int task, int result)
{
    cli_cleanup_forget();
    /* A worker's output is its results: policies' ctx:log chatter and the
     * like would interleave on the terminal. */
    int null = open("/dev/null", O_WRONLY);
    if (null >= 0) {
        dup2(null, STDOUT_FILENO);
        dup2(null, STDERR_FILENO);
        close(null);
    }
    uint64_t idx;
    while (read_all(task, &idx, sizeof idx) && idx < n) {
        cli_result r;
        run_one(scenario, backend, &cfgs[idx], &r);
        if (!write_all(result, &idx, sizeof idx) || !write_all(result, &r, sizeof r))
            break;
    }
    _exit(0);
}

static bool start_worker(worker *w, const char *scenario, const char *backend,
                         const cli_config *cfgs, size_t n)
{
    int task[2], result[2];
    if (pipe(task) != 0)
        return false;
    if (pipe(result) != 0) {
        close(task[0]);
        close(task[1]);
        return false;
    }
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    if (pid == 0) {
        close(task[1]);
        close(result[0]);
        worker_main(scenario, backend, cfgs, n, task[0], result[1]);
    }
    close(task[0]);
    close(result[1]);
    if (pid < 0) {
        close(task[1]);
        close(result[0]);
        return false;
    }
    *w = (worker){.pid = pid, .task = task[1], .result = result[0], .busy = -1};
    return true;
}

/* The next index to run here, or n. */
static size_t next_index(const bool *only, size_t n, size_t *cursor)
{
    while (*cursor < n && only != NULL && !only[*cursor])
        (*cursor)++;
    return *cursor < n ? (*cursor)++ : n;
}

static void give(worker *w, size_t idx, size_t n)
{
    uint64_t v = idx;
    if (idx < n && write_all(w->task, &v, sizeof v)) {
        w->busy = (long)idx;
        return;
    }
    close(w->task); /* nothing left: the worker sees EOF and exits */
    w->task = -1;
    w->busy = -1;
}

/* A worker that died mid-configuration (killed, out of memory) leaves that
 * configuration with an error; the others go on. */
static void worker_lost(worker *w, cli_result *out)
{
    int status = 0;
    waitpid(w->pid, &status, 0);
    if (w->busy >= 0) {
        cli_result *r = &out[w->busy];
        memset(r, 0, sizeof *r);
        r->status = MS_EINTERNAL;
        if (WIFSIGNALED(status))
            snprintf(r->error, sizeof r->error, "the worker running it died of signal %d",
                     WTERMSIG(status));
        else
            snprintf(r->error, sizeof r->error, "the worker running it exited (status %d)",
                     WEXITSTATUS(status));
    }
    if (w->task >= 0)
        close(w->task);
    close(w->result);
    w->pid = -1;
    w->busy = -1;
}

static ms_status run_parallel(const char *scenario, const char *backend, const cli_config *cfgs,
                              size_t n, const bool *only, size_t todo, int jobs, bool show,
                              cli_result *out, ms_diag *d)
{
    size_t nw = jobs > 0 && (size_t)jobs < todo ? (size_t)jobs : todo;
    worker *w = calloc(nw, sizeof *w);
    if (w == NULL)
        return ms_diag_set(d, MS_ENOMEM, "out of memory");
    int live = 0;
    for (size_t k = 0; k < nw; k++)
        live += start_worker(&w[live], scenario, backend, cfgs, n);
    if (live == 0) {
        free(w);
        return ms_diag_set(d, MS_EIO, "cannot start worker processes: %s", strerror(errno));
    }
    size_t cursor = 0, done = 0;
    for (int k = 0; k < live; k++)
        give(&w[k], next_index(only, n, &cursor), n);
    struct pollfd *pf = calloc(nw, sizeof *pf);
    while (pf != NULL && done < todo) {
        int running = 0;
        for (int k = 0; k < live; k++) {
            pf[k] = (struct pollfd){.fd = w[k].pid > 0 ? w[k].result : -1, .events = POLLIN};
            running += w[k].busy >= 0;
        }
        progress(show, done, todo, running);
        if (running == 0)
            break;
        if (poll(pf, (nfds_t)live, -1) < 0) {
            if (errno == EINTR)
                continue;
            break;
        }
        for (int k = 0; k < live; k++) {
            if (pf[k].revents == 0 || w[k].pid <= 0)
                continue;
            uint64_t idx;
            cli_result r;
            bool got = read_all(w[k].result, &idx, sizeof idx) && idx < n &&
                       read_all(w[k].result, &r, sizeof r);
            if (!got) {
                done += w[k].busy >= 0;
                worker_lost(&w[k], out);
                continue;
            }
            out[idx] = r;
            done++;
            give(&w[k], next_index(only, n, &cursor), n);
        }
    }
    progress(show, done, todo, 0);
    for (int k = 0; k < live; k++)
        if (w[k].pid > 0) {
            if (w[k].task >= 0)
                close(w[k].task);
            close(w[k].result);
            waitpid(w[k].pid, NULL, 0);
        }
    free(pf);
    free(w);
    return MS_OK;
}

ms_status cli_run_configs(const char *scenario, const char *backend, const cli_config *cfgs,
                          size_t n, const bool *only, int jobs, bool progress_on, cli_result *out,
                          ms_diag *d)
{
    size_t todo = 0;
    for (size_t i = 0; i < n; i++)
        todo += only == NULL || only[i];
    if (jobs > 1 && todo > 1)
        return run_parallel(scenario, backend, cfgs, n, only, todo, jobs, progress_on, out, d);
    size_t done = 0;
    for (size_t i = 0; i < n; i++) {
        if (only != NULL && !only[i])
            continue;
        progress(progress_on, done, todo, 1);
        run_one(scenario, backend, &cfgs[i], &out[i]);
        done++;
    }
    progress(progress_on, done, todo, 0);
    return MS_OK;
}

long cli_best_fit(const cli_result *r, size_t n)
{
    long best = -1;
    for (size_t i = 0; i < n; i++) {
        if (r[i].status != MS_OK || r[i].oom)
            continue;
        if (best < 0 || r[i].tokens_per_s > r[best].tokens_per_s ||
            (r[i].tokens_per_s == r[best].tokens_per_s &&
             r[i].peak_reserved < r[best].peak_reserved))
            best = (long)i;
    }
    return best;
}
