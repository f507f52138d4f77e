/* Device events (cudaEvent / aclrtEvent).  Each record makes a new capture;
 * the event handle points at its latest one, and a wait holds on to the
 * capture it saw, so re-recording never changes what an earlier wait waits
 * for (CUDA semantics). */
#include "device_model.h"

ms_status sim_event_create(ms_simdev *d, ms_simevent **out)
{
    if (d == NULL || out == NULL)
        return MS_EINVAL;
    ms_simevent *e = base_pool_get(&d->events_pool);
    if (e == NULL)
        return MS_ENOMEM;
    *e = (ms_simevent){.dev = d, .next = d->events};
    if (d->events != NULL)
        d->events->prev = e;
    d->events = e;
    *out = e;
    return MS_OK;
}

ms_status sim_event_destroy(ms_simevent *e)
{
    if (e == NULL)
        return MS_EINVAL;
    ms_simdev *d = e->dev;
    /* A pending capture stays alive through its record item's reference. */
    sim_capture_unref(d, e->latest);
    if (e->prev != NULL)
        e->prev->next = e->next;
    else
        d->events = e->next;
    if (e->next != NULL)
        e->next->prev = e->prev;
    base_pool_put(&d->events_pool, e);
    return MS_OK;
}

ms_status sim_event_status(const ms_simevent *e, bool *recorded, bool *complete, int64_t *time_ns)
{
    if (e == NULL)
        return MS_EINVAL;
    const ms_capture *c = e->latest;
    if (recorded != NULL)
        *recorded = c != NULL;
    if (complete != NULL)
        *complete = c == NULL || c->done;
    if (time_ns != NULL && c != NULL && c->done)
        *time_ns = c->time_ns;
    return MS_OK;
}
