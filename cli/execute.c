/* One scenario under one policy, as every subcommand runs it, its progress
 * on stderr, and the small rules they share about overrides and output
 * folders (cli/commands.h). */
#include "commands.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

ms_status cli_execute(const cli_job *job, cli_outcome *out, ms_diag *d)
{
    memset(out, 0, sizeof *out);
    ms_status st = ms_scenario_load(job->scenario, job->sets, job->n_sets, &out->sc, d);
    if (st != MS_OK) {
        cli_explain(d, NULL);
        ms_diag_prefix(d, "scenario: ");
        return st;
    }
    ms_run_options opt = {.policy = job->policy,
                          .backend = job->backend,
                          .record = job->record,
                          .settings_out = job->settings_out,
                          .single_stage = job->single_stage,
                          .stage = job->stage,
                          .verify = job->verify,
                          .no_fast_forward = job->no_fast_forward,
                          .quiet_policy = job->quiet_policy,
                          .overrides = job->sets,
                          .n_overrides = job->n_sets,
                          .progress = job->progress,
                          .progress_user = job->progress_user};
    st = ms_run_execute(out->sc, &opt, &out->run, d);
    if (st != MS_OK) {
        cli_explain(d, job->policy);
        ms_diag_prefix(d, "run: ");
        cli_outcome_free(out);
        return st;
    }
    size_t n = 0;
    const ms_run_summary *s = ms_run_summaries(out->run, &n);
    out->rows = malloc((n ? n : 1) * sizeof *out->rows);
    if (out->rows == NULL) {
        cli_outcome_free(out);
        return ms_diag_set(d, MS_ENOMEM, "run: out of memory");
    }
    memcpy(out->rows, s, n * sizeof *s);
    out->n_rows = n;
    for (size_t i = 0; i < n; i++)
        cli_join_sets(job->sets, job->n_sets, out->rows[i].overrides,
                      sizeof out->rows[i].overrides);
    return MS_OK;
}

void cli_outcome_free(cli_outcome *o)
{
    if (o->run != NULL)
        ms_run_free(o->run);
    if (o->sc != NULL)
        ms_scenario_free(o->sc);
    free(o->rows);
    memset(o, 0, sizeof *o);
}

bool cli_outcome_oom(const cli_outcome *o)
{
    for (size_t i = 0; i < o->n_rows; i++)
        if (o->rows[i].oom)
            return true;
    return false;
}

