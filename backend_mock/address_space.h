/* backend_mock/: a deterministic address space (device or pinned host).
 * First fit over a free list kept sorted by address, so the same sequence of
 * calls always yields the same addresses and freed ranges are reused. */
#ifndef MEMSIM_MOCK_ADDRESS_SPACE_H
#define MEMSIM_MOCK_ADDRESS_SPACE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "memsim/status.h"

typedef struct ms_range {
    uint64_t addr, size;
} ms_range;

/* A sorted array of disjoint ranges. */
typedef struct ms_range_set {
    ms_range *v;
    size_t n, cap;
} ms_range_set;

typedef struct ms_addrspace {
    uint64_t align;
    ms_range_set free; /* coalesced */
    ms_range_set used; /* one range per allocation */
} ms_addrspace;

ms_status ms_addrspace_init(ms_addrspace *as, uint64_t base, uint64_t size, uint64_t align);
void ms_addrspace_fini(ms_addrspace *as);
/* Round bytes up to the alignment: what an allocation of bytes occupies. */
uint64_t ms_addrspace_footprint(const ms_addrspace *as, uint64_t bytes);
/* First fit; MS_ENOMEM (nothing changed) when no free range is large enough. */
ms_status ms_addrspace_alloc(ms_addrspace *as, uint64_t bytes, uint64_t *addr);
/* Release the allocation starting at addr; *footprint gets its size.
 * MS_EINVAL if no allocation starts there. */
ms_status ms_addrspace_release(ms_addrspace *as, uint64_t addr, uint64_t *footprint);
/* The allocation starting at addr, if any. */
bool ms_addrspace_lookup(const ms_addrspace *as, uint64_t addr, ms_range *out);

/* Range sets (also the mapped pages of a reservation). */
void ms_range_set_fini(ms_range_set *rs);
/* Make room for `extra` more ranges, so that a later insert cannot fail. */
ms_status ms_range_set_reserve(ms_range_set *rs, size_t extra);
/* Index of the last range with addr <= a, or -1. */
ptrdiff_t ms_range_set_floor(const ms_range_set *rs, uint64_t a);
/* Add [addr, addr+size) (disjoint from the set), merging with neighbours
 * when coalesce is set.  Needs room (ms_range_set_reserve). */
void ms_range_set_add(ms_range_set *rs, ms_range r, bool coalesce);
/* Remove [addr, addr+size), which must lie inside range i; may split it (needs
 * room for one more range). */
void ms_range_set_cut(ms_range_set *rs, size_t i, ms_range r);

#endif
