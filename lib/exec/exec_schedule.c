/* Turning a policy's plan into the executor's per-step action list.
 *
 * The rules applied here are the MindFormers/MindSpeed ones users expect:
 * recompute wins over swap on the same tensor (seed 003, "混合重计算" rule 1),
 * keep wins over both, and a tensor is swapped out after its last forward use
 * and back before its first backward use unless the decision says otherwise. */
#include "exec_actions.h"
#include "lib/base/growable.h"

#include <stdlib.h>
#include <string.h>

static ms_status push(ms_schedule *s, uint32_t op, ms_act_when when, ms_act_kind kind,
                      uint32_t arg)
{
    if (!MS_GROW(s->acts, s->n, s->cap, 1024))
        return MS_ENOMEM;
    s->acts[s->n++] = (ms_action){.op = op, .when = (uint8_t)when, .kind = (uint8_t)kind,
                                  .arg = arg};
    return MS_OK;
}

static int cmp_action(const void *pa, const void *pb)
{
    const ms_action *a = pa, *b = pb;
    if (a->op != b->op)
        return a->op < b->op ? -1 : 1;
    if (a->when != b->when)
        return a->when < b->when ? -1 : 1;
    if (a->kind != b->kind)
        return a->kind < b->kind ? -1 : 1;
    if (a->arg != b->arg)
        return a->arg < b->arg ? -1 : 1;
    return 0;
}

/* Into cmp_action order.  A step has a few actions per op and a 70B stage
 * ~10^5 of them, so a counting sort by op (stable, linear) followed by an
 * insertion sort of each op's handful replaces a qsort that cost as much as
 * simulating the step's allocations. */
static ms_status sort_actions(ms_schedule *s, uint32_t n_ops)
{
    uint32_t *start = calloc((size_t)n_ops + 3, sizeof *start);
    ms_action *out = malloc((s->n ? s->n : 1) * sizeof *out);
    if (start == NULL || out == NULL) {
        free(start);
        free(out);
        return MS_ENOMEM;
    }
    for (uint32_t i = 0; i < s->n; i++) {
        uint32_t op = s->acts[i].op < n_ops ? s->acts[i].op : n_ops; /* past the end: last */
        start[op + 2]++;
    }
    for (uint32_t k = 2; k < n_ops + 2; k++)
        start[k] += start[k - 1];
    for (uint32_t i = 0; i < s->n; i++) {
        uint32_t op = s->acts[i].op < n_ops ? s->acts[i].op : n_ops;
        out[start[op + 1]++] = s->acts[i];
    }
    for (uint32_t i = 1; i < s->n; i++) {
        ms_action a = out[i];
        uint32_t j = i;
        for (; j > 0 && cmp_action(&out[j - 1], &a) > 0; j--)
            out[j] = out[j - 1];
        out[j] = a;
    }
    free(start);
    free(s->acts);
    s->acts = out;
    s->cap = s->n ? s->n : 1;
    return MS_OK;
}

/* A tensor a recompute of s may drop: made and consumed inside s in forward,
 * needed in backward only by s's own layer and micro-batch.  What s hands on
 * to later forward ops is its output: Megatron's checkpoint returns it and
 * the consumer saves it, so it stays (the attention core's context layer
 * under selective recompute; a layer's output, the next layer's checkpoint,
 * under full recompute). */
/* op is inside a segment that is recomputed (itself or an ancestor). */
static bool in_recomputed(const ms_program_view *p, const ms_schedule *s, const ms_op *op)
{
    for (int32_t g = op->segment; g != MS_NONE; g = p->segments[g].parent)
        if (s->seg_recompute[g])
            return true;
    return false;
}

