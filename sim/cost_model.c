/* The cost model: device time of a kernel from its FLOPs and HBM bytes (a
 * roofline whose compute side has a GEMM efficiency by shape, a fused
 * attention efficiency by shape, or a curve by FLOPs), of a collective from
 * an alpha-beta model of its ring algorithm with a bandwidth efficiency by
 * link, message size and collective kind, and of a copy from the host link's
 * latency and size-dependent bandwidth.  docs/validation.md says where each
 * parameter's value comes from. */
#include <math.h>
#include <stdlib.h>

#include "curve.h"
#include "device_model.h"
#include "sim/sim.h"

struct ms_cost_model {
    ms_device_spec spec; /* own copy: the interpolants point into its curves */
    ms_curve_interp curves[MS_CURVE_COUNT];
};

static const ms_curve *spec_curve(const ms_device_spec *s, ms_cost_curve which)
{
    switch (which) {
    case MS_CURVE_MATMUL_EFF: return &s->matmul_eff;
    case MS_CURVE_ATTENTION_EFF: return &s->attention_eff;
    case MS_CURVE_HBM_EFF: return &s->hbm_eff;
    case MS_CURVE_H2D_BW: return &s->h2d_bw;
    case MS_CURVE_D2H_BW: return &s->d2h_bw;
    case MS_CURVE_INTRA_EFF: return &s->intra_node_eff;
    default: return &s->inter_node_eff;
    }
}

ms_status sim_cost_model_create(const ms_device_spec *spec, ms_cost_model **out)
{
    if (spec == NULL || out == NULL)
        return MS_EINVAL;
    ms_status st = ms_device_spec_validate(spec, NULL);
    if (st != MS_OK)
        return st;
    ms_cost_model *cm = calloc(1, sizeof *cm);
    if (cm == NULL)
        return MS_ENOMEM;
    cm->spec = *spec;
    for (int i = 0; i < MS_CURVE_COUNT; i++) {
        /* An empty efficiency curve means 1.0 (device.h); the bandwidth
         * curves are required by validation, so their empty value is moot. */
        st = sim_curve_interp_init(&cm->curves[i], spec_curve(&cm->spec, (ms_cost_curve)i), 1.0);
        if (st != MS_OK) {
            sim_cost_model_destroy(cm);
            return st;
        }
    }
    *out = cm;
    return MS_OK;
}

ms_status sim_cost_model_destroy(ms_cost_model *cm)
{
    if (cm == NULL)
        return MS_EINVAL;
    for (int i = 0; i < MS_CURVE_COUNT; i++)
        sim_curve_interp_free(&cm->curves[i]);
    free(cm);
    return MS_OK;
}

ms_status sim_cost_model_spec(const ms_cost_model *cm, const ms_device_spec **spec)
{
    if (cm == NULL || spec == NULL)
        return MS_EINVAL;
    *spec = &cm->spec;
    return MS_OK;
}

ms_status sim_cost_curve_eval(const ms_cost_model *cm, ms_cost_curve which, double x, double *y)
{
    if (cm == NULL || y == NULL || (unsigned)which >= MS_CURVE_COUNT || isnan(x))
        return MS_EINVAL;
    *y = sim_curve_interp_eval(&cm->curves[which], x);
    return MS_OK;
}

static double curve(const ms_cost_model *cm, ms_cost_curve which, double x)
{
    return sim_curve_interp_eval(&cm->curves[which], x);
}

static bool bad_size(double v)
{
    return !(v >= 0) || isinf(v);
}

/* Alpha-beta time in seconds of one collective or p2p transfer of B bytes
 * among n ranks on a link of bus bandwidth bw (bytes/s) and latency alpha.
 * Bandwidth terms follow the ring algorithms' bus-bandwidth factors that
 * nccl-tests documents (doc/PERFORMANCE.md, "busBw"), with B the full buffer
 * (nccl-tests' "size": the reduced buffer, or the gathered one); latency
 * terms count the ring's sequential steps (Thakur, Rabenseifner & Gropp,
 * "Optimization of Collective Communication Operations in MPICH", 2005;
 * Patarasuk & Yuan, "Bandwidth optimal all-reduce algorithms", 2009). */
