/* The run record: what the executor did, row by row, kept for the reports. */
#include "memsim/report.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "lib/base/growable.h"
#include "report_internal.h"

/* Room for one more row of table f. */
#define ROOM(r, f) (MS_GROW((r)->f, (r)->n_##f, (r)->cap_##f, 1024) ? MS_OK : MS_ENOMEM)

struct ms_run_record {
    ms_op_row *ops;
    size_t n_ops, cap_ops;
    ms_mem_row *mem;
    size_t n_mem, cap_mem;
    ms_tensor_row *tensors;
    size_t n_tensors, cap_tensors;
    ms_segment_row *segments;
    size_t n_segments, cap_segments;
    /* Per device, the last memory row of the steps ms_record_clear_steps
     * dropped: the allocator state the kept rows start from. */
    ms_mem_row *carry;
    size_t n_carry, cap_carry;
};

static const char *const work_kind_names[] = {"kernel", "recompute", "swap_out", "swap_in"};

const char *ms_work_kind_name(ms_work_kind k)
{
    if ((unsigned)k >= sizeof work_kind_names / sizeof work_kind_names[0])
        return "?";
    return work_kind_names[k];
}

ms_status ms_record_create(ms_run_record **out)
{
    if (out == NULL)
        return MS_EINVAL;
    *out = calloc(1, sizeof **out);
    return *out ? MS_OK : MS_ENOMEM;
}

ms_status ms_record_free(ms_run_record *r)
{
    if (r == NULL)
        return MS_EINVAL;
    free(r->ops);
    free(r->mem);
    free(r->tensors);
    free(r->segments);
    free(r->carry);
    free(r);
    return MS_OK;
}

/* Keep, in order, the rows of setup (negative step) and of `from` on. */
#define KEEP_ROWS_FROM(rows, n, from)                                                              \
    do {                                                                                           \
        size_t k_ = 0;                                                                             \
        for (size_t i_ = 0; i_ < (n); i_++)                                                        \
            if ((rows)[i_].step < 0 || (rows)[i_].step >= (from))                                  \
                (rows)[k_++] = (rows)[i_];                                                         \
        (n) = k_;                                                                                  \
    } while (0)

/* Remember each device's last row of the steps before `from` before they
 * go. */
static ms_status keep_carry(ms_run_record *r, int from)
{
    for (size_t i = 0; i < r->n_mem; i++) {
        const ms_mem_row *m = &r->mem[i];
        if (m->step < 0 || m->step >= from || m->device < 0)
            continue;
        size_t dev = (size_t)m->device;
        if (dev >= r->n_carry) {
            if (!MS_GROW_TO(r->carry, dev + 1, r->cap_carry, 8))
                return MS_ENOMEM;
            for (size_t k = r->n_carry; k <= dev; k++)
                r->carry[k] = (ms_mem_row){.step = -1, .device = -1};
            r->n_carry = dev + 1;
        }
        r->carry[dev] = *m;
    }
    return MS_OK;
}

const ms_mem_row *rep_record_carry(const ms_run_record *r, int device)
{
    if (r == NULL || device < 0 || (size_t)device >= r->n_carry || r->carry[device].device < 0)
        return NULL;
    return &r->carry[device];
}

ms_status ms_record_clear_steps_before(ms_run_record *r, int step)
{
    if (r == NULL)
        return MS_EINVAL;
    ms_status st = keep_carry(r, step);
    if (st != MS_OK)
        return st;
    KEEP_ROWS_FROM(r->ops, r->n_ops, step);
    KEEP_ROWS_FROM(r->mem, r->n_mem, step);
    KEEP_ROWS_FROM(r->tensors, r->n_tensors, step);
    KEEP_ROWS_FROM(r->segments, r->n_segments, step);
    return MS_OK;
}

ms_status ms_record_clear_steps(ms_run_record *r)
{
    return ms_record_clear_steps_before(r, INT_MAX);
}

/* Append a copy of every row of step `from` as step `to`; rows hold times
 * relative to their step's start, so a repeat's rows are the same rows.
 * Room for all four tables is made first: on out of memory nothing is
 * added. */
#define COUNT_STEP(rows, n, from, out)                                                             \
    do {                                                                                           \
        (out) = 0;                                                                                 \
        for (size_t i_ = 0; i_ < (n); i_++)                                                        \
            (out) += (rows)[i_].step == (from);                                                    \
    } while (0)
