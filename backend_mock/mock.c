/* The mock NPU: backend.h implemented on the discrete-event simulator.
 *
 * Each instance is one device (sim/'s ms_simdev) driven by one host thread
 * (sim/'s ms_simhost).  Every call first lets device time catch up with the
 * host's clock.  Async calls cost the device's launch overhead of host time
 * and enqueue work that the device sees at the end of the call; launches and
 * copies block only while their stream already holds launch_queue_depth
 * kernels/copies that have not started, as a runtime's launch queue does.
 * Blocking calls run the engine until their condition holds and move the host
 * clock to the device time it did.  The host thus runs ahead of the device,
 * which is what gives a swapped block's deferred free its real memory cost. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "mock_private.h"

static const ms_backend_ops mock_ops;

ms_status mock_enter(ms_mock *m)
{
    ms_status st = sim_host_enter(m->host, m->dev);
    if (st != MS_OK)
        return st;
    return m->data != NULL ? mock_data_fault(m) : MS_OK;
}

static ms_status host_wait(ms_mock *m, ms_simhost_cond cond, const void *ctx)
{
    ms_status st = sim_host_wait(m->host, cond, ctx);
    ms_status fault = sim_dev_fault(m->dev);
    if (fault == MS_OK && m->data != NULL)
        fault = mock_data_fault(m);
    return fault != MS_OK ? fault : st;
}

static bool own_stream(const ms_mock *m, const ms_stream *s)
{
    return m != NULL && s != NULL && s->owner == m;
}

static bool own_event(const ms_mock *m, const ms_event *e)
{
    return m != NULL && e != NULL && e->owner == m;
}

/* ---- wait conditions (checked after engine steps) -------------------- */

static ms_simstream_info stream_info(const ms_stream *s)
{
    ms_simstream_info info = {0};
    sim_stream_info_get(s->ss, &info);
    return info;
}

static bool cond_slot_free(const void *ctx)
{
    const ms_stream *s = ctx;
    return stream_info(s).not_started < s->owner->queue_depth;
}

static bool cond_stream_idle(const void *ctx)
{
    return stream_info(ctx).queued == 0;
}

static bool cond_event_done(const void *ctx)
{
    const ms_event *e = ctx;
    bool complete = false;
    sim_event_status(e->se, NULL, &complete, NULL);
    return complete;
}

static bool cond_device_idle(const void *ctx)
{
    const ms_mock *m = ctx;
    bool idle = false;
    sim_dev_idle(m->dev, &idle);
    return idle;
}

/* ---- lifetime --------------------------------------------------------- */

static ms_status mock_destroy(void *inst)
{
    ms_mock *m = inst;
    if (m == NULL)
        return MS_EINVAL;
    while (m->streams != NULL) {
        ms_stream *s = m->streams;
        m->streams = s->next;
        free(s);
    }
    base_pool_fini(&m->event_pool); /* the handles still open go with it */
    /* The device cancels its engine events and frees its pending work, so
     * the shared engine may outlive it. */
    if (m->dev != NULL)
        sim_dev_destroy(m->dev);
    if (m->host != NULL)
        sim_host_destroy(m->host);
    mock_data_free(m);
    mock_memory_fini(m);
    free(m);
    return MS_OK;
}

static ms_status mock_now(void *inst, int64_t *ns)
{
    ms_mock *m = inst;
    if (m == NULL || ns == NULL)
        return MS_EINVAL;
    ms_status st = mock_enter(m);
    if (st != MS_OK)
        return st;
    return sim_host_now(m->host, ns);
}

static ms_status mock_set_tracer(void *inst, ms_work_tracer fn, void *user)
{
    ms_mock *m = inst;
    if (m == NULL)
        return MS_EINVAL;
    if (m->data != NULL) {
        mock_data_set_tracer(m, fn, user); /* its own tracer moves the bytes */
        return MS_OK;
    }
    return sim_dev_set_tracer(m->dev, fn, user);
}

static const char *mock_last_error(void *inst)
{
    ms_mock *m = inst;
    return m != NULL ? mock_data_fault_text(m) : "";
}

/* ---- streams ----------------------------------------------------------- */