static double comm_seconds(ms_comm_kind kind, int n, double B, double bw, double alpha_s)
{
    double steps = n - 1;
    switch (kind) {
    case MS_COMM_ALLREDUCE:
        /* reduce-scatter then all-gather around the ring: each moves
         * (n-1)/n of B, in n-1 steps each -> 2(n-1)/n B/bw + 2(n-1) alpha. */
        return 2.0 * steps / n * B / bw + 2.0 * steps * alpha_s;
    case MS_COMM_ALLGATHER:
    case MS_COMM_REDUCE_SCATTER:
        /* n-1 ring steps of B/n each: (n-1)/n B/bw + (n-1) alpha. */
        return steps / n * B / bw + steps * alpha_s;
    case MS_COMM_ALLTOALL:
        /* pairwise exchange: n-1 steps, each sending B/n: (n-1)/n B/bw + (n-1) alpha. */
        return steps / n * B / bw + steps * alpha_s;
    case MS_COMM_BROADCAST:
        /* pipelined ring broadcast: busBw == algBw -> B/bw + alpha. */
        return B / bw + alpha_s;
    default: /* MS_COMM_SEND, MS_COMM_RECV: one hop */
        return B / bw + alpha_s;
    }
}

_Static_assert(MS_COMM_KINDS == MS_COMM_COUNT, "device.h's collective slots follow backend.h");

static ms_status check_comm(const ms_kernel *k)
{
    if (k->comm <= MS_COMM_NONE || k->comm >= MS_COMM_COUNT || bad_size(k->comm_bytes) ||
        (k->link != MS_LINK_INTRA_NODE && k->link != MS_LINK_INTER_NODE))
        return MS_EINVAL;
    bool p2p = k->comm == MS_COMM_SEND || k->comm == MS_COMM_RECV;
    if (!p2p && k->group_size < 1)
        return MS_EINVAL;
    return MS_OK;
}

/* A group of one moves nothing. */
static bool comm_is_free(const ms_kernel *k)
{
    return k->comm != MS_COMM_SEND && k->comm != MS_COMM_RECV && k->group_size == 1;
}

/* The link's bandwidth for k: the link's, times its efficiency at the
 * message size and the collective kind's efficiency relative to an
 * all-reduce. */
static double link_bandwidth(const ms_cost_model *cm, const ms_kernel *k)
{
    const ms_device_spec *s = &cm->spec;
    bool intra = k->link == MS_LINK_INTRA_NODE;
    double bw = intra ? s->intra_node_bw : s->inter_node_bw;
    bw *= curve(cm, intra ? MS_CURVE_INTRA_EFF : MS_CURVE_INTER_EFF, k->comm_bytes);
    int kind = k->comm == MS_COMM_RECV ? MS_COMM_SEND : k->comm;
    if (kind != MS_COMM_ALLREDUCE && s->collective_eff[kind] > 0)
        bw *= s->collective_eff[kind];
    return bw;
}

/* Ranks of k's group on one node when it crosses nodes, at most a node's
 * devices and (for a collective) the group's ranks: 1 for a single rank a
 * node (or a group within a node). */
static int ranks_on_a_node(const ms_cost_model *cm, const ms_kernel *k)
{
    int r = k->ranks_per_node;
    if (k->link != MS_LINK_INTER_NODE || r < 2)
        return 1;
    if (r > cm->spec.devices_per_node)
        r = cm->spec.devices_per_node;
    if (k->group_size >= 1 && r > k->group_size)
        r = k->group_size;
    return r;
}

/* The bandwidth one transfer of k gets: the link's (link_bandwidth), and
 * on a full mesh the share of links the group uses. */
static double comm_bandwidth(const ms_cost_model *cm, const ms_kernel *k)
{
    const ms_device_spec *s = &cm->spec;
    double bw = link_bandwidth(cm, k);
    int nics = ranks_on_a_node(cm, k);
    if (nics > 1) {
        /* One NIC per device: k ranks of the group on a node cross on k
         * NICs, the hierarchical ring's intra-node hops staying on the
         * faster intra-node link, which bounds it. */
        bw = fmin(bw * nics, s->intra_node_bw);
    }
    if (k->link == MS_LINK_INTRA_NODE && s->intra_node_mesh && s->devices_per_node > 1) {
        bool p2p = k->comm == MS_COMM_SEND || k->comm == MS_COMM_RECV;
        int links = p2p ? 1 : k->group_size - 1;
        if (links > s->devices_per_node - 1)
            links = s->devices_per_node - 1;
        bw *= (double)links / (s->devices_per_node - 1);
    }
    return bw;
}

