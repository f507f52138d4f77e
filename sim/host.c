/* Host threads.  Each device is driven by one host thread with its own
 * virtual clock, which runs ahead of the device: async calls cost host time
 * and return; only blocking calls wait for device time.
 *
 * Several host threads may share one engine (pipeline stages in one run).
 * They are simulated one call at a time, so the engine must never get ahead
 * of a host that may still issue work: that work would have to start in the
 * engine's past.  A host therefore runs the engine only up to the smallest
 * clock of the other active hosts (conservative parallel discrete-event
 * simulation, Chandy & Misra 1979).  A host blocked in a wait it cannot finish
 * under that bound is parked: it issues nothing until its condition holds,
 * so it stops bounding the others, and it wakes (becomes active at the device
 * time its condition became true) as soon as the condition holds. */
#include <stdlib.h>

#include "device_model.h"
#include "lib/base/growable.h"
#include "sim_private.h"

typedef enum ms_host_state { MS_HOST_ACTIVE = 0, MS_HOST_PARKED, MS_HOST_IDLE } ms_host_state;

struct ms_simhost {
    ms_sim *sim;
    int64_t now;
    ms_host_state state;
    ms_simhost_cond cond; /* while parked */
    const void *cond_ctx;
    ms_simhost *prev, *next;
    ms_simdev *watch; /* what cond reads (sim_host_watch), or NULL */
    /* On the engine's list of hosts whose clock or parked state changed
     * since the scheduler last drained it (sim_hosts_drain_changes). */
    int tag;
    bool changed;
    ms_simhost *changed_next;
    ptrdiff_t heap_pos; /* in the active hosts' heap, or -1 */
};

/* ---- the active hosts by clock --------------------------------------- */
/* horizon() needs the smallest clock of the other active hosts, again after
 * every wake; with 64 pipeline stages, scanning every host for it was a
 * sixth of a GPT-1T step's instructions (bench/README.md).  A binary
 * min-heap of the active hosts answers from its root, or, when the root is
 * the asking host, from the root's two children.  Clocks only grow, so a
 * clock that moves sifts down; a shift of every clock keeps the order.
 * Keeping the heap costs a look at every clock move, which is more than a
 * scan of a few hosts saves: it is kept from HEAP_HOSTS hosts on. */
enum { HEAP_HOSTS = 16 };

static void heap_put(ms_sim_attachments *a, size_t i, ms_simhost *h)
{
    a->active[i] = h;
    h->heap_pos = (ptrdiff_t)i;
}

static void sift_up(ms_sim_attachments *a, size_t i)
{
    ms_simhost *h = a->active[i];
    while (i > 0 && a->active[(i - 1) / 2]->now > h->now) {
        heap_put(a, i, a->active[(i - 1) / 2]);
        i = (i - 1) / 2;
    }
    heap_put(a, i, h);
}

static void sift_down(ms_sim_attachments *a, size_t i)
{
    ms_simhost *h = a->active[i];
    for (size_t c = 2 * i + 1; c < a->n_active; c = 2 * i + 1) {
        if (c + 1 < a->n_active && a->active[c + 1]->now < a->active[c]->now)
            c++;
        if (h->now <= a->active[c]->now)
            break;
        heap_put(a, i, a->active[c]);
        i = c;
    }
    heap_put(a, i, h);
}

/* Out of line: set_clock stays small where no heap is kept. */
static __attribute__((noinline)) void heap_clock_moved(ms_simhost *h)
{
    sift_down(sim_attached(h->sim), (size_t)h->heap_pos);
}

static void active_add(ms_simhost *h)
{
    ms_sim_attachments *a = sim_attached(h->sim);
    if (!a->heap_on)
        return;
    heap_put(a, a->n_active++, h);
    sift_up(a, (size_t)h->heap_pos);
}

static void active_remove(ms_simhost *h)
{
    ms_sim_attachments *a = sim_attached(h->sim);
    if (h->heap_pos < 0)
        return;
    size_t i = (size_t)h->heap_pos;
    ms_simhost *last = a->active[--a->n_active];
    h->heap_pos = -1;
    if (last == h)
        return;
    heap_put(a, i, last);
    sift_up(a, i);
    sift_down(a, (size_t)last->heap_pos);
}

/* From the HEAP_HOSTS-th host on: every active host into the heap (room for
 * each was made when it was created). */
static void heap_start(ms_sim_attachments *a)
{
    a->heap_on = true;
    for (ms_simhost *h = a->hosts; h != NULL; h = h->next)
        if (h->state == MS_HOST_ACTIVE)
            active_add(h);
}