static ms_status mock_stream_create(void *inst, int priority, ms_stream **out)
{
    ms_mock *m = inst;
    if (m == NULL || out == NULL)
        return MS_EINVAL;
    ms_status st = mock_enter(m);
    if (st != MS_OK)
        return st;
    ms_stream *s = calloc(1, sizeof *s);
    if (s == NULL)
        return MS_ENOMEM;
    if ((st = sim_stream_create(m->dev, priority, &s->ss)) != MS_OK) {
        free(s);
        return st;
    }
    s->owner = m;
    s->next = m->streams;
    if (m->streams != NULL)
        m->streams->prev = s;
    m->streams = s;
    *out = s;
    return MS_OK;
}

/* As cudaStreamDestroy: returns at once; queued work still runs, and the
 * device frees the stream when it has drained. */
static ms_status mock_stream_destroy(void *inst, ms_stream *s)
{
    ms_mock *m = inst;
    if (!own_stream(m, s))
        return MS_EINVAL;
    ms_status st = mock_enter(m);
    if (st != MS_OK)
        return st;
    if ((st = sim_stream_destroy(s->ss)) != MS_OK)
        return st;
    if (s->prev != NULL)
        s->prev->next = s->next;
    else
        m->streams = s->next;
    if (s->next != NULL)
        s->next->prev = s->prev;
    free(s);
    return MS_OK;
}

static ms_status mock_stream_synchronize(void *inst, ms_stream *s)
{
    ms_mock *m = inst;
    if (!own_stream(m, s))
        return MS_EINVAL;
    ms_status st = mock_enter(m);
    if (st != MS_OK)
        return st;
    return host_wait(m, cond_stream_idle, s);
}

static ms_status mock_stream_id(void *inst, const ms_stream *s, uint64_t *id)
{
    ms_mock *m = inst;
    if (!own_stream(m, s) || id == NULL)
        return MS_EINVAL;
    *id = stream_info(s).id;
    return MS_OK;
}

static ms_status mock_device_synchronize(void *inst)
{
    ms_mock *m = inst;
    if (m == NULL)
        return MS_EINVAL;
    ms_status st = mock_enter(m);
    if (st != MS_OK)
        return st;
    return host_wait(m, cond_device_idle, m);
}

/* ---- events ------------------------------------------------------------ */

static ms_status mock_event_create(void *inst, ms_event **out)
{
    ms_mock *m = inst;
    if (m == NULL || out == NULL)
        return MS_EINVAL;
    ms_status st = mock_enter(m);
    if (st != MS_OK)
        return st;
    ms_event *e = base_pool_get(&m->event_pool);
    if (e == NULL)
        return MS_ENOMEM;
    *e = (ms_event){.owner = m, .next = m->events};
    if ((st = sim_event_create(m->dev, &e->se)) != MS_OK) {
        base_pool_put(&m->event_pool, e);
        return st;
    }
    if (m->events != NULL)
        m->events->prev = e;
    m->events = e;
    *out = e;
    return MS_OK;
}

static ms_status mock_event_destroy(void *inst, ms_event *e)
{
    ms_mock *m = inst;
    if (!own_event(m, e))
        return MS_EINVAL;
    ms_status st = mock_enter(m);
    if (st != MS_OK)
        return st;
    sim_event_destroy(e->se);
    if (e->prev != NULL)
        e->prev->next = e->next;
    else
        m->events = e->next;
    if (e->next != NULL)
        e->next->prev = e->prev;
    base_pool_put(&m->event_pool, e);
    return MS_OK;
}

/* Host time of one async runtime call; the work is visible to the device at
 * the end of the call. */
static int64_t issue_time(const ms_mock *m)
{
    int64_t now = 0;
    sim_host_now(m->host, &now);
    return now + m->launch_overhead_ns;
}

static ms_status mock_event_record(void *inst, ms_event *e, ms_stream *s)
{
    ms_mock *m = inst;
    if (!own_event(m, e) || !own_stream(m, s))
        return MS_EINVAL;
    ms_status st = mock_enter(m);
    if (st != MS_OK)
        return st;
    if ((st = sim_stream_record(s->ss, e->se, issue_time(m))) != MS_OK)
        return st;
    return sim_host_advance(m->host, m->launch_overhead_ns);
}

