/* An allocator on the fake device, for the allocator's Check suites: it
 * records every observer event and wraps the calls with assertions. */
#ifndef MEMSIM_TEST_ALLOCATOR_FIXTURE_H
#define MEMSIM_TEST_ALLOCATOR_FIXTURE_H

#include "memsim/allocator.h"
#include "test_allocator_fake.h"

#define FX_MAX_EVENTS 64
#define FX_MAX_BLOCKS 32

typedef struct fx {
    ms_backend *be;
    ms_alloc *a;
    ms_stream *s0, *s1; /* stream ids 0 and 1 */
    ms_diag d;          /* the last malloc's diagnostic */
    ms_alloc_event ev[FX_MAX_EVENTS];
    int n_ev;
} fx;

/* Blocks in address order, as ms_alloc_visit_blocks reports them. */
typedef struct fx_blocks {
    ms_block_info b[FX_MAX_BLOCKS];
    int n;
} fx_blocks;

void fx_open_cfg(fx *f, const ms_alloc_config *cfg, uint64_t capacity, int device);
void fx_open(fx *f, ms_alloc_flavour flavour, const char *conf, uint64_t capacity);
/* Destroy gives every segment back: asserts the device ends empty. */
void fx_close(fx *f);
uint64_t fx_mp(fx *f, uint64_t size, ms_stream *s, int pool); /* malloc, must succeed */
uint64_t fx_ms(fx *f, uint64_t size, ms_stream *s);           /* ... in pool 0 */
uint64_t fx_m(fx *f, uint64_t size);                          /* ... on stream 0 */
void fx_f(fx *f, uint64_t addr);                              /* free, must succeed */
ms_alloc_stats fx_stats(fx *f);
const fake_counts *fx_counts(fx *f);
fx_blocks fx_visit(fx *f);
const ms_alloc_event *fx_last(const fx *f, ms_alloc_action action); /* or NULL */

#endif
