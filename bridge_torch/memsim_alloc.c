/* libmemsim_alloc.so: the two functions of PyTorch's pluggable allocator
 * interface, and a few more for memsim_torch (ctypes).
 *
 *   torch.cuda.memory.CUDAPluggableAllocator(path, "memsim_alloc", "memsim_free")
 *   torch_npu.npu.memory.NPUPluggableAllocator(path, "memsim_alloc", "memsim_free")
 *
 * Settings come from the environment when a device is first used:
 * MEMSIM_ALLOC_TRACE (the CSV trace; "%d" in it becomes the device index),
 * MEMSIM_ALLOC_POLICY (a Lua policy whose `pool` hook and `pools` table
 * route requests), MEMSIM_ALLOC_CONF (PYTORCH_CUDA_ALLOC_CONF form),
 * MEMSIM_ALLOC_FLAVOUR (cuda or npu rules; default: the runtime's).
 *
 * The interface passes no user pointer, so the allocators of the process
 * live in one static table guarded by a mutex: the one place memsim keeps
 * state outside a context, because the caller gives it nowhere else. */
#include "config.h" /* MS_WITH_CUDA, MS_WITH_ASCEND */

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>

#include "bridge_torch/bridge.h"
#include "bridge_torch/memsim_alloc.h"

#define PLUGIN_API __attribute__((visibility("default")))
#define PLUGIN_MAX_DEVICES 64

typedef struct plugin {
    pthread_mutex_t lock;
    const npu_runtime *rt;
    bridge_alloc *dev[PLUGIN_MAX_DEVICES];
    bridge_context ctx; /* what the next requests are for, on every device */
    char error[2 * MS_DIAG_MAX];
} plugin;

static plugin the_plugin = {.lock = PTHREAD_MUTEX_INITIALIZER,
                            .ctx = {.kind = MS_TK_ACTIVATION, .forward = true}};

static const npu_runtime *built_runtime(void)
{
#if defined(MS_WITH_CUDA)
    return &npu_runtime_cuda;
#elif defined(MS_WITH_ASCEND)
    return &npu_runtime_acl;
#else
    return NULL;
#endif
}

PLUGIN_API int memsim_alloc_set_runtime(const void *runtime)
{
    const npu_runtime *rt = runtime;
    pthread_mutex_lock(&the_plugin.lock);
    ms_status st = MS_EINVAL;
    bool opened = false;
    for (int i = 0; i < PLUGIN_MAX_DEVICES; i++)
        opened = opened || the_plugin.dev[i] != NULL;
    if (!opened) {
        the_plugin.rt = rt;
        st = MS_OK;
    }
    pthread_mutex_unlock(&the_plugin.lock);
    return st == MS_OK ? 0 : -1;
}

static void set_error(const char *msg)
{
    snprintf(the_plugin.error, sizeof the_plugin.error, "%s", msg);
}

static ms_status options_from_env(const npu_runtime *rt, int device, char *trace, size_t n,
                                  bridge_options *o, ms_diag *d)
{
    *o = (bridge_options){.policy = getenv("MEMSIM_ALLOC_POLICY"),
                          .alloc_conf = getenv("MEMSIM_ALLOC_CONF"),
                          .flavour = strcmp(rt->name, "npu") == 0 ? MS_ALLOC_NPU : MS_ALLOC_CUDA};
    const char *fl = getenv("MEMSIM_ALLOC_FLAVOUR");
    if (fl != NULL && strcmp(fl, "cuda") != 0 && strcmp(fl, "npu") != 0)
        return ms_diag_set(d, MS_EINVAL, "MEMSIM_ALLOC_FLAVOUR='%s': expected cuda or npu", fl);
    if (fl != NULL)
        o->flavour = strcmp(fl, "npu") == 0 ? MS_ALLOC_NPU : MS_ALLOC_CUDA;
    const char *tp = getenv("MEMSIM_ALLOC_TRACE");
    if (tp == NULL || *tp == '\0')
        return MS_OK;
    const char *pct = strstr(tp, "%d");
    int w = pct ? snprintf(trace, n, "%.*s%d%s", (int)(pct - tp), tp, device, pct + 2)
                : snprintf(trace, n, "%s", tp);
    if (w < 0 || (size_t)w >= n)
        return ms_diag_set(d, MS_ERANGE, "MEMSIM_ALLOC_TRACE is longer than %zu bytes", n - 1);
    if (pct == NULL && device != 0)
        return ms_diag_set(d, MS_EINVAL,
                           "MEMSIM_ALLOC_TRACE='%s' names one file but device %d "
                           "is in use too: put %%d in the name",
                           tp, device);
    o->trace_path = trace;
    return MS_OK;
}

/* The device's allocator, opened on first use; NULL with the error set. */
static bridge_alloc *device_alloc(int device)
{
    if (device < 0 || device >= PLUGIN_MAX_DEVICES) {
        snprintf(the_plugin.error, sizeof the_plugin.error,
                 "memsim_alloc: device %d is out of range (0..%d)", device, PLUGIN_MAX_DEVICES - 1);
        return NULL;
    }
    if (the_plugin.dev[device] != NULL)
        return the_plugin.dev[device];
    const npu_runtime *rt = the_plugin.rt ? the_plugin.rt : built_runtime();
    if (rt == NULL) {
        set_error("memsim_alloc: libmemsim_alloc was built without a device runtime "
                  "(configure memsim --with-cuda or --with-ascend)");
        return NULL;
    }
    ms_diag d = {0};
    char trace[4096];
    bridge_options o;
    ms_status st = options_from_env(rt, device, trace, sizeof trace, &o, &d);
    if (st == MS_OK)
        st = bridge_alloc_open(rt, device, &o, &the_plugin.dev[device], &d);
    /* A context declared before the device's first request holds for it. */
    if (st == MS_OK)
        st = bridge_alloc_set_context(the_plugin.dev[device], &the_plugin.ctx);
    if (st != MS_OK) {
        snprintf(the_plugin.error, sizeof the_plugin.error, "memsim_alloc: device %d: %s", device,
                 d.msg[0] ? d.msg : ms_strerror(st));
        return NULL;
    }
    return the_plugin.dev[device];
}

