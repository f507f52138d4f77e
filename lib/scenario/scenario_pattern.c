/* MindFormers op patterns (select_recompute, select_comm_recompute, op_swap).
 *
 * MindFormers walks a layer's cells with a pattern split at the two
 * characters "\." (pattern.split(r'\.')): the first part must match a child
 * cell's name whole (re.fullmatch), the next a child of that, and the last an
 * operator or a cell, which then covers every op inside it.  memsim's op
 * names are those module paths ("layers.3.feed_forward.w1.activation.silu"),
 * so a pattern matches an op when its parts match the first levels of the
 * op's path inside the layer.  Each part is a POSIX extended regex anchored
 * at both ends; Python's "\." inside a part works as is. */
#include "scenario_load.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "memory_config.h"

#define LEVEL_MAX 256

static int count_levels(const char *text)
{
    int n = 1;
    for (const char *p = strstr(text, "\\."); p != NULL; p = strstr(p + 2, "\\."))
        n++;
    return n;
}

/* glibc compiles a bounded repetition by copying its operand up to the
 * bound, so nested bounds multiply: ((a{1,255}){1,255}){1,255} takes
 * gigabytes and seconds to compile.  Op-name patterns need no such thing:
 * the bounds of one level may multiply to REPEAT_MAX at most. */
#define REPEAT_MAX 1024

static unsigned long repeat_product(const char *part, size_t len)
{
    unsigned long product = 1;
    for (size_t i = 0; i < len; i++) {
        if (part[i] == '\\') {
            i++;
            continue;
        }
        if (part[i] != '{')
            continue;
        unsigned long bound = 0;
        for (i++; i < len && part[i] != '}'; i++)
            if (part[i] >= '0' && part[i] <= '9')
                bound = bound > 100000 ? bound : bound * 10 + (unsigned long)(part[i] - '0');
            else if (part[i] == ',')
                bound = 0; /* the upper bound counts */
        product *= bound > 1 ? bound : 1;
        if (product > REPEAT_MAX)
            return product;
    }
    return product;
}

static ms_status compile_level(regex_t *re, const char *part, size_t len, const char *field,
                               const char *text, const char *file, ms_diag *d)
{
    char buf[LEVEL_MAX + 8];
    if (len > LEVEL_MAX)
        return ms_diag_set(d, MS_ERANGE, "%s: %s: pattern '%s' has a level longer than %d "
                           "bytes", file, field, text, LEVEL_MAX);
    if (repeat_product(part, len) > REPEAT_MAX)
        return ms_diag_set(d, MS_ERANGE,
                           "%s: %s: pattern '%s': its bounded repetitions "
                           "({m,n}) multiply to more than %d, which the regex compiler would "
                           "expand into gigabytes",
                           file, field, text, REPEAT_MAX);
    snprintf(buf, sizeof buf, "^(%.*s)$", (int)len, part);
    int rc = regcomp(re, buf, REG_EXTENDED | REG_NOSUB);
    if (rc == 0)
        return MS_OK;
    char why[128];
    regerror(rc, re, why, sizeof why);
    return ms_diag_set(d, MS_EINVAL, "%s: %s: pattern '%s' is not a valid regular expression "
                       "(part '%.*s': %s)", file, field, text, (int)len, part, why);
}

ms_status scn_regex_compile(mc_regex *re, const char *text, const char *field, const char *file,
                            ms_diag *d)
{
    memset(re, 0, sizeof *re);
    int n = count_levels(text);
    re->text = strdup(text);
    re->level = calloc((size_t)n, sizeof *re->level);
    if (re->text == NULL || re->level == NULL)
        return ms_diag_set(d, MS_ENOMEM, "%s: out of memory", file);
    const char *part = text;
    for (int i = 0; i < n; i++) {
        const char *end = strstr(part, "\\.");
        size_t len = end != NULL ? (size_t)(end - part) : strlen(part);
        ms_status st = compile_level(&re->level[i], part, len, field, text, file, d);
        if (st != MS_OK)
            return st;
        re->n = i + 1; /* compiled levels are freed by scn_regex_release */
        part = end != NULL ? end + 2 : part + len;
    }
    return MS_OK;
}

void scn_regex_release(mc_regex *re)
{
    for (int i = 0; i < re->n; i++)
        regfree(&re->level[i]);
    free(re->level);
    free(re->text);
    memset(re, 0, sizeof *re);
}

bool scn_regex_match(const mc_regex *re, const char *rest, size_t *prefix_len)
{
    char part[LEVEL_MAX + 1];
    const char *p = rest;
    for (int i = 0; i < re->n; i++) {
        if (i > 0) {
            if (*p != '.')
                return false; /* the op's path is shorter than the pattern */
            p++;
        }
        size_t len = strcspn(p, ".");
        if (len > LEVEL_MAX)
            return false;
        memcpy(part, p, len);
        part[len] = '\0';
        if (regexec(&re->level[i], part, 0, NULL, 0) != 0)
            return false;
        p += len;
    }
    if (prefix_len != NULL)
        *prefix_len = (size_t)(p - rest);
    return true;
}