static double comm_alpha_s(const ms_cost_model *cm, const ms_kernel *k)
{
    const ms_device_spec *s = &cm->spec;
    return (k->link == MS_LINK_INTRA_NODE ? s->intra_node_latency_ns : s->inter_node_latency_ns) *
           1e-9;
}

/* An all-to-all sends B/n to every other rank, each over its own path: with
 * r ranks of the group on a node, (r-1)/n of B stays on the intra-node link
 * and (n-r)/n leaves through the rank's own NIC, both at once (NCCL's
 * all-to-all is point-to-point sends, not a hierarchical ring whose r NICs
 * share one transfer, comm_bandwidth's rule).  r = 1 is comm_seconds'. */
static double alltoall_across_nodes(const ms_cost_model *cm, const ms_kernel *k, int r)
{
    const ms_device_spec *s = &cm->spec;
    double n = k->group_size, B = k->comm_bytes;
    double nic = link_bandwidth(cm, k);
    double local = s->intra_node_bw * curve(cm, MS_CURVE_INTRA_EFF, B);
    double out = (n - r) / n * B / nic, in = (r - 1) / n * B / local;
    return fmax(out, in) + (n - 1) * comm_alpha_s(cm, k);
}

ms_status sim_cost_comm_parts(const ms_cost_model *cm, const ms_kernel *k, int64_t *latency_ns,
                              double *transfer_ns)
{
    if (cm == NULL || k == NULL || latency_ns == NULL || transfer_ns == NULL ||
        k->cls != MS_KC_COMM)
        return MS_EINVAL;
    ms_status st = check_comm(k);
    if (st != MS_OK)
        return st;
    *latency_ns = 0;
    *transfer_ns = 0;
    if (comm_is_free(k))
        return MS_OK;
    double alpha = comm_alpha_s(cm, k);
    /* The latency part is comm_seconds with no bytes; the rest moves data. */
    double lat = comm_seconds(k->comm, k->group_size, 0, 1, alpha);
    int r = ranks_on_a_node(cm, k);
    double all = k->comm == MS_COMM_ALLTOALL && r > 1
                     ? alltoall_across_nodes(cm, k, r)
                     : comm_seconds(k->comm, k->group_size, k->comm_bytes,
                                    comm_bandwidth(cm, k), alpha);
    if (!(all < 9e9))
        return MS_ERANGE;
    *latency_ns = llround(lat * 1e9);
    *transfer_ns = (all - lat) * 1e9;
    return MS_OK;
}

static ms_status comm_ns(const ms_cost_model *cm, const ms_kernel *k, double *ns)
{
    int64_t lat = 0;
    double xfer = 0;
    ms_status st = sim_cost_comm_parts(cm, k, &lat, &xfer);
    *ns = (double)lat + xfer;
    return st;
}

static double saturation(double x, double half)
{
    return x / (x + half);
}

static bool has_shape(const ms_kernel *k)
{
    return k->shape[0] > 0 && k->shape[1] > 0 && k->shape[2] > 0;
}

/* Fraction of peak a matmul reaches: by shape where the device has a GEMM
 * model for the dtype (device.h), else by FLOPs. */
static double gemm_efficiency(const ms_cost_model *cm, const ms_kernel *k)
{
    const ms_gemm_model *g = &cm->spec.gemm;
    double max = g->max[k->dtype];
    if (!(max > 0) || !has_shape(k))
        return curve(cm, MS_CURVE_MATMUL_EFF, k->flops);
    double m = (double)k->shape[0] * (double)(k->shape[3] > 1 ? k->shape[3] : 1);
    return max * saturation(m, g->m_half) * saturation((double)k->shape[1], g->n_half) *
           saturation((double)k->shape[2], g->k_half);
}

/* Seconds of compute of a fused attention kernel. */
static double attention_seconds(const ms_cost_model *cm, const ms_kernel *k, double peak)
{
    const ms_attention_model *a = &cm->spec.flash;
    if (!(a->max > 0) || !has_shape(k))
        return k->flops / (peak * curve(cm, MS_CURVE_ATTENTION_EFF, k->flops));
    double eff = a->max * saturation((double)k->shape[0], a->seq_half) *
                 saturation((double)k->shape[2], a->head_dim_half);
    double executed = a->executed_fraction > 0 ? a->executed_fraction : 1.0;
    return k->flops * executed / (peak * eff);
}

