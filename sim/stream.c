/* Streams: FIFO queues of device work, as CUDA streams and ACL streams.
 * Only the head item of a stream is ever in progress; it becomes ready once
 * the device clock reaches its issue time and the item before it finished
 * (and, for a wait, once the capture it waits for has run). */
#include <stdlib.h>

#include "device_model.h"
#include "sim_private.h"
#include "lib/base/growable.h"

ms_status sim_stream_create(ms_simdev *d, int priority, ms_simstream **out)
{
    if (d == NULL || out == NULL)
        return MS_EINVAL;
    if (!MS_GROW(d->streams, d->n_streams, d->cap_streams, 8))
        return MS_ENOMEM;
    ms_simstream *s = calloc(1, sizeof *s);
    if (s == NULL)
        return MS_ENOMEM;
    s->dev = d;
    /* 64 items a chunk: a launch queue of 1 024 kernels with their event
     * records and waits fills a few dozen. */
    base_fifo_init(&s->items, sizeof(ms_work_item), 64);
    s->id = d->next_stream_id++;
    s->priority = priority;
    d->streams[d->n_streams++] = s;
    *out = s;
    return MS_OK;
}

void sim_stream_free(ms_simstream *s)
{
    base_fifo_fini(&s->items);
    free(s);
}

/* The items this far behind the head are fetched as the head moves: far
 * enough that they arrive before they are read (a record or a wait runs
 * as soon as it is the head, several in a row), near enough to stay in the
 * cache until then. */
#define PREFETCH_AHEAD 8

void sim_stream_pop(ms_simstream *s, ms_work_item *it)
{
    s->head = it->next;
    if (s->head == NULL)
        s->tail = NULL;
    if (!base_fifo_pop(&s->items, it))
        s->dev->fault = MS_EINTERNAL;
    const char *ahead = base_fifo_at(&s->items, PREFETCH_AHEAD);
    for (size_t at = 0; ahead != NULL && at < sizeof *it; at += 64)
        __builtin_prefetch(ahead + at);
    /* Fetched PREFETCH_AHEAD / 2 pops ago: its capture's address is there. */
    const ms_work_item *near = base_fifo_at(&s->items, PREFETCH_AHEAD / 2);
    if (near != NULL && near->cap != NULL)
        __builtin_prefetch(near->cap);
}

ms_status sim_stream_destroy(ms_simstream *s)
{
    if (s == NULL || s->destroyed)
        return MS_EINVAL;
    /* cudaStreamDestroy returns at once and the stream's resources are
     * released once the device has completed its work. */
    s->destroyed = true;
    s->dev->sweep = true;
    if (s->queued == 0 && !s->dev->settling)
        sim_dev_settle(s->dev, NULL);
    return MS_OK;
}

ms_status sim_stream_info_get(const ms_simstream *s, ms_simstream_info *out)
{
    if (s == NULL || out == NULL)
        return MS_EINVAL;
    *out = (ms_simstream_info){s->id, s->priority, s->queued, s->not_started, s->last_done_ns};
    return MS_OK;
}

/* A stream's items leave it in the order they came, the newest first only
 * when it was never queued; anything else is a bug of this file, reported
 * as the device's fault rather than left to corrupt the queue. */
static void item_drop(ms_simstream *s, ms_work_item *it)
{
    if (!base_fifo_unpush(&s->items, it))
        s->dev->fault = MS_EINTERNAL;
}

static ms_work_item *item_new(ms_simstream *s, ms_item_kind kind, int64_t issue_ns, uint64_t tag)
{
    ms_work_item *it = base_fifo_push(&s->items);
    if (it == NULL)
        return NULL;
    *it = (ms_work_item){.stream = s, .kind = (uint8_t)kind, .issue_ns = issue_ns,
                         .seq = s->dev->next_seq++, .tag = tag};
    return it;
}

static void enqueue(ms_simstream *s, ms_work_item *it)
{
    if (s->tail != NULL)
        s->tail->next = it;
    else
        s->head = it;
    s->tail = it;
    s->queued++;
    if (it->kind == MS_IK_KERNEL || it->kind == MS_IK_COPY)
        s->not_started++;
    sim_dev_touch(s->dev);
    /* Only a new head can change what the device does next. */
    if (s->head == it)
        sim_dev_settle(s->dev, s);
}

