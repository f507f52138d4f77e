/* sim/: the structures of a simulated device, shared by its models (stream.c,
 * device_event.c, serial_engine.c, link_engine.c, device.c).
 * Nothing outside sim/ includes this. */
#ifndef MEMSIM_SIM_DEVICE_MODEL_H
#define MEMSIM_SIM_DEVICE_MODEL_H

#include <math.h>
#include <stddef.h>

#include "lib/base/obj_fifo.h"
#include "lib/base/obj_pool.h"
#include "sim/sim.h"
#include "sim_private.h"

/* Round a fractional duration up to whole ns, forgiving float noise so that
 * 100000.0000001 stays 100000 (the cost model and the copy engine agree). */
static inline int64_t sim_ceil_ns(double t)
{
    return (int64_t)ceil(t - 1e-6);
}

typedef enum ms_item_kind { MS_IK_KERNEL = 0, MS_IK_COPY, MS_IK_RECORD, MS_IK_WAIT } ms_item_kind;

/* Where an item runs once it is at the head of its stream. */
typedef enum ms_item_res {
    MS_RES_NONE = 0, /* event record / wait: instantaneous */
    MS_RES_COMPUTE,  /* compute-class kernels, D2D copies */
    MS_RES_COMM,     /* collectives, SENDs, RECVs from unattached peers: a network link */
    MS_RES_P2P_RECV, /* RECV from an attached peer: waits for the SEND */
    MS_RES_COPY_H2D,
    MS_RES_COPY_D2H
} ms_item_res;

typedef enum ms_item_state {
    MS_IS_QUEUED = 0, /* not yet at the head, or not yet issued */
    MS_IS_READY,      /* at the head, waiting for its serial engine */
    MS_IS_RUNNING,    /* started (a copy or kernel in progress) */
    MS_IS_WAITING     /* a wait or p2p receive blocked on something else */
} ms_item_state;

/* A capture made by one event record; shared by the event (its latest),
 * the record item, and wait items that saw it. */
typedef struct ms_capture {
    uint32_t refs;
    bool done;
    int64_t time_ns;
} ms_capture;

typedef struct ms_work_item {
    struct ms_work_item *next; /* stream FIFO */
    struct ms_work_item *link; /* copy engine lists; a serial engine's ready list */
    ms_simstream *stream;
    uint8_t kind, res, state;
    uint8_t net;         /* MS_RES_COMM: its ms_link_kind */
    bool arrival_kicked; /* a kick is scheduled for its issue time */
    int64_t issue_ns, ready_ns, start_ns;
    int64_t dur_ns;      /* compute: cost; link transfers: latency */
    double remaining_ns; /* link transfers: exclusive link time still to move */
    int64_t lat_end_ns;
    uint64_t seq, tag, bytes;
    const char *name;
    ms_copy_kind copy_kind;
    ms_comm_kind comm;
    int peer, p2p_tag;
    ms_capture *cap; /* record / wait */
} ms_work_item;

/* A device resource that runs one item at a time (the compute engine). */
typedef struct ms_serial_engine {
    ms_simdev *dev;
    ms_item_res res;
    ms_work_item *current;
    /* Stream heads waiting for this engine, in no particular order: the
     * dispatch rule is a total order on them (seq is unique per device), so
     * the pick does not depend on where they sit.  Kept so that a dispatch
     * looks at these few instead of at every stream's head. */
    ms_work_item *ready;
} ms_serial_engine;

/* A link that moves bytes with processor sharing (link_engine.c): a
 * direction of the host link, or a network. */
typedef struct ms_link_engine {
    ms_simdev *dev;
    ms_work_item *lat_head, *lat_tail; /* in their latency phase, by its end */
    ms_work_item *act_head, *act_tail; /* sharing the bandwidth */
    uint32_t n_active;
    int64_t last_update_ns;
    int64_t wake_at;
    bool wake_pending;
    /* A byte takes this many times the cost model's time: 1 + the device's
     * overlap_copy_slowdown for a host copy while the compute engine runs;
     * 1 otherwise and on the network links. */
    double stretch;
} ms_link_engine;

struct ms_simstream {
    ms_simdev *dev;
    uint64_t id;
    int priority;
    ms_work_item *head, *tail;
    base_fifo items; /* head..tail's memory, in queue order (obj_fifo.h) */
    uint32_t queued, not_started;
    int64_t last_done_ns;
    bool destroyed; /* freed by the device once drained */
};

struct ms_simevent {
    ms_simdev *dev;
    ms_capture *latest;
    struct ms_simevent *prev, *next; /* the device's open events */
};

