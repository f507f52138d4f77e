/* Arrays that grow by doubling (private to lib/): the executor's rows and
 * copies and the run record append millions of elements a run. */
#ifndef MEMSIM_GROWABLE_H
#define MEMSIM_GROWABLE_H

#include <stdlib.h>

#include "memsim/status.h"

/* Room for element n of *arr (capacity *cap elements of elem bytes),
 * doubling from `first`; *arr is unchanged on MS_ENOMEM. */
static inline ms_status ms_grow_for_one(void **arr, size_t n, size_t *cap, size_t elem,
                                        size_t first)
{
    if (n < *cap)
        return MS_OK;
    size_t c = *cap ? *cap * 2 : first;
    void *p = realloc(*arr, c * elem);
    if (p == NULL)
        return MS_ENOMEM;
    *arr = p;
    *cap = c;
    return MS_OK;
}

#endif