static bool usable(const ms_simstream *s)
{
    return s != NULL && !s->destroyed;
}

/* A transfer on a network link: its latency (not shared) and the rest of
 * its time, exclusive link time that concurrent transfers share. */
static ms_status comm_split(ms_simdev *d, const ms_kernel *k, int64_t dur_ns, ms_work_item *it)
{
    int64_t lat = 0;
    double xfer = 0;
    ms_status st = sim_cost_comm_parts(d->cm, k, &lat, &xfer);
    if (st != MS_OK)
        return st;
    /* A time given by the caller (measured) keeps the modeled latency. */
    if (lat > dur_ns)
        lat = dur_ns;
    it->res = MS_RES_COMM;
    it->net = (uint8_t)k->link;
    it->dur_ns = lat;
    it->remaining_ns = (double)(dur_ns - lat);
    return MS_OK;
}

ms_status sim_stream_launch_timed(ms_simstream *s, const ms_kernel *k, int64_t dur_ns,
                                  int64_t issue_ns, uint64_t tag)
{
    if (!usable(s) || k == NULL || dur_ns < 0 || (unsigned)k->cls >= MS_KC_COUNT)
        return MS_EINVAL;
    ms_simdev *d = s->dev;
    bool p2p = k->cls == MS_KC_COMM && (k->comm == MS_COMM_SEND || k->comm == MS_COMM_RECV);
    if (p2p && k->peer < 0)
        return MS_EINVAL;
    ms_work_item *it = item_new(s, MS_IK_KERNEL, issue_ns, tag);
    if (it == NULL)
        return MS_ENOMEM;
    it->dur_ns = dur_ns;
    it->name = k->name;
    it->comm = k->cls == MS_KC_COMM ? k->comm : MS_COMM_NONE;
    it->bytes = (uint64_t)(k->cls == MS_KC_COMM ? k->comm_bytes : k->bytes);
    it->peer = k->peer;
    it->p2p_tag = k->tag;
    if (k->cls != MS_KC_COMM) {
        it->res = MS_RES_COMPUTE;
    } else if (k->comm == MS_COMM_RECV && sim_p2p_find_device(d->sim, k->peer) != NULL) {
        it->res = MS_RES_P2P_RECV;
    } else {
        ms_status st = comm_split(d, k, dur_ns, it);
        if (st != MS_OK) {
            item_drop(s, it);
            return st;
        }
    }
    enqueue(s, it);
    return MS_OK;
}

ms_status sim_stream_launch(ms_simstream *s, const ms_kernel *k, int64_t issue_ns, uint64_t tag)
{
    if (!usable(s) || k == NULL)
        return MS_EINVAL;
    int64_t dur = 0;
    ms_status st = sim_cost_kernel_ns(s->dev->cm, k, &dur);
    if (st != MS_OK)
        return st;
    return sim_stream_launch_timed(s, k, dur, issue_ns, tag);
}

ms_status sim_stream_copy(ms_simstream *s, ms_copy_kind kind, uint64_t bytes, int64_t issue_ns,
                          uint64_t tag)
{
    if (!usable(s))
        return MS_EINVAL;
    ms_simdev *d = s->dev;
    int64_t dur = 0;
    double xfer = 0;
    ms_item_res res;
    ms_status st;
    if (kind == MS_COPY_D2D) {
        st = sim_cost_copy_ns(d->cm, kind, bytes, &dur);
        res = MS_RES_COMPUTE; /* a copy kernel: HBM bandwidth on the compute engine */
    } else {
        st = sim_cost_copy_parts(d->cm, kind, bytes, &dur, &xfer);
        res = kind == MS_COPY_H2D ? MS_RES_COPY_H2D : MS_RES_COPY_D2H;
    }
    if (st != MS_OK)
        return st;
    ms_work_item *it = item_new(s, MS_IK_COPY, issue_ns, tag);
    if (it == NULL)
        return MS_ENOMEM;
    it->res = (uint8_t)res;
    it->dur_ns = dur;
    it->remaining_ns = xfer;
    it->copy_kind = kind;
    it->bytes = bytes;
    it->name = "memcpy";
    enqueue(s, it);
    return MS_OK;
}