static bool droppable(const ms_program_view *p, const ms_schedule *sched, const ms_segment *s,
                      const ms_tensor *t)
{
    if (t->persistent || t->producer == MS_NONE || !t->saved_for_backward)
        return false;
    if ((uint32_t)t->producer < s->first_op || (uint32_t)t->producer > s->last_op)
        return false;
    bool any_backward = false;
    for (uint32_t u = 0; u < t->n_uses; u++) {
        const ms_op *op = &p->ops[t->uses[u]];
        bool outside = t->uses[u] < s->first_op || t->uses[u] > s->last_op;
        /* A reader outside that is re-issued itself would need the tensor
         * before this segment's replay brings it back. */
        if (op->phase == MS_PHASE_FORWARD && outside &&
            (!s->op_level || in_recomputed(p, sched, op)))
            return false;
        if (op->phase != MS_PHASE_BACKWARD)
            continue;
        any_backward = true;
        if (op->layer != s->layer || op->micro_batch != s->micro_batch)
            return false;
    }
    return any_backward;
}

static ms_status mark_recompute(const ms_program_view *p, const ms_plan *plan, ms_schedule *s,
                                ms_diag *d)
{
    for (uint32_t i = 0; plan && i < plan->n; i++) {
        const ms_decision *dec = &plan->items[i];
        if (dec->kind != MS_DEC_RECOMPUTE)
            continue;
        if (dec->segment >= p->n_segments)
            return ms_diag_set(d, MS_EINVAL, "plan: recompute of segment %u, but the program has %u",
                               dec->segment, p->n_segments);
        s->seg_recompute[dec->segment] = 1;
    }
    /* A module (or op) inside a recomputed layer or module is recomputed
     * with it.  Parents come before their children, so one pass in id order
     * sees every ancestor's final mark: covered[] is "an ancestor is
     * recomputed" (seg_at serves as scratch; emit_recompute_actions sets it). */
    int32_t *covered = s->seg_at;
    for (uint32_t i = 0; i < p->n_segments; i++) {
        int32_t parent = p->segments[i].parent;
        covered[i] = parent != MS_NONE && (s->seg_recompute[parent] || covered[parent]);
        if (covered[i])
            s->seg_recompute[i] = 0;
    }
    for (uint32_t i = 0; i < p->n_segments; i++) {
        if (!s->seg_recompute[i])
            continue;
        const ms_segment *seg = &p->segments[i];
        for (uint32_t o = seg->first_op; o <= seg->last_op; o++) {
            const ms_op *op = &p->ops[o];
            for (uint32_t k = 0; k < op->n_outputs; k++) {
                const ms_tensor *t = &p->tensors[op->outputs[k]];
                if (droppable(p, s, seg, t)) {
                    s->tensors[t->id].dropped = 1;
                    s->tensors[t->id].segment = (int32_t)i;
                }
            }
        }
    }
    return MS_OK;
}

static bool read_by_recomputed(const ms_program_view *p, const ms_schedule *s, const ms_tensor *t)
{
    for (uint32_t u = 0; u < t->n_uses; u++) {
        const ms_op *op = &p->ops[t->uses[u]];
        if (op->phase == MS_PHASE_FORWARD && in_recomputed(p, s, op))
            return true;
    }
    return false;
}

