/* A link of the device that moves bytes: one direction of the full-duplex
 * host link (PCIe, or HCCS to the host), or the device's share of the
 * intra-node or the inter-node network.  A transfer first spends its
 * latency (setup, round trips, the alpha terms of a collective: it uses no
 * bandwidth), then moves its bytes.  Transfers moving at the same time share
 * the link's bandwidth equally (fluid processor sharing: with n active, each
 * progresses at 1/n of its exclusive rate, recomputed at every arrival and
 * departure), so two equal concurrent copies take twice as long as one, and
 * a pipeline send that meets a data-parallel all-reduce on the same network
 * slows down instead of queueing behind it (NCCL/HCCL run the collectives of
 * different process groups on their own streams, concurrently).  A
 * transfer's exclusive rate comes from the cost model.  Every link is an
 * independent engine.  A host link slows down (all its transfers alike)
 * while the device computes: sim_link_engine_set_slowdown. */
#include "device_model.h"
#include "sim_private.h"

/* Remaining work below this (in exclusive ns) is float noise: done. */
#define DONE_EPS_NS 1e-6

void sim_link_engine_init(ms_link_engine *ce, ms_simdev *d)
{
    *ce = (ms_link_engine){.dev = d, .stretch = 1};
}

static void reschedule(ms_link_engine *ce)
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
        int64_t dep = ce->last_update_ns + sim_ceil_ns(min_rem * ce->n_active * ce->stretch);
        if (dep < next)
            next = dep;
    }
    if (next == INT64_MAX || (ce->wake_pending && ce->wake_at == next))
        return;
    if (sim_schedule(ce->dev->sim, next, sim_link_engine_wake, ce) != MS_OK) {
        ce->dev->fault = MS_ENOMEM;
        return;
    }
    ce->wake_at = next;
    ce->wake_pending = true;
}

void sim_link_engine_start(ms_link_engine *ce, ms_work_item *it)
{
    it->lat_end_ns = it->start_ns + it->dur_ns;
    it->link = NULL;
    /* Latencies differ (a collective's grows with its group), so the list
     * is kept in order of their ends, FIFO among equal ends. */
    ms_work_item **at = &ce->lat_head;
    while (*at != NULL && (*at)->lat_end_ns <= it->lat_end_ns)
        at = &(*at)->link;
    it->link = *at;
    *at = it;
    if (it->link == NULL)
        ce->lat_tail = it;
    reschedule(ce);
}

int64_t sim_link_engine_busy_until(const ms_link_engine *ce)
{
    /* The link stays busy (fully used) for the work left on it. */
    double work = 0;
    for (const ms_work_item *it = ce->act_head; it != NULL; it = it->link)
        work += it->remaining_ns > 0 ? it->remaining_ns : 0;
    int64_t t =
        ce->n_active > 0 ? ce->last_update_ns + sim_ceil_ns(work * ce->stretch) : INT64_MIN;
    for (const ms_work_item *it = ce->lat_head; it != NULL; it = it->link) {
        int64_t end = it->lat_end_ns + sim_ceil_ns(it->remaining_ns * ce->stretch);
        if (end > t)
            t = end;
    }
    return t;
}

/* Progress every active transfer from the last update to now. */
static void advance(ms_link_engine *ce, int64_t now)
{
    if (ce->n_active > 0 && now > ce->last_update_ns) {
        double share = (double)(now - ce->last_update_ns) / (ce->n_active * ce->stretch);
        for (ms_work_item *it = ce->act_head; it != NULL; it = it->link)
            it->remaining_ns -= share;
    }
    ce->last_update_ns = now;
}

/* From now on the link moves bytes 1 + slow times slower; what moved until
 * now moved at the old rate. */
void sim_link_engine_set_slowdown(ms_link_engine *ce, int64_t now, double slow)
{
    if (ce->stretch == 1 + slow)
        return;
    advance(ce, now);
    ce->stretch = 1 + slow;
    reschedule(ce);
}

static void finish_done(ms_link_engine *ce)
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
            sim_p2p_sent(ce->dev, it);
            sim_dev_finish_item(ce->dev, it);
        } else {
            prev = it;
        }
        it = next;
    }
}

static void promote(ms_link_engine *ce, int64_t now)
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

void sim_link_engine_wake(ms_sim *sim, void *arg)
{
    ms_link_engine *ce = arg;
    int64_t now = sim_clock(sim);
    /* A superseded wake-up (the schedule moved) does nothing. */
    if (!ce->wake_pending || ce->wake_at != now)
        return;
    ce->wake_pending = false;
    advance(ce, now);
    finish_done(ce);
    promote(ce, now);
    finish_done(ce); /* zero-byte transfers leave as soon as their latency ends */
    reschedule(ce);
    sim_dev_settle(ce->dev, NULL);
}
