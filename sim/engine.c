/* The discrete-event engine: an int64 ns clock and a binary min-heap of
 * (time, sequence) events.  The sequence number makes ties run in scheduling
 * order, so a run is a pure function of its inputs.  Events are stored by
 * value in one growable array: scheduling allocates only when the queue
 * outgrows its high-water mark, never per event in steady state. */
#include <stdlib.h>

#include "sim_private.h"
#include "lib/base/growable.h"

static inline bool ev_before(const ms_sim_event *a, const ms_sim_event *b)
{
    return a->t < b->t || (a->t == b->t && a->seq < b->seq);
}

static void sift_up(ms_sim_event *h, size_t i)
{
    ms_sim_event e = h[i];
    while (i > 0) {
        size_t p = (i - 1) / 2;
        if (!ev_before(&e, &h[p]))
            break;
        h[i] = h[p];
        i = p;
    }
    h[i] = e;
}

static void sift_down(ms_sim_event *h, size_t n, size_t i)
{
    ms_sim_event e = h[i];
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= n)
            break;
        if (c + 1 < n && ev_before(&h[c + 1], &h[c]))
            c++;
        if (!ev_before(&h[c], &e))
            break;
        h[i] = h[c];
        i = c;
    }
    h[i] = e;
}

ms_status sim_create(ms_sim **out)
{
    if (out == NULL)
        return MS_EINVAL;
    ms_sim *s = calloc(1, sizeof *s);
    if (s == NULL)
        return MS_ENOMEM;
    s->cap = 1024;
    s->heap = malloc(s->cap * sizeof *s->heap);
    if (s->heap == NULL) {
        free(s);
        return MS_ENOMEM;
    }
    *out = s;
    return MS_OK;
}

ms_status sim_destroy(ms_sim *sim)
{
    if (sim == NULL)
        return MS_EINVAL;
    /* A device or host still attached would be left pointing at freed
     * memory; refusing is safer than a use after free. */
    if (sim->att.n_hosts > 0 || sim->att.n_devs > 0)
        return MS_EINVAL;
    free(sim->att.devs);
    free(sim->att.mail);
    free(sim->att.active);
    free(sim->heap);
    free(sim);
    return MS_OK;
}

ms_status sim_now(const ms_sim *sim, int64_t *now_ns)
{
    if (sim == NULL || now_ns == NULL)
        return MS_EINVAL;
    *now_ns = sim->now;
    return MS_OK;
}

ms_status sim_schedule(ms_sim *sim, int64_t at_ns, ms_sim_fn fn, void *arg)
{
    if (sim == NULL || fn == NULL || at_ns < sim->now)
        return MS_EINVAL;
    if (!MS_GROW(sim->heap, sim->n, sim->cap, 1))
        return MS_ENOMEM;
    sim->heap[sim->n] = (ms_sim_event){at_ns, sim->next_seq++, fn, arg};
    sift_up(sim->heap, sim->n++);
    return MS_OK;
}

/* Remove the root: move the hole down along the smaller children to a
 * leaf, then let the last element rise from there (Floyd's bottom-up
 * deletion: about half the comparisons of a plain sift-down, since the last
 * element almost always belongs near the bottom). */
static void pop_root(ms_sim_event *h, size_t n)
{
    size_t i = 0;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= n)
            break;
        if (c + 1 < n && ev_before(&h[c + 1], &h[c]))
            c++;
        h[i] = h[c];
        i = c;
    }
    if (i != n) {
        h[i] = h[n];
        sift_up(h, i);
    }
}

void sim_step_one(ms_sim *sim)
{
    ms_sim_event e = sim->heap[0];
    if (--sim->n > 0)
        pop_root(sim->heap, sim->n);
    sim->now = e.t;
    sim->n_run++;
    e.fn(sim, e.arg);
}

ms_status sim_step(ms_sim *sim, bool *ran)
{
    if (sim == NULL || ran == NULL)
        return MS_EINVAL;
    *ran = sim->n > 0;
    if (*ran)
        sim_step_one(sim);
    return MS_OK;
}

ms_status sim_run_until(ms_sim *sim, int64_t until_ns)
{
    if (sim == NULL)
        return MS_EINVAL;
    while (sim->n > 0 && sim->heap[0].t <= until_ns)
        sim_step_one(sim);
    if (until_ns > sim->now)
        sim->now = until_ns;
    return MS_OK;
}

ms_status sim_run(ms_sim *sim)
{
    if (sim == NULL)
        return MS_EINVAL;
    while (sim->n > 0)
        sim_step_one(sim);
    return MS_OK;
}

ms_status sim_next_time(const ms_sim *sim, int64_t *t_ns, bool *any)
{
    if (sim == NULL || t_ns == NULL || any == NULL)
        return MS_EINVAL;
    *any = sim_peek(sim, t_ns);
    return MS_OK;
}

uint64_t sim_cancel_if(ms_sim *sim, ms_sim_cancel_pred pred, const void *ctx)
{
    size_t kept = 0;
    for (size_t i = 0; i < sim->n; i++) {
        if (!pred(sim->heap[i].fn, sim->heap[i].arg, ctx))
            sim->heap[kept++] = sim->heap[i];
    }
    uint64_t removed = sim->n - kept;
    sim->n = kept;
    /* Floyd's heap construction; (time, seq) keys are unique, so the pop
     * order of what remains is unchanged. */
    for (size_t i = kept / 2; i-- > 0;)
        sift_down(sim->heap, kept, i);
    return removed;
}

typedef struct fn_arg {
    ms_sim_fn fn;
    void *arg;
} fn_arg;

static bool same_fn_arg(ms_sim_fn fn, void *arg, const void *ctx)
{
    const fn_arg *fa = ctx;
    return fn == fa->fn && arg == fa->arg;
}

ms_status sim_cancel(ms_sim *sim, ms_sim_fn fn, void *arg, uint64_t *n_cancelled)
{
    if (sim == NULL || fn == NULL)
        return MS_EINVAL;
    fn_arg fa = {fn, arg};
    uint64_t n = sim_cancel_if(sim, same_fn_arg, &fa);
    if (n_cancelled != NULL)
        *n_cancelled = n;
    return MS_OK;
}

ms_status sim_stats(const ms_sim *sim, uint64_t *events_run, uint64_t *events_pending)
{
    if (sim == NULL)
        return MS_EINVAL;
    if (events_run != NULL)
        *events_run = sim->n_run;
    if (events_pending != NULL)
        *events_pending = sim->n;
    return MS_OK;
}
