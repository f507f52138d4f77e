/* The facts every consumer of a program needs (the executor to place swaps
 * and recomputes, the policy host to show and check decisions), derived
 * once per program: last forward and first backward reader of each tensor,
 * saved-for-backward and input bytes of each segment.  The derivation also
 * checks the program's ids and ranges, since a view may be made by hand
 * (tests, other front ends); errors name the element and the field. */
#include "memsim/workload.h"

#include <stdlib.h>
#include <string.h>


static ms_status check_ids(const uint32_t *ids, uint32_t n, uint32_t limit, const char *what,
                           uint32_t owner, const char *field, const char *target, ms_diag *d)
{
    if (n > 0 && ids == NULL)
        return ms_diag_set(d, MS_EINVAL, "program: %s %u: %s is NULL with %u entries", what,
                           owner, field, n);
    for (uint32_t i = 0; i < n; i++)
        if (ids[i] >= limit)
            return ms_diag_set(d, MS_EINVAL,
                               "program: %s %u: %s[%u] = %u is not a %s id (%u %ss)", what,
                               owner, field, i, ids[i], target, limit, target);
    return MS_OK;
}

static ms_status check_ops(const ms_program_view *pv, ms_diag *d)
{
    for (uint32_t i = 0; i < pv->n_ops; i++) {
        const ms_op *op = &pv->ops[i];
        if (op->id != i)
            return ms_diag_set(d, MS_EINVAL, "program: op at index %u has id %u", i, op->id);
        ms_status st = check_ids(op->inputs, op->n_inputs, pv->n_tensors, "op", i, "inputs",
                                 "tensor", d);
        if (st == MS_OK)
            st = check_ids(op->outputs, op->n_outputs, pv->n_tensors, "op", i, "outputs",
                           "tensor", d);
        if (st != MS_OK)
            return st;
        if (op->segment != MS_NONE && (op->segment < 0 || (uint32_t)op->segment >= pv->n_segments))
            return ms_diag_set(d, MS_EINVAL, "program: op %u: segment %d does not exist", i,
                               op->segment);
    }
    return MS_OK;
}

static ms_status check_tensors(const ms_program_view *pv, ms_diag *d)
{
    for (uint32_t i = 0; i < pv->n_tensors; i++) {
        const ms_tensor *t = &pv->tensors[i];
        if (t->id != i)
            return ms_diag_set(d, MS_EINVAL, "program: tensor at index %u has id %u", i, t->id);
        if (t->producer != MS_NONE && (t->producer < 0 || (uint32_t)t->producer >= pv->n_ops))
            return ms_diag_set(d, MS_EINVAL, "program: tensor %u: producer %d is not an op", i,
                               t->producer);
        ms_status st = check_ids(t->uses, t->n_uses, pv->n_ops, "tensor", i, "uses", "op", d);
        if (st != MS_OK)
            return st;
        for (uint32_t u = 1; u < t->n_uses; u++)
            if (t->uses[u] < t->uses[u - 1])
                return ms_diag_set(d, MS_EINVAL, "program: tensor %u: uses are not ascending "
                                   "(uses[%u] = %u after %u)", i, u, t->uses[u], t->uses[u - 1]);
    }
    return MS_OK;
}

static ms_status check_segments(const ms_program_view *pv, ms_diag *d)
{
    for (uint32_t i = 0; i < pv->n_segments; i++) {
        const ms_segment *s = &pv->segments[i];
        if (s->id != i)
            return ms_diag_set(d, MS_EINVAL, "program: segment at index %u has id %u", i, s->id);
        if (s->first_op > s->last_op || s->last_op >= pv->n_ops ||
            s->first_backward_op >= pv->n_ops)
            return ms_diag_set(d, MS_EINVAL, "program: segment %u: ops %u..%u, first backward "
                               "op %u: outside the program's %u ops or reversed", i, s->first_op,
                               s->last_op, s->first_backward_op, pv->n_ops);
        if (s->parent != MS_NONE && (s->parent < 0 || (uint32_t)s->parent >= pv->n_segments))
            return ms_diag_set(d, MS_EINVAL, "program: segment %u: parent %d does not exist", i,
                               s->parent);
        ms_status st = check_ids(s->inputs, s->n_inputs, pv->n_tensors, "segment", i, "inputs",
                                 "tensor", d);
        if (st != MS_OK)
            return st;
    }
    return MS_OK;
}

