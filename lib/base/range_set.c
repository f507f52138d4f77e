/* Sets of disjoint address ranges: see range_set.h. */
#include "range_set.h"

#include <stdlib.h>
#include <string.h>

#include "growable.h"

void base_range_set_fini(ms_range_set *rs)
{
    free(rs->v);
    *rs = (ms_range_set){0};
}

ms_status base_range_set_reserve(ms_range_set *rs, size_t extra)
{
    return MS_GROW_TO(rs->v, rs->n + extra, rs->cap, 8) ? MS_OK : MS_ENOMEM;
}

size_t base_addr_lower_bound(const void *v, size_t n, size_t stride, uint64_t addr)
{
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        uint64_t at;
        memcpy(&at, (const char *)v + mid * stride, sizeof at);
        if (at < addr)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

ptrdiff_t base_range_set_floor(const ms_range_set *rs, uint64_t a)
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

size_t base_range_set_lower(const ms_range_set *rs, uint64_t a)
{
    size_t lo = 0, hi = rs->n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (rs->v[mid].addr + rs->v[mid].size <= a)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

bool base_range_set_overlaps(const ms_range_set *rs, uint64_t addr, uint64_t size)
{
    size_t i = base_range_set_lower(rs, addr);
    return i < rs->n && rs->v[i].addr < addr + size;
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

void base_range_set_add(ms_range_set *rs, ms_range r, bool coalesce)
{
    size_t i = (size_t)(base_range_set_floor(rs, r.addr) + 1);
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

void base_range_set_cut(ms_range_set *rs, size_t i, ms_range r)
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
