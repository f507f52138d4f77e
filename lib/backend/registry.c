/* Backends register by name; the real ones only where configure built them
 * (Redis's ae.c pattern: one interface, implementations chosen at build
 * time).  Each entry is the backend's group opener, declared here by its
 * type so that nothing above backend.h includes a backend's own header. */
#include "config.h" /* MS_WITH_CUDA, MS_WITH_ASCEND */

#include "memsim/backend.h"

#include <string.h>

ms_group_open_fn mock_group_open;
#ifdef MS_WITH_CUDA
ms_group_open_fn ms_npu_group_open_cuda;
#endif
#ifdef MS_WITH_ASCEND
ms_group_open_fn ms_npu_group_open_acl;
#endif

static const struct {
    const char *name;
    ms_group_open_fn *open;
} registry[] = {
    {"mock", mock_group_open},
#ifdef MS_WITH_CUDA
    {"cuda", ms_npu_group_open_cuda},
#endif
#ifdef MS_WITH_ASCEND
    {"npu", ms_npu_group_open_acl},
#endif
};

#define N_BACKENDS (sizeof registry / sizeof registry[0])

const char *ms_backend_names(void)
{
    return "mock"
#ifdef MS_WITH_CUDA
           ", cuda"
#endif
#ifdef MS_WITH_ASCEND
           ", npu"
#endif
        ;
}

/* The registry name in the CLI's spelling "cuda:1" (device ordinal after the
 * colon, which the caller passes in the config). */
static size_t name_length(const char *name)
{
    const char *colon = strchr(name, ':');
    return colon ? (size_t)(colon - name) : strlen(name);
}

ms_status ms_group_open(const char *backend, const ms_group_config *cfg, ms_device_group **out,
                        ms_diag *d)
{
    if (backend == NULL || cfg == NULL || cfg->spec == NULL || out == NULL || cfg->n_devices < 1)
        return ms_diag_set(d, MS_EINVAL, "ms_group_open: NULL argument or no devices");
    *out = NULL;
    size_t len = name_length(backend);
    for (size_t i = 0; i < N_BACKENDS; i++)
        if (strlen(registry[i].name) == len && strncmp(registry[i].name, backend, len) == 0)
            return registry[i].open(cfg, out, d);
    if ((len == 3 && strncmp(backend, "npu", 3) == 0) ||
        (len == 4 && strncmp(backend, "cuda", 4) == 0))
        return ms_diag_set(d, MS_EUNSUPPORTED,
                           "backend '%.*s' is not built in (configure --with-%s); this build "
                           "has: %s", (int)len, backend, len == 3 ? "ascend" : "cuda",
                           ms_backend_names());
    return ms_diag_set(d, MS_ENOENT, "unknown backend '%s' (this build has: %s)", backend,
                       ms_backend_names());
}