static ms_status mock_stream_wait_event(void *inst, ms_stream *s, ms_event *e)
{
    ms_mock *m = inst;
    if (!own_event(m, e) || !own_stream(m, s))
        return MS_EINVAL;
    ms_status st = mock_enter(m);
    if (st != MS_OK)
        return st;
    if ((st = sim_stream_wait_event(s->ss, e->se, issue_time(m))) != MS_OK)
        return st;
    return sim_host_advance(m->host, m->launch_overhead_ns);
}

/* Complete only once device time has reached the event (the engine has been
 * run up to the host's clock, and no further). */
static ms_status mock_event_query(void *inst, ms_event *e, bool *complete)
{
    ms_mock *m = inst;
    if (!own_event(m, e) || complete == NULL)
        return MS_EINVAL;
    ms_status st = mock_enter(m);
    if (st != MS_OK)
        return st;
    return sim_event_status(e->se, NULL, complete, NULL);
}

static ms_status mock_event_synchronize(void *inst, ms_event *e)
{
    ms_mock *m = inst;
    if (!own_event(m, e))
        return MS_EINVAL;
    ms_status st = mock_enter(m);
    if (st != MS_OK)
        return st;
    return host_wait(m, cond_event_done, e);
}

/* MS_EINVAL if either event was never recorded; MS_EAGAIN while either has
 * not completed (cudaErrorNotReady); otherwise end - start in ns. */
static ms_status mock_event_elapsed_ns(void *inst, ms_event *start, ms_event *end, int64_t *ns)
{
    ms_mock *m = inst;
    if (!own_event(m, start) || !own_event(m, end) || ns == NULL)
        return MS_EINVAL;
    ms_status st = mock_enter(m);
    if (st != MS_OK)
        return st;
    bool rec0 = false, rec1 = false, done0 = false, done1 = false;
    int64_t t0 = 0, t1 = 0;
    sim_event_status(start->se, &rec0, &done0, &t0);
    sim_event_status(end->se, &rec1, &done1, &t1);
    if (!rec0 || !rec1)
        return MS_EINVAL;
    if (!done0 || !done1)
        return MS_EAGAIN;
    *ns = t1 - t0;
    return MS_OK;
}

/* ---- work -------------------------------------------------------------- */

static uint64_t double_bits(double v)
{
    uint64_t u;
    memcpy(&u, &v, sizeof u);
    return u;
}

static ms_price_memo price_key(const ms_kernel *k)
{
    return (ms_price_memo){
        .flops = double_bits(k->flops),
        .bytes = double_bits(k->bytes),
        .comm_bytes = double_bits(k->comm_bytes),
        .cls = (int32_t)k->cls,
        .dtype = (int32_t)k->dtype,
        .comm = (int32_t)k->comm,
        .link = (int32_t)k->link,
        .group_size = k->group_size,
        .ranks_per_node = k->ranks_per_node,
        .shape = {k->shape[0], k->shape[1], k->shape[2], k->shape[3]},
    };
}

static bool same_price_key(const ms_price_memo *a, const ms_price_memo *b)
{
    return a->flops == b->flops && a->bytes == b->bytes && a->comm_bytes == b->comm_bytes &&
           a->cls == b->cls && a->dtype == b->dtype && a->comm == b->comm && a->link == b->link &&
           a->group_size == b->group_size && a->ranks_per_node == b->ranks_per_node &&
           memcmp(a->shape, b->shape, sizeof a->shape) == 0;
}

static size_t price_slot(const ms_price_memo *key)
{
    /* Fibonacci hashing: the top bits of a product depend on every bit of
     * the word, so round sizes (low mantissa bits zero) still spread. */
    uint64_t h = key->flops ^ key->bytes * 0x9e3779b97f4a7c15u ^
                 (uint64_t)(key->shape[0] ^ key->shape[1] << 20 ^ key->shape[2] << 40 ^
                            key->shape[3] << 50) *
                     0xd6e8feb86659fd93u ^
                 key->comm_bytes * 0xbf58476d1ce4e5b9u ^
                 ((uint64_t)(uint32_t)key->cls | (uint64_t)(uint32_t)key->dtype << 8 |
                  (uint64_t)(uint32_t)key->comm << 16 | (uint64_t)(uint32_t)key->link << 24 |
                  (uint64_t)(uint32_t)key->group_size << 32) *
                     0x94d049bb133111ebu;
    return (size_t)((h * 0x9e3779b97f4a7c15u) >> (64 - MS_PRICE_MEMO_BITS));
}

