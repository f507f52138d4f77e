/* Memory events on the device clock (see report_internal.h for the rule and
 * why the reports need it). */
#include "report_internal.h"

#include <stdlib.h>
#include <string.h>

/* How far back a free looks for the work that last touched its tensor: the
 * actions after an op (swap-outs of other tensors, several frees) put at most
 * a few rows between a tensor's last use and its free. */
#define TOUCH_LOOKBACK 256

/* Op rows that ran, sorted by (step, device, issue time, record order). */
typedef struct op_key {
    int step, device;
    int64_t issue;
    size_t i;
} op_key;

typedef struct op_index {
    const ms_run_record *rec;
    op_key *keys;
    size_t n;
} op_index;

static int cmp_op(const void *a, const void *b)
{
    const op_key *x = a, *y = b;
    if (x->step != y->step)
        return x->step < y->step ? -1 : 1;
    if (x->device != y->device)
        return x->device < y->device ? -1 : 1;
    if (x->issue != y->issue)
        return x->issue < y->issue ? -1 : 1;
    return x->i < y->i ? -1 : x->i > y->i;
}

static bool ran(const ms_op_row *r)
{
    return r->step >= 0 && r->start_ns >= 0 && r->end_ns >= r->start_ns;
}

static ms_status op_index_build(const ms_run_record *rec, op_index *oi)
{
    size_t n = ms_record_n_ops(rec);
    oi->rec = rec;
    oi->n = 0;
    oi->keys = malloc((n ? n : 1) * sizeof *oi->keys);
    if (oi->keys == NULL)
        return MS_ENOMEM;
    for (size_t i = 0; i < n; i++) {
        const ms_op_row *r = ms_record_op(rec, i);
        if (ran(r))
            oi->keys[oi->n++] = (op_key){r->step, r->device, r->issue_ns, i};
    }
    qsort(oi->keys, oi->n, sizeof *oi->keys, cmp_op);
    return MS_OK;
}

static const ms_op_row *op_at(const op_index *oi, size_t k)
{
    return ms_record_op(oi->rec, oi->keys[k].i);
}

static int key_cmp(const ms_op_row *r, int step, int device)
{
    if (r->step != step)
        return r->step < step ? -1 : 1;
    if (r->device != device)
        return r->device < device ? -1 : 1;
    return 0;
}

/* [lo, hi) of the rows of (step, device). */
static void group_of(const op_index *oi, int step, int device, size_t *lo, size_t *hi)
{
    size_t a = 0, b = oi->n;
    while (a < b) {
        size_t m = a + (b - a) / 2;
        if (key_cmp(op_at(oi, m), step, device) < 0)
            a = m + 1;
        else
            b = m;
    }
    *lo = a;
    b = oi->n;
    while (a < b) {
        size_t m = a + (b - a) / 2;
        if (key_cmp(op_at(oi, m), step, device) <= 0)
            a = m + 1;
        else
            b = m;
    }
    *hi = a;
}

/* First row of [lo, hi) issued at or after t (strict: after t). */
static size_t first_issued(const op_index *oi, size_t lo, size_t hi, int64_t t, bool strict)
{
    while (lo < hi) {
        size_t m = lo + (hi - lo) / 2;
        int64_t at = op_at(oi, m)->issue_ns;
        if (strict ? at <= t : at < t)
            lo = m + 1;
        else
            hi = m;
    }
    return lo;
}

static bool touches(const ms_op_row *r, uint32_t tensor, const ms_program_view *p)
{
    if (r->kind == MS_WK_SWAP_OUT || r->kind == MS_WK_SWAP_IN)
        return r->tensor == tensor;
    if (p == NULL || r->op >= p->n_ops)
        return false;
    const ms_op *op = &p->ops[r->op];
    for (uint32_t i = 0; i < op->n_inputs; i++)
        if (op->inputs[i] == tensor)
            return true;
    for (uint32_t i = 0; i < op->n_outputs; i++)
        if (op->outputs[i] == tensor)
            return true;
    return false;
}

static bool allocates(int action)
{
    return action == MS_AA_ALLOC || action == MS_AA_SEGMENT_ALLOC || action == MS_AA_SEGMENT_MAP;
}

