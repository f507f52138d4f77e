/* A deterministic first-fit address space.  Allocations are aligned (and
 * sized) to the space's alignment; a free list sorted by address makes first
 * fit reuse the lowest hole, as a simple driver heap does. */
#include "address_space.h"

#include <stdlib.h>
#include <string.h>

ms_status mock_addrspace_init(ms_addrspace *as, uint64_t base, uint64_t size, uint64_t align)
{
    if (as == NULL || align == 0 || (align & (align - 1)) != 0 || base % align != 0 || size == 0)
        return MS_EINVAL;
    *as = (ms_addrspace){.align = align};
    if (base_range_set_reserve(&as->free, 1) != MS_OK)
        return MS_ENOMEM;
    base_range_set_add(&as->free, (ms_range){base, size - size % align}, true);
    return MS_OK;
}

void mock_addrspace_fini(ms_addrspace *as)
{
    base_range_set_fini(&as->free);
    base_addr_map_fini(&as->used);
}

uint64_t mock_addrspace_footprint(const ms_addrspace *as, uint64_t bytes)
{
    if (bytes > UINT64_MAX - (as->align - 1))
        return 0;
    return (bytes + as->align - 1) & ~(as->align - 1);
}

ms_status mock_addrspace_alloc(ms_addrspace *as, uint64_t bytes, uint64_t *addr)
{
    uint64_t need = mock_addrspace_footprint(as, bytes);
    if (need == 0)
        return bytes == 0 ? MS_EINVAL : MS_ENOMEM;
    size_t i = 0;
    while (i < as->free.n && as->free.v[i].size < need)
        i++;
    if (i == as->free.n)
        return MS_ENOMEM;
    /* Room first, so that failure leaves the space unchanged. */
    if (base_addr_map_reserve(&as->used, 1) != MS_OK ||
        base_range_set_reserve(&as->free, 1) != MS_OK)
        return MS_ENOMEM;
    ms_range r = {as->free.v[i].addr, need};
    base_range_set_cut(&as->free, i, r);
    base_addr_map_add(&as->used, r);
    *addr = r.addr;
    return MS_OK;
}

bool mock_addrspace_lookup(const ms_addrspace *as, uint64_t addr, ms_range *out)
{
    return base_addr_map_find(&as->used, addr, out);
}

ms_status mock_addrspace_release(ms_addrspace *as, uint64_t addr, uint64_t *footprint)
{
    if (!base_addr_map_find(&as->used, addr, NULL))
        return MS_EINVAL;
    if (base_range_set_reserve(&as->free, 1) != MS_OK)
        return MS_ENOMEM;
    ms_range r;
    base_addr_map_remove(&as->used, addr, &r);
    base_range_set_add(&as->free, r, true);
    if (footprint != NULL)
        *footprint = r.size;
    return MS_OK;
}
