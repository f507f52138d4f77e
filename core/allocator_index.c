/* Allocated blocks by device address (NativeCachingAllocator's
 * allocated_blocks map): free(ptr) must find its block in O(1).  Open
 * addressing with linear probing and backward-shift deletion; the table is
 * only ever looked up by key, never iterated, so its order cannot leak into
 * any output. */
#include <stdlib.h>

#include "allocator_internal.h"

#define INDEX_MIN_CAP 1024u

static uint64_t slot_of(uint64_t mask, uint64_t addr)
{
    /* Fibonacci hashing: addresses are 512-byte aligned, so mix the bits. */
    return ((addr * UINT64_C(0x9E3779B97F4A7C15)) >> 20) & mask;
}

ms_status ms_aindex_init(ms_aindex *ix)
{
    ix->slots = calloc(INDEX_MIN_CAP, sizeof *ix->slots);
    if (!ix->slots)
        return MS_ENOMEM;
    ix->mask = INDEX_MIN_CAP - 1;
    ix->count = 0;
    return MS_OK;
}

void ms_aindex_free(ms_aindex *ix)
{
    free(ix->slots);
    ix->slots = NULL;
    ix->mask = 0;
    ix->count = 0;
}

static void put_slot(ms_aslot *slots, uint64_t mask, ms_ablock *b)
{
    uint64_t i = slot_of(mask, b->addr);
    while (slots[i].block)
        i = (i + 1) & mask;
    slots[i].addr = b->addr;
    slots[i].block = b;
}

static ms_status grow(ms_aindex *ix)
{
    uint64_t cap = (ix->mask + 1) * 2;
    ms_aslot *slots = calloc(cap, sizeof *slots);
    if (!slots)
        return MS_ENOMEM;
    for (uint64_t i = 0; i <= ix->mask; i++)
        if (ix->slots[i].block)
            put_slot(slots, cap - 1, ix->slots[i].block);
    free(ix->slots);
    ix->slots = slots;
    ix->mask = cap - 1;
    return MS_OK;
}

/* Keep the load factor under 1/2 so probe runs stay short; called before a
 * malloc or an import changes anything so that the puts cannot fail. */
ms_status ms_aindex_reserve_n(ms_aindex *ix, uint64_t extra)
{
    while ((ix->count + extra) * 2 > ix->mask + 1) {
        ms_status st = grow(ix);
        if (st != MS_OK)
            return st;
    }
    return MS_OK;
}

ms_status ms_aindex_put(ms_aindex *ix, ms_ablock *b)
{
    ms_status st = ms_aindex_reserve(ix);
    if (st != MS_OK)
        return st;
    put_slot(ix->slots, ix->mask, b);
    ix->count++;
    return MS_OK;
}

static ms_aslot *find_slot(const ms_aindex *ix, uint64_t addr)
{
    uint64_t i = slot_of(ix->mask, addr);
    while (ix->slots[i].block) {
        if (ix->slots[i].addr == addr)
            return &ix->slots[i];
        i = (i + 1) & ix->mask;
    }
    return NULL;
}

ms_ablock *ms_aindex_get(const ms_aindex *ix, uint64_t addr)
{
    ms_aslot *s = find_slot(ix, addr);
    return s ? s->block : NULL;
}

ms_ablock *ms_aindex_take(ms_aindex *ix, uint64_t addr)
{
    ms_aslot *s = find_slot(ix, addr);
    if (!s)
        return NULL;
    ms_ablock *b = s->block;
    /* Backward-shift deletion: pull later members of the run into the hole
     * when their home slot does not lie cyclically in (hole, j]. */
    uint64_t hole = (uint64_t)(s - ix->slots);
    for (uint64_t j = (hole + 1) & ix->mask; ix->slots[j].block; j = (j + 1) & ix->mask) {
        uint64_t home = slot_of(ix->mask, ix->slots[j].addr);
        bool stays = (hole <= j) ? (hole < home && home <= j) : (hole < home || home <= j);
        if (stays)
            continue;
        ix->slots[hole] = ix->slots[j];
        hole = j;
    }
    ix->slots[hole].block = NULL;
    ix->count--;
    return b;
}
