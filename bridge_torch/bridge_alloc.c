/* One device's allocator inside a PyTorch job: memsim's caching allocator
 * (lib/alloc, PyTorch's rules) over the runtime's segments, a Lua policy's
 * `pool` hook choosing the pool of each request (lifetime_pools.lua is
 * MindSpeed's memory-fragmentation feature), and the CSV trace.
 *
 * The pluggable interface gives a size, a device and a stream, nothing
 * about the tensor; what the pool hook is told (kind, persistent) is what
 * the caller declared for the requests that follow (bridge_context; the
 * memsim_torch module sets it while the model is built, during forward,
 * backward and the optimizer step).  Whether a tensor will be saved for
 * backward is not known when it is allocated, so `saved` is false. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "bridge_torch/bridge.h"

struct bridge_alloc {
    pthread_mutex_t lock; /* PyTorch may allocate from several threads */
    ms_backend *be;
    ms_alloc *a;
    ms_policy *policy;
    bridge_trace trace;
    char *trace_path;
    bridge_context ctx;
    uint64_t requests; /* the pool hook's tensor ids */
};

static ms_status open_policy(bridge_alloc *b, const bridge_options *o, ms_diag *d)
{
    ms_status st = bridge_policy_load(o->policy, o->policy_dir, &b->policy, d);
    uint32_t n = 0;
    const ms_pool_decl *pools = st == MS_OK ? ms_policy_pools(b->policy, &n) : NULL;
    for (uint32_t i = 0; st == MS_OK && i < n; i++) {
        ms_pool_options po = {.exact_segments = pools[i].exact_segments,
                              .lendable = pools[i].lendable};
        int id;
        st = ms_alloc_pool_create(b->a, pools[i].name, &po, &id);
        if (st != MS_OK)
            ms_diag_set(d, st, "pool '%s' of policy '%s': cannot create it", pools[i].name,
                        ms_policy_name(b->policy));
    }
    return st;
}

static ms_status open_allocator(bridge_alloc *b, const bridge_options *o, ms_diag *d)
{
    ms_alloc_config cfg;
    ms_status st = ms_alloc_config_default(o->flavour, &cfg);
    if (st == MS_OK && o->alloc_conf != NULL)
        st = ms_alloc_config_parse(o->alloc_conf, &cfg, d);
    if (st == MS_OK && cfg.expandable_segments)
        st = ms_diag_set(d, MS_EUNSUPPORTED,
                         "expandable_segments: the runtime layer maps no "
                         "virtual memory; leave it off");
    if (st == MS_OK && ms_alloc_create(b->be, &cfg, &b->a) != MS_OK)
        st = ms_diag_set(d, MS_EINTERNAL, "the allocator refused the runtime's backend");
    return st;
}

ms_status bridge_alloc_open(const npu_runtime *rt, int ordinal, const bridge_options *o,
                            bridge_alloc **out, ms_diag *d)
{
    if (rt == NULL || o == NULL || out == NULL)
        return ms_diag_set(d, MS_EINVAL, "bridge_alloc_open: NULL argument");
    *out = NULL;
    bridge_alloc *b = calloc(1, sizeof *b);
    if (b == NULL)
        return ms_diag_set(d, MS_ENOMEM, "out of host memory");
    pthread_mutex_init(&b->lock, NULL);
    b->ctx = (bridge_context){.kind = MS_TK_ACTIVATION, .forward = true};
    ms_status st = bridge_device_open(rt, ordinal, &b->be, d);
    if (st == MS_OK)
        st = open_allocator(b, o, d);
    if (st == MS_OK && o->policy != NULL)
        st = open_policy(b, o, d);
    if (st == MS_OK && o->trace_path != NULL) {
        b->trace_path = strdup(o->trace_path);
        st = b->trace_path ? bridge_trace_open(&b->trace, o->trace_path, d) : MS_ENOMEM;
        if (st == MS_OK)
            st = ms_alloc_set_observer(b->a, bridge_trace_event, &b->trace);
    }
    if (st != MS_OK) {
        bridge_alloc_close(b, NULL);
        return st;
    }
    *out = b;
    return MS_OK;
}

