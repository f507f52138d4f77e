/* Arrays that grow by doubling (private to lib/ and the backends): the
 * executor's rows, the run record, the allocator's registries, the pickle
 * decoder's stacks and the simulator's heap all append element by element.
 * One rule for all: the capacity doubles (from a first size when empty)
 * until it holds what is needed, and on out of memory nothing changes. */
#ifndef MEMSIM_BASE_GROWABLE_H
#define MEMSIM_BASE_GROWABLE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

/* The capacity that holds `need` elements: `cap` doubled (from `first` when
 * zero) until it does; SIZE_MAX when doubling would overflow. */
static inline size_t base_grown_capacity(size_t cap, size_t need, size_t first)
{
    size_t c = cap ? cap : (first ? first : 1);
    while (c < need) {
        if (c > SIZE_MAX / 2)
            return SIZE_MAX;
        c *= 2;
    }
    return c;
}

/* Reallocate *arr to n elements of elem bytes; false, *arr untouched, when
 * out of memory or n * elem exceeds what malloc can give (PTRDIFF_MAX). */
static inline bool base_resize_array(void **arr, size_t n, size_t elem)
{
    void *p = n <= PTRDIFF_MAX / elem ? realloc(*arr, n * elem) : NULL;
    if (p == NULL)
        return false;
    *arr = p;
    return true;
}

/* Room for `need` elements in the array `arr` of capacity `cap` (lvalues;
 * cap of any unsigned type that holds the result): true, or false with
 * both unchanged on out of memory. */
#define MS_GROW_TO(arr, need, cap, first)                                                          \
    ((size_t)(need) <= (size_t)(cap) ||                                                            \
     (base_resize_array((void **)&(arr), base_grown_capacity((cap), (need), (first)),              \
                        sizeof *(arr)) &&                                                          \
      ((cap) = base_grown_capacity((cap), (need), (first)), true)))

/* Room for element `n` (one past the last). */
#define MS_GROW(arr, n, cap, first) MS_GROW_TO(arr, (size_t)(n) + 1, cap, first)

#endif
