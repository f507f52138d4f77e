/* Pipeline p2p between devices attached to one engine.  A SEND is eager: it
 * runs on its device's comm link and, once finished, its data waits in the
 * receiver's mailbox; a RECV completes when the matching SEND (same source,
 * destination and tag, taken in FIFO order) has been posted.  The devices
 * and the mailbox hang off the engine, so nothing here is global. */
#include <stdlib.h>

#include "device_model.h"
#include "sim_private.h"
#include "lib/base/growable.h"

ms_simdev *sim_p2p_find_device(ms_sim *sim, int index)
{
    ms_sim_attachments *a = sim_attached(sim);
    for (size_t i = 0; i < a->n_devs; i++)
        if (a->devs[i]->index == index)
            return a->devs[i];
    return NULL;
}

ms_status sim_p2p_attach(ms_sim *sim, ms_simdev *d, int index)
{
    ms_sim_attachments *a = sim_attached(sim);
    if (sim_p2p_find_device(sim, index) != NULL)
        return MS_EINVAL; /* a device index names one device per engine */
    if (!MS_GROW(a->devs, a->n_devs, a->cap_devs, 4))
        return MS_ENOMEM;
    a->devs[a->n_devs++] = d;
    return MS_OK;
}

void sim_p2p_detach(ms_sim *sim, ms_simdev *d, int index)
{
    ms_sim_attachments *a = sim_attached(sim);
    size_t k = 0;
    for (size_t i = 0; i < a->n_devs; i++)
        if (a->devs[i] != d)
            a->devs[k++] = a->devs[i];
    a->n_devs = k;
    /* Mail to a device that is gone would be taken by a later device that
     * reuses its index. */
    k = 0;
    for (size_t i = 0; i < a->n_mail; i++)
        if (a->mail[i].dst != index)
            a->mail[k++] = a->mail[i];
    a->n_mail = k;
}

ms_status sim_p2p_post(ms_sim *sim, int src, int dst, int tag)
{
    ms_sim_attachments *a = sim_attached(sim);
    if (!MS_GROW(a->mail, a->n_mail, a->cap_mail, 16))
        return MS_ENOMEM;
    a->mail[a->n_mail++] = (ms_p2p_delivery){src, dst, tag};
    ms_simdev *peer = sim_p2p_find_device(sim, dst);
    if (peer != NULL)
        sim_dev_kick(peer, sim_clock(sim));
    return MS_OK;
}

bool sim_p2p_take(ms_sim *sim, int src, int dst, int tag)
{
    ms_sim_attachments *a = sim_attached(sim);
    for (size_t i = 0; i < a->n_mail; i++) {
        ms_p2p_delivery *m = &a->mail[i];
        if (m->src == src && m->dst == dst && m->tag == tag) {
            /* Keep delivery order for the other keys. */
            for (size_t j = i + 1; j < a->n_mail; j++)
                a->mail[j - 1] = a->mail[j];
            a->n_mail--;
            return true;
        }
    }
    return false;
}

void sim_p2p_sent(ms_simdev *d, const ms_work_item *it)
{
    if (it->kind != MS_IK_KERNEL || it->comm != MS_COMM_SEND)
        return;
    if (sim_p2p_find_device(d->sim, it->peer) != NULL &&
        sim_p2p_post(d->sim, d->index, it->peer, it->p2p_tag) != MS_OK)
        d->fault = MS_ENOMEM;
}
