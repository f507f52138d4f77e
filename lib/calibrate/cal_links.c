/* Calibrating the links: host copies by size and direction, collectives by
 * size and kind on each network, and the slowdown of compute beside a
 * collective and of host copies beside compute (calibrate.c).  A backend
 * without collectives on one device (no communicator) keeps the base's
 * network values: reported, not an error. */
#include "calibrate_parts.h"

#include <math.h>
#include <string.h>

#include "fit.h"

#define MIB 1048576.0

/* ---- host link ------------------------------------------------------- */

static ms_status copy_curve(cal_ctx *c, ms_copy_kind kind, uint64_t dev, uint64_t host,
                            double latency, ms_curve *out, double *rms)
{
    int step = c->quick ? 2 : 1, n = 0;
    for (int e = 12; e <= 30; e += step) {
        double bytes = ldexp(1, e), ns = 0;
        ms_status st = cal_time_copy(c->cb, kind, dev, host, (uint64_t)bytes, NULL, &ns);
        if (st != MS_OK)
            return st;
        out->x[n] = bytes;
        out->y[n++] = bytes / ((ns - latency > 1 ? ns - latency : 1) * 1e-9);
    }
    out->n = n;
    *rms = 0; /* an interpolation table: exact at its points */
    return MS_OK;
}

/* An H2D beside a GEMM that outlasts it: the extra time over the transfer's
 * own (the latency is not slowed) is overlap.copy_slowdown. */
static ms_status copy_beside_compute(cal_ctx *c, uint64_t dev, uint64_t host, double latency)
{
    double alone = 0, beside = 0;
    uint64_t bytes = 64u << 20;
    /* A GEMM on the side stream that outlasts the copies. */
    ms_kernel side = cal_gemm_kernel(MS_DTYPE_BF16, 8192, 8192, 8192);
    side.shape[0] *= 16;
    side.flops *= 16;
    ms_status st = cal_time_copy(c->cb, MS_COPY_H2D, dev, host, bytes, NULL, &alone);
    if (st == MS_OK)
        st = cal_time_copy(c->cb, MS_COPY_H2D, dev, host, bytes, &side, &beside);
    if (st == MS_OK) {
        double transfer = alone - latency > 1 ? alone - latency : 1;
        double slow = (beside - alone) / transfer;
        c->res->copy_with_compute = beside / alone;
        c->spec->overlap_copy_slowdown = slow > 0 ? slow : 0;
        cal_log(c, "H2D of 64 MiB beside a GEMM: %.3f x its time alone (copy_slowdown %.3f)",
                beside / alone, c->spec->overlap_copy_slowdown);
    }
    return st;
}

ms_status cal_host_link(cal_ctx *c)
{
    ms_backend *b = c->cb->b;
    uint64_t dev = 0, host = 0, size = 1u << 30;
    ms_status st = b->ops->malloc_device(b->inst, size, &dev);
    if (st == MS_OK && (st = b->ops->malloc_host(b->inst, size, &host)) != MS_OK)
        b->ops->free_device(b->inst, dev);
    if (st != MS_OK)
        return ms_diag_set(c->d, st, "calibrate: cannot allocate 1 GiB buffers for copies");
    /* The latency: a one-byte copy (its transfer is a nanosecond). */
    double lat = 0;
    st = cal_time_copy(c->cb, MS_COPY_H2D, dev, host, 1, NULL, &lat);
    if (st == MS_OK)
        st = copy_curve(c, MS_COPY_H2D, dev, host, lat, &c->spec->h2d_bw, &c->res->h2d);
    if (st == MS_OK)
        st = copy_curve(c, MS_COPY_D2H, dev, host, lat, &c->spec->d2h_bw, &c->res->d2h);
    if (st == MS_OK)
        st = copy_beside_compute(c, dev, host, lat);
    b->ops->free_host(b->inst, host);
    b->ops->free_device(b->inst, dev);
    if (st == MS_OK) {
        c->spec->host_link_latency_ns = lat;
        const ms_curve *h = &c->spec->h2d_bw;
        cal_log(c, "host link: latency %.2f us, H2D %.1f GB/s at %.0f MiB", lat / 1e3,
                h->y[h->n - 1] / 1e9, h->x[h->n - 1] / MIB);
    }
    return st;
}

