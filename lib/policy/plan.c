/* Decision plans: a growable array of decisions a policy makes for a step. */
#include "memsim/policy.h"
#include "lib/base/growable.h"

#include <stdlib.h>
#include <string.h>

ms_status ms_plan_init(ms_plan *p)
{
    if (p == NULL)
        return MS_EINVAL;
    memset(p, 0, sizeof *p);
    return MS_OK;
}

ms_status ms_plan_add(ms_plan *p, const ms_decision *dec)
{
    if (p == NULL || dec == NULL)
        return MS_EINVAL;
    if (!MS_GROW(p->items, p->n, p->cap, 64))
        return MS_ENOMEM;
    p->items[p->n++] = *dec;
    return MS_OK;
}

ms_status ms_plan_clear(ms_plan *p)
{
    if (p == NULL)
        return MS_EINVAL;
    p->n = 0;
    p->stable = false;
    return MS_OK;
}

ms_status ms_plan_copy(ms_plan *dst, const ms_plan *src)
{
    if (dst == NULL || src == NULL || dst == src)
        return MS_EINVAL;
    ms_plan_clear(dst);
    for (uint32_t i = 0; i < src->n; i++) {
        ms_status st = ms_plan_add(dst, &src->items[i]);
        if (st != MS_OK)
            return st;
    }
    dst->stable = src->stable;
    return MS_OK;
}

bool ms_plan_same_decisions(const ms_plan *a, const ms_plan *b)
{
    uint32_t na = a != NULL ? a->n : 0, nb = b != NULL ? b->n : 0;
    return na == nb && (na == 0 || memcmp(a->items, b->items, na * sizeof *a->items) == 0);
}

ms_status ms_plan_free(ms_plan *p)
{
    if (p == NULL)
        return MS_EINVAL;
    free(p->items);
    memset(p, 0, sizeof *p);
    return MS_OK;
}