/* Every change of state goes through here, which keeps the heap to the
 * active hosts. */
static void set_state(ms_simhost *h, ms_host_state s)
{
    if (h->state == MS_HOST_ACTIVE && s != MS_HOST_ACTIVE)
        active_remove(h);
    else if (h->state != MS_HOST_ACTIVE && s == MS_HOST_ACTIVE)
        active_add(h);
    h->state = s;
}

ms_status sim_host_create(ms_sim *sim, ms_simhost **out)
{
    if (sim == NULL || out == NULL)
        return MS_EINVAL;
    ms_simhost *h = calloc(1, sizeof *h);
    if (h == NULL)
        return MS_ENOMEM;
    ms_sim_attachments *a = sim_attached(sim);
    if (!MS_GROW_TO(a->active, (size_t)a->n_hosts + 1, a->cap_active, 4)) {
        free(h);
        return MS_ENOMEM;
    }
    h->sim = sim;
    h->heap_pos = -1;
    h->prev = a->hosts_tail;
    if (a->hosts_tail != NULL)
        a->hosts_tail->next = h;
    else
        a->hosts = h;
    a->hosts_tail = h;
    a->n_hosts++;
    if (a->heap_on)
        active_add(h); /* a new host is active, at time 0 */
    else if (a->n_hosts >= HEAP_HOSTS)
        heap_start(a);
    *out = h;
    return MS_OK;
}

ms_status sim_host_destroy(ms_simhost *h)
{
    if (h == NULL)
        return MS_EINVAL;
    ms_sim_attachments *a = sim_attached(h->sim);
    active_remove(h);
    if (h->state == MS_HOST_PARKED) {
        a->n_parked--;
        if (h->watch == NULL)
            a->n_parked_unwatched--;
    }
    if (h->watch != NULL)
        h->watch->watcher = NULL;
    for (ms_simhost **p = &a->changed_hosts; h->changed && *p != NULL; p = &(*p)->changed_next)
        if (*p == h) {
            *p = h->changed_next;
            break;
        }
    if (h->prev != NULL)
        h->prev->next = h->next;
    else
        a->hosts = h->next;
    if (h->next != NULL)
        h->next->prev = h->prev;
    else
        a->hosts_tail = h->prev;
    a->n_hosts--;
    free(h);
    return MS_OK;
}

ms_status sim_host_now(const ms_simhost *h, int64_t *ns)
{
    if (h == NULL || ns == NULL)
        return MS_EINVAL;
    *ns = h->now;
    return MS_OK;
}

ms_status sim_host_parked(const ms_simhost *h, bool *parked)
{
    if (h == NULL || parked == NULL)
        return MS_EINVAL;
    *parked = h->state == MS_HOST_PARKED;
    return MS_OK;
}

/* What a scheduler orders hosts by changed: list h (once) for the next
 * drain.  About one host a hand-over changes besides the one that ran. */
static void note_change(ms_simhost *h)
{
    if (h->changed)
        return;
    ms_sim_attachments *a = sim_attached(h->sim);
    h->changed = true;
    h->changed_next = a->changed_hosts;
    a->changed_hosts = h;
}

static inline void set_clock(ms_simhost *h, int64_t now)
{
    if (now != h->now) {
        sim_attached(h->sim)->clock_moves++;
        note_change(h);
    }
    h->now = now;
    if (h->heap_pos >= 0)
        heap_clock_moved(h);
}

static void wake(ms_simhost *h, int64_t now)
{
    ms_sim_attachments *a = sim_attached(h->sim);
    a->n_parked--;
    if (h->watch == NULL)
        a->n_parked_unwatched--;
    set_state(h, MS_HOST_ACTIVE);
    h->cond = NULL;
    h->cond_ctx = NULL;
    note_change(h);
    if (now > h->now)
        set_clock(h, now);
}

ms_status sim_host_advance(ms_simhost *h, int64_t ns)
{
    if (h == NULL || ns < 0 || ns > INT64_MAX - h->now)
        return MS_EINVAL;
    set_clock(h, h->now + ns);
    return MS_OK;
}

/* How far self may run the engine: the other active hosts' clocks. */
static int64_t horizon(const ms_simhost *self)
{
    const ms_sim_attachments *a = sim_attached(self->sim);
    int64_t lim = INT64_MAX;
    if (!a->heap_on) {
        for (const ms_simhost *h = a->hosts; a->n_hosts > 1 && h != NULL; h = h->next)
            if (h != self && h->state == MS_HOST_ACTIVE && h->now < lim)
                lim = h->now;
        return lim;
    }
    if (a->n_active == 0)
        return lim;
    if (a->active[0] != self)
        return a->active[0]->now;
    for (size_t c = 1; c <= 2 && c < a->n_active; c++)
        if (a->active[c]->now < lim)
            lim = a->active[c]->now;
    return lim;
}

