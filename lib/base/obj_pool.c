/* Slabs of fixed-size objects (obj_pool.h says why). */
#include <stdint.h>
#include <stdlib.h>

#include "obj_pool.h"

struct base_pool_slab {
    base_pool_slab *next;
};

void base_pool_init(base_pool *p, size_t size, size_t per_slab)
{
    /* A free object holds the next one's address. */
    size_t room = size < sizeof(void *) ? sizeof(void *) : size;
    *p = (base_pool){.size = base_obj_aligned(room), .per_slab = per_slab};
}

void *base_obj_block(size_t size, size_t n)
{
    size_t head = base_obj_aligned(sizeof(void *));
    if (size == 0 || n == 0 || n > (SIZE_MAX - head) / size)
        return NULL;
    return malloc(head + n * size);
}

bool base_pool_refill(base_pool *p)
{
    base_pool_slab *s = base_obj_block(p->size, p->per_slab);
    if (s == NULL)
        return false;
    s->next = p->slabs;
    p->slabs = s;
    p->n_slabs++;
    char *obj = base_obj_block_objs(s);
    for (size_t i = 0; i < p->per_slab; i++, obj += p->size)
        base_pool_put(p, obj);
    return true;
}

void base_pool_fini(base_pool *p)
{
    while (p->slabs != NULL) {
        base_pool_slab *s = p->slabs;
        p->slabs = s->next;
        free(s);
    }
    p->free = NULL;
    p->n_slabs = 0;
}
