/* Work items and event captures are recycled through per-device free lists
 * fed by slabs, so a steady-state simulation allocates nothing per launch. */
#include <stdlib.h>

#include "device_model.h"

enum { ITEMS_PER_SLAB = 512, CAPS_PER_SLAB = 256 };

static void *slab_new(ms_simdev *d, size_t payload)
{
    /* The slab header is padded to the items' alignment. */
    size_t head = (sizeof(ms_slab) + sizeof(max_align_t) - 1) / sizeof(max_align_t) *
                  sizeof(max_align_t);
    ms_slab *s = malloc(head + payload);
    if (s == NULL)
        return NULL;
    s->next = d->slabs;
    d->slabs = s;
    return (char *)s + head;
}

bool sim_pool_items_refill(ms_simdev *d)
{
    ms_work_item *v = slab_new(d, ITEMS_PER_SLAB * sizeof *v);
    if (v == NULL)
        return false;
    for (size_t i = 0; i < ITEMS_PER_SLAB; i++) {
        v[i].next = d->free_items;
        d->free_items = &v[i];
    }
    return true;
}

bool sim_pool_captures_refill(ms_simdev *d)
{
    ms_capture *v = slab_new(d, CAPS_PER_SLAB * sizeof *v);
    if (v == NULL)
        return false;
    for (size_t i = 0; i < CAPS_PER_SLAB; i++) {
        v[i].next_free = d->free_caps;
        d->free_caps = &v[i];
    }
    return true;
}

void sim_pool_free_all(ms_simdev *d)
{
    while (d->slabs != NULL) {
        ms_slab *s = d->slabs;
        d->slabs = s->next;
        free(s);
    }
    d->free_items = NULL;
    d->free_caps = NULL;
}
