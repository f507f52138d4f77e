/* A device resource that runs one item at a time: the compute engine (every
 * compute-class kernel and D2D copy of the device serialises on it;
 * collectives and p2p run beside it on the network links, link_engine.c).
 * When several streams have a ready head, the stream with the lower priority
 * number wins (CUDA stream priorities), then the item that became ready
 * first, then the one issued first.  A kernel that starts while a network
 * link moves data runs slower by the device's overlap_compute_slowdown over
 * the part of it that overlaps (as far as the link's work known now goes);
 * while it runs, host copies move slower (overlap_copy_slowdown). */
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

/* Extra time of a compute item of dur ns starting now while collectives
 * move data: the slowdown over the overlapping part. */
static int64_t overlap_penalty_ns(const ms_simdev *d, int64_t now, int64_t dur)
{
    double slow = d->spec.overlap_compute_slowdown;
    if (!(slow > 0) || dur <= 0)
        return 0;
    int64_t busy = sim_link_engine_busy_until(&d->net[0]);
    int64_t inter = sim_link_engine_busy_until(&d->net[1]);
    if (inter > busy)
        busy = inter;
    if (busy <= now)
        return 0;
    int64_t overlap = busy - now < dur ? busy - now : dur;
    return llround(slow * (double)overlap);
}

/* The host links' rate follows whether the device computes (an H2D beside
 * a GEMM: memsim calibrate's copy_with_compute measurement). */
static void slow_host_copies(ms_serial_engine *e)
{
    ms_simdev *d = e->dev;
    double slow = d->spec.overlap_copy_slowdown;
    if (!(slow > 0))
        return;
    int64_t now = sim_clock(d->sim);
    for (int i = 0; i < 2; i++)
        sim_link_engine_set_slowdown(&d->copy[i], now, e->current != NULL ? slow : 0);
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
    sim_dev_touch(d);
    e->current = best;
    slow_host_copies(e);
    int64_t dur = best->dur_ns + overlap_penalty_ns(d, now, best->dur_ns);
    if (sim_schedule(d->sim, now + dur, sim_serial_engine_done, e) != MS_OK)
        d->fault = MS_ENOMEM;
}

void sim_serial_engine_done(ms_sim *sim, void *arg)
{
    ms_serial_engine *e = arg;
    ms_simdev *d = e->dev;
    ms_work_item *it = e->current;
    e->current = NULL;
    slow_host_copies(e);
    (void)sim;
    ms_simstream *s = it->stream;
    sim_dev_finish_item(d, it);
    sim_dev_settle(d, s);
}
