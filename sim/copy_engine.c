/* One direction of the full-duplex host link (PCIe, or HCCS to the host).
 * A copy first spends the link latency (setup, round trip: it uses no
 * bandwidth), then moves its bytes.  Copies moving at the same time share the
 * direction's bandwidth equally (fluid processor sharing: with n active, each
 * progresses at 1/n of its exclusive rate, recomputed at every arrival and
 * departure), so two equal concurrent copies take twice as long as one.  A
 * copy's exclusive rate is bw(its size) from the direction's curve.  The
 * two directions are independent engines. */
#include "device_model.h"
#include "sim_private.h"

/* Remaining work below this (in exclusive ns) is float noise: done. */
#define DONE_EPS_NS 1e-6

void sim_copy_engine_init(ms_copy_engine *ce, ms_simdev *d, ms_copy_kind dir)
{
    *ce = (ms_copy_engine){.dev = d, .dir = dir};
}

static void reschedule(ms_copy_engine *ce)
{
    int64_t next = INT64_MAX;
    if (ce->lat_head != NULL)
        next = ce->lat_head->lat_end_ns;
    if (ce->n_active > 0) {
        double min_rem = ce->act_head->remaining_ns;
        for (ms_work_item *it = ce->act_head->link; it != NULL; it = it->link)
            if (it->remaining_ns < min_rem)
                min_rem = it->remaining_ns;
        if (min_rem < 0)
            min_rem = 0;
        int64_t dep = ce->last_update_ns + sim_ceil_ns(min_rem * ce->n_active);
        if (dep < next)
            next = dep;
    }
    if (next == INT64_MAX || (ce->wake_pending && ce->wake_at == next))
        return;
    if (sim_schedule(ce->dev->sim, next, sim_copy_engine_wake, ce) != MS_OK) {
        ce->dev->fault = MS_ENOMEM;
        return;
    }
    ce->wake_at = next;
    ce->wake_pending = true;
}

void sim_copy_engine_start(ms_copy_engine *ce, ms_work_item *it)
{
    it->lat_end_ns = it->start_ns + it->dur_ns;
    it->link = NULL;
    /* Every copy has the same latency, so latency phases end in FIFO order. */
    if (ce->lat_tail != NULL)
        ce->lat_tail->link = it;
    else
        ce->lat_head = it;
    ce->lat_tail = it;
    reschedule(ce);
}

/* Progress every active copy from the last update to now. */
static void advance(ms_copy_engine *ce, int64_t now)
{
    if (ce->n_active > 0 && now > ce->last_update_ns) {
        double share = (double)(now - ce->last_update_ns) / ce->n_active;
        for (ms_work_item *it = ce->act_head; it != NULL; it = it->link)
            it->remaining_ns -= share;
    }
    ce->last_update_ns = now;
}

static void finish_done(ms_copy_engine *ce)
{
    ms_work_item *prev = NULL, *it = ce->act_head;
    while (it != NULL) {
        ms_work_item *next = it->link;
        if (it->remaining_ns <= DONE_EPS_NS) {
            if (prev != NULL)
                prev->link = next;
            else
                ce->act_head = next;
            if (ce->act_tail == it)
                ce->act_tail = prev;
            ce->n_active--;
            sim_dev_finish_item(ce->dev, it);
        } else {
            prev = it;
        }
        it = next;
    }
}

static void promote(ms_copy_engine *ce, int64_t now)
{
    while (ce->lat_head != NULL && ce->lat_head->lat_end_ns <= now) {
        ms_work_item *it = ce->lat_head;
        ce->lat_head = it->link;
        if (ce->lat_head == NULL)
            ce->lat_tail = NULL;
        it->link = NULL;
        if (ce->act_tail != NULL)
            ce->act_tail->link = it;
        else
            ce->act_head = it;
        ce->act_tail = it;
        ce->n_active++;
    }
}

void sim_copy_engine_wake(ms_sim *sim, void *arg)
{
    ms_copy_engine *ce = arg;
    int64_t now = sim_clock(sim);
    /* A superseded wake-up (the schedule moved) does nothing. */
    if (!ce->wake_pending || ce->wake_at != now)
        return;
    ce->wake_pending = false;
    advance(ce, now);
    finish_done(ce);
    promote(ce, now);
    finish_done(ce); /* zero-byte copies leave as soon as their latency ends */
    reschedule(ce);
    sim_dev_settle(ce->dev, NULL);
}