static bool others_may_issue(const ms_simhost *self)
{
    for (const ms_simhost *h = sim_attached(self->sim)->hosts; h != NULL; h = h->next)
        if (h != self && h->state != MS_HOST_PARKED)
            return true;
    return false;
}

static void make_active(ms_simhost *h, int64_t at)
{
    if (h->state == MS_HOST_PARKED) {
        wake(h, at);
        return;
    }
    set_state(h, MS_HOST_ACTIVE);
    h->cond = NULL;
    h->cond_ctx = NULL;
    if (at > h->now)
        set_clock(h, at);
}

/* Parked hosts that watch no device: asked after every engine step. */
static bool wake_unwatched(const ms_simhost *self, int64_t now)
{
    bool woke = false;
    for (ms_simhost *h = sim_attached(self->sim)->hosts; h != NULL; h = h->next)
        if (h != self && h->state == MS_HOST_PARKED && h->watch == NULL && h->cond(h->cond_ctx)) {
            wake(h, now);
            woke = true;
        }
    return woke;
}

/* After each engine step: parked hosts whose condition now holds resume at
 * this device time, and from then on bound the engine again (true if any
 * did: the horizon may have moved).  A watching host's condition reads its
 * device only, so only hosts whose device changed since it was last asked
 * (the dirty list) are asked; the order of waking does not matter, each
 * resumes at the same time. */
static bool wake_parked(const ms_simhost *self)
{
    ms_sim_attachments *a = sim_attached(self->sim);
    /* Nobody waits: dirty devices stay listed (a touch of a listed device
     * costs one test) until a host parks; parking lists its device again
     * anyway, so its first look is never lost. */
    if (a->n_parked == 0)
        return false;
    int64_t now = sim_clock(self->sim);
    bool woke = false;
    while (a->dirty != NULL) {
        ms_simdev *d = a->dirty;
        a->dirty = d->dirty_next;
        d->dirty = false;
        ms_simhost *h = d->watcher;
        if (h != NULL && h != self && h->state == MS_HOST_PARKED && h->cond(h->cond_ctx)) {
            wake(h, now);
            woke = true;
        }
    }
    if (a->n_parked_unwatched > 0)
        woke |= wake_unwatched(self, now);
    return woke;
}

typedef enum ms_run_end { MS_RUN_MET = 0, MS_RUN_DRY, MS_RUN_BOUND } ms_run_end;

/* Other hosts' clocks change only while they run, or when an engine step
 * here wakes one, so the horizon is computed once and again after a wake. */
static ms_run_end run(ms_simhost *h, int64_t limit, ms_simhost_cond cond, const void *ctx,
                      bool *stepped)
{
    int64_t bound = INT64_MIN; /* not computed yet: most calls never need it */
    for (;;) {
        if (cond != NULL && cond(ctx))
            return MS_RUN_MET;
        int64_t t;
        if (!sim_peek(h->sim, &t))
            return MS_RUN_DRY;
        if (t > limit)
            return MS_RUN_BOUND;
        if (bound == INT64_MIN)
            bound = horizon(h);
        if (t > bound)
            return MS_RUN_BOUND;
        sim_step_one(h->sim);
        *stepped = true;
        if (wake_parked(h))
            bound = INT64_MIN;
    }
}

ms_status sim_host_catch_up(ms_simhost *h)
{
    if (h == NULL)
        return MS_EINVAL;
    /* A host that was parked or idle did nothing meanwhile: it resumes no
     * earlier than the device time it finds. */
    if (h->state != MS_HOST_ACTIVE)
        make_active(h, sim_clock(h->sim));
    /* Most calls find nothing due by the host's clock; run() would return at
     * its first look (queue dry, or next event past the limit), so skip it. */
    int64_t t;
    if (!sim_peek(h->sim, &t) || t > h->now)
        return MS_OK;
    bool stepped = false;
    run(h, h->now, NULL, NULL, &stepped);
    return MS_OK;
}

ms_status sim_host_enter(ms_simhost *h, const ms_simdev *d)
{
    if (h == NULL || d == NULL)
        return MS_EINVAL;
    if (d->fault != MS_OK)
        return d->fault;
    sim_host_catch_up(h);
    return d->fault;
}

