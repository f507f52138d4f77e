/* A device group on a real runtime: one device (a pipeline stage run alone,
 * memsim run --stage K), its body run on the calling thread, which is the
 * thread the runtime's current device was set on.  Opening says what this
 * machine has when the device asked for is not there. */
#include <stdlib.h>

#include "runtime.h"

typedef struct npu_group {
    ms_device_group g;
    ms_backend *device;
} npu_group;

static ms_status group_run(void *inst, ms_group_body body, void *user)
{
    (void)inst;
    return body(user, 0);
}

/* One device: nothing else waits for it. */
static ms_status group_cancel(void *inst)
{
    (void)inst;
    return MS_OK;
}

static ms_status group_destroy(void *inst)
{
    npu_group *g = inst;
    ms_status st = g->device != NULL ? ms_backend_close(g->device) : MS_OK;
    free(g);
    return st;
}

static const ms_group_ops npu_group_ops = {
    .name = "npu",
    .run = group_run,
    .cancel = group_cancel,
    .destroy = group_destroy,
};

/* "no CUDA runtime: cannot load ..." / "no CUDA device: ..." / "cuda:3
 * does not exist: ...", with what the machine has. */
static ms_status check_device(const npu_runtime *rt, const ms_group_config *cfg, ms_diag *d)
{
    int n = 0;
    char why[1024] = "";
    ms_status st = rt->load != NULL ? rt->load(why, sizeof why) : MS_OK;
    if (st != MS_OK)
        return ms_diag_set(d, st, "no %s: %s (backends in this build: %s)", rt->runtime_noun, why,
                           ms_backend_names());
    st = rt->device_count(&n, why, sizeof why);
    if (st != MS_OK)
        return ms_diag_set(d, st, "%s: cannot count the %ss: %s", rt->name, rt->device_noun, why);
    if (n == 0)
        return ms_diag_set(d, MS_ENOENT, "no %s: %s (backends in this build: %s)", rt->device_noun,
                           why[0] ? why : "the runtime found none", ms_backend_names());
    if ((cfg->ordinal < 0 || cfg->ordinal >= n) && n == 1)
        return ms_diag_set(d, MS_ERANGE, "%s:%d does not exist: this machine has one %s (%s:0)",
                           rt->name, cfg->ordinal, rt->device_noun, rt->name);
    if (cfg->ordinal < 0 || cfg->ordinal >= n)
        return ms_diag_set(d, MS_ERANGE,
                           "%s:%d does not exist: this machine has %d %ss (%s:0 .. %s:%d)",
                           rt->name, cfg->ordinal, n, rt->device_noun, rt->name, rt->name, n - 1);
    if (cfg->n_devices != 1)
        return ms_diag_set(d, MS_EUNSUPPORTED,
                           "%s runs one pipeline stage on one %s; %d asked for "
                           "(run one stage with --stage K)",
                           rt->name, rt->device_noun, cfg->n_devices);
    return MS_OK;
}

ms_status npu_group_open(const npu_runtime *rt, const ms_group_config *cfg, ms_device_group **out,
                         ms_diag *d)
{
    if (rt == NULL || cfg == NULL || out == NULL || cfg->n_devices < 1 || cfg->first_device < 0)
        return ms_diag_set(d, MS_EINVAL, "npu: bad device group configuration");
    *out = NULL;
    ms_status st = check_device(rt, cfg, d);
    if (st != MS_OK)
        return st;
    npu_group *g = calloc(1, sizeof *g);
    if (g == NULL)
        return MS_ENOMEM;
    if ((st = npu_device_open(rt, cfg->ordinal, cfg->first_device, &g->device, d)) != MS_OK) {
        free(g);
        return st;
    }
    g->g =
        (ms_device_group){.ops = &npu_group_ops, .inst = g, .n_devices = 1, .devices = &g->device};
    *out = &g->g;
    return MS_OK;
}