#define REPEAT_STEP(rows, n, from, to)                                                             \
    do {                                                                                           \
        size_t n_ = (n);                                                                           \
        for (size_t i_ = 0; i_ < n_; i_++)                                                         \
            if ((rows)[i_].step == (from)) {                                                       \
                (rows)[(n)] = (rows)[i_];                                                          \
                (rows)[(n)++].step = (to);                                                         \
            }                                                                                      \
    } while (0)

ms_status ms_record_repeat_step(ms_run_record *r, int from, int to)
{
    if (r == NULL || from < 0 || to <= from)
        return MS_EINVAL;
    size_t k_ops, k_mem, k_tensors, k_segments;
    COUNT_STEP(r->ops, r->n_ops, from, k_ops);
    COUNT_STEP(r->mem, r->n_mem, from, k_mem);
    COUNT_STEP(r->tensors, r->n_tensors, from, k_tensors);
    COUNT_STEP(r->segments, r->n_segments, from, k_segments);
    if (!MS_GROW_TO(r->ops, r->n_ops + k_ops, r->cap_ops, 1024) ||
        !MS_GROW_TO(r->mem, r->n_mem + k_mem, r->cap_mem, 1024) ||
        !MS_GROW_TO(r->tensors, r->n_tensors + k_tensors, r->cap_tensors, 1024) ||
        !MS_GROW_TO(r->segments, r->n_segments + k_segments, r->cap_segments, 1024))
        return MS_ENOMEM;
    REPEAT_STEP(r->ops, r->n_ops, from, to);
    REPEAT_STEP(r->mem, r->n_mem, from, to);
    REPEAT_STEP(r->tensors, r->n_tensors, from, to);
    REPEAT_STEP(r->segments, r->n_segments, from, to);
    return MS_OK;
}

ms_status ms_record_add_op(ms_run_record *r, const ms_op_row *row)
{
    if (r == NULL || row == NULL)
        return MS_EINVAL;
    ms_status st = ROOM(r, ops);
    if (st == MS_OK)
        r->ops[r->n_ops++] = *row;
    return st;
}

ms_status ms_record_add_mem(ms_run_record *r, const ms_mem_row *row)
{
    if (r == NULL || row == NULL)
        return MS_EINVAL;
    ms_status st = ROOM(r, mem);
    if (st == MS_OK)
        r->mem[r->n_mem++] = *row;
    return st;
}

ms_status ms_record_add_tensor(ms_run_record *r, const ms_tensor_row *row)
{
    if (r == NULL || row == NULL)
        return MS_EINVAL;
    ms_status st = ROOM(r, tensors);
    if (st == MS_OK)
        r->tensors[r->n_tensors++] = *row;
    return st;
}

ms_status ms_record_add_segment(ms_run_record *r, const ms_segment_row *row)
{
    if (r == NULL || row == NULL)
        return MS_EINVAL;
    ms_status st = ROOM(r, segments);
    if (st == MS_OK)
        r->segments[r->n_segments++] = *row;
    return st;
}

ms_status ms_record_set_times(ms_run_record *r, size_t row, int64_t start_ns, int64_t end_ns)
{
    if (r == NULL || row >= r->n_ops)
        return MS_EINVAL;
    r->ops[row].start_ns = start_ns;
    r->ops[row].end_ns = end_ns;
    return MS_OK;
}

size_t ms_record_n_ops(const ms_run_record *r)
{
    return r != NULL ? r->n_ops : 0;
}

const ms_op_row *ms_record_op(const ms_run_record *r, size_t i)
{
    return r != NULL && i < r->n_ops ? &r->ops[i] : NULL;
}

size_t ms_record_n_mem(const ms_run_record *r)
{
    return r != NULL ? r->n_mem : 0;
}

const ms_mem_row *ms_record_mem(const ms_run_record *r, size_t i)
{
    return r != NULL && i < r->n_mem ? &r->mem[i] : NULL;
}

size_t ms_record_n_tensors(const ms_run_record *r)
{
    return r != NULL ? r->n_tensors : 0;
}

const ms_tensor_row *ms_record_tensor(const ms_run_record *r, size_t i)
{
    return r != NULL && i < r->n_tensors ? &r->tensors[i] : NULL;
}

size_t ms_record_n_segments(const ms_run_record *r)
{
    return r != NULL ? r->n_segments : 0;
}

const ms_segment_row *ms_record_segment(const ms_run_record *r, size_t i)
{
    return r != NULL && i < r->n_segments ? &r->segments[i] : NULL;
}

const char *ms_snapshot_when_name(ms_snapshot_when w)
{
    return w == MS_SNAP_OOM ? "oom" : w == MS_SNAP_STEP_END ? "step_end" : "?";
}