static int64_t device_time(const op_index *oi, const ms_mem_row *m, const ms_program_view *p)
{
    size_t lo, hi;
    group_of(oi, m->step, m->device, &lo, &hi);
    if (lo == hi)
        return -1;
    if (allocates(m->action)) {
        size_t k = first_issued(oi, lo, hi, m->time_ns, false);
        if (k < hi)
            return op_at(oi, k)->start_ns;
        int64_t end = 0;
        for (size_t j = lo; j < hi; j++)
            end = op_at(oi, j)->end_ns > end ? op_at(oi, j)->end_ns : end;
        return end;
    }
    /* Work issued strictly before: an op issued at the free's own host time
     * came after it (the free happens after its last use was launched, and
     * a launch takes host time). */
    size_t k = first_issued(oi, lo, hi, m->time_ns - 1, true);
    if (k == lo)
        return 0;
    if (m->tensor != UINT32_MAX)
        for (size_t j = k, seen = 0; j > lo && seen < TOUCH_LOOKBACK; j--, seen++)
            if (touches(op_at(oi, j - 1), m->tensor, p))
                return op_at(oi, j - 1)->end_ns;
    return op_at(oi, k - 1)->end_ns;
}

ms_status rep_mem_device_times(const ms_run_record *rec, const ms_program_view *programs,
                               size_t n_programs, int64_t **out)
{
    if (rec == NULL || out == NULL)
        return MS_EINVAL;
    *out = NULL;
    size_t n = ms_record_n_mem(rec);
    if (n == 0)
        return MS_OK;
    op_index oi;
    if (op_index_build(rec, &oi) != MS_OK)
        return MS_ENOMEM;
    int64_t *t = malloc(n * sizeof *t);
    if (t == NULL) {
        free(oi.keys);
        return MS_ENOMEM;
    }
    for (size_t i = 0; i < n; i++) {
        const ms_mem_row *m = ms_record_mem(rec, i);
        const ms_program_view *p =
            programs != NULL && m->device >= 0 && (size_t)m->device < n_programs
                ? &programs[m->device]
                : NULL;
        t[i] = m->step < 0 ? -1 : device_time(&oi, m, p);
    }
    free(oi.keys);
    *out = t;
    return MS_OK;
}

/* ---- the series ------------------------------------------------------- */

/* The state a memory row carries, as signed sums (a reordered series may
 * pass through a free before the allocation it undoes only by rounding of
 * the rule above; sums never wrap and are clamped at zero when written). */
typedef struct mem_state {
    int64_t v[3 + MS_TK_COUNT];
} mem_state;

static mem_state state_of(const ms_mem_row *r)
{
    mem_state s = {{(int64_t)r->allocated, (int64_t)r->reserved, (int64_t)r->active}};
    for (int k = 0; k < MS_TK_COUNT; k++)
        s.v[3 + k] = (int64_t)r->by_kind[k];
    return s;
}

static void put_state(ms_mem_row *r, const mem_state *s)
{
    uint64_t u[3 + MS_TK_COUNT];
    for (int k = 0; k < 3 + MS_TK_COUNT; k++)
        u[k] = s->v[k] > 0 ? (uint64_t)s->v[k] : 0;
    r->allocated = u[0];
    r->reserved = u[1];
    r->active = u[2];
    for (int k = 0; k < MS_TK_COUNT; k++)
        r->by_kind[k] = u[3 + k];
}

/* A memory row of the series with its record index (the tie-break). */
typedef struct timed {
    int step, device;
    int64_t t;
    size_t i;
} timed;

static int cmp_timed(const void *a, const void *b)
{
    const timed *x = a, *y = b;
    if (x->step != y->step)
        return x->step < y->step ? -1 : 1;
    if (x->device != y->device)
        return x->device < y->device ? -1 : 1;
    if (x->t != y->t)
        return x->t < y->t ? -1 : 1;
    return x->i < y->i ? -1 : x->i > y->i;
}

