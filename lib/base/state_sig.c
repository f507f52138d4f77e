/* A simulation's state as bytes (backend.h, ms_state_sig): the writers of
 * every layer append to one buffer, and fast-forward compares two. */
#include "memsim/backend.h"

#include <stdlib.h>
#include <string.h>

#include "lib/base/growable.h"

ms_status ms_state_sig_put(ms_state_sig *s, const void *p, size_t n)
{
    if (s == NULL || (p == NULL && n > 0))
        return MS_EINVAL;
    if (s->st != MS_OK)
        return s->st;
    /* Compared before the copy overwrites what it is compared with. */
    if (s->rewriting && !s->differs)
        s->differs = s->n + n > s->old_n || (n > 0 && memcmp(s->bytes + s->n, p, n) != 0);
    if (s->checking) {
        if (s->differs)
            return s->st = MS_EMISMATCH;
        s->n += n; /* the same bytes are there already */
        return MS_OK;
    }
    if (!MS_GROW_TO(s->bytes, s->n + n, s->cap, 4096))
        return s->st = MS_ENOMEM;
    if (n > 0)
        memcpy(s->bytes + s->n, p, n);
    s->n += n;
    return MS_OK;
}

ms_status ms_state_sig_u64(ms_state_sig *s, uint64_t v)
{
    return ms_state_sig_put(s, &v, sizeof v);
}

ms_status ms_state_sig_reset(ms_state_sig *s)
{
    if (s == NULL)
        return MS_EINVAL;
    s->n = 0;
    s->st = MS_OK;
    s->rewriting = false;
    s->checking = false;
    return MS_OK;
}

ms_status ms_state_sig_rewrite(ms_state_sig *s)
{
    if (s == NULL)
        return MS_EINVAL;
    if (!s->checking) { /* a check leaves the last moment in place */
        s->old_n = s->n;
        s->old_whole = s->st == MS_OK;
    }
    s->differs = false;
    s->n = 0;
    s->st = MS_OK;
    s->rewriting = true;
    s->checking = false;
    return MS_OK;
}

ms_status ms_state_sig_check(ms_state_sig *s)
{
    ms_status st = ms_state_sig_rewrite(s);
    if (st == MS_OK)
        s->checking = true;
    return st;
}

bool ms_state_sig_same_as_before(const ms_state_sig *s)
{
    return s != NULL && s->rewriting && s->old_whole && s->st == MS_OK && !s->differs &&
           s->n == s->old_n;
}

ms_status ms_state_sig_free(ms_state_sig *s)
{
    if (s == NULL)
        return MS_EINVAL;
    free(s->bytes);
    *s = (ms_state_sig){0};
    return MS_OK;
}

/* A signature whose writing failed equals nothing: an incomplete state
 * proves no repeat. */
bool ms_state_sig_equal(const ms_state_sig *a, const ms_state_sig *b)
{
    return a != NULL && b != NULL && a->st == MS_OK && b->st == MS_OK && a->n == b->n &&
           (a->n == 0 || memcmp(a->bytes, b->bytes, a->n) == 0);
}