static ms_status check_program(const ms_program_view *pv, ms_diag *d)
{
    if ((pv->n_ops > 0 && pv->ops == NULL) || (pv->n_tensors > 0 && pv->tensors == NULL) ||
        (pv->n_segments > 0 && pv->segments == NULL))
        return ms_diag_set(d, MS_EINVAL, "program: an array is NULL with a non-zero count");
    /* Op ids travel through Lua integers and int32 decision fields. */
    if (pv->n_ops > INT32_MAX || pv->n_tensors > INT32_MAX || pv->n_segments > INT32_MAX)
        return ms_diag_set(d, MS_ERANGE, "program: more than %d ops, tensors or segments",
                           INT32_MAX);
    ms_status st = check_ops(pv, d);
    if (st == MS_OK)
        st = check_tensors(pv, d);
    if (st == MS_OK)
        st = check_segments(pv, d);
    return st;
}

/* ---- the checks again, fused with the derivation ----
 *
 * Every run derives the facts of each stage's program (50k ops and more),
 * and check_program's walk (an out-of-line call per id list, carrying its
 * message arguments) followed by separate derivation walks cost two thirds
 * more than this: one pass per array that checks the same conditions
 * without formatting anything and derives the facts on the way.  At the
 * first problem it gives up and check_program names it, so a bad program
 * reports exactly what it did before. */

static inline bool ids_below(const uint32_t *ids, uint32_t n, uint32_t limit)
{
    if (n > 0 && ids == NULL)
        return false;
    bool bad = false;
    for (uint32_t i = 0; i < n; i++)
        bad |= ids[i] >= limit;
    return !bad;
}

static bool ops_ok(const ms_program_view *pv)
{
    for (uint32_t i = 0; i < pv->n_ops; i++) {
        const ms_op *op = &pv->ops[i];
        if (op->id != i || !ids_below(op->inputs, op->n_inputs, pv->n_tensors) ||
            !ids_below(op->outputs, op->n_outputs, pv->n_tensors))
            return false;
        if (op->segment != MS_NONE && (op->segment < 0 || (uint32_t)op->segment >= pv->n_segments))
            return false;
    }
    return true;
}

/* Per tensor: the last forward and first backward reader, checking that its
 * uses are op ids in ascending order on the way; the saved bytes each op
 * produces go into prefix[op + 1] (see derive_segments). */
static bool derive_tensors(const ms_program_view *pv, ms_program_facts *dv, uint64_t *prefix)
{
    for (uint32_t i = 0; i < pv->n_tensors; i++) {
        const ms_tensor *t = &pv->tensors[i];
        if (t->id != i || (t->producer != MS_NONE &&
                           (t->producer < 0 || (uint32_t)t->producer >= pv->n_ops)))
            return false;
        if (t->n_uses > 0 && t->uses == NULL)
            return false;
        int32_t lfu = MS_NONE, fbu = MS_NONE;
        uint32_t prev = 0;
        for (uint32_t u = 0; u < t->n_uses; u++) {
            uint32_t o = t->uses[u];
            if (o >= pv->n_ops || o < prev)
                return false;
            prev = o;
            ms_phase ph = pv->ops[o].phase;
            if (ph == MS_PHASE_FORWARD)
                lfu = (int32_t)o;
            else if (ph == MS_PHASE_BACKWARD && fbu == MS_NONE)
                fbu = (int32_t)o;
        }
        dv->last_forward_use[i] = lfu;
        dv->first_backward_use[i] = fbu;
        if (t->saved_for_backward && t->producer != MS_NONE)
            prefix[t->producer + 1] += t->bytes;
    }
    return true;
}

/* Saved bytes of a segment are those of the saved-for-backward tensors whose
 * producer lies in first_op..last_op (what recomputing it drops); a prefix
 * sum over ops makes every segment O(1), nested ones included. */
