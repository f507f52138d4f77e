/* Microbenchmarks through backend.h.  Kernel time comes from device events
 * around back-to-back launches queued behind a long "spacer" GEMM, so that
 * by the time the device reaches the first timed launch the host has issued
 * them all: what is timed is device time, as with CUDA/ACL events on real
 * hardware, never the host's launch gaps. */
#include "bench.h"

#include <string.h>

#define BE(cb, fn, ...) ((cb)->b->ops->fn((cb)->b->inst, __VA_ARGS__))

static ms_status fail(cal_bench *cb, ms_status st, const char *what)
{
    return ms_diag_set(cb->diag, st, "calibrate: %s failed: %s", what, ms_strerror(st));
}

ms_status cal_bench_open(cal_bench *cb, ms_backend *b, int repeats, double spacer_flops, ms_diag *d)
{
    memset(cb, 0, sizeof *cb);
    cb->b = b;
    cb->repeats = repeats;
    cb->spacer_flops = spacer_flops;
    cb->diag = d;
    ms_status st = b->ops->stream_create(b->inst, 0, &cb->s);
    if (st == MS_OK)
        st = b->ops->stream_create(b->inst, 0, &cb->side);
    if (st == MS_OK)
        st = b->ops->event_create(b->inst, &cb->e0);
    if (st == MS_OK)
        st = b->ops->event_create(b->inst, &cb->e1);
    return st == MS_OK ? MS_OK : fail(cb, st, "opening streams and events");
}

void cal_bench_close(cal_bench *cb)
{
    if (cb->b == NULL)
        return;
    cb->b->ops->device_synchronize(cb->b->inst);
    if (cb->e0 != NULL)
        BE(cb, event_destroy, cb->e0);
    if (cb->e1 != NULL)
        BE(cb, event_destroy, cb->e1);
    if (cb->side != NULL)
        BE(cb, stream_destroy, cb->side);
    if (cb->s != NULL)
        BE(cb, stream_destroy, cb->s);
    cb->b = NULL;
}

ms_kernel cal_gemm_kernel(ms_dtype dt, double m, double n, double k)
{
    double es = (double)ms_dtype_size(dt);
    return (ms_kernel){.name = "calibrate.gemm",
                       .cls = MS_KC_MATMUL,
                       .dtype = dt,
                       .flops = 2 * m * n * k,
                       .bytes = (m * k + k * n + m * n) * es,
                       .shape = {(int64_t)m, (int64_t)n, (int64_t)k, 1},
                       .peer = -1};
}

ms_kernel cal_flash_kernel(ms_dtype dt, double seq, double head_dim, double batch_heads)
{
    double es = (double)ms_dtype_size(dt);
    /* Q K^T and P V over the whole square, as the workload counts them. */
    return (ms_kernel){
        .name = "calibrate.flash_attention",
        .cls = MS_KC_ATTENTION,
        .dtype = dt,
        .flops = 4 * batch_heads * seq * seq * head_dim,
        .bytes = 4 * batch_heads * seq * head_dim * es,
        .shape = {(int64_t)seq, (int64_t)seq, (int64_t)head_dim, (int64_t)batch_heads},
        .peer = -1};
}

ms_kernel cal_stream_kernel(double bytes)
{
    return (ms_kernel){.name = "calibrate.stream",
                       .cls = MS_KC_ELEMENTWISE,
                       .dtype = MS_DTYPE_BF16,
                       .bytes = bytes,
                       .peer = -1};
}

ms_kernel cal_comm_kernel(ms_comm_kind kind, int group, ms_link_kind link, double bytes)
{
    bool p2p = kind == MS_COMM_SEND || kind == MS_COMM_RECV;
    /* A peer no device of the group is: the transfer costs its modeled time
     * on the link instead of waiting for a partner (sim.h). */
    return (ms_kernel){.name = "calibrate.comm",
                       .cls = MS_KC_COMM,
                       .dtype = MS_DTYPE_BF16,
                       .comm = kind,
                       .group_size = p2p ? 2 : group,
                       .link = link,
                       .comm_bytes = bytes,
                       .peer = p2p ? 1 << 20 : -1};
}