struct ms_simdev {
    ms_sim *sim;
    int index;
    ms_device_spec spec;
    ms_cost_model *cm;
    ms_simstream **streams; /* creation order, destroyed ones until drained */
    size_t n_streams, cap_streams;
    uint64_t next_stream_id;
    ms_serial_engine compute;
    ms_link_engine copy[2]; /* [MS_COPY_H2D], [MS_COPY_D2H] */
    ms_link_engine net[2];  /* [MS_LINK_INTRA_NODE], [MS_LINK_INTER_NODE] */
    uint64_t hbm_used, hbm_peak;
    uint64_t next_seq;
    /* Recycled: a steady-state simulation allocates nothing per launch,
     * record or event (lib/base/obj_pool.h here; a stream's items reuse its
     * FIFO's chunks). */
    base_pool caps, events_pool;
    ms_simevent *events;
    ms_work_tracer tracer;
    void *tracer_user;
    int64_t kick_at;
    bool kick_pending;
    bool in_kick;   /* dispatch now: same-time readiness has been collected */
    bool settling;
    /* Why a settle must advance every stream again (SIM_REDO_*).  One byte,
     * not two bools: the loop that clears and tests them let the compiler
     * test both with one wide load right after the byte stores, which the
     * CPU cannot forward from its store buffer (perf: 3.7% of the shipped
     * llama2-70B stalled there). */
    uint8_t redo;
    bool sweep;     /* a destroyed stream may have drained */
    /* Sticky: the engine could not grow inside a callback (MS_ENOMEM), or
     * a stream's items left it out of order (MS_EINTERNAL, stream.c). */
    ms_status fault;
    /* The host whose waits read this device (sim_host_watch), and whether
     * the device changed since that host's condition was last found false:
     * with 64 pipeline stages, asking every parked host after every engine
     * event was a fifth of a step. */
    ms_simhost *watcher;
    ms_simdev *dirty_next;
    bool dirty;
};

enum {
    SIM_REDO_RESETTLE = 1, /* a settle was asked for while one ran */
    SIM_REDO_CAPTURES = 2  /* a record ran: waits on other streams may go on */
};

/* What a waiting host can observe changed: a stream's queued or not-started
 * count, or a capture completing.  Its watcher's condition is asked again
 * after this engine step (and only then). */
static inline void sim_dev_touch(ms_simdev *d)
{
    if (d->dirty)
        return;
    d->dirty = true;
    ms_sim_attachments *a = sim_attached(d->sim);
    d->dirty_next = a->dirty;
    a->dirty = d;
}

/* Captures and events come from the device's pools; returned, their memory
 * serves the next one (a stream's items come from its FIFO). */
/* A fresh capture holding one reference. */
static inline ms_capture *sim_pool_capture_get(ms_simdev *d)
{
    ms_capture *c = base_pool_get(&d->caps);
    if (c != NULL)
        *c = (ms_capture){.refs = 1};
    return c;
}

static inline void sim_capture_unref(ms_simdev *d, ms_capture *c)
{
    if (c == NULL || --c->refs > 0)
        return;
    base_pool_put(&d->caps, c);
}

/* device.c */
/* Bring the device up to date at the engine's clock: advance stream heads
 * (only `changed`'s when it is given and no event record completes, else
 * every stream's), then start what the serial engines can run. */
void sim_dev_settle(ms_simdev *d, ms_simstream *changed);
/* Settle d at time t from inside the engine. */
void sim_dev_kick(ms_simdev *d, int64_t t);
/* An item finished now: report it, pop it off its stream, recycle it. */
void sim_dev_finish_item(ms_simdev *d, ms_work_item *it);
/* True if some other event is due at the engine's current time, so the
 * dispatch of a serial engine should wait for it (see serial_engine.c). */
bool sim_dev_defer_dispatch(ms_simdev *d);

/* stream.c */
/* Advance s's head as far as it can go now; true if anything changed. */
bool sim_stream_advance(ms_simstream *s);
/* Pops s's head, `it`, and fetches the items that will be its head next. */
void sim_stream_pop(ms_simstream *s, ms_work_item *it);
/* Frees a stream and whatever it still holds. */
void sim_stream_free(ms_simstream *s);

/* serial_engine.c */
void sim_serial_engine_init(ms_serial_engine *e, ms_simdev *d, ms_item_res res);
/* The head it became ready for e (state already MS_IS_READY). */
static inline void sim_serial_engine_add_ready(ms_serial_engine *e, ms_work_item *it)
{
    it->link = e->ready;
    e->ready = it;
}
void sim_serial_engine_dispatch(ms_serial_engine *e);
void sim_serial_engine_done(ms_sim *sim, void *arg);

/* link_engine.c */
void sim_link_engine_init(ms_link_engine *ce, ms_simdev *d);
/* it (latency in dur_ns, exclusive transfer time in remaining_ns) started now. */
void sim_link_engine_start(ms_link_engine *ce, ms_work_item *it);
void sim_link_engine_wake(ms_sim *sim, void *arg);
/* When the link runs out of work if nothing more arrives (INT64_MIN: idle). */
int64_t sim_link_engine_busy_until(const ms_link_engine *ce);
void sim_link_engine_set_slowdown(ms_link_engine *ce, int64_t now, double slow);

/* p2p.c: an item finished on a link; a SEND to an attached peer posts its
 * data to the peer's mailbox (an eager send). */
void sim_p2p_sent(ms_simdev *d, const ms_work_item *it);

/* device.c's kick handler (an engine event). */
void sim_dev_kick_event(ms_sim *sim, void *arg);

#endif