/* sim_cost_kernel_ns, remembered: a step launches the same few hundred kernels
 * over and over (every layer alike), and a launch that parked on a full
 * queue is priced again when it is retried.  The price is a pure function of
 * the device's cost model and the fields in the key, so a hit returns exactly
 * what pricing again would; failures are not remembered. */
static ms_status price_kernel(ms_mock *m, const ms_kernel *k, int64_t *ns)
{
    mock_prices *p = m->prices;
    ms_price_memo key = price_key(k);
    size_t i = price_slot(&key);
    for (; p->slots[i].used; i = (i + 1) % MS_PRICE_MEMO_SLOTS) {
        if (same_price_key(&p->slots[i], &key)) {
            *ns = p->slots[i].ns;
            return MS_OK;
        }
    }
    ms_status st = sim_cost_kernel_ns(m->cm, k, ns);
    if (st != MS_OK)
        return st;
    if (p->used >= MS_PRICE_MEMO_SLOTS / 4 * 3) {
        memset(p, 0, sizeof *p);
        i = price_slot(&key);
    }
    key.used = true;
    key.ns = *ns;
    p->slots[i] = key;
    p->used++;
    return MS_OK;
}

/* Block while the stream's launch queue is full; the host resumes when the
 * device starts an item and frees a slot. */
static ms_status take_slot(ms_mock *m, ms_stream *s)
{
    if (cond_slot_free(s))
        return MS_OK;
    return host_wait(m, cond_slot_free, s);
}

static ms_status mock_launch(void *inst, const ms_kernel *k, ms_stream *s, uint64_t tag)
{
    ms_mock *m = inst;
    if (!own_stream(m, s) || k == NULL)
        return MS_EINVAL;
    ms_status st = mock_enter(m);
    if (st != MS_OK)
        return st;
    /* Priced first: a kernel that cannot be priced fails before the host
     * blocks on a full queue. */
    int64_t dur = 0;
    if ((st = price_kernel(m, k, &dur)) != MS_OK || (st = take_slot(m, s)) != MS_OK)
        return st;
    if ((st = sim_stream_launch_timed(s->ss, k, dur, issue_time(m), tag)) != MS_OK)
        return st;
    return sim_host_advance(m->host, m->launch_overhead_ns);
}

/* Addresses are not checked, except in the functional mode when the copy
 * runs (functional.c). */
static ms_status mock_memcpy_async(void *inst, uint64_t dst, uint64_t src, uint64_t bytes,
                                   ms_copy_kind kind, ms_stream *s, uint64_t tag)
{
    ms_mock *m = inst;
    if (!own_stream(m, s) || (kind != MS_COPY_H2D && kind != MS_COPY_D2H && kind != MS_COPY_D2D))
        return MS_EINVAL;
    ms_status st = mock_enter(m);
    if (st != MS_OK)
        return st;
    if ((st = take_slot(m, s)) != MS_OK)
        return st;
    if (m->data != NULL &&
        (st = mock_data_copy_issued(m, stream_info(s).id, dst, src, bytes, kind)) != MS_OK)
        return st;
    if ((st = sim_stream_copy(s->ss, kind, bytes, issue_time(m), tag)) != MS_OK) {
        if (m->data != NULL)
            mock_data_copy_withdrawn(m, stream_info(s).id);
        return st;
    }
    return sim_host_advance(m->host, m->launch_overhead_ns);
}

/* The mock prices every dtype from its device file (sim/cost_model.c). */
static ms_status mock_matmul_dtype(void *inst, const ms_kernel *k, ms_dtype *runs_as)
{
    (void)inst;
    *runs_as = k->dtype;
    return MS_OK;
}

static const ms_backend_ops mock_ops = {
    .name = "mock",
    .destroy = mock_destroy,
    .mem_get_info = mock_mem_get_info,
    .malloc_device = mock_malloc_device,
    .free_device = mock_free_device,
    .malloc_host = mock_malloc_host,
    .free_host = mock_free_host,
    .va_reserve = mock_va_reserve,
    .va_release = mock_va_release,
    .mem_map = mock_mem_map,
    .mem_unmap = mock_mem_unmap,
    .stream_create = mock_stream_create,
    .stream_destroy = mock_stream_destroy,
    .stream_synchronize = mock_stream_synchronize,
    .stream_id = mock_stream_id,
    .event_create = mock_event_create,
    .event_destroy = mock_event_destroy,
    .event_record = mock_event_record,
    .event_query = mock_event_query,
    .event_synchronize = mock_event_synchronize,
    .event_elapsed_ns = mock_event_elapsed_ns,
    .stream_wait_event = mock_stream_wait_event,
    .memcpy_async = mock_memcpy_async,
    .launch = mock_launch,
    .device_synchronize = mock_device_synchronize,
    .now = mock_now,
    .set_tracer = mock_set_tracer,
    .last_error = mock_last_error,
    .event_state = mock_event_state,
    .matmul_dtype = mock_matmul_dtype,
};