/* The pool of the next request: the policy's pool(tensor) on what the
 * caller declared (docs/torch.md). */
static ms_status choose_pool(bridge_alloc *b, uint64_t size, int *pool, ms_diag *d)
{
    *pool = 0;
    if (b->policy == NULL)
        return MS_OK;
    char name[64];
    ms_tensor t = {.id = (uint32_t)b->requests++,
                   .name = ms_tensor_kind_name(b->ctx.kind),
                   .bytes = size,
                   .dtype = MS_DTYPE_FP32,
                   .kind = b->ctx.kind,
                   .producer = MS_NONE,
                   .persistent = b->ctx.persistent,
                   .layer = MS_NONE,
                   .micro_batch = MS_NONE};
    ms_status st = ms_policy_pool(b->policy, &t, name, sizeof name, d);
    if (st == MS_OK)
        st = ms_alloc_pool_find(b->a, name, pool);
    return st;
}

ms_status bridge_alloc_malloc(bridge_alloc *b, uint64_t size, void *stream, uint64_t *addr,
                              ms_diag *d)
{
    if (b == NULL || addr == NULL)
        return ms_diag_set(d, MS_EINVAL, "bridge_alloc_malloc: NULL argument");
    *addr = 0;
    pthread_mutex_lock(&b->lock);
    ms_stream *s = NULL;
    int pool = 0;
    ms_status st = bridge_device_stream(b->be, stream, &s);
    if (st != MS_OK)
        ms_diag_set(d, st, "stream %p: cannot track it", stream);
    if (st == MS_OK)
        st = choose_pool(b, size, &pool, d);
    if (st == MS_OK)
        st = ms_alloc_malloc(b->a, size, s, pool, addr, d);
    pthread_mutex_unlock(&b->lock);
    return st;
}

ms_status bridge_alloc_free(bridge_alloc *b, uint64_t addr, ms_diag *d)
{
    if (b == NULL)
        return ms_diag_set(d, MS_EINVAL, "bridge_alloc_free: NULL argument");
    if (addr == 0)
        return MS_OK;
    pthread_mutex_lock(&b->lock);
    ms_status st = ms_alloc_free(b->a, addr);
    pthread_mutex_unlock(&b->lock);
    if (st != MS_OK)
        return ms_diag_set(d, st, "free of 0x%llx: not an address this allocator gave out",
                           (unsigned long long)addr);
    return MS_OK;
}

ms_status bridge_alloc_set_context(bridge_alloc *b, const bridge_context *c)
{
    if (b == NULL || c == NULL || (unsigned)c->kind >= MS_TK_COUNT)
        return MS_EINVAL;
    pthread_mutex_lock(&b->lock);
    b->ctx = *c;
    /* As the executor: lendable pools lend outside the forward pass. */
    ms_status st = ms_alloc_set_borrowing(b->a, !c->forward);
    pthread_mutex_unlock(&b->lock);
    return st;
}

ms_status bridge_alloc_empty_cache(bridge_alloc *b)
{
    if (b == NULL)
        return MS_EINVAL;
    pthread_mutex_lock(&b->lock);
    ms_status st = ms_alloc_empty_cache(b->a);
    pthread_mutex_unlock(&b->lock);
    return st;
}

ms_alloc_stats bridge_alloc_stats(const bridge_alloc *b)
{
    return ms_alloc_get_stats(b ? b->a : NULL);
}

ms_status bridge_alloc_close(bridge_alloc *b, ms_diag *d)
{
    if (b == NULL)
        return MS_OK;
    ms_status st = MS_OK;
    if (b->a != NULL) {
        ms_alloc_set_observer(b->a, NULL, NULL);
        ms_alloc_destroy(b->a);
    }
    st = bridge_trace_close(&b->trace, b->trace_path, d);
    ms_policy_free(b->policy);
    if (b->be != NULL)
        ms_backend_close(b->be);
    free(b->trace_path);
    pthread_mutex_destroy(&b->lock);
    free(b);
    return st;
}
