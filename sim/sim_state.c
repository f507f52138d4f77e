/* A quiet engine as bytes, and the shift that replays a repeat (fast-forward;
 * backend.h, ms_state_sig).  Times are written relative to the engine's
 * clock, and only the times the models still read: a stream's last_done_ns
 * is reported, never waited on; an idle link's last update, a kick or a
 * wake-up no longer pending, a capture's time (read by event_elapsed_ns
 * alone, which no step asks of events recorded before it) decide nothing
 * later.  Everything still in flight makes the moment not quiet (MS_EAGAIN):
 * fast-forward compares step boundaries, after every device synchronized. */
#include <stdlib.h>
#include <string.h>

#include "device_model.h"
#include "sim_private.h"

static void put_i64(ms_state_sig *sig, int64_t v)
{
    ms_state_sig_u64(sig, (uint64_t)v);
}

static int by_time_then_seq(const void *pa, const void *pb)
{
    const ms_sim_event *a = pa, *b = pb;
    if (a->t != b->t)
        return a->t < b->t ? -1 : 1;
    return a->seq < b->seq ? -1 : a->seq > b->seq;
}

/* Pending events in the order they will run: stale wake-ups (a link whose
 * schedule moved) may outlive the work; which function on which object,
 * and when, is all they are. */
static ms_status write_pending(const ms_sim *sim, ms_state_sig *sig)
{
    ms_state_sig_u64(sig, sim->n);
    if (sim->n == 0)
        return sig->st;
    ms_sim_event *ev = malloc(sim->n * sizeof *ev);
    if (ev == NULL)
        return sig->st = MS_ENOMEM;
    memcpy(ev, sim->heap, sim->n * sizeof *ev);
    qsort(ev, sim->n, sizeof *ev, by_time_then_seq);
    for (size_t i = 0; i < sim->n; i++) {
        put_i64(sig, ev[i].t - sim->now);
        ms_state_sig_u64(sig, (uint64_t)(uintptr_t)ev[i].fn);
        ms_state_sig_u64(sig, (uint64_t)(uintptr_t)ev[i].arg);
    }
    free(ev);
    return sig->st;
}

static bool stream_quiet(const ms_simstream *s)
{
    return s->head == NULL && s->queued == 0 && s->not_started == 0;
}

static bool link_quiet(const ms_link_engine *l)
{
    return l->lat_head == NULL && l->act_head == NULL && l->n_active == 0;
}

static void write_link(const ms_link_engine *l, int64_t now, ms_state_sig *sig)
{
    ms_state_sig_u64(sig, l->wake_pending);
    if (l->wake_pending)
        put_i64(sig, l->wake_at - now);
}

static ms_status write_streams(const ms_simdev *d, ms_state_sig *sig)
{
    ms_state_sig_u64(sig, d->n_streams);
    ms_state_sig_u64(sig, d->next_stream_id);
    for (size_t i = 0; i < d->n_streams; i++) {
        const ms_simstream *s = d->streams[i];
        if (!stream_quiet(s))
            return MS_EAGAIN;
        ms_state_sig_u64(sig, s->id);
        put_i64(sig, s->priority);
        ms_state_sig_u64(sig, s->destroyed);
    }
    return MS_OK;
}

/* Open events in their list's order: whether each was recorded and whether
 * that completed is what a later wait on it sees. */
static ms_status write_events(const ms_simdev *d, ms_state_sig *sig)
{
    for (const ms_simevent *e = d->events; e != NULL; e = e->next) {
        const ms_capture *c = e->latest;
        if (c != NULL && (!c->done || c->refs > 1))
            return MS_EAGAIN;
        ms_state_sig_u64(sig, c == NULL ? 0 : 1);
    }
    ms_state_sig_u64(sig, UINT64_MAX); /* the list's end */
    return MS_OK;
}

static ms_status write_device(const ms_simdev *d, int64_t now, ms_state_sig *sig)
{
    if (d->compute.current != NULL || d->compute.ready != NULL || d->settling || d->fault != MS_OK)
        return MS_EAGAIN;
    for (int i = 0; i < 2; i++)
        if (!link_quiet(&d->copy[i]) || !link_quiet(&d->net[i]))
            return MS_EAGAIN;
    put_i64(sig, d->index);
    ms_state_sig_u64(sig, d->hbm_used);
    ms_state_sig_u64(sig, d->hbm_peak);
    ms_state_sig_u64(sig, d->kick_pending);
    if (d->kick_pending)
        put_i64(sig, d->kick_at - now);
    for (int i = 0; i < 2; i++) {
        write_link(&d->copy[i], now, sig);
        write_link(&d->net[i], now, sig);
    }
    ms_status st = write_streams(d, sig);
    return st == MS_OK ? write_events(d, sig) : st;
}

ms_status sim_state_write(ms_sim *sim, ms_state_sig *sig)
{
    if (sim == NULL || sig == NULL)
        return MS_EINVAL;
    const ms_sim_attachments *a = sim_attached(sim);
    if (a->n_parked > 0)
        return MS_EAGAIN;
    ms_status st = write_pending(sim, sig);
    ms_state_sig_u64(sig, a->n_mail);
    if (a->n_mail > 0)
        ms_state_sig_put(sig, a->mail, a->n_mail * sizeof *a->mail);
    if (st == MS_OK)
        st = sim_hosts_state_write(sim, sig);
    for (size_t i = 0; st == MS_OK && i < a->n_devs; i++)
        st = write_device(a->devs[i], sim->now, sig);
    return st != MS_OK ? st : sig->st;
}

static void shift_link(ms_link_engine *l, int64_t delta)
{
    l->last_update_ns += delta;
    l->wake_at += delta;
}

static void shift_device(ms_simdev *d, int64_t delta)
{
    d->kick_at += delta;
    for (int i = 0; i < 2; i++) {
        shift_link(&d->copy[i], delta);
        shift_link(&d->net[i], delta);
    }
    for (size_t i = 0; i < d->n_streams; i++)
        d->streams[i]->last_done_ns += delta;
    /* Quiet: every capture is held by its event alone (write_events). */
    for (ms_simevent *e = d->events; e != NULL; e = e->next)
        if (e->latest != NULL)
            e->latest->time_ns += delta;
}

/* Heap order is by (t, seq): adding one delta to every t keeps it. */
ms_status sim_state_shift(ms_sim *sim, int64_t delta_ns)
{
    if (sim == NULL || delta_ns < 0)
        return MS_EINVAL;
    ms_sim_attachments *a = sim_attached(sim);
    sim->now += delta_ns;
    for (size_t i = 0; i < sim->n; i++)
        sim->heap[i].t += delta_ns;
    sim_hosts_shift(sim, delta_ns);
    for (size_t i = 0; i < a->n_devs; i++)
        shift_device(a->devs[i], delta_ns);
    return MS_OK;
}
