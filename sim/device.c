/* A simulated device: its streams, the compute engine, the links that move
 * bytes (two directions of the host link, the intra- and inter-node
 * networks), and its HBM capacity, tied together by one rule: whenever
 * something finishes or arrives, settle the device (move every stream head
 * forward, then let the compute engine pick its next item). */
#include <stdlib.h>

#include "device_model.h"
#include "sim_private.h"

ms_status sim_dev_create(ms_sim *sim, const ms_device_spec *spec, int index, ms_simdev **out)
{
    if (sim == NULL || spec == NULL || out == NULL || index < 0 || index >= 32768)
        return MS_EINVAL;
    ms_simdev *d = calloc(1, sizeof *d);
    if (d == NULL)
        return MS_ENOMEM;
    ms_status st = sim_cost_model_create(spec, &d->cm);
    if (st != MS_OK) {
        free(d);
        return st;
    }
    d->sim = sim;
    d->index = index;
    d->spec = *spec;
    base_pool_init(&d->caps, sizeof(ms_capture), 256);
    base_pool_init(&d->events_pool, sizeof(ms_simevent), 256);
    sim_serial_engine_init(&d->compute, d, MS_RES_COMPUTE);
    for (int i = 0; i < 2; i++) {
        sim_link_engine_init(&d->copy[i], d);
        sim_link_engine_init(&d->net[i], d);
    }
    if ((st = sim_p2p_attach(sim, d, index)) != MS_OK) {
        sim_cost_model_destroy(d->cm);
        free(d);
        return st;
    }
    *out = d;
    return MS_OK;
}

static bool owned_by(ms_sim_fn fn, void *arg, const void *ctx)
{
    const ms_simdev *d = ctx;
    if (fn == sim_dev_kick_event)
        return arg == d;
    if (fn == sim_serial_engine_done)
        return arg == &d->compute;
    if (fn == sim_link_engine_wake)
        return arg == &d->copy[0] || arg == &d->copy[1] || arg == &d->net[0] || arg == &d->net[1];
    return false;
}

ms_status sim_dev_destroy(ms_simdev *d)
{
    if (d == NULL)
        return MS_EINVAL;
    /* The engine may outlive the device: none of its events may still
     * point here. */
    sim_cancel_if(d->sim, owned_by, d);
    sim_p2p_detach(d->sim, d, d->index);
    sim_host_unwatch_device(d);
    for (size_t i = 0; i < d->n_streams; i++)
        sim_stream_free(d->streams[i]);
    free(d->streams);
    /* Captures of items queued or running, and the events still open. */
    base_pool_fini(&d->caps);
    base_pool_fini(&d->events_pool);
    sim_cost_model_destroy(d->cm);
    free(d);
    return MS_OK;
}

ms_status sim_dev_engine(const ms_simdev *d, ms_sim **sim)
{
    if (d == NULL || sim == NULL)
        return MS_EINVAL;
    *sim = d->sim;
    return MS_OK;
}

ms_status sim_dev_cost_model(const ms_simdev *d, const ms_cost_model **cm)
{
    if (d == NULL || cm == NULL)
        return MS_EINVAL;
    *cm = d->cm;
    return MS_OK;
}

ms_status sim_dev_set_tracer(ms_simdev *d, ms_work_tracer fn, void *user)
{
    if (d == NULL)
        return MS_EINVAL;
    d->tracer = fn;
    d->tracer_user = fn != NULL ? user : NULL;
    return MS_OK;
}

ms_status sim_dev_idle(const ms_simdev *d, bool *idle)
{
    if (d == NULL || idle == NULL)
        return MS_EINVAL;
    *idle = true;
    for (size_t i = 0; i < d->n_streams && *idle; i++)
        *idle = d->streams[i]->queued == 0;
    return MS_OK;
}

ms_status sim_dev_fault(const ms_simdev *d)
{
    return d == NULL ? MS_EINVAL : d->fault;
}

ms_status sim_dev_hbm_charge(ms_simdev *d, uint64_t bytes)
{
    if (d == NULL)
        return MS_EINVAL;
    if (bytes > d->spec.hbm_bytes - d->hbm_used)
        return MS_ENOMEM;
    d->hbm_used += bytes;
    if (d->hbm_used > d->hbm_peak)
        d->hbm_peak = d->hbm_used;
    return MS_OK;
}

ms_status sim_dev_hbm_uncharge(ms_simdev *d, uint64_t bytes)
{
    if (d == NULL || bytes > d->hbm_used)
        return MS_EINVAL;
    d->hbm_used -= bytes;
    return MS_OK;
}