static ms_status resolve_swap(const ms_program_view *p, const ms_decision *dec, ms_schedule *s,
                              ms_diag *d)
{
    if (dec->tensor >= p->n_tensors)
        return ms_diag_set(d, MS_EINVAL, "plan: swap of tensor %u, but the program has %u",
                           dec->tensor, p->n_tensors);
    const ms_tensor *t = &p->tensors[dec->tensor];
    ms_tensor_plan *tp = &s->tensors[t->id];
    if (MS_TENSOR_IS_MAIN_GRAD(t))
        return ms_diag_set(d, MS_EINVAL,
                           "plan: swap of tensor %u (%s): a main grad is a view into the "
                           "contiguous grad buffer; copying it out would free nothing",
                           t->id, t->name);
    /* Recompute (and keep) win over swap on the same tensor; so does a
     * recompute of a forward reader: its replay reads the tensor before a
     * swap-in for the backward would bring it back (seed 003: "swapping an
     * op whose consumer is recomputed has no effect").  The tensor is
     * recorded as swap_ignored (tensors.csv), never dropped silently. */
    if (tp->dropped || tp->kept || read_by_recomputed(p, s, t)) {
        s->ignored_swaps++;
        tp->swap_ignored = 1;
        return MS_OK;
    }
    /* A second swap of a tensor (the scenario's declared swap after the
     * policy's): the first decision stands, as ctx:swap refuses a policy's
     * own second swap of a tensor. */
    if (tp->swap) {
        s->ignored_swaps++;
        return MS_OK;
    }
    int32_t out = dec->out_after != MS_NONE ? dec->out_after : s->facts->last_forward_use[t->id];
    int32_t in = dec->in_before != MS_NONE ? dec->in_before : s->facts->first_backward_use[t->id];
    if (out == MS_NONE && !t->persistent)
        out = t->producer;
    if (out == MS_NONE || in == MS_NONE)
        return ms_diag_set(d, MS_EINVAL,
                           "plan: swap of tensor %u (%s) needs explicit out_after and in_before "
                           "(it has no forward or no backward use)", t->id, t->name);
    if (out < 0 || in < 0 || (uint32_t)out >= p->n_ops || (uint32_t)in >= p->n_ops || out >= in)
        return ms_diag_set(d, MS_EINVAL,
                           "plan: swap of tensor %u (%s): out_after %d must precede in_before %d "
                           "within 0..%u", t->id, t->name, out, in, p->n_ops - 1);
    if (t->producer != MS_NONE && out < t->producer)
        return ms_diag_set(d, MS_EINVAL,
                           "plan: swap of tensor %u (%s): out_after %d is before its producer %d",
                           t->id, t->name, out, t->producer);
    for (uint32_t u = 0; u < t->n_uses; u++)
        if ((int32_t)t->uses[u] > out && (int32_t)t->uses[u] < in)
            return ms_diag_set(d, MS_EINVAL,
                               "plan: swap of tensor %u (%s): op %u reads it while it is on the "
                               "host (out after op %d, back before op %d)",
                               t->id, t->name, t->uses[u], out, in);
    int32_t prefetch = dec->prefetch < 0 ? 1 : dec->prefetch;
    int32_t at = in - prefetch;
    if (at <= out)
        at = out + 1; /* cannot come back before it went out */
    tp->swap = 1;
    tp->out_after = out;
    tp->in_before = in;
    tp->in_at = at;
    /* MindFormers' backward_prefetch also sets how late in forward the
     * block is released (seed 003, default_prefetch): as many ops after the
     * swap-out, and before the swap-in. */
    int32_t release = out + prefetch;
    tp->release_at = release < at ? release : at - 1;
    return MS_OK;
}

static ms_status emit_tensor_actions(const ms_program_view *p, bool release_after_copy,
                                     ms_schedule *s)
{
    ms_status st = MS_OK;
    for (uint32_t i = 0; i < p->n_tensors && st == MS_OK; i++) {
        const ms_tensor *t = &p->tensors[i];
        const ms_tensor_plan *tp = &s->tensors[i];
        if (tp->swap) {
            st = push(s, (uint32_t)tp->out_after, MS_ACT_AFTER, MS_ACT_SWAP_OUT, i);
            if (st == MS_OK)
                st = push(s, (uint32_t)tp->in_at, MS_ACT_BEFORE, MS_ACT_SWAP_IN, i);
            if (st == MS_OK && release_after_copy)
                st = push(s, (uint32_t)tp->release_at, MS_ACT_AFTER, MS_ACT_RELEASE, i);
        }
        if (t->persistent || st != MS_OK)
            continue;
        if (t->producer == MS_NONE && t->n_uses == 0)
            continue;
        uint32_t last = t->n_uses ? t->uses[t->n_uses - 1] : (uint32_t)t->producer;
        if (t->producer != MS_NONE && (uint32_t)t->producer > last)
            last = (uint32_t)t->producer;
        if (tp->dropped) {
            int32_t fwd = s->facts->last_forward_use[t->id];
            uint32_t drop_at = fwd != MS_NONE ? (uint32_t)fwd : (uint32_t)t->producer;
            st = push(s, drop_at, MS_ACT_AFTER, MS_ACT_FREE, i);
        }
        if (st == MS_OK)
            st = push(s, last, MS_ACT_AFTER, MS_ACT_FREE, i);
    }
    return st;
}

