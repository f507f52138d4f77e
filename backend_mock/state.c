/* The mock's part of a state between steps (fast-forward, backend.h
 * ms_state_sig): the engine's (sim_state.c) plus what the mock keeps above
 * it, the address spaces whose next first fit decides every address. */
#include "mock_private.h"

#include <stdlib.h>

static void write_ranges(const ms_range_set *rs, ms_state_sig *sig)
{
    ms_state_sig_u64(sig, rs->n);
    if (rs->n > 0)
        ms_state_sig_put(sig, rs->v, rs->n * sizeof *rs->v);
}

/* The allocations in address order, as the free list is. */
static ms_status write_addrspace(const ms_addrspace *as, ms_state_sig *sig)
{
    write_ranges(&as->free, sig);
    ms_range *used;
    ms_status st = base_addr_map_sorted(&as->used, &used);
    if (st != MS_OK)
        return st;
    ms_state_sig_u64(sig, as->used.n);
    if (as->used.n > 0)
        ms_state_sig_put(sig, used, as->used.n * sizeof *used);
    free(used);
    return MS_OK;
}

/* The functional mode's bytes are state too, and not written: a data check
 * simulates every step. */
ms_status mock_state_write(const ms_backend *b, ms_state_sig *sig)
{
    if (b == NULL || sig == NULL)
        return MS_EINVAL;
    const ms_mock *m = b->inst;
    if (m->data != NULL)
        return MS_EUNSUPPORTED;
    ms_state_sig_u64(sig, m->host_used);
    ms_status st = write_addrspace(&m->dev_as, sig);
    if (st == MS_OK)
        st = write_addrspace(&m->host_as, sig);
    if (st != MS_OK)
        return st;
    ms_state_sig_u64(sig, m->n_resv);
    for (size_t i = 0; i < m->n_resv; i++) {
        ms_state_sig_put(sig, &m->resv[i].range, sizeof m->resv[i].range);
        write_ranges(&m->resv[i].mapped, sig);
    }
    return sig->st;
}

/* A wait on e waits for nothing once its capture completed; before its
 * first record it waits for nothing either (CUDA's rule). */
ms_status mock_event_state(void *inst, const ms_event *e, ms_state_sig *sig)
{
    const ms_mock *m = inst;
    if (m == NULL || e == NULL || e->owner != m || sig == NULL)
        return MS_EINVAL;
    bool recorded = false, complete = false;
    sim_event_status(e->se, &recorded, &complete, NULL);
    if (recorded && !complete)
        return MS_EAGAIN;
    return ms_state_sig_u64(sig, recorded);
}
