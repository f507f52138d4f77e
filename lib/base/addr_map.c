/* Allocations by start address: see addr_map.h. */
#include "addr_map.h"

#include <stdlib.h>

void base_addr_map_fini(ms_addr_map *m)
{
    free(m->slot);
    *m = (ms_addr_map){0};
}

/* Fibonacci hashing: the addresses are multiples of a large alignment, so
 * their low bits carry nothing; the multiply spreads the high ones. */
static size_t home(const ms_addr_map *m, uint64_t addr)
{
    return (size_t)((addr * UINT64_C(0x9E3779B97F4A7C15)) >> 32) & (m->cap - 1);
}

static void put(ms_addr_map *m, ms_range r)
{
    size_t i = home(m, r.addr);
    while (m->slot[i].size != 0)
        i = (i + 1) & (m->cap - 1);
    m->slot[i] = r;
    m->n++;
}

ms_status base_addr_map_reserve(ms_addr_map *m, size_t extra)
{
    size_t need = m->n + extra;
    if (need > SIZE_MAX / 4)
        return MS_ENOMEM;
    if (2 * need <= m->cap)
        return MS_OK;
    size_t cap = m->cap ? m->cap : 16;
    while (cap < 2 * need)
        cap *= 2;
    ms_range *slot = calloc(cap, sizeof *slot);
    if (slot == NULL)
        return MS_ENOMEM;
    ms_addr_map grown = {slot, 0, cap};
    for (size_t i = 0; i < m->cap; i++)
        if (m->slot[i].size != 0)
            put(&grown, m->slot[i]);
    free(m->slot);
    *m = grown;
    return MS_OK;
}

void base_addr_map_add(ms_addr_map *m, ms_range r)
{
    put(m, r);
}

static size_t find_slot(const ms_addr_map *m, uint64_t addr)
{
    if (m->cap == 0)
        return SIZE_MAX;
    for (size_t i = home(m, addr); m->slot[i].size != 0; i = (i + 1) & (m->cap - 1))
        if (m->slot[i].addr == addr)
            return i;
    return SIZE_MAX;
}

bool base_addr_map_find(const ms_addr_map *m, uint64_t addr, ms_range *out)
{
    size_t i = find_slot(m, addr);
    if (i != SIZE_MAX && out != NULL)
        *out = m->slot[i];
    return i != SIZE_MAX;
}

/* Whether the entry at j, whose home is h, may move back to the hole at i:
 * only if h does not lie cyclically in (i, j]. */
static bool may_fill(size_t i, size_t j, size_t h)
{
    return i <= j ? (h <= i || h > j) : (h <= i && h > j);
}

/* Backward-shift deletion: entries after the hole that may move back fill
 * it, so a probe never stops early and no tombstone is needed. */
bool base_addr_map_remove(ms_addr_map *m, uint64_t addr, ms_range *out)
{
    size_t i = find_slot(m, addr);
    if (i == SIZE_MAX)
        return false;
    if (out != NULL)
        *out = m->slot[i];
    size_t mask = m->cap - 1;
    for (size_t j = (i + 1) & mask; m->slot[j].size != 0; j = (j + 1) & mask)
        if (may_fill(i, j, home(m, m->slot[j].addr))) {
            m->slot[i] = m->slot[j];
            i = j;
        }
    m->slot[i] = (ms_range){0};
    m->n--;
    return true;
}

static int by_addr(const void *a, const void *b)
{
    const ms_range *x = a, *y = b;
    return (x->addr > y->addr) - (x->addr < y->addr);
}

ms_status base_addr_map_sorted(const ms_addr_map *m, ms_range **out)
{
    *out = NULL;
    if (m->n == 0)
        return MS_OK;
    ms_range *v = malloc(m->n * sizeof *v);
    if (v == NULL)
        return MS_ENOMEM;
    size_t k = 0;
    for (size_t i = 0; i < m->cap; i++)
        if (m->slot[i].size != 0)
            v[k++] = m->slot[i];
    qsort(v, k, sizeof *v, by_addr);
    *out = v;
    return MS_OK;
}
