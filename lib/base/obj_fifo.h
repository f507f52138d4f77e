/* Fixed-size objects made and released in first-in first-out order (private
 * to lib/, sim/ and the backends), laid out in the order they are made.
 *
 * A stream's work items are such objects: each is queued a launch queue
 * (~1 000 launches) before it runs, so by the time a stream's head is looked
 * at it has left the cache.  From a free list (obj_pool.h) consecutive items
 * sit anywhere, and the head's successor can only be found by reading the
 * head; here they sit one after another, so the hardware's stride prefetcher
 * and base_fifo_prefetch can fetch them before they are read (perf on the
 * shipped llama2-70B, bench/README.md).
 *
 * Objects live in chunks joined in a ring; a full ring gets another chunk,
 * and addresses never move.  Contents of a new object are undefined. */
#ifndef MEMSIM_BASE_OBJ_FIFO_H
#define MEMSIM_BASE_OBJ_FIFO_H

#include <stdbool.h>
#include <stddef.h>

typedef struct base_fifo_chunk base_fifo_chunk;

typedef struct base_fifo {
    size_t size;      /* an object's bytes, rounded to malloc's alignment */
    size_t per_chunk; /* objects a chunk holds */
    base_fifo_chunk *head, *tail; /* the oldest object's chunk, the newest's */
    size_t head_slot; /* the oldest object's slot in head */
    size_t tail_end;  /* the slot after the newest object's, in tail */
    size_t count;     /* objects out */
    size_t n_chunks;
} base_fifo;

/* An empty FIFO of objects of `size` bytes (> 0), `per_chunk` (> 0) a chunk. */
void base_fifo_init(base_fifo *f, size_t size, size_t per_chunk);
/* Frees every chunk: the objects still out are gone too. */
void base_fifo_fini(base_fifo *f);
/* A new object after every other, or NULL when out of memory. */
void *base_fifo_push(base_fifo *f);
/* Releases the oldest object if it is obj; false (nothing released) if not. */
bool base_fifo_pop(base_fifo *f, const void *obj);
/* Releases the newest object if it is obj (a push taken back); false if not. */
bool base_fifo_unpush(base_fifo *f, const void *obj);
/* The object `k` after the oldest (0: the oldest), or NULL past the newest. */
void *base_fifo_at(const base_fifo *f, size_t k);

#endif
