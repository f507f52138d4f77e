/* Status strings and the diagnostic buffer every layer reports through. */
#include "memsim/status.h"

#include <stdint.h>
#include <stdio.h>
#include <string.h>

static const char *const status_names[MS_STATUS_COUNT] = {
    [MS_OK] = "success",
    [MS_EINVAL] = "invalid argument",
    [MS_ENOMEM] = "out of memory",
    [MS_ENOENT] = "not found",
    [MS_EPARSE] = "parse error",
    [MS_ERANGE] = "value out of range",
    [MS_EIO] = "input/output error",
    [MS_ESCRIPT] = "script error",
    [MS_ELIMIT] = "script limit exceeded",
    [MS_EHAZARD] = "data hazard",
    [MS_EDEADLOCK] = "deadlock",
    [MS_EAGAIN] = "would block",
    [MS_EUNSUPPORTED] = "unsupported",
    [MS_EMISMATCH] = "replay mismatch",
    [MS_EINTERNAL] = "internal error",
    [MS_ECANCELED] = "cancelled",
};

const char *ms_strerror(ms_status s)
{
    if ((unsigned)s >= MS_STATUS_COUNT)
        return "unknown status";
    return status_names[s];
}

ms_status ms_diag_vset(ms_diag *d, ms_status code, const char *fmt, va_list ap)
{
    if (d == NULL)
        return code;
    d->code = code;
    if (fmt == NULL) {
        snprintf(d->msg, sizeof d->msg, "%s", ms_strerror(code));
        return code;
    }
    vsnprintf(d->msg, sizeof d->msg, fmt, ap);
    return code;
}

ms_status ms_diag_set(ms_diag *d, ms_status code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    ms_diag_vset(d, code, fmt, ap);
    va_end(ap);
    return code;
}

ms_status ms_diag_prefix(ms_diag *d, const char *fmt, ...)
{
    if (d == NULL || fmt == NULL)
        return MS_EINVAL;
    char prefix[MS_DIAG_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(prefix, sizeof prefix, fmt, ap);
    va_end(ap);
    /* Truncation of an over-long message is acceptable: it is for humans. */
    size_t plen = strlen(prefix);
    if (plen >= sizeof d->msg)
        plen = sizeof d->msg - 1;
    size_t mlen = strnlen(d->msg, sizeof d->msg - 1);
    if (plen + mlen >= sizeof d->msg)
        mlen = sizeof d->msg - 1 - plen;
    memmove(d->msg + plen, d->msg, mlen);
    memcpy(d->msg, prefix, plen);
    d->msg[plen + mlen] = '\0';
    return MS_OK;
}

ms_status ms_diag_clear(ms_diag *d)
{
    if (d == NULL)
        return MS_EINVAL;
    d->code = MS_OK;
    d->msg[0] = '\0';
    return MS_OK;
}

size_t ms_diag_edit_distance(const char *a, const char *b)
{
    size_t la = strlen(a), lb = strlen(b);
    if (la > 127 || lb > 127)
        return SIZE_MAX;
    size_t row[128];
    for (size_t j = 0; j <= lb; j++)
        row[j] = j;
    for (size_t i = 1; i <= la; i++) {
        size_t diag = row[0];
        row[0] = i;
        for (size_t j = 1; j <= lb; j++) {
            size_t up = row[j];
            size_t sub = diag + (a[i - 1] != b[j - 1]);
            size_t best = up + 1 < row[j - 1] + 1 ? up + 1 : row[j - 1] + 1;
            row[j] = sub < best ? sub : best;
            diag = up;
        }
    }
    return row[lb];
}
