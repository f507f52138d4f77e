/* Decision plans: a growable array of decisions a policy makes for a step. */
#include "memsim/policy.h"

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
    if (p->n == p->cap) {
        uint32_t cap = p->cap ? p->cap * 2 : 64;
        ms_decision *items = realloc(p->items, (size_t)cap * sizeof *items);
        if (items == NULL)
            return MS_ENOMEM;
        p->items = items;
        p->cap = cap;
    }
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

ms_status ms_plan_free(ms_plan *p)
{
    if (p == NULL)
        return MS_EINVAL;
    free(p->items);
    memset(p, 0, sizeof *p);
    return MS_OK;
}