ms_status sim_stream_record(ms_simstream *s, ms_simevent *e, int64_t issue_ns)
{
    if (!usable(s) || e == NULL || e->dev != s->dev)
        return MS_EINVAL;
    ms_simdev *d = s->dev;
    ms_work_item *it = item_new(s, MS_IK_RECORD, issue_ns, 0);
    if (it == NULL)
        return MS_ENOMEM;
    ms_capture *c = sim_pool_capture_get(d); /* the item's reference */
    if (c == NULL) {
        item_drop(s, it);
        return MS_ENOMEM;
    }
    c->refs++; /* the event's reference */
    sim_capture_unref(d, e->latest);
    e->latest = c;
    it->cap = c;
    enqueue(s, it);
    return MS_OK;
}

ms_status sim_stream_wait_event(ms_simstream *s, ms_simevent *e, int64_t issue_ns)
{
    if (!usable(s) || e == NULL || e->dev != s->dev)
        return MS_EINVAL;
    /* Waiting on an event never recorded is a no-op in CUDA; one whose
     * capture already ran has nothing left to wait for. */
    if (e->latest == NULL || e->latest->done)
        return MS_OK;
    ms_work_item *it = item_new(s, MS_IK_WAIT, issue_ns, 0);
    if (it == NULL)
        return MS_ENOMEM;
    it->cap = e->latest;
    it->cap->refs++;
    enqueue(s, it);
    return MS_OK;
}

/* A blocked head (wait or p2p receive) re-checks what it waits for. */
static bool unblock_head(ms_simstream *s, ms_work_item *it)
{
    ms_simdev *d = s->dev;
    if (it->kind == MS_IK_WAIT) {
        if (!it->cap->done)
            return false;
    } else if (!sim_p2p_take(d->sim, it->peer, d->index, it->p2p_tag)) {
        return false;
    }
    sim_dev_finish_item(d, it);
    return true;
}

/* The head just became ready at the device clock. */
static bool start_head(ms_simstream *s, ms_work_item *it, int64_t now)
{
    ms_simdev *d = s->dev;
    it->ready_ns = now;
    switch ((ms_item_res)it->res) {
    case MS_RES_NONE:
        if (it->kind == MS_IK_RECORD) {
            it->cap->done = true;
            it->cap->time_ns = now;
            d->redo |= SIM_REDO_CAPTURES;
            sim_dev_touch(d);
        } else if (!it->cap->done) {
            it->state = MS_IS_WAITING;
            return false;
        }
        sim_dev_finish_item(d, it);
        return true;
    case MS_RES_COMPUTE:
        it->state = MS_IS_READY; /* the serial engine picks among ready heads */
        sim_serial_engine_add_ready(&d->compute, it);
        return false;
    case MS_RES_COMM:
        it->state = MS_IS_RUNNING;
        it->start_ns = now;
        s->not_started--;
        sim_dev_touch(d);
        sim_link_engine_start(&d->net[it->net], it);
        return false;
    case MS_RES_P2P_RECV:
        /* A receive occupies its stream from now until its send arrives,
         * which may be already. */
        it->state = MS_IS_WAITING;
        it->start_ns = now;
        s->not_started--;
        sim_dev_touch(d);
        return unblock_head(s, it);
    default: /* MS_RES_COPY_H2D, MS_RES_COPY_D2H */
        it->state = MS_IS_RUNNING;
        it->start_ns = now;
        s->not_started--;
        sim_dev_touch(d);
        sim_link_engine_start(&d->copy[it->copy_kind], it);
        return false;
    }
}

bool sim_stream_advance(ms_simstream *s)
{
    ms_simdev *d = s->dev;
    int64_t now = sim_clock(d->sim);
    bool changed = false;
    for (;;) {
        ms_work_item *it = s->head;
        if (it == NULL || it->state == MS_IS_READY || it->state == MS_IS_RUNNING)
            break;
        bool popped;
        if (it->state == MS_IS_WAITING) {
            popped = unblock_head(s, it);
        } else if (it->issue_ns > now) {
            /* Not yet issued by the host: come back when it is. */
            if (!it->arrival_kicked) {
                it->arrival_kicked = true;
                sim_dev_kick(d, it->issue_ns);
            }
            break;
        } else {
            popped = start_head(s, it, now);
        }
        if (!popped)
            break;
        changed = true;
    }
    return changed;
}