ms_status sim_host_wait(ms_simhost *h, ms_simhost_cond cond, const void *ctx)
{
    if (h == NULL || cond == NULL)
        return MS_EINVAL;
    if (h->state != MS_HOST_ACTIVE)
        make_active(h, sim_clock(h->sim));
    bool stepped = false;
    switch (run(h, INT64_MAX, cond, ctx, &stepped)) {
    case MS_RUN_MET:
        /* It held at the device time of the last event run. */
        if (stepped && sim_clock(h->sim) > h->now)
            set_clock(h, sim_clock(h->sim));
        return MS_OK;
    case MS_RUN_DRY:
        if (!others_may_issue(h))
            return MS_EDEADLOCK; /* nothing left that could make it hold */
        break;
    case MS_RUN_BOUND:
        break;
    }
    set_state(h, MS_HOST_PARKED);
    h->cond = cond;
    h->cond_ctx = ctx;
    note_change(h);
    ms_sim_attachments *a = sim_attached(h->sim);
    a->n_parked++;
    if (h->watch == NULL)
        a->n_parked_unwatched++;
    else
        sim_dev_touch(h->watch); /* engine steps ran since cond was last asked */
    return MS_EAGAIN;
}

ms_status sim_host_set_idle(ms_simhost *h)
{
    if (h == NULL)
        return MS_EINVAL;
    if (h->state == MS_HOST_PARKED) {
        sim_attached(h->sim)->n_parked--;
        note_change(h);
    }
    set_state(h, MS_HOST_IDLE);
    h->cond = NULL;
    h->cond_ctx = NULL;
    return MS_OK;
}

ms_status sim_host_resume(ms_simhost *h)
{
    if (h == NULL)
        return MS_EINVAL;
    if (h->state == MS_HOST_IDLE)
        make_active(h, sim_clock(h->sim));
    return MS_OK;
}

ms_status sim_host_watch(ms_simhost *h, ms_simdev *d)
{
    /* Changing what a parked host watches would lose its wake-up. */
    if (h == NULL || h->state == MS_HOST_PARKED || (d != NULL && d->watcher != NULL))
        return MS_EINVAL;
    if (h->watch != NULL)
        h->watch->watcher = NULL;
    h->watch = d;
    if (d != NULL)
        d->watcher = h;
    return MS_OK;
}

uint64_t sim_host_clock_moves(const ms_simhost *h)
{
    return h != NULL ? sim_attached(h->sim)->clock_moves : 0;
}

void sim_host_unwatch_device(ms_simdev *d)
{
    ms_sim_attachments *a = sim_attached(d->sim);
    for (ms_simdev **p = &a->dirty; *p != NULL; p = &(*p)->dirty_next)
        if (*p == d) {
            *p = d->dirty_next;
            break;
        }
    ms_simhost *h = d->watcher;
    if (h == NULL)
        return;
    h->watch = NULL;
    d->watcher = NULL;
    if (h->state == MS_HOST_PARKED)
        a->n_parked_unwatched++; /* asked after every step from now on */
}

/* ---- fast-forward (sim_state.c) -------------------------------------- */

/* Each host's clock relative to the engine's, in creation order: the
 * offsets between hosts decide how their calls interleave. */
ms_status sim_hosts_state_write(const ms_sim *sim, ms_state_sig *sig)
{
    for (const ms_simhost *h = sim->att.hosts; h != NULL; h = h->next) {
        if (h->state == MS_HOST_PARKED)
            return MS_EAGAIN;
        ms_state_sig_u64(sig, (uint64_t)(h->now - sim->now));
        ms_state_sig_u64(sig, (uint64_t)h->state);
    }
    return sig->st;
}

void sim_hosts_shift(ms_sim *sim, int64_t delta_ns)
{
    for (ms_simhost *h = sim->att.hosts; h != NULL; h = h->next) {
        h->now += delta_ns;
        note_change(h);
    }
}

ms_status sim_host_set_tag(ms_simhost *h, int tag)
{
    if (h == NULL || tag < 0)
        return MS_EINVAL;
    h->tag = tag;
    return MS_OK;
}

size_t sim_hosts_drain_changes(ms_sim *sim, int *tags, size_t max)
{
    if (sim == NULL)
        return 0;
    size_t n = 0;
    ms_sim_attachments *a = sim_attached(sim);
    for (ms_simhost *h = a->changed_hosts; h != NULL; h = h->changed_next) {
        if (n < max && tags != NULL)
            tags[n] = h->tag;
        n++;
        h->changed = false;
    }
    a->changed_hosts = NULL;
    return n;
}
