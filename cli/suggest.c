/* What ships with memsim (scenarios, devices, policies) and "did you mean"
 * for a mistyped policy name or --set key (cli/commands.h). */
#include "commands.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "memsim/scenario.h"

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

ms_status cli_names_list(const char *sub, cli_names *out)
{
    char dir[4096];
    memset(out, 0, sizeof *out);
    if (ms_data_path(sub, dir, sizeof dir) != MS_OK)
        return MS_ENOENT;
    snprintf(out->dir, sizeof out->dir, "%s", dir);
    DIR *d = opendir(dir);
    if (d == NULL)
        return MS_ENOENT;
    struct dirent *e;
    ms_status st = MS_OK;
    while (st == MS_OK && (e = readdir(d)) != NULL) {
        size_t len = strlen(e->d_name);
        if (len < 5 || strcmp(e->d_name + len - 4, ".lua") != 0 || e->d_name[0] == '.')
            continue;
        if (out->n == CLI_MAX_NAMES)
            break;
        out->name[out->n] = strndup(e->d_name, len - 4);
        st = out->name[out->n] != NULL ? MS_OK : MS_ENOMEM;
        out->n += st == MS_OK;
    }
    closedir(d);
    qsort(out->name, out->n, sizeof *out->name, cmp_str);
    return st;
}

void cli_names_free(cli_names *n)
{
    for (size_t i = 0; i < n->n; i++)
        free(n->name[i]);
    n->n = 0;
}

/* The last dotted part: "model.hiden_size" vs "hidden_size" alone. */
static const char *leaf(const char *s)
{
    const char *dot = strrchr(s, '.');
    return dot ? dot + 1 : s;
}

const char *cli_closest(const char *word, const char *const *cands, size_t n)
{
    const char *best = NULL;
    size_t best_d = (size_t)-1;
    size_t limit = strlen(word) / 3 + 1;
    for (size_t i = 0; i < n; i++) {
        size_t dist = ms_diag_edit_distance(word, cands[i]);
        /* A key given without its section ("hidden_size") is its leaf. */
        if (strchr(word, '.') == NULL && strcmp(word, leaf(cands[i])) == 0)
            dist = 1;
        if (dist < best_d) {
            best_d = dist;
            best = cands[i];
        }
    }
    return best_d <= limit ? best : NULL;
}

/* The key of an "unknown key 'K'" message, or NULL. */
static bool unknown_key(const char *msg, char *key, size_t n)
{
    const char *p = strstr(msg, "unknown key '");
    if (p == NULL)
        return false;
    p += strlen("unknown key '");
    size_t len = strcspn(p, "'");
    if (len == 0 || len >= n)
        return false;
    memcpy(key, p, len);
    key[len] = '\0';
    return true;
}

static void suggest_key(ms_diag *d)
{
    char key[128];
    if (!unknown_key(d->msg, key, sizeof key))
        return;
    size_t n = ms_scenario_key_count();
    char(*keys)[96] = calloc(n ? n : 1, sizeof *keys);
    const char **ptr = calloc(n ? n : 1, sizeof *ptr);
    if (keys == NULL || ptr == NULL) {
        free(keys);
        free(ptr);
        return;
    }
    for (size_t i = 0; i < n; i++) {
        ms_scenario_key(i, keys[i], sizeof keys[i]);
        ptr[i] = keys[i];
    }
    const char *best = cli_closest(key, ptr, n);
    if (best != NULL) {
        char was[MS_DIAG_MAX];
        snprintf(was, sizeof was, "%s", d->msg);
        ms_diag_set(d, d->code, "%s; did you mean '%s'?", was, best);
    }
    free(keys);
    free(ptr);
}

/* A policy given by name (no '/', no ".lua") that is not shipped. */
static void suggest_policy(ms_diag *d, const char *policy)
{
    if (policy == NULL || strchr(policy, '/') != NULL || strstr(policy, ".lua") != NULL)
        return;
    cli_names pols;
    if (cli_names_list("policies_lua", &pols) != MS_OK)
        return;
    bool shipped = false;
    for (size_t i = 0; i < pols.n; i++)
        shipped |= strcmp(pols.name[i], policy) == 0;
    if (!shipped) {
        const char *best = cli_closest(policy, (const char *const *)pols.name, pols.n);
        char list[1024] = "";
        for (size_t i = 0, at = 0; i < pols.n && at < sizeof list; i++)
            at +=
                (size_t)snprintf(list + at, sizeof list - at, "%s%s", i ? ", " : "", pols.name[i]);
        ms_diag_set(d, d->code, "no shipped policy '%s'%s%s%s (shipped: %s; or give a file)",
                    policy, best ? "; did you mean '" : "", best ? best : "", best ? "'?" : "",
                    list);
    }
    cli_names_free(&pols);
}

void cli_explain(ms_diag *d, const char *policy)
{
    if (d == NULL || d->msg[0] == '\0')
        return;
    suggest_key(d);
    if (d->code == MS_ENOENT)
        suggest_policy(d, policy);
}