ms_status mock_create(ms_sim *engine, const ms_device_spec *spec, int device, uint64_t seed,
                      ms_backend **out)
{
    if (engine == NULL || spec == NULL || out == NULL || device < 0 || device >= 32768)
        return MS_EINVAL;
    ms_status st = ms_device_spec_validate(spec, NULL);
    if (st != MS_OK)
        return st;
    ms_mock *m = calloc(1, sizeof *m);
    ms_backend *b = malloc(sizeof *b);
    if (m == NULL || b == NULL) {
        free(m);
        free(b);
        return MS_ENOMEM;
    }
    m->sim = engine;
    m->device = device;
    m->seed = seed;
    m->launch_overhead_ns = llround(spec->launch_overhead_ns);
    m->queue_depth = (uint32_t)spec->launch_queue_depth;
    m->host_pinned_limit = spec->host_pinned_bytes;
    base_pool_init(&m->event_pool, sizeof(ms_event), 256);
    if ((st = mock_memory_init(m)) != MS_OK) {
        free(m);
        free(b);
        return st;
    }
    if ((st = sim_dev_create(engine, spec, device, &m->dev)) != MS_OK ||
        (st = sim_host_create(engine, &m->host)) != MS_OK ||
        (st = sim_host_watch(m->host, m->dev)) != MS_OK) {
        mock_destroy(m);
        free(b);
        return st;
    }
    sim_dev_cost_model(m->dev, &m->cm);
    m->prices = &m->own_prices;
    *b = (ms_backend){.ops = &mock_ops, .inst = m, .device = device};
    *out = b;
    return MS_OK;
}

ms_mock *mock_instance(const ms_backend *b)
{
    return b != NULL && b->ops == &mock_ops ? b->inst : NULL;
}

ms_status mock_share_prices(ms_backend *b, ms_backend *with)
{
    ms_mock *m = mock_instance(b), *w = mock_instance(with);
    if (m == NULL || w == NULL || m->sim != w->sim)
        return MS_EINVAL;
    m->prices = w->prices;
    return MS_OK;
}

ms_status mock_set_host_idle(ms_backend *b)
{
    ms_mock *m = mock_instance(b);
    if (m == NULL)
        return MS_EINVAL;
    return sim_host_set_idle(m->host);
}

ms_status mock_set_host_active(ms_backend *b)
{
    ms_mock *m = mock_instance(b);
    if (m == NULL)
        return MS_EINVAL;
    return sim_host_resume(m->host);
}

ms_status mock_host_clock(const ms_backend *b, int64_t *ns, bool *parked)
{
    ms_mock *m = mock_instance(b);
    if (m == NULL || ns == NULL)
        return MS_EINVAL;
    if (parked != NULL)
        sim_host_parked(m->host, parked);
    return sim_host_now(m->host, ns);
}

ms_status mock_set_host_tag(ms_backend *b, int tag)
{
    ms_mock *m = mock_instance(b);
    return m != NULL ? sim_host_set_tag(m->host, tag) : MS_EINVAL;
}

size_t mock_host_changes(const ms_backend *b, int *hosts, size_t max)
{
    ms_mock *m = mock_instance(b);
    return m != NULL ? sim_hosts_drain_changes(m->sim, hosts, max) : 0;
}

uint64_t mock_host_clock_moves(const ms_backend *b)
{
    ms_mock *m = mock_instance(b);
    return m != NULL ? sim_host_clock_moves(m->host) : 0;
}

ms_status mock_simdev(const ms_backend *b, ms_simdev **out)
{
    ms_mock *m = mock_instance(b);
    if (m == NULL || out == NULL)
        return MS_EINVAL;
    *out = m->dev;
    return MS_OK;
}