/* Recompute a segment just before the first backward op that reads what it
 * dropped: the latest point that still has everything ready in time. */
static ms_status emit_recompute_actions(const ms_program_view *p, ms_schedule *s)
{
    /* One pass over the dropped tensors: per-segment scans of every tensor
     * cost minutes on a 70B pipeline with hundreds of micro-batches. */
    for (uint32_t i = 0; i < p->n_segments; i++)
        s->seg_at[i] = MS_NONE;
    for (uint32_t t = 0; t < p->n_tensors; t++) {
        if (!s->tensors[t].dropped)
            continue;
        int32_t seg = s->tensors[t].segment;
        int32_t b = s->facts->first_backward_use[t];
        if (b != MS_NONE && (s->seg_at[seg] == MS_NONE || b < s->seg_at[seg]))
            s->seg_at[seg] = b;
    }
    for (uint32_t i = 0; i < p->n_segments; i++) {
        /* Nothing dropped: recomputing would only cost time. */
        if (!s->seg_recompute[i] || s->seg_at[i] == MS_NONE)
            continue;
        ms_status st = push(s, (uint32_t)s->seg_at[i], MS_ACT_BEFORE, MS_ACT_RECOMPUTE, i);
        if (st != MS_OK)
            return st;
    }
    return MS_OK;
}

ms_status exec_schedule_build(const ms_program_view *p, const ms_program_facts *facts,
                              const ms_plan *plan, bool release_after_copy, ms_schedule *s,
                              ms_diag *d)
{
    if (p == NULL || facts == NULL || s == NULL)
        return MS_EINVAL;
    exec_schedule_free(s);
    s->facts = facts;
    s->tensors = calloc(p->n_tensors ? p->n_tensors : 1, sizeof *s->tensors);
    s->seg_recompute = calloc(p->n_segments ? p->n_segments : 1, 1);
    s->seg_at = calloc(p->n_segments ? p->n_segments : 1, sizeof *s->seg_at);
    if (s->tensors == NULL || s->seg_recompute == NULL || s->seg_at == NULL) {
        exec_schedule_free(s);
        return MS_ENOMEM;
    }
    for (uint32_t i = 0; i < p->n_tensors; i++) {
        s->tensors[i].segment = MS_NONE;
        s->tensors[i].release_at = MS_NONE;
    }
    ms_status st = mark_recompute(p, plan, s, d);
    for (uint32_t i = 0; st == MS_OK && plan && i < plan->n; i++) {
        const ms_decision *dec = &plan->items[i];
        if (dec->kind != MS_DEC_KEEP)
            continue;
        if (dec->tensor >= p->n_tensors) {
            st = ms_diag_set(d, MS_EINVAL, "plan: keep of tensor %u, but the program has %u",
                             dec->tensor, p->n_tensors);
            break;
        }
        s->tensors[dec->tensor].kept = 1;
        s->tensors[dec->tensor].dropped = 0;
        s->tensors[dec->tensor].swap = 0;
    }
    for (uint32_t i = 0; st == MS_OK && plan && i < plan->n; i++)
        if (plan->items[i].kind == MS_DEC_SWAP)
            st = resolve_swap(p, &plan->items[i], s, d);
    if (st == MS_OK)
        st = emit_tensor_actions(p, release_after_copy, s);
    if (st == MS_OK)
        st = emit_recompute_actions(p, s);
    if (st != MS_OK) {
        exec_schedule_free(s);
        return st;
    }
    return sort_actions(s, p->n_ops);
}

ms_status exec_schedule_free(ms_schedule *s)
{
    if (s == NULL)
        return MS_EINVAL;
    free(s->acts);
    free(s->tensors);
    free(s->seg_recompute);
    free(s->seg_at);
    memset(s, 0, sizeof *s);
    return MS_OK;
}
