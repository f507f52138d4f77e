/* Sets of disjoint address ranges kept sorted by address (private to lib/
 * and the backends): the mock's free and used lists and mapped pages, and
 * the replay backend's allocations, mappings and reservations.  Binary
 * search to find, memmove to insert or remove; room is made first so an
 * insert or a cut that splits a range cannot fail halfway. */
#ifndef MEMSIM_BASE_RANGE_SET_H
#define MEMSIM_BASE_RANGE_SET_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "memsim/status.h"

typedef struct ms_range {
    uint64_t addr, size;
} ms_range;

typedef struct ms_range_set {
    ms_range *v;
    size_t n, cap;
} ms_range_set;

/* The first of n elements, each `stride` bytes and starting with a uint64_t
 * address, sorted by it, whose address is >= addr (n if none): the search
 * of the sorted arrays that keep more than a range an entry (the executor's
 * in-flight copies, the real backend's pinned-memory cache). */
size_t base_addr_lower_bound(const void *v, size_t n, size_t stride, uint64_t addr);

void base_range_set_fini(ms_range_set *rs);
/* Make room for `extra` more ranges, so that a later insert cannot fail. */
ms_status base_range_set_reserve(ms_range_set *rs, size_t extra);
/* Index of the last range with addr <= a, or -1. */
ptrdiff_t base_range_set_floor(const ms_range_set *rs, uint64_t a);
/* Index of the first range that ends after a (n if none). */
size_t base_range_set_lower(const ms_range_set *rs, uint64_t a);
/* Does any range overlap [addr, addr + size)? */
bool base_range_set_overlaps(const ms_range_set *rs, uint64_t addr, uint64_t size);
/* Add [addr, addr+size) (disjoint from the set), merging with neighbours
 * when coalesce is set.  Needs room (base_range_set_reserve). */
void base_range_set_add(ms_range_set *rs, ms_range r, bool coalesce);
/* Remove [addr, addr+size), which must lie inside range i; may split it (needs
 * room for one more range). */
void base_range_set_cut(ms_range_set *rs, size_t i, ms_range r);

#endif
