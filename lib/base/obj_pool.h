/* Fixed-size objects recycled through a free list fed by slabs (private to
 * lib/, sim/ and the backends).  A simulation makes and drops a work item
 * per launch and an event per tensor it tracks, ~27 000 events a 70B stage's
 * step: through calloc and free, the events alone were 3.7% of a policy
 * search (bench/README.md).  A pool hands back the memory of the objects put
 * into it and frees its slabs only with the pool, which dies with its owner
 * (a device, a mock); objects still out then are freed with it.
 *
 * A free object is linked through its first bytes, so `get` returns an object
 * whose contents are undefined: the caller initializes every field. */
#ifndef MEMSIM_BASE_OBJ_POOL_H
#define MEMSIM_BASE_OBJ_POOL_H

#include <stdbool.h>
#include <stddef.h>

typedef struct base_pool_slab base_pool_slab;

typedef struct base_pool {
    size_t size;           /* an object's bytes, rounded to malloc's alignment */
    size_t per_slab;       /* objects a refill adds */
    void *free;            /* free objects, each starting with the next one's address */
    base_pool_slab *slabs; /* every slab, newest first */
    size_t n_slabs;
} base_pool;

/* n rounded up to max_align_t's alignment (malloc's), so that objects laid
 * side by side are each aligned as malloc would align them. */
static inline size_t base_obj_aligned(size_t n)
{
    return (n + _Alignof(max_align_t) - 1) / _Alignof(max_align_t) * _Alignof(max_align_t);
}

/* A block of n objects of `size` bytes (each a multiple of base_obj_aligned)
 * after a one-pointer header that chains the owner's blocks: a pool's slab,
 * a FIFO's chunk.  NULL when n or size is 0, the block's size would
 * overflow, or memory is out.  Freed with free(). */
void *base_obj_block(size_t size, size_t n);
/* The first object of such a block. */
static inline char *base_obj_block_objs(void *block)
{
    return (char *)block + base_obj_aligned(sizeof(void *));
}

/* An empty pool of objects of `size` bytes (> 0), `per_slab` (> 0) at a time. */
void base_pool_init(base_pool *p, size_t size, size_t per_slab);
/* Adds a slab's worth of free objects: false when out of memory. */
bool base_pool_refill(base_pool *p);
/* Frees every slab: the objects still out are gone too. */
void base_pool_fini(base_pool *p);

/* An object (contents undefined), or NULL when out of memory. */
static inline void *base_pool_get(base_pool *p)
{
    if (p->free == NULL && !base_pool_refill(p))
        return NULL;
    void *obj = p->free;
    p->free = *(void **)obj;
    return obj;
}

/* Gives obj (from this pool's get) back. */
static inline void base_pool_put(base_pool *p, void *obj)
{
    *(void **)obj = p->free;
    p->free = obj;
}

#endif
