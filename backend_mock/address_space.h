/* backend_mock/: a deterministic address space (device or pinned host).
 * First fit over a free list kept sorted by address, so the same sequence of
 * calls always yields the same addresses and freed ranges are reused. */
#ifndef MEMSIM_MOCK_ADDRESS_SPACE_H
#define MEMSIM_MOCK_ADDRESS_SPACE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "lib/base/addr_map.h"
#include "lib/base/range_set.h"
#include "memsim/status.h"

typedef struct ms_addrspace {
    uint64_t align;
    ms_range_set free; /* coalesced */
    ms_addr_map used;  /* one range per allocation, by its start */
} ms_addrspace;

ms_status mock_addrspace_init(ms_addrspace *as, uint64_t base, uint64_t size, uint64_t align);
void mock_addrspace_fini(ms_addrspace *as);
/* Round bytes up to the alignment: what an allocation of bytes occupies. */
uint64_t mock_addrspace_footprint(const ms_addrspace *as, uint64_t bytes);
/* First fit; MS_ENOMEM (nothing changed) when no free range is large enough. */
ms_status mock_addrspace_alloc(ms_addrspace *as, uint64_t bytes, uint64_t *addr);
/* Release the allocation starting at addr; *footprint gets its size.
 * MS_EINVAL if no allocation starts there. */
ms_status mock_addrspace_release(ms_addrspace *as, uint64_t addr, uint64_t *footprint);
/* The allocation starting at addr, if any. */
bool mock_addrspace_lookup(const ms_addrspace *as, uint64_t addr, ms_range *out);

#endif
