/* Backends register by name; the real ones only where configure built them
 * (the ae.c pattern: one interface, implementations chosen at build time). */
#include "memsim/backend.h"

#include <string.h>

#include "backend_mock/mock.h"

static ms_status open_mock(const ms_backend_config *cfg, ms_backend **out, ms_diag *d)
{
    if (cfg->engine == NULL)
        return ms_diag_set(d, MS_EINVAL, "the mock backend needs a simulation engine");
    return ms_mock_create(cfg->engine, cfg->spec, cfg->device, cfg->seed, out);
}

static const struct {
    const char *name;
    ms_status (*open)(const ms_backend_config *cfg, ms_backend **out, ms_diag *d);
} registry[] = {
    {"mock", open_mock},
};

ms_status ms_backend_open(const char *name, const ms_backend_config *cfg, ms_backend **out,
                          ms_diag *d)
{
    if (name == NULL || cfg == NULL || cfg->spec == NULL || out == NULL)
        return MS_EINVAL;
    *out = NULL;
    for (size_t i = 0; i < sizeof registry / sizeof registry[0]; i++)
        if (strcmp(registry[i].name, name) == 0)
            return registry[i].open(cfg, out, d);
    if (strcmp(name, "npu") == 0 || strcmp(name, "cuda") == 0)
        return ms_diag_set(d, MS_EUNSUPPORTED,
                           "backend '%s' is not built in (configure --with-%s)", name,
                           strcmp(name, "npu") == 0 ? "ascend" : "cuda");
    return ms_diag_set(d, MS_ENOENT, "unknown backend '%s' (known: mock, npu, cuda)", name);
}
