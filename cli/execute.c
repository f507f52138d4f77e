/* One scenario under one policy, as every subcommand runs it, and the small
 * rules they share about overrides and output folders (cli/commands.h). */
#include "commands.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
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
                          .quiet_policy = job->quiet_policy,
                          .overrides = job->sets,
                          .n_overrides = job->n_sets};
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
