/* Objects in making order (obj_fifo.h says why). */
#include <stdlib.h>

#include "obj_fifo.h"
#include "obj_pool.h"

struct base_fifo_chunk {
    base_fifo_chunk *next; /* the ring's next chunk */
};

static char *slot(const base_fifo *f, const base_fifo_chunk *c, size_t i)
{
    return base_obj_block_objs((void *)c) + i * f->size;
}

void base_fifo_init(base_fifo *f, size_t size, size_t per_chunk)
{
    *f = (base_fifo){.size = base_obj_aligned(size), .per_chunk = per_chunk};
}

void base_fifo_fini(base_fifo *f)
{
    base_fifo_chunk *c = f->head;
    for (size_t i = 0; i < f->n_chunks; i++) {
        base_fifo_chunk *next = c->next;
        free(c);
        c = next;
    }
    base_fifo_init(f, f->size, f->per_chunk);
}

/* A chunk placed after `after` in the ring (or alone), or NULL. */
static base_fifo_chunk *chunk_add(base_fifo *f, base_fifo_chunk *after)
{
    base_fifo_chunk *c = base_obj_block(f->size, f->per_chunk);
    if (c == NULL)
        return NULL;
    c->next = after != NULL ? after->next : c;
    if (after != NULL)
        after->next = c;
    f->n_chunks++;
    return c;
}

void *base_fifo_push(base_fifo *f)
{
    if (f->tail == NULL) {
        if ((f->tail = f->head = chunk_add(f, NULL)) == NULL)
            return NULL;
    } else if (f->tail_end == f->per_chunk) {
        /* The next chunk is free unless the oldest objects are still in it. */
        base_fifo_chunk *next = f->tail->next;
        if (next == f->head && (next = chunk_add(f, f->tail)) == NULL)
            return NULL;
        f->tail = next;
        f->tail_end = 0;
    }
    f->count++;
    return slot(f, f->tail, f->tail_end++);
}

/* Empty again: start over at the front of the last chunk used, which is
 * the one in the cache. */
static void restart(base_fifo *f)
{
    f->head = f->tail;
    f->head_slot = f->tail_end = 0;
}

bool base_fifo_pop(base_fifo *f, const void *obj)
{
    if (f->count == 0 || obj != slot(f, f->head, f->head_slot))
        return false;
    if (--f->count == 0) {
        restart(f);
    } else if (++f->head_slot == f->per_chunk) {
        f->head = f->head->next;
        f->head_slot = 0;
    }
    return true;
}

bool base_fifo_unpush(base_fifo *f, const void *obj)
{
    if (f->count == 0 || obj != slot(f, f->tail, f->tail_end - 1))
        return false;
    f->tail_end--;
    if (--f->count == 0)
        restart(f);
    return true;
}

void *base_fifo_at(const base_fifo *f, size_t k)
{
    if (k >= f->count)
        return NULL;
    const base_fifo_chunk *c = f->head;
    size_t i = f->head_slot + k;
    for (; i >= f->per_chunk; i -= f->per_chunk)
        c = c->next;
    return slot(f, c, i);
}