PLUGIN_API void *memsim_alloc(ssize_t size, int device, void *stream)
{
    pthread_mutex_lock(&the_plugin.lock);
    bridge_alloc *b = device_alloc(device);
    uint64_t addr = 0;
    if (b != NULL && size < 0)
        set_error("memsim_alloc: negative size");
    else if (b != NULL) {
        ms_diag d = {0};
        /* On MS_ENOMEM d holds PyTorch's "CUDA out of memory. Tried to
         * allocate ..." message, word for word. */
        if (bridge_alloc_malloc(b, (uint64_t)size, stream, &addr, &d) != MS_OK)
            set_error(d.msg);
    }
    pthread_mutex_unlock(&the_plugin.lock);
    return (void *)(uintptr_t)addr;
}

PLUGIN_API void memsim_free(void *ptr, ssize_t size, int device, void *stream)
{
    (void)size;
    (void)stream;
    pthread_mutex_lock(&the_plugin.lock);
    bridge_alloc *b = device >= 0 && device < PLUGIN_MAX_DEVICES ? the_plugin.dev[device] : NULL;
    ms_diag d = {0};
    if (b == NULL && ptr != NULL)
        set_error("memsim_free: no allocator is open on that device");
    else if (bridge_alloc_free(b, (uint64_t)(uintptr_t)ptr, &d) != MS_OK)
        set_error(d.msg);
    pthread_mutex_unlock(&the_plugin.lock);
}

/* The last error (an OOM's CUDA-format message among them) into buf;
 * returns its length. */
PLUGIN_API int memsim_alloc_last_error(char *buf, size_t n)
{
    pthread_mutex_lock(&the_plugin.lock);
    int len = snprintf(buf, n, "%s", the_plugin.error);
    pthread_mutex_unlock(&the_plugin.lock);
    return len;
}

/* What the following requests are for (the pool hook sees it): kind is a
 * memsim tensor kind name ("weight", "activation", ...). 0 or -1. */
PLUGIN_API int memsim_alloc_set_context(const char *kind, int persistent, int forward)
{
    bridge_context c = {
        .kind = MS_TK_COUNT, .persistent = persistent != 0, .forward = forward != 0};
    for (int k = 0; kind != NULL && k < MS_TK_COUNT; k++)
        if (strcmp(kind, ms_tensor_kind_name((ms_tensor_kind)k)) == 0)
            c.kind = (ms_tensor_kind)k;
    pthread_mutex_lock(&the_plugin.lock);
    int rc = c.kind == MS_TK_COUNT ? -1 : 0;
    if (rc != 0)
        snprintf(the_plugin.error, sizeof the_plugin.error,
                 "memsim_alloc_set_context: unknown kind '%s'", kind ? kind : "(null)");
    else
        the_plugin.ctx = c;
    for (int i = 0; rc == 0 && i < PLUGIN_MAX_DEVICES; i++)
        if (the_plugin.dev[i] != NULL && bridge_alloc_set_context(the_plugin.dev[i], &c) != MS_OK)
            rc = -1;
    pthread_mutex_unlock(&the_plugin.lock);
    return rc;
}

PLUGIN_API int memsim_alloc_stats(int device, unsigned long long out[5])
{
    pthread_mutex_lock(&the_plugin.lock);
    bridge_alloc *b = device >= 0 && device < PLUGIN_MAX_DEVICES ? the_plugin.dev[device] : NULL;
    if (b != NULL) {
        ms_alloc_stats s = bridge_alloc_stats(b);
        out[0] = (unsigned long long)s.allocated_bytes[MS_STAT_ALL].current;
        out[1] = (unsigned long long)s.reserved_bytes[MS_STAT_ALL].current;
        out[2] = (unsigned long long)s.allocated_bytes[MS_STAT_ALL].peak;
        out[3] = (unsigned long long)s.reserved_bytes[MS_STAT_ALL].peak;
        out[4] = (unsigned long long)s.num_ooms;
    }
    pthread_mutex_unlock(&the_plugin.lock);
    return b != NULL ? 0 : -1;
}

/* torch.cuda.empty_cache() for memsim's allocator (the pluggable interface
 * of torch 2.x has no hook for it). */
PLUGIN_API int memsim_alloc_empty_cache(void)
{
    pthread_mutex_lock(&the_plugin.lock);
    int rc = 0;
    for (int i = 0; i < PLUGIN_MAX_DEVICES; i++)
        if (the_plugin.dev[i] != NULL && bridge_alloc_empty_cache(the_plugin.dev[i]) != MS_OK)
            rc = -1;
    pthread_mutex_unlock(&the_plugin.lock);
    return rc;
}

/* Release every device's memory and finish the traces.  Call it once the
 * tensors are gone (the end of the job); later frees are ignored, a later
 * allocation opens the device again. 0, or -1 with the error set. */
PLUGIN_API int memsim_alloc_shutdown(void)
{
    pthread_mutex_lock(&the_plugin.lock);
    int rc = 0;
    for (int i = 0; i < PLUGIN_MAX_DEVICES; i++) {
        ms_diag d = {0};
        if (bridge_alloc_close(the_plugin.dev[i], &d) != MS_OK) {
            set_error(d.msg);
            rc = -1;
        }
        the_plugin.dev[i] = NULL;
    }
    pthread_mutex_unlock(&the_plugin.lock);
    return rc;
}