/* For each row, the state just before it on its device (record order). */
static ms_status states_before(const ms_run_record *rec, mem_state *before)
{
    size_t n = ms_record_n_mem(rec);
    mem_state *last = NULL;
    bool *seen = NULL;
    size_t n_dev = 0;
    for (size_t i = 0; i < n; i++) {
        int dev = ms_record_mem(rec, i)->device;
        if (dev >= 0 && (size_t)dev + 1 > n_dev)
            n_dev = (size_t)dev + 1;
    }
    last = calloc(n_dev + 1, sizeof *last);
    seen = calloc(n_dev + 1, sizeof *seen);
    if (last == NULL || seen == NULL) {
        free(last);
        free(seen);
        return MS_ENOMEM;
    }
    for (size_t i = 0; i < n; i++) {
        const ms_mem_row *m = ms_record_mem(rec, i);
        size_t d = m->device >= 0 ? (size_t)m->device : n_dev;
        if (!seen[d] && m->device >= 0 && rep_record_carry(rec, m->device) != NULL)
            last[d] = state_of(rep_record_carry(rec, m->device));
        seen[d] = true;
        before[i] = last[d];
        last[d] = state_of(m);
    }
    free(last);
    free(seen);
    return MS_OK;
}

static ms_status device_series(const ms_run_record *rec, const int64_t *times, int step,
                               rep_mem_series *out)
{
    size_t n = ms_record_n_mem(rec);
    mem_state *before = malloc((n ? n : 1) * sizeof *before);
    timed *order = malloc((n ? n : 1) * sizeof *order);
    out->rows = malloc((n ? n : 1) * sizeof *out->rows);
    ms_status st = before && order && out->rows ? states_before(rec, before) : MS_ENOMEM;
    size_t m = 0;
    for (size_t i = 0; st == MS_OK && i < n; i++) {
        const ms_mem_row *r = ms_record_mem(rec, i);
        if (r->step >= 0 && times[i] >= 0 && (step < 0 || r->step == step))
            order[m++] = (timed){r->step, r->device, times[i], i};
    }
    if (st == MS_OK)
        qsort(order, m, sizeof *order, cmp_timed);
    /* Each group starts from the state before its first row in record
     * order and adds each row's own change in time order. */
    mem_state cur = {{0}};
    for (size_t k = 0; st == MS_OK && k < m; k++) {
        if (k == 0 || order[k].step != order[k - 1].step ||
            order[k].device != order[k - 1].device) {
            size_t first = order[k].i;
            for (size_t j = k;
                 j < m && order[j].step == order[k].step && order[j].device == order[k].device; j++)
                first = order[j].i < first ? order[j].i : first;
            cur = before[first];
        }
        size_t i = order[k].i;
        mem_state now = state_of(ms_record_mem(rec, i));
        for (int f = 0; f < 3 + MS_TK_COUNT; f++)
            cur.v[f] += now.v[f] - before[i].v[f];
        out->rows[out->n] = *ms_record_mem(rec, i);
        out->rows[out->n].time_ns = order[k].t;
        put_state(&out->rows[out->n], &cur);
        out->n++;
    }
    free(before);
    free(order);
    return st;
}

static ms_status host_series(const ms_run_record *rec, int step, rep_mem_series *out)
{
    size_t n = ms_record_n_mem(rec);
    timed *order = malloc((n ? n : 1) * sizeof *order);
    out->rows = malloc((n ? n : 1) * sizeof *out->rows);
    if (order == NULL || out->rows == NULL) {
        free(order);
        return MS_ENOMEM;
    }
    size_t m = 0;
    for (size_t i = 0; i < n; i++) {
        const ms_mem_row *r = ms_record_mem(rec, i);
        if (r->step >= 0 && (step < 0 || r->step == step))
            order[m++] = (timed){r->step, r->device, r->time_ns, i};
    }
    qsort(order, m, sizeof *order, cmp_timed);
    for (size_t k = 0; k < m; k++)
        out->rows[out->n++] = *ms_record_mem(rec, order[k].i);
    free(order);
    return MS_OK;
}

ms_status rep_mem_series_build(const ms_run_record *rec, const int64_t *device_times,
                               ms_memory_clock clock, int step, rep_mem_series *out)
{
    if (rec == NULL || out == NULL)
        return MS_EINVAL;
    memset(out, 0, sizeof *out);
    if (ms_record_n_mem(rec) == 0)
        return MS_OK;
    ms_status st;
    if (clock == MS_CLOCK_HOST)
        st = host_series(rec, step, out);
    else if (device_times == NULL)
        st = MS_EINVAL;
    else
        st = device_series(rec, device_times, step, out);
    if (st != MS_OK)
        rep_mem_series_free(out);
    return st;
}

void rep_mem_series_free(rep_mem_series *s)
{
    if (s == NULL)
        return;
    free(s->rows);
    s->rows = NULL;
    s->n = 0;
}