static ms_status spacer(cal_bench *cb)
{
    ms_kernel k = cal_gemm_kernel(MS_DTYPE_BF16, 8192, 8192, 8192);
    double scale = cb->spacer_flops / k.flops;
    k.shape[0] = (int64_t)(8192 * (scale > 1 ? scale : 1));
    k.flops = 2.0 * (double)k.shape[0] * 8192 * 8192;
    return BE(cb, launch, &k, cb->s, 0);
}

/* Record e0, run body (repeats of the timed work), record e1, wait, and
 * return the elapsed device time per repeat.  A side kernel launched here
 * follows the spacer, so it starts with the timed work: launched before,
 * a compute kernel would hold the compute engine ahead of the spacer and
 * end before e0. */
static ms_status timed_beside(cal_bench *cb, const ms_kernel *side,
                              ms_status (*body)(cal_bench *, const void *), const void *arg,
                              double *ns)
{
    ms_status st = spacer(cb);
    if (st == MS_OK && side != NULL)
        st = BE(cb, launch, side, cb->side, 0);
    if (st == MS_OK)
        st = BE(cb, event_record, cb->e0, cb->s);
    for (int i = 0; st == MS_OK && i < cb->repeats; i++)
        st = body(cb, arg);
    if (st == MS_OK)
        st = BE(cb, event_record, cb->e1, cb->s);
    if (st == MS_OK)
        st = BE(cb, event_synchronize, cb->e1);
    int64_t el = 0;
    if (st == MS_OK)
        st = BE(cb, event_elapsed_ns, cb->e0, cb->e1, &el);
    if (st == MS_OK)
        st = cb->b->ops->device_synchronize(cb->b->inst);
    *ns = (double)el / cb->repeats;
    return st;
}

static ms_status timed(cal_bench *cb, ms_status (*body)(cal_bench *, const void *), const void *arg,
                       double *ns)
{
    return timed_beside(cb, NULL, body, arg, ns);
}

static ms_status launch_one(cal_bench *cb, const void *arg)
{
    return BE(cb, launch, (const ms_kernel *)arg, cb->s, 0);
}

ms_status cal_time_kernel(cal_bench *cb, const ms_kernel *k, double *ns)
{
    return cal_time_kernel_beside(cb, k, NULL, ns);
}

ms_status cal_time_kernel_beside(cal_bench *cb, const ms_kernel *k, const ms_kernel *side,
                                 double *ns)
{
    ms_status st = side != NULL ? BE(cb, launch, side, cb->side, 0) : MS_OK;
    if (st != MS_OK)
        return st; /* the caller decides whether an unsupported kind is an error */
    st = timed(cb, launch_one, k, ns);
    return st == MS_OK ? MS_OK : fail(cb, st, k->name);
}

typedef struct copy_arg {
    ms_copy_kind kind;
    uint64_t dev, host, bytes;
} copy_arg;

static ms_status copy_one(cal_bench *cb, const void *arg)
{
    const copy_arg *c = arg;
    bool h2d = c->kind == MS_COPY_H2D;
    return BE(cb, memcpy_async, h2d ? c->dev : c->host, h2d ? c->host : c->dev, c->bytes, c->kind,
              cb->s, 0);
}

ms_status cal_time_copy(cal_bench *cb, ms_copy_kind kind, uint64_t dev, uint64_t host,
                        uint64_t bytes, const ms_kernel *side, double *ns)
{
    copy_arg c = {kind, dev, host, bytes};
    ms_status st = timed_beside(cb, side, copy_one, &c, ns);
    return st == MS_OK ? MS_OK : fail(cb, st, "a host-device copy");
}

ms_status cal_time_launch(cal_bench *cb, double *ns)
{
    ms_kernel k = cal_stream_kernel(0);
    int64_t t0 = 0, t1 = 0;
    /* Behind a spacer the queue never fills, so no launch blocks. */
    ms_status st = spacer(cb);
    if (st == MS_OK)
        st = BE(cb, now, &t0);
    for (int i = 0; st == MS_OK && i < cb->repeats; i++)
        st = BE(cb, launch, &k, cb->s, 0);
    if (st == MS_OK)
        st = BE(cb, now, &t1);
    if (st == MS_OK)
        st = cb->b->ops->device_synchronize(cb->b->inst);
    *ns = (double)(t1 - t0) / cb->repeats;
    return st == MS_OK ? MS_OK : fail(cb, st, "timing launches");
}