ms_status sim_dev_hbm_usage(const ms_simdev *d, uint64_t *used, uint64_t *peak, uint64_t *capacity)
{
    if (d == NULL)
        return MS_EINVAL;
    if (used != NULL)
        *used = d->hbm_used;
    if (peak != NULL)
        *peak = d->hbm_peak;
    if (capacity != NULL)
        *capacity = d->spec.hbm_bytes;
    return MS_OK;
}

void sim_dev_finish_item(ms_simdev *d, ms_work_item *it)
{
    ms_simstream *s = it->stream;
    int64_t now = sim_clock(d->sim);
    if (d->tracer != NULL && (it->kind == MS_IK_KERNEL || it->kind == MS_IK_COPY)) {
        ms_work_record rec = {
            .tag = it->tag,
            .is_copy = it->kind == MS_IK_COPY,
            .copy_kind = it->copy_kind,
            .name = it->name,
            .stream_id = s->id,
            .start_ns = it->start_ns,
            .end_ns = now,
            .bytes = it->bytes,
        };
        d->tracer(d->tracer_user, &rec);
    }
    s->queued--;
    s->last_done_ns = now;
    sim_dev_touch(d);
    sim_capture_unref(d, it->cap);
    sim_stream_pop(s, it); /* only a stream's head is ever in progress */
    if (s->destroyed && s->queued == 0)
        d->sweep = true;
}

/* Free destroyed streams that have drained, keeping creation order. */
static void sweep_streams(ms_simdev *d)
{
    size_t k = 0;
    for (size_t i = 0; i < d->n_streams; i++) {
        ms_simstream *s = d->streams[i];
        if (s->destroyed && s->queued == 0)
            sim_stream_free(s);
        else
            d->streams[k++] = s;
    }
    d->n_streams = k;
    d->sweep = false;
}

/* False when sim_stream_advance(s) would return at its first look and
 * change nothing: no head, a head already handed to an engine, a wait whose
 * capture has not run, a p2p receive with an empty mailbox, or a head not yet
 * issued whose arrival kick is already scheduled.  Skipping those keeps the
 * order of everything that does happen (creation order of the streams). */
static bool may_advance(const ms_simdev *d, const ms_simstream *s, int64_t now)
{
    const ms_work_item *it = s->head;
    if (it == NULL)
        return false;
    switch ((ms_item_state)it->state) {
    case MS_IS_READY:
    case MS_IS_RUNNING:
        return false;
    case MS_IS_WAITING:
        if (it->kind == MS_IK_WAIT)
            return it->cap->done;
        return sim_attached(d->sim)->n_mail > 0;
    default:
        return it->issue_ns <= now || !it->arrival_kicked;
    }
}

static void advance_all(ms_simdev *d)
{
    int64_t now = sim_clock(d->sim);
    for (size_t i = 0; i < d->n_streams; i++)
        if (may_advance(d, d->streams[i], now))
            sim_stream_advance(d->streams[i]);
}

void sim_dev_settle(ms_simdev *d, ms_simstream *changed)
{
    if (d->settling) {
        d->redo |= SIM_REDO_RESETTLE;
        return;
    }
    d->settling = true;
    d->redo &= (uint8_t)~SIM_REDO_CAPTURES;
    if (changed != NULL)
        sim_stream_advance(changed);
    else
        advance_all(d);
    do {
        d->redo &= (uint8_t)~SIM_REDO_RESETTLE;
        /* A record that ran may release waits on any stream, and what
         * those streams then run may complete further records. */
        while (d->redo != 0) {
            d->redo = 0;
            advance_all(d);
        }
        sim_serial_engine_dispatch(&d->compute);
    } while (d->redo != 0);
    if (d->sweep)
        sweep_streams(d);
    d->settling = false;
}

void sim_dev_kick(ms_simdev *d, int64_t t)
{
    if (d->kick_pending && d->kick_at == t)
        return;
    if (sim_schedule(d->sim, t, sim_dev_kick_event, d) != MS_OK) {
        d->fault = MS_ENOMEM;
        return;
    }
    d->kick_pending = true;
    d->kick_at = t;
}

void sim_dev_kick_event(ms_sim *sim, void *arg)
{
    ms_simdev *d = arg;
    if (d->kick_at == sim_clock(sim))
        d->kick_pending = false;
    d->in_kick = true;
    sim_dev_settle(d, NULL);
    d->in_kick = false;
}

bool sim_dev_defer_dispatch(ms_simdev *d)
{
    /* Items that become ready at the same instant compete by priority, so the
     * compute engine waits for everything else due now before it chooses
     * (a kick event scheduled now runs after them). */
    if (d->in_kick)
        return false;
    int64_t t;
    int64_t now = sim_clock(d->sim);
    if (!sim_peek(d->sim, &t) || t != now)
        return false;
    sim_dev_kick(d, now);
    return true;
}
