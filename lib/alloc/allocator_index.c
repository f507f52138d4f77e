/* Allocated blocks by device address (NativeCachingAllocator's
 * allocated_blocks map): free(ptr) must find its block in O(1).  Open
 * addressing with linear probing and backward-shift deletion; the table is
 * only ever looked up by key, never iterated, so its order cannot leak into
 * any output. */
#include <stdlib.h>

#include "allocator_internal.h"

#define INDEX_MIN_CAP 1024u
#define INDEX_MIN_SHIFT 54u /* 64 - log2(INDEX_MIN_CAP) */

ms_status alloc_index_init(ms_aindex *ix)
{
    ix->slots = calloc(INDEX_MIN_CAP, sizeof *ix->slots);
    if (!ix->slots)
        return MS_ENOMEM;
    ix->mask = INDEX_MIN_CAP - 1;
    ix->shift = INDEX_MIN_SHIFT;
    ix->count = 0;
    return MS_OK;
}

void alloc_index_free(ms_aindex *ix)
{
    free(ix->slots);
    ix->slots = NULL;
    ix->mask = 0;
    ix->shift = 0;
    ix->count = 0;
}

static ms_status grow(ms_aindex *ix)
{
    uint64_t cap = (ix->mask + 1) * 2;
    ms_aslot *slots = calloc(cap, sizeof *slots);
    if (!slots)
        return MS_ENOMEM;
    for (uint64_t i = 0; i <= ix->mask; i++)
        if (ix->slots[i].block)
            alloc_index_put_slot(slots, cap - 1, ix->shift - 1, ix->slots[i].block);
    free(ix->slots);
    ix->slots = slots;
    ix->mask = cap - 1;
    ix->shift--;
    return MS_OK;
}

/* Keep the load factor under 1/2 so probe runs stay short; called before a
 * malloc or an import changes anything so that the puts cannot fail. */
ms_status alloc_index_reserve_n(ms_aindex *ix, uint64_t extra)
{
    while ((ix->count + extra) * 2 > ix->mask + 1) {
        ms_status st = grow(ix);
        if (st != MS_OK)
            return st;
    }
    return MS_OK;
}

ms_status alloc_index_put(ms_aindex *ix, ms_ablock *b)
{
    ms_status st = alloc_index_reserve(ix);
    if (st != MS_OK)
        return st;
    alloc_index_put_reserved(ix, b);
    return MS_OK;
}

static ms_aslot *find_slot(const ms_aindex *ix, uint64_t addr)
{
    uint64_t i = alloc_index_slot(ix->shift, addr);
    while (ix->slots[i].block) {
        if (ix->slots[i].addr == addr)
            return &ix->slots[i];
        i = (i + 1) & ix->mask;
    }
    return NULL;
}

ms_ablock *alloc_index_get(const ms_aindex *ix, uint64_t addr)
{
    ms_aslot *s = find_slot(ix, addr);
    return s ? s->block : NULL;
}

ms_ablock *alloc_index_take(ms_aindex *ix, uint64_t addr)
{
    ms_aslot *slots = ix->slots;
    uint64_t mask = ix->mask;
    unsigned shift = ix->shift;
    uint64_t hole = alloc_index_slot(shift, addr);
    while (slots[hole].addr != addr || !slots[hole].block) {
        if (!slots[hole].block)
            return NULL;
        hole = (hole + 1) & mask;
    }
    ms_ablock *b = slots[hole].block;
    /* Backward-shift deletion: a later member of the run moves into the
     * hole when the hole lies on its probe path, i.e. its home is at least
     * as far behind it (cyclically) as the hole is. */
    for (uint64_t j = (hole + 1) & mask; slots[j].block; j = (j + 1) & mask) {
        uint64_t home = alloc_index_slot(shift, slots[j].addr);
        if (((j - home) & mask) >= ((j - hole) & mask)) {
            slots[hole] = slots[j];
            hole = j;
        }
    }
    slots[hole].block = NULL;
    ix->count--;
    return b;
}
