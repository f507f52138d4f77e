/* Allocations by start address (private to lib/ and the backends): the
 * mock's live pinned buffers and device segments.  A host buffer lives from
 * a swap-out to its swap-in, so a swap-heavy step holds thousands, freed in
 * an order unrelated to their addresses; a sorted array paid a memmove of
 * the tail at every free, 4% of a 70B policy search (bench/README.md).
 * Open addressing with linear probing: finding, adding and removing are
 * constant time; the ranges in address order, which a fast-forward
 * signature writes, are sorted on demand. */
#ifndef MEMSIM_BASE_ADDR_MAP_H
#define MEMSIM_BASE_ADDR_MAP_H

#include <stdbool.h>
#include <stddef.h>

#include "range_set.h"

typedef struct ms_addr_map {
    ms_range *slot; /* size 0: empty (no allocation has size 0) */
    size_t n, cap;  /* cap: 0 or a power of two, at least twice n */
} ms_addr_map;

void base_addr_map_fini(ms_addr_map *m);
/* Room for `extra` more ranges, so that a later add cannot fail. */
ms_status base_addr_map_reserve(ms_addr_map *m, size_t extra);
/* Adds r (r.size > 0, r.addr not present).  Needs room. */
void base_addr_map_add(ms_addr_map *m, ms_range r);
/* The range starting at addr into *out (may be NULL): false if none. */
bool base_addr_map_find(const ms_addr_map *m, uint64_t addr, ms_range *out);
/* Removes the range starting at addr into *out (may be NULL): false if none. */
bool base_addr_map_remove(ms_addr_map *m, uint64_t addr, ms_range *out);
/* A new array of every range, by address (*out NULL when there is none). */
ms_status base_addr_map_sorted(const ms_addr_map *m, ms_range **out);

#endif
