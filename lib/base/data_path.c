/* Shipped data (policies_lua/, scenarios/devices/) found wherever memsim
 * runs from: an explicit $MEMSIM_DATADIR, the source tree it was built in,
 * or the installed pkgdatadir. */
#include "memsim/status.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>

static bool is_dir(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

ms_status ms_data_path(const char *sub, char *buf, size_t n)
{
    if (sub == NULL || buf == NULL || n == 0)
        return MS_EINVAL;
    const char *roots[] = {getenv("MEMSIM_DATADIR"), MS_SRCDIR, MS_DATADIR};
    for (size_t i = 0; i < sizeof roots / sizeof roots[0]; i++) {
        if (roots[i] == NULL || roots[i][0] == '\0')
            continue;
        if ((size_t)snprintf(buf, n, "%s/%s", roots[i], sub) >= n)
            continue;
        if (is_dir(buf))
            return MS_OK;
    }
    return MS_ENOENT;
}
