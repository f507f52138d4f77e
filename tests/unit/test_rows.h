/* Record rows compared field by field: two records are the same when every
 * field is, whatever the padding bytes between the fields hold (a row built
 * on the stack and a row copied from an earlier step can differ there, and
 * no report reads them). */
#ifndef MEMSIM_TESTS_TEST_ROWS_H
#define MEMSIM_TESTS_TEST_ROWS_H

#include <stdbool.h>
#include <string.h>

#include "memsim/report.h"

static inline bool same_op_row(const ms_op_row *a, const ms_op_row *b)
{
    return a->step == b->step && a->device == b->device && a->kind == b->kind &&
           a->op == b->op && a->tensor == b->tensor && a->stream_id == b->stream_id &&
           a->issue_ns == b->issue_ns && a->start_ns == b->start_ns && a->end_ns == b->end_ns &&
           a->bytes == b->bytes && memcmp(&a->flops, &b->flops, sizeof a->flops) == 0 &&
           a->allocated == b->allocated && a->reserved == b->reserved;
}

static inline bool same_mem_row(const ms_mem_row *a, const ms_mem_row *b)
{
    return a->step == b->step && a->device == b->device && a->time_ns == b->time_ns &&
           a->action == b->action && a->addr == b->addr && a->bytes == b->bytes &&
           a->allocated == b->allocated && a->reserved == b->reserved && a->active == b->active &&
           memcmp(a->by_kind, b->by_kind, sizeof a->by_kind) == 0 && a->tensor == b->tensor &&
           a->stream_id == b->stream_id;
}

static inline bool same_segment_row(const ms_segment_row *a, const ms_segment_row *b)
{
    const ms_block_info *x = &a->block, *y = &b->block;
    return a->step == b->step && a->device == b->device && a->when == b->when &&
           x->segment_addr == y->segment_addr && x->segment_size == y->segment_size &&
           x->addr == y->addr && x->size == y->size && x->requested == y->requested &&
           x->allocated == y->allocated && x->stream_id == y->stream_id && x->pool == y->pool &&
           x->expandable == y->expandable && x->pending_free == y->pending_free &&
           x->small == y->small;
}

#endif
