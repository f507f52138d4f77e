/* Closing a backend is the same for every implementation: the instance goes
 * through its own destroy, the handle is freed here. */
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