/* ---- networks -------------------------------------------------------- */

/* The bus-bandwidth factor and latency steps of a ring collective of n
 * ranks (cost_model.c's comm_seconds). */
static void ring(ms_comm_kind kind, int n, double *factor, double *steps)
{
    switch (kind) {
    case MS_COMM_ALLREDUCE:
        *factor = 2.0 * (n - 1) / n;
        *steps = 2.0 * (n - 1);
        return;
    case MS_COMM_ALLGATHER:
    case MS_COMM_REDUCE_SCATTER:
    case MS_COMM_ALLTOALL:
        *factor = (double)(n - 1) / n;
        *steps = n - 1;
        return;
    default: /* broadcast, send */ *factor = 1; *steps = 1;
    }
}

typedef struct net_cal {
    cal_ctx *c;
    ms_link_kind link;
    int n;            /* ranks in the measured collectives */
    double bw, alpha; /* link bandwidth (data sheet), latency per step */
} net_cal;

static ms_status time_comm(net_cal *nc, ms_comm_kind kind, double bytes, double *ns)
{
    ms_kernel k = cal_comm_kernel(kind, nc->n, nc->link, bytes);
    return cal_time_kernel(nc->c->cb, &k, ns);
}

/* Efficiency of kind at bytes from its measured time. */
static double measured_eff(const net_cal *nc, ms_comm_kind kind, double bytes, double ns)
{
    double f, steps;
    ring(kind, kind == MS_COMM_SEND ? 2 : nc->n, &f, &steps);
    double t = ns - steps * nc->alpha;
    return f * bytes / ((t > 1 ? t : 1) * 1e-9) / nc->bw;
}

static ms_status net_curve(net_cal *nc, ms_curve *out)
{
    int step = nc->c->quick ? 3 : 1, n = 0;
    for (int e = 16; e <= 31; e += step) {
        double bytes = ldexp(1, e), ns = 0;
        ms_status st = time_comm(nc, MS_COMM_ALLREDUCE, bytes, &ns);
        if (st != MS_OK)
            return st;
        double eff = measured_eff(nc, MS_COMM_ALLREDUCE, bytes, ns);
        out->x[n] = bytes;
        out->y[n++] = eff > 1 ? 1 : eff;
    }
    out->n = n;
    return MS_OK;
}

/* Each kind's efficiency relative to an all-reduce of the same size. */
static ms_status net_kinds(net_cal *nc, const ms_curve *ar)
{
    static const ms_comm_kind kinds[] = {MS_COMM_ALLGATHER, MS_COMM_REDUCE_SCATTER,
                                         MS_COMM_ALLTOALL, MS_COMM_BROADCAST, MS_COMM_SEND};
    double bytes = ar->x[ar->n - 1], ar_eff = ar->y[ar->n - 1];
    for (size_t i = 0; i < sizeof kinds / sizeof kinds[0]; i++) {
        double ns = 0;
        ms_status st = time_comm(nc, kinds[i], bytes, &ns);
        if (st != MS_OK)
            return st;
        double rel = measured_eff(nc, kinds[i], bytes, ns) / ar_eff;
        if (kinds[i] == MS_COMM_SEND && nc->c->spec->intra_node_mesh &&
            nc->link == MS_LINK_INTRA_NODE && nc->c->spec->devices_per_node > 1)
            rel *= nc->c->spec->devices_per_node - 1; /* one link of the mesh's P - 1 */
        nc->c->spec->collective_eff[kinds[i]] = rel;
    }
    return MS_OK;
}