static ms_status compute_ns(const ms_cost_model *cm, const ms_kernel *k, double *ns)
{
    if ((unsigned)k->dtype >= MS_DTYPE_COUNT || bad_size(k->flops) || bad_size(k->bytes))
        return MS_EINVAL;
    const ms_device_spec *s = &cm->spec;
    double t_flops = 0;
    if (k->flops > 0) {
        double peak = s->peak_flops[k->dtype];
        if (!(peak > 0))
            return MS_EUNSUPPORTED;
        if (k->cls == MS_KC_MATMUL)
            t_flops = k->flops / (peak * gemm_efficiency(cm, k));
        else if (k->cls == MS_KC_ATTENTION)
            t_flops = attention_seconds(cm, k, peak);
        else
            t_flops = k->flops / peak; /* elementwise/norm are memory bound: no curve */
    }
    double t_bytes = 0;
    if (k->bytes > 0)
        t_bytes = k->bytes / (s->hbm_bw * curve(cm, MS_CURVE_HBM_EFF, k->bytes));
    /* Roofline: a kernel is bound by the slower of its compute and memory. */
    *ns = fmax(t_flops, t_bytes) * 1e9 + s->kernel_overhead_ns;
    return MS_OK;
}

/* A GEMM that overlaps a tensor-parallel collective in t chunks (TE's
 * userbuffers ring exchange: chunk i's GEMM runs while chunk i + 1 moves):
 * the longer of the two, plus one chunk of the shorter that nothing hides. */
static ms_status overlapped_gemm_ns(const ms_cost_model *cm, const ms_kernel *k, double *ns)
{
    ms_kernel c = *k;
    c.cls = MS_KC_COMM;
    double gemm = 0, comm = 0;
    ms_status st = compute_ns(cm, k, &gemm);
    if (st == MS_OK)
        st = comm_ns(cm, &c, &comm);
    if (st != MS_OK)
        return st;
    int n = k->group_size > 1 ? k->group_size : 1;
    *ns = fmax(gemm, comm) + fmin(gemm, comm) / n;
    return MS_OK;
}

ms_status sim_cost_kernel_ns(const ms_cost_model *cm, const ms_kernel *k, int64_t *ns)
{
    if (cm == NULL || k == NULL || ns == NULL || (unsigned)k->cls >= MS_KC_COUNT)
        return MS_EINVAL;
    double t = 0;
    ms_status st;
    if (k->cls == MS_KC_COMM)
        st = comm_ns(cm, k, &t);
    else if (k->cls == MS_KC_MATMUL && k->comm != MS_COMM_NONE)
        st = overlapped_gemm_ns(cm, k, &t);
    else
        st = compute_ns(cm, k, &t);
    if (st != MS_OK)
        return st;
    if (!(t < 9e18))
        return MS_ERANGE;
    *ns = (int64_t)(t + 0.5); /* t >= 0: round half up, cheaper than llround */
    return MS_OK;
}

ms_status sim_cost_copy_parts(const ms_cost_model *cm, ms_copy_kind kind, uint64_t bytes,
                              int64_t *latency_ns, double *transfer_ns)
{
    if (cm == NULL || latency_ns == NULL || transfer_ns == NULL ||
        (kind != MS_COPY_H2D && kind != MS_COPY_D2H))
        return MS_EINVAL;
    double b = (double)bytes;
    double bw = curve(cm, kind == MS_COPY_H2D ? MS_CURVE_H2D_BW : MS_CURVE_D2H_BW, b);
    *latency_ns = llround(cm->spec.host_link_latency_ns);
    *transfer_ns = b / bw * 1e9;
    return MS_OK;
}

ms_status sim_cost_copy_ns(const ms_cost_model *cm, ms_copy_kind kind, uint64_t bytes, int64_t *ns)
{
    if (cm == NULL || ns == NULL)
        return MS_EINVAL;
    if (kind == MS_COPY_D2D) {
        double moved = 2.0 * (double)bytes;
        double t = 0;
        if (bytes > 0)
            t = moved / (cm->spec.hbm_bw * curve(cm, MS_CURVE_HBM_EFF, moved)) * 1e9;
        *ns = llround(t + cm->spec.kernel_overhead_ns);
        return MS_OK;
    }
    int64_t lat = 0;
    double xfer = 0;
    ms_status st = sim_cost_copy_parts(cm, kind, bytes, &lat, &xfer);
    if (st != MS_OK)
        return st;
    *ns = lat + sim_ceil_ns(xfer);
    return MS_OK;
}