static bool derive_segments(const ms_program_view *pv, ms_program_facts *dv, uint64_t *prefix)
{
    for (uint32_t o = 0; o < pv->n_ops; o++)
        prefix[o + 1] += prefix[o];
    for (uint32_t i = 0; i < pv->n_segments; i++) {
        const ms_segment *s = &pv->segments[i];
        if (s->id != i || s->first_op > s->last_op || s->last_op >= pv->n_ops ||
            s->first_backward_op >= pv->n_ops ||
            (s->parent != MS_NONE && (s->parent < 0 || (uint32_t)s->parent >= pv->n_segments)) ||
            !ids_below(s->inputs, s->n_inputs, pv->n_tensors))
            return false;
        dv->saved_bytes[i] = prefix[s->last_op + 1] - prefix[s->first_op];
        uint64_t in = 0;
        for (uint32_t k = 0; k < s->n_inputs; k++)
            in += pv->tensors[s->inputs[k]].bytes;
        dv->input_bytes[i] = in;
    }
    return true;
}

/* The array pointers and counts, checked before anything reads the arrays
 * (the first checks of check_program). */
static bool shape_ok(const ms_program_view *pv)
{
    return !((pv->n_ops > 0 && pv->ops == NULL) || (pv->n_tensors > 0 && pv->tensors == NULL) ||
             (pv->n_segments > 0 && pv->segments == NULL)) &&
           pv->n_ops <= INT32_MAX && pv->n_tensors <= INT32_MAX && pv->n_segments <= INT32_MAX;
}

static bool derive_all(const ms_program_view *pv, ms_program_facts *dv, uint64_t *prefix)
{
    return ops_ok(pv) && derive_tensors(pv, dv, prefix) && derive_segments(pv, dv, prefix);
}

/* A problem the fused pass found, named by check_program; should the two
 * ever disagree, the program is still refused rather than half derived. */
static ms_status report_bad_program(const ms_program_view *pv, ms_diag *d)
{
    ms_status st = check_program(pv, d);
    if (st != MS_OK)
        return st;
    return ms_diag_set(d, MS_EINVAL, "program: inconsistent (the fused and the "
                       "named checks disagree; please report)");
}

ms_status ms_program_facts_derive(const ms_program_view *pv, ms_program_facts *dv, ms_diag *d)
{
    if (pv == NULL || dv == NULL)
        return ms_diag_set(d, MS_EINVAL, "ms_program_facts_derive: NULL argument");
    memset(dv, 0, sizeof *dv);
    if (!shape_ok(pv))
        return check_program(pv, d);
    size_t nt = pv->n_tensors ? pv->n_tensors : 1, ns = pv->n_segments ? pv->n_segments : 1;
    dv->last_forward_use = malloc(nt * sizeof(int32_t));
    dv->first_backward_use = malloc(nt * sizeof(int32_t));
    dv->saved_bytes = malloc(ns * sizeof(uint64_t));
    dv->input_bytes = malloc(ns * sizeof(uint64_t));
    uint64_t *prefix = calloc((size_t)pv->n_ops + 1, sizeof *prefix);
    ms_status st = MS_OK;
    if (dv->last_forward_use == NULL || dv->first_backward_use == NULL ||
        dv->saved_bytes == NULL || dv->input_bytes == NULL || prefix == NULL) {
        /* A bad program is named before the lack of memory, as when the
         * checks ran before anything was allocated. */
        st = check_program(pv, d);
        if (st == MS_OK)
            st = ms_diag_set(d, MS_ENOMEM, "out of memory deriving the facts of a program");
    } else if (!derive_all(pv, dv, prefix)) {
        st = report_bad_program(pv, d);
    }
    free(prefix);
    if (st != MS_OK)
        ms_program_facts_free(dv);
    return st;
}

ms_status ms_program_facts_free(ms_program_facts *dv)
{
    if (dv == NULL)
        return MS_EINVAL;
    free(dv->last_forward_use);
    free(dv->first_backward_use);
    free(dv->saved_bytes);
    free(dv->input_bytes);
    memset(dv, 0, sizeof *dv);
    return MS_OK;
}
