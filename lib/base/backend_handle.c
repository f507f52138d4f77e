/* Backend handles and device groups are the same for every implementation:
 * the instance goes through its own table, the handle is freed here. */
#include "memsim/backend.h"

#include <stdlib.h>

ms_status ms_backend_close(ms_backend *b)
{
    if (b == NULL)
        return MS_EINVAL;
    ms_status st = MS_OK;
    if (b->ops != NULL && b->ops->destroy != NULL)
        st = b->ops->destroy(b->inst);
    free(b);
    return st;
}

ms_status ms_backend_matmul_dtype(const ms_backend *b, const ms_kernel *k, ms_dtype *runs_as)
{
    if (b == NULL || b->ops == NULL || k == NULL || runs_as == NULL || k->cls != MS_KC_MATMUL ||
        (unsigned)k->dtype >= MS_DTYPE_COUNT)
        return MS_EINVAL;
    if (b->ops->matmul_dtype == NULL)
        return MS_EUNSUPPORTED;
    return b->ops->matmul_dtype(b->inst, k, runs_as);
}

ms_status ms_group_close(ms_device_group *g)
{
    if (g == NULL)
        return MS_EINVAL;
    return g->ops->destroy(g->inst);
}

ms_backend *ms_group_device(const ms_device_group *g, int i)
{
    return g != NULL && i >= 0 && i < g->n_devices ? g->devices[i] : NULL;
}

ms_status ms_group_run(ms_device_group *g, ms_group_body body, void *user)
{
    if (g == NULL || body == NULL)
        return MS_EINVAL;
    return g->ops->run(g->inst, body, user);
}

ms_status ms_group_cancel(ms_device_group *g)
{
    if (g == NULL)
        return MS_EINVAL;
    return g->ops->cancel(g->inst);
}

ms_status ms_group_state_write(ms_device_group *g, ms_state_sig *sig, int64_t *now_ns)
{
    if (g == NULL || sig == NULL || now_ns == NULL)
        return MS_EINVAL;
    if (g->ops->state_write == NULL)
        return MS_EUNSUPPORTED;
    return g->ops->state_write(g->inst, sig, now_ns);
}

ms_status ms_group_advance(ms_device_group *g, int64_t delta_ns)
{
    if (g == NULL || delta_ns < 0)
        return MS_EINVAL;
    if (g->ops->advance == NULL)
        return MS_EUNSUPPORTED;
    return g->ops->advance(g->inst, delta_ns);
}
