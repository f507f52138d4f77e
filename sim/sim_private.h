/* sim/: what the engine shares with the device models beside it.  Nothing
 * outside sim/ includes this. */
#ifndef MEMSIM_SIM_PRIVATE_H
#define MEMSIM_SIM_PRIVATE_H

#include <stddef.h>

#include "sim/sim.h"

/* p2p sends that finished before their receive was ready (eager protocol). */
typedef struct ms_p2p_delivery {
    int src, dst, tag;
} ms_p2p_delivery;

/* Everything attached to one engine: the host threads (for the conservative
 * bound on how far a host may run the engine), the devices (for p2p peers),
 * and the p2p mailbox.  Owned by the engine; devices and hosts attach to it
 * so that no state is global. */
typedef struct ms_sim_attachments {
    ms_simhost *hosts;  /* creation order */
    ms_simhost *hosts_tail;
    int n_hosts;
    int n_parked;
    int n_parked_unwatched; /* parked hosts without sim_host_watch */
    /* Devices changed since their watching host's condition was last asked
     * (intrusive list through ms_simdev.dirty_next; see sim_dev_touch). */
    ms_simdev *dirty;
    /* Times any host's clock moved forward: the cooperative scheduler asks
     * "did anything move during that turn" without looking at every host. */
    uint64_t clock_moves;
    /* Hosts whose clock or parked state changed since the last
     * sim_hosts_drain_changes (intrusive list through ms_simhost). */
    ms_simhost *changed_hosts;
    /* The active hosts, a binary min-heap by clock (host.c, horizon):
     * room for every host is made when it is created. */
    ms_simhost **active;
    size_t n_active, cap_active;
    bool heap_on; /* from HEAP_HOSTS hosts on */
    ms_simdev **devs;   /* creation order */
    size_t n_devs, cap_devs;
    ms_p2p_delivery *mail; /* delivery order */
    size_t n_mail, cap_mail;
} ms_sim_attachments;

/* host.c: a device going away leaves the dirty list and its watcher. */
void sim_host_unwatch_device(ms_simdev *d);
/* host.c, for sim_state.c: the hosts' part of a state, and its shift. */
ms_status sim_hosts_state_write(const ms_sim *sim, ms_state_sig *sig);
void sim_hosts_shift(ms_sim *sim, int64_t delta_ns);

typedef struct ms_sim_event {
    int64_t t;
    uint64_t seq;
    ms_sim_fn fn;
    void *arg;
} ms_sim_event;

/* The engine (engine.c owns it; the models read its clock inline). */
struct ms_sim {
    int64_t now;
    uint64_t next_seq;
    uint64_t n_run;
    ms_sim_event *heap; /* binary min-heap on (t, seq) */
    size_t n, cap;
    ms_sim_attachments att;
};

static inline ms_sim_attachments *sim_attached(ms_sim *sim)
{
    return &sim->att;
}

/* Fast internal forms of the public calls (no argument checks). */
static inline int64_t sim_clock(const ms_sim *sim)
{
    return sim->now;
}

static inline bool sim_peek(const ms_sim *sim, int64_t *t_ns)
{
    if (sim->n == 0)
        return false;
    *t_ns = sim->heap[0].t;
    return true;
}

void sim_step_one(ms_sim *sim);
/* Remove every pending event for which pred is true; returns how many. */
typedef bool (*ms_sim_cancel_pred)(ms_sim_fn fn, void *arg, const void *ctx);
uint64_t sim_cancel_if(ms_sim *sim, ms_sim_cancel_pred pred, const void *ctx);

/* p2p mailbox (p2p.c). */
ms_simdev *sim_p2p_find_device(ms_sim *sim, int index);
ms_status sim_p2p_attach(ms_sim *sim, ms_simdev *d, int index);
void sim_p2p_detach(ms_sim *sim, ms_simdev *d, int index);
/* A SEND from src to dst with tag finished: post it and wake dst. */
ms_status sim_p2p_post(ms_sim *sim, int src, int dst, int tag);
/* Take the oldest posted SEND matching (src, dst, tag); false if none. */
bool sim_p2p_take(ms_sim *sim, int src, int dst, int tag);

#endif
