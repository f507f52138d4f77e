/* Named pools, each with its own small and large block sets (the two
 * LcPools of MindSpeed's memory-fragmentation allocator, generalised), and
 * borrowing: a default-pool request may take an idle block of a lendable
 * pool while the executor allows it (MindSpeed lets short-lived tensors use
 * idle long-lived blocks outside the forward pass). */
#include <stdlib.h>
#include <string.h>

#include "allocator_internal.h"
#include "lib/base/growable.h"

static void bpool_init(ms_bpool *b, ms_npool *owner, bool small)
{
    memset(b, 0, sizeof *b);
    b->is_small = small;
    b->owner = owner;
}

ms_status alloc_npool_new(ms_alloc *a, const char *name, const ms_pool_options *opt, int *id)
{
    if (!MS_GROW(a->pools, a->n_pools, a->cap_pools, 4))
        return MS_ENOMEM;
    ms_npool *np = calloc(1, sizeof *np);
    char *copy = np ? malloc(strlen(name) + 1) : NULL;
    if (!copy) {
        free(np);
        return MS_ENOMEM;
    }
    strcpy(copy, name);
    np->name = copy;
    np->id = a->n_pools;
    if (opt)
        np->opt = *opt;
    bpool_init(&np->small, np, true);
    bpool_init(&np->large, np, false);
    a->pools[a->n_pools++] = np;
    *id = np->id;
    return MS_OK;
}

void alloc_npools_free(ms_alloc *a)
{
    for (int i = 0; i < a->n_pools; i++) {
        free(a->pools[i]->name);
        free(a->pools[i]);
    }
    free(a->pools);
    a->pools = NULL;
    a->n_pools = 0;
}

ms_status ms_alloc_pool_find(const ms_alloc *a, const char *name, int *pool)
{
    if (!a || !name || !pool)
        return MS_EINVAL;
    for (int i = 0; i < a->n_pools; i++)
        if (strcmp(a->pools[i]->name, name) == 0) {
            *pool = i;
            return MS_OK;
        }
    return MS_ENOENT;
}

ms_status ms_alloc_pool_create(ms_alloc *a, const char *name, const ms_pool_options *opt,
                               int *pool)
{
    int existing = 0;
    if (!a || !name || !*name || !pool)
        return MS_EINVAL;
    if (ms_alloc_pool_find(a, name, &existing) == MS_OK)
        return MS_EINVAL; /* names are unique */
    return alloc_npool_new(a, name, opt, pool);
}

ms_status ms_alloc_set_borrowing(ms_alloc *a, bool enabled)
{
    if (!a)
        return MS_EINVAL;
    a->borrowing = enabled;
    return MS_OK;
}

ms_status ms_alloc_set_forward(ms_alloc *a, bool in_forward)
{
    if (!a)
        return MS_EINVAL;
    if (in_forward && !a->in_forward)
        a->forwards_begun++;
    a->in_forward = in_forward;
    a->borrowing = !in_forward;
    return MS_OK;
}

/* The best fit of one lendable pool, by get_free_block's own rules; the
 * protection of large blocks is the default pool's (MindSpeed tests it for
 * default_lc_pools.large_blocks at pool_idx 0 only). */
static ms_ablock *lendable_fit(ms_alloc *a, const ms_aparams *p, ms_bpool *pool)
{
    ms_aparams q = *p;
    q.pool = pool;
    q.exact = false;
    q.protect = false;
    return alloc_peek_free_block(a, &q);
}

/* The smallest idle block, over all lendable pools, that the request may
 * take; ties go to the lower pool id. */
bool alloc_borrow(ms_alloc *a, ms_aparams *p)
{
    if (!a->borrowing && !alloc_mindspeed_may_borrow(a, p))
        return false;
    ms_ablock *best = NULL;
    for (int i = 1; i < a->n_pools; i++) {
        ms_npool *np = a->pools[i];
        if (!np->opt.lendable)
            continue;
        ms_ablock *b = lendable_fit(a, p, alloc_npool_class(np, p->size));
        if (b && (!best || b->size < best->size))
            best = b;
    }
    if (!best)
        return false;
    p->pool = best->pool;
    p->block = best;
    alloc_bpool_erase(best->pool, best);
    return true;
}
