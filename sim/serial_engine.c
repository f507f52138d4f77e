/* A device resource that runs one item at a time: the compute engine (every
 * compute-class kernel and D2D copy of the device serialises on it) and the
 * comm link (collectives and p2p sends, which overlap compute as NCCL/HCCL
 * kernels on their own stream do).  When several streams have a ready head,
 * the stream with the lower priority number wins (CUDA stream priorities),
 * then the item that became ready first, then the one issued first. */
#include "device_model.h"
#include "sim_private.h"

void sim_serial_engine_init(ms_serial_engine *e, ms_simdev *d, ms_item_res res)
{
    *e = (ms_serial_engine){.dev = d, .res = res};
}

static bool before(const ms_work_item *a, const ms_work_item *b)
{
    if (a->stream->priority != b->stream->priority)
        return a->stream->priority < b->stream->priority;
    if (a->ready_ns != b->ready_ns)
        return a->ready_ns < b->ready_ns;
    return a->seq < b->seq;
}

void sim_serial_engine_dispatch(ms_serial_engine *e)
{
    if (e->current != NULL || e->ready == NULL)
        return;
    ms_simdev *d = e->dev;
    /* The ready list holds exactly the stream heads in MS_IS_READY for this
     * engine; before() is a total order on them, so its minimum is the item
     * a scan of every stream's head would pick. */
    ms_work_item **best_at = &e->ready;
    for (ms_work_item **p = &e->ready->link; *p != NULL; p = &(*p)->link)
        if (before(*p, *best_at))
            best_at = p;
    if (sim_dev_defer_dispatch(d))
        return;
    ms_work_item *best = *best_at;
    *best_at = best->link;
    best->link = NULL;
    int64_t now = sim_clock(d->sim);
    best->state = MS_IS_RUNNING;
    best->start_ns = now;
    best->stream->not_started--;
    e->current = best;
    if (sim_schedule(d->sim, now + best->dur_ns, sim_serial_engine_done, e) != MS_OK)
        d->fault = MS_ENOMEM;
}

void sim_serial_engine_done(ms_sim *sim, void *arg)
{
    ms_serial_engine *e = arg;
    ms_simdev *d = e->dev;
    ms_work_item *it = e->current;
    e->current = NULL;
    /* An eager send: its data is at the receiver once the send finishes. */
    if (it->comm == MS_COMM_SEND && sim_p2p_find_device(sim, it->peer) != NULL &&
        sim_p2p_post(sim, d->index, it->peer, it->p2p_tag) != MS_OK)
        d->fault = MS_ENOMEM;
    ms_simstream *s = it->stream;
    sim_dev_finish_item(d, it);
    sim_dev_settle(d, s);
}