void cli_join_sets(const char *const *sets, size_t n, char *buf, size_t len)
{
    size_t at = 0;
    buf[0] = '\0';
    for (size_t i = 0; i < n && at < len; i++)
        at += (size_t)snprintf(buf + at, len - at, "%s%s", i ? ";" : "", sets[i]);
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* FNV-1a: a short, stable name for overrides too long for a folder name. */
static uint64_t fnv1a(const char *s)
{
    uint64_t h = 14695981039346656037ULL;
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 1099511628211ULL;
    return h;
}

void cli_default_dir(const char *scenario, const char *tag, const char *const *sets, size_t n,
                     char *buf, size_t len)
{
    int at = snprintf(buf, len, "results/%s-%s", scenario, tag);
    if (n == 0 || at < 0 || (size_t)at >= len)
        return;
    /* Sorted, so the same overrides in another order share the folder. */
    const char *sorted[CLI_MAX_SETS];
    size_t m = n < CLI_MAX_SETS ? n : CLI_MAX_SETS;
    memcpy(sorted, sets, m * sizeof *sorted);
    qsort(sorted, m, sizeof *sorted, cmp_str);
    char joined[4096] = "";
    size_t j = 0;
    for (size_t i = 0; i < m && j < sizeof joined; i++)
        j += (size_t)snprintf(joined + j, sizeof joined - j, "%s%s", i ? "," : "", sorted[i]);
    if (strlen(joined) > 96) {
        snprintf(buf + at, len - (size_t)at, "--%016llx", (unsigned long long)fnv1a(joined));
        return;
    }
    for (char *p = joined; *p; p++) {
        bool ok = (*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') ||
                  (*p >= '0' && *p <= '9') || strchr("._=,+-", *p) != NULL;
        if (!ok)
            *p = '_';
    }
    snprintf(buf + at, len - (size_t)at, "--%s", joined);
}

int cli_split_list(char *s, const char **items, int max)
{
    int n = 0;
    for (char *tok = s; tok != NULL;) {
        char *comma = strchr(tok, ',');
        if (comma != NULL)
            *comma = '\0';
        if (*tok == '\0' || n == max)
            return -1;
        items[n++] = tok;
        tok = comma != NULL ? comma + 1 : NULL;
    }
    return n;
}

int cli_parse_count(const char *s)
{
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    return errno == 0 && *end == '\0' && s[0] != '\0' && v > 0 && v <= 4096 ? (int)v : 0;
}

int cli_cpus(void)
{
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 ? (int)n : 1;
}

/* ---- progress on stderr -------------------------------------------------
 *
 * The bar a sweep and a run redraw in place on a terminal, and a run's
 * progress as it sets up, plans and simulates its steps.  A run says
 * nothing for its first second (MEMSIM_PROGRESS_AFTER_MS), so quick runs
 * stay quiet.  A step of a 70B pipeline takes seconds with no event in
 * between, so a ticker thread shows the state once that second is up and
 * keeps a terminal's elapsed time moving; every line that is not a
 * terminal's redraw comes from the run's own events, so the lines of a run
 * are the same every time apart from their times.  stdout is never touched:
 * tests and scripts compare it. */

void cli_progress_bar(FILE *out, size_t done, size_t total, const char *text)
{
    enum { WIDTH = 30 };
    char bar[WIDTH + 1];
    size_t fill = total > 0 ? done * WIDTH / total : 0;
    for (size_t i = 0; i < WIDTH; i++)
        bar[i] = i < fill ? '#' : '.';
    bar[WIDTH] = '\0';
    /* The spaces wipe the end of a longer line drawn before. */
    fprintf(out, "\r[%s] %s   ", bar, text);
    fflush(out);
}

/* ---- a run's progress -------------------------------------------------- */

enum { DEFAULT_AFTER_MS = 1000, TICK_MS = 200 };

struct cli_progress {
    pthread_mutex_t lock;
    pthread_cond_t wake;
    pthread_t ticker;
    bool tty;
    bool stopping;
    long after_ms;
    struct timespec start;
    char label[160];
    ms_run_progress state;
    bool have_state;
    bool shown;     /* something was printed */
    bool state_out; /* the current state was printed as a line */
};

static long elapsed_ms(const cli_progress *p)
{
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return (long)(now.tv_sec - p->start.tv_sec) * 1000 +
           (long)(now.tv_nsec - p->start.tv_nsec) / 1000000;
}

static void describe(const ms_run_progress *s, char *buf, size_t n)
{
    if (s->phase == MS_RUN_SETUP)
        snprintf(buf, n, "setting up (%d step%s to run)", s->steps, s->steps == 1 ? "" : "s");
    else if (s->phase == MS_RUN_DONE && s->repeated > 0)
        snprintf(buf, n, "%d of %d step%s run, %d replayed by fast-forward", s->step, s->steps,
                 s->steps == 1 ? "" : "s", s->repeated);
    else if (s->phase == MS_RUN_DONE)
        snprintf(buf, n, "%d of %d step%s run", s->step, s->steps, s->steps == 1 ? "" : "s");
    else
        snprintf(buf, n, "step %d of %d, %s", s->step + 1, s->steps,
                 s->phase == MS_RUN_PLANNING    ? "planning"
                 : s->phase == MS_RUN_REPEATING ? "repeating the step before (fast-forward)"
                                                : "simulating");
}

/* Under the lock: the current state, on a terminal as the bar, else as a
 * line of its own (once). */
static void show(cli_progress *p)
{
    long ms = elapsed_ms(p);
    if (!p->have_state || ms < p->after_ms || (!p->tty && p->state_out))
        return;
    char what[96], text[320];
    describe(&p->state, what, sizeof what);
    snprintf(text, sizeof text, "%s%s%s (%.1f s)", p->label, p->label[0] ? ": " : "", what,
             (double)ms / 1000.0);
    if (p->tty)
        cli_progress_bar(stderr, (size_t)p->state.step, (size_t)p->state.steps, text);
    else
        fprintf(stderr, "memsim run: %s\n", text);
    fflush(stderr);
    p->shown = true;
    p->state_out = true;
}

static void *tick(void *arg)
{
    cli_progress *p = arg;
    pthread_mutex_lock(&p->lock);
    while (!p->stopping) {
        struct timespec until;
        clock_gettime(CLOCK_REALTIME, &until);
        until.tv_nsec += TICK_MS * 1000000L;
        until.tv_sec += until.tv_nsec / 1000000000L;
        until.tv_nsec %= 1000000000L;
        pthread_cond_timedwait(&p->wake, &p->lock, &until);
        if (!p->stopping)
            show(p);
    }
    pthread_mutex_unlock(&p->lock);
    return NULL;
}

/* MEMSIM_PROGRESS_AFTER_MS: how long a run is quiet first (tests set 0). */
static long after_ms_from_env(void)
{
    const char *v = getenv("MEMSIM_PROGRESS_AFTER_MS");
    if (v == NULL || v[0] == '\0')
        return DEFAULT_AFTER_MS;
    char *end = NULL;
    errno = 0;
    long ms = strtol(v, &end, 10);
    if (*end == '\0' && errno == 0 && ms >= 0)
        return ms;
    fprintf(stderr,
            "memsim: MEMSIM_PROGRESS_AFTER_MS='%s': expected milliseconds (an integer from "
            "0); using %d\n",
            v, DEFAULT_AFTER_MS);
    return DEFAULT_AFTER_MS;
}

cli_progress *cli_progress_start(const char *label)
{
    cli_progress *p = calloc(1, sizeof *p);
    if (p == NULL)
        return NULL; /* no progress is no failure */
    p->tty = isatty(STDERR_FILENO) == 1;
    p->after_ms = after_ms_from_env();
    snprintf(p->label, sizeof p->label, "%s", label ? label : "");
    clock_gettime(CLOCK_MONOTONIC, &p->start);
    pthread_mutex_init(&p->lock, NULL);
    pthread_cond_init(&p->wake, NULL);
    if (pthread_create(&p->ticker, NULL, tick, p) != 0) {
        pthread_cond_destroy(&p->wake);
        pthread_mutex_destroy(&p->lock);
        free(p);
        return NULL;
    }
    return p;
}

void cli_progress_update(void *user, const ms_run_progress *state)
{
    cli_progress *p = user;
    if (p == NULL)
        return;
    pthread_mutex_lock(&p->lock);
    p->state = *state;
    p->have_state = true;
    p->state_out = false;
    show(p);
    pthread_mutex_unlock(&p->lock);
}

void cli_progress_stop(cli_progress *p)
{
    if (p == NULL)
        return;
    pthread_mutex_lock(&p->lock);
    p->stopping = true;
    pthread_cond_signal(&p->wake);
    pthread_mutex_unlock(&p->lock);
    pthread_join(p->ticker, NULL);
    /* The bar's line ends, so what is printed next starts a line. */
    if (p->tty && p->shown)
        fputc('\n', stderr);
    pthread_cond_destroy(&p->wake);
    pthread_mutex_destroy(&p->lock);
    free(p);
}