static ms_status calibrate_network(cal_ctx *c, ms_link_kind link)
{
    ms_device_spec *s = c->spec;
    bool intra = link == MS_LINK_INTRA_NODE;
    net_cal nc = {.c = c,
                  .link = link,
                  .n = intra ? s->devices_per_node : 2,
                  .bw = intra ? s->intra_node_bw : s->inter_node_bw};
    if (nc.n < 2)
        return MS_OK;
    double tiny = 0;
    ms_status st = time_comm(&nc, MS_COMM_ALLREDUCE, 8, &tiny);
    if (st == MS_EUNSUPPORTED || st == MS_EINVAL) {
        ms_diag_clear(c->d);
        cal_log(c,
                "%s-node collectives: not supported by this backend on one device; the "
                "base file's values are kept",
                intra ? "intra" : "inter");
        return MS_OK;
    }
    if (st != MS_OK)
        return st;
    nc.alpha = tiny / (2.0 * (nc.n - 1));
    ms_curve *curve = intra ? &s->intra_node_eff : &s->inter_node_eff;
    if ((st = net_curve(&nc, curve)) != MS_OK || (st = net_kinds(&nc, curve)) != MS_OK)
        return st;
    *(intra ? &s->intra_node_latency_ns : &s->inter_node_latency_ns) = nc.alpha;
    *(intra ? &c->res->intra_node : &c->res->inter_node) = 0; /* tables: exact at points */
    cal_log(c, "%s-node: latency %.2f us a step, all-reduce %.1f%% of %.0f GB/s at %.0f MiB",
            intra ? "intra" : "inter", nc.alpha / 1e3, 100 * curve->y[curve->n - 1], nc.bw / 1e9,
            curve->x[curve->n - 1] / MIB);
    return MS_OK;
}

ms_status cal_networks(cal_ctx *c)
{
    ms_status st = calibrate_network(c, MS_LINK_INTRA_NODE);
    return st == MS_OK ? calibrate_network(c, MS_LINK_INTER_NODE) : st;
}

/* ---- overlap --------------------------------------------------------- */

ms_status cal_overlap(cal_ctx *c)
{
    if (c->res->intra_node < 0 && c->res->inter_node < 0)
        return MS_OK; /* no collectives to overlap with */
    ms_link_kind link = c->res->intra_node >= 0 ? MS_LINK_INTRA_NODE : MS_LINK_INTER_NODE;
    ms_kernel gemm = cal_gemm_kernel(MS_DTYPE_BF16, 4096, 4096, 4096);
    double alone = 0, beside = 0;
    ms_status st = cal_time_kernel(c->cb, &gemm, &alone);
    if (st != MS_OK)
        return st;
    /* An all-reduce that outlasts the spacer and the timed GEMMs 4 times. */
    double spacer_ns = c->cb->spacer_flops / c->spec->peak_flops[MS_DTYPE_BF16] * 1e9 * 2;
    double span_s = 4 * (spacer_ns + c->cb->repeats * alone) * 1e-9;
    double bw = link == MS_LINK_INTRA_NODE ? c->spec->intra_node_bw : c->spec->inter_node_bw;
    int n = link == MS_LINK_INTRA_NODE ? c->spec->devices_per_node : 2;
    ms_kernel side = cal_comm_kernel(MS_COMM_ALLREDUCE, n, link, span_s * bw * n / (2.0 * (n - 1)));
    st = cal_time_kernel_beside(c->cb, &gemm, &side, &beside);
    if (st != MS_OK)
        return st;
    /* The whole kernel overlaps: it runs (1 + slowdown) x its time alone. */
    double slow = beside / alone - 1;
    c->spec->overlap_compute_slowdown = slow > 0 ? slow : 0;
    c->res->overlap = 0;
    cal_log(c, "a GEMM beside an all-reduce runs %.1f%% slower",
            100 * c->spec->overlap_compute_slowdown);
    return MS_OK;
}
