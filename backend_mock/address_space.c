/* A deterministic first-fit address space.  Allocations are aligned (and
 * sized) to the space's alignment; a free list sorted by address makes first
 * fit reuse the lowest hole, as a simple driver heap does. */
#include "address_space.h"

#include <stdlib.h>
#include <string.h>

void ms_range_set_fini(ms_range_set *rs)
{
    free(rs->v);
    *rs = (ms_range_set){0};
}

ms_status ms_range_set_reserve(ms_range_set *rs, size_t extra)
{
    if (rs->n + extra <= rs->cap)
        return MS_OK;
    size_t cap = rs->cap ? rs->cap : 8;
    while (cap < rs->n + extra)
        cap *= 2;
    ms_range *v = realloc(rs->v, cap * sizeof *v);
    if (v == NULL)
        return MS_ENOMEM;
    rs->v = v;
    rs->cap = cap;
    return MS_OK;
}

ptrdiff_t ms_range_set_floor(const ms_range_set *rs, uint64_t a)
{
    size_t lo = 0, hi = rs->n; /* first index with addr > a */
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (rs->v[mid].addr <= a)
            lo = mid + 1;
        else
            hi = mid;
    }
    return (ptrdiff_t)lo - 1;
}

static void insert_at(ms_range_set *rs, size_t i, ms_range r)
{
    memmove(&rs->v[i + 1], &rs->v[i], (rs->n - i) * sizeof *rs->v);
    rs->v[i] = r;
    rs->n++;
}

static void remove_at(ms_range_set *rs, size_t i)
{
    memmove(&rs->v[i], &rs->v[i + 1], (rs->n - i - 1) * sizeof *rs->v);
    rs->n--;
}

void ms_range_set_add(ms_range_set *rs, ms_range r, bool coalesce)
{
    size_t i = (size_t)(ms_range_set_floor(rs, r.addr) + 1);
    if (coalesce && i > 0 && rs->v[i - 1].addr + rs->v[i - 1].size == r.addr) {
        rs->v[i - 1].size += r.size;
        if (i < rs->n && r.addr + r.size == rs->v[i].addr) {
            rs->v[i - 1].size += rs->v[i].size;
            remove_at(rs, i);
        }
        return;
    }
    if (coalesce && i < rs->n && r.addr + r.size == rs->v[i].addr) {
        rs->v[i].addr = r.addr;
        rs->v[i].size += r.size;
        return;
    }
    insert_at(rs, i, r);
}

void ms_range_set_cut(ms_range_set *rs, size_t i, ms_range r)
{
    ms_range whole = rs->v[i];
    ms_range before = {whole.addr, r.addr - whole.addr};
    ms_range after = {r.addr + r.size, whole.addr + whole.size - (r.addr + r.size)};
    if (before.size > 0 && after.size > 0) {
        rs->v[i] = before;
        insert_at(rs, i + 1, after);
    } else if (before.size > 0) {
        rs->v[i] = before;
    } else if (after.size > 0) {
        rs->v[i] = after;
    } else {
        remove_at(rs, i);
    }
}

ms_status ms_addrspace_init(ms_addrspace *as, uint64_t base, uint64_t size, uint64_t align)
{
    if (as == NULL || align == 0 || (align & (align - 1)) != 0 || base % align != 0 || size == 0)
        return MS_EINVAL;
    *as = (ms_addrspace){.align = align};
    if (ms_range_set_reserve(&as->free, 1) != MS_OK)
        return MS_ENOMEM;
    ms_range_set_add(&as->free, (ms_range){base, size - size % align}, true);
    return MS_OK;
}

void ms_addrspace_fini(ms_addrspace *as)
{
    ms_range_set_fini(&as->free);
    ms_range_set_fini(&as->used);
}

uint64_t ms_addrspace_footprint(const ms_addrspace *as, uint64_t bytes)
{
    if (bytes > UINT64_MAX - (as->align - 1))
        return 0;
    return (bytes + as->align - 1) & ~(as->align - 1);
}

ms_status ms_addrspace_alloc(ms_addrspace *as, uint64_t bytes, uint64_t *addr)
{
    uint64_t need = ms_addrspace_footprint(as, bytes);
    if (need == 0)
        return bytes == 0 ? MS_EINVAL : MS_ENOMEM;
    size_t i = 0;
    while (i < as->free.n && as->free.v[i].size < need)
        i++;
    if (i == as->free.n)
        return MS_ENOMEM;
    /* Room first, so that failure leaves the space unchanged. */
    if (ms_range_set_reserve(&as->used, 1) != MS_OK || ms_range_set_reserve(&as->free, 1) != MS_OK)
        return MS_ENOMEM;
    ms_range r = {as->free.v[i].addr, need};
    ms_range_set_cut(&as->free, i, r);
    ms_range_set_add(&as->used, r, false);
    *addr = r.addr;
    return MS_OK;
}

bool ms_addrspace_lookup(const ms_addrspace *as, uint64_t addr, ms_range *out)
{
    ptrdiff_t i = ms_range_set_floor(&as->used, addr);
    if (i < 0 || as->used.v[i].addr != addr)
        return false;
    if (out != NULL)
        *out = as->used.v[i];
    return true;
}

ms_status ms_addrspace_release(ms_addrspace *as, uint64_t addr, uint64_t *footprint)
{
    ptrdiff_t i = ms_range_set_floor(&as->used, addr);
    if (i < 0 || as->used.v[i].addr != addr)
        return MS_EINVAL;
    if (ms_range_set_reserve(&as->free, 1) != MS_OK)
        return MS_ENOMEM;
    ms_range r = as->used.v[i];
    ms_range_set_cut(&as->used, (size_t)i, r);
    ms_range_set_add(&as->free, r, true);
    if (footprint != NULL)
        *footprint = r.size;
    return MS_OK;
}
