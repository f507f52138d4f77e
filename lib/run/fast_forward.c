/* Steady-state fast-forward between steps (issue 13).
 *
 * Every step ends with its devices synchronized, so a step boundary is a
 * quiet moment: nothing in flight, the engine's queue holding at most stale
 * wake-ups.  The simulation is deterministic and reads absolute time
 * nowhere, so when the state before step k (each stage's allocator, tensors
 * and tracked copies, the group's devices and host clocks, every time
 * relative to the clock: ms_state_sig) equals the state before step k-1 and
 * every stage's plan is the same, step k repeats step k-1 shifted by the time
 * between the two moments: its results and record rows are step k-1's, and
 * it leaves the same state shifted once more.  So the skip is exact, not an
 * estimate; `--no-fast-forward` simulates every step, and
 * tests/fast_forward.sh compares the two on every shipped scenario and
 * policy.  A policy that changes its plan, an OOM, a rescue, the data check
 * or a real device (which cannot say its state) simply simulates. */

#include "run_internal.h"

void run_ff_start(ms_run *r, bool enabled)
{
    r->ff = (run_ff){.enabled = enabled, .from = -1};
}

void run_ff_free(ms_run *r)
{
    ms_state_sig_free(&r->ff.sig);
}

static bool plans_repeat(const ms_run *r)
{
    for (int i = 0; i < r->n; i++)
        if (!ms_plan_same_decisions(&r->stages[i].plan, &r->stages[i].ff_plan))
            return false;
    return true;
}

/* The whole run's state: the group's, then each stage's executor; with
 * `compare`, written over the last one and compared with it as it goes,
 * and with `keep` false only compared (no later step will compare with it,
 * so the writing may stop at the first difference). */
static ms_status take_state(ms_run *r, ms_state_sig *sig, bool compare, bool keep,
                            int64_t *now_ns)
{
    if (compare && keep)
        ms_state_sig_rewrite(sig);
    else if (compare)
        ms_state_sig_check(sig);
    else
        ms_state_sig_reset(sig);
    ms_status st = ms_group_state_write(r->group, sig, now_ns);
    for (int i = 0; st == MS_OK && i < r->n; i++)
        st = ms_exec_state_write(r->stages[i].exec, sig);
    return st;
}

static void alloc_counts(const ms_stage *s, int64_t *retries, int64_t *ooms)
{
    ms_alloc_stats st = ms_alloc_get_stats(s->alloc);
    *retries = st.num_alloc_retries;
    *ooms = st.num_ooms;
}

/* The state just taken (f->sig) is the one before step `step`, about to be
 * simulated. */
static ms_status arm(ms_run *r, int step, int64_t now_ns)
{
    run_ff *f = &r->ff;
    f->before_ns = now_ns;
    f->from = step;
    f->armed = false; /* until the step ran cleanly (run_ff_after_step) */
    for (int i = 0; i < r->n; i++) {
        ms_stage *s = &r->stages[i];
        alloc_counts(s, &s->ff_retries_before, &s->ff_ooms_before);
        ms_status st = ms_plan_copy(&s->ff_plan, &s->plan);
        if (st != MS_OK)
            return st;
    }
    return MS_OK;
}

/* Step `from` ran from `before` to the state now: what its allocators
 * counted is what each repeat adds. */
static void start_repeating(ms_run *r, int64_t now_ns)
{
    run_ff *f = &r->ff;
    f->delta_ns = now_ns - f->before_ns;
    f->repeating = true;
    for (int i = 0; i < r->n; i++) {
        ms_stage *s = &r->stages[i];
        alloc_counts(s, &s->ff_retries, &s->ff_ooms);
        s->ff_retries -= s->ff_retries_before;
        s->ff_ooms -= s->ff_ooms_before;
    }
}

ms_status run_ff_check(ms_run *r, int step, bool *repeat, ms_diag *d)
{
    run_ff *f = &r->ff;
    *repeat = false;
    if (!f->enabled)
        return MS_OK;
    bool same_plans = plans_repeat(r);
    if (f->repeating && same_plans) {
        *repeat = true;
        return MS_OK;
    }
    f->repeating = false;
    /* Step 0's rows also hold the setup's allocations: it is never the
     * step repeated.  A state nothing will compare is not taken. */
    bool may_repeat = f->armed && same_plans && f->from >= 1 && f->from == step - 1;
    bool may_be_repeated = step >= 1 && step + 1 < r->sc->steps;
    if (!may_repeat && !may_be_repeated) {
        f->armed = false;
        return MS_OK;
    }
    int64_t now_ns = 0;
    ms_status st = take_state(r, &f->sig, may_repeat, may_be_repeated, &now_ns);
    if (st == MS_EMISMATCH) { /* a check (!may_be_repeated) found a difference */
        f->armed = false; /* and nothing after it will be compared */
        return MS_OK;
    }
    if (st == MS_EAGAIN || st == MS_EUNSUPPORTED) {
        f->armed = false; /* cannot tell: simulate */
        return MS_OK;
    }
    if (st != MS_OK)
        return ms_diag_set(d, st, "fast-forward: the state before step %d: %s", step,
                           ms_strerror(st));
    if (may_repeat && ms_state_sig_same_as_before(&f->sig)) {
        start_repeating(r, now_ns);
        *repeat = true;
        return MS_OK;
    }
    if ((st = arm(r, step, now_ns)) != MS_OK)
        return ms_diag_set(d, st, "fast-forward: keeping the plans of step %d: %s", step,
                           ms_strerror(st));
    return MS_OK;
}

void run_ff_after_step(ms_run *r, int step)
{
    run_ff *f = &r->ff;
    bool clean = f->enabled && f->from == step;
    for (int i = 0; clean && i < r->n; i++) {
        const ms_stage *s = &r->stages[i];
        clean = !s->cancelled && !s->res.oom && s->res.rescued.count == 0;
    }
    f->armed = clean;
}

ms_status run_ff_repeat(ms_run *r, int step, ms_diag *d)
{
    run_ff *f = &r->ff;
    ms_status st = ms_group_advance(r->group, f->delta_ns);
    if (st != MS_OK)
        return ms_diag_set(d, st, "fast-forward: moving the clocks to step %d: %s", step,
                           ms_strerror(st));
    for (int i = 0; i < r->n; i++) {
        ms_stage *s = &r->stages[i];
        s->step = step;
        s->cancelled = false;
        s->res.start_ns += f->delta_ns;
        s->res.end_ns += f->delta_ns;
        s->earlier_retries += s->ff_retries;
        s->earlier_ooms += s->ff_ooms;
    }
    if (r->record != NULL && (st = ms_record_repeat_step(r->record, step - 1, step)) != MS_OK)
        return ms_diag_set(d, st, "fast-forward: the record of step %d: %s", step, ms_strerror(st));
    r->notes.fast_forwarded_steps++;
    return MS_OK;
}
