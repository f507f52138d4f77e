/* Op emission in the model's terms: a matmul with its kernel cost and model
 * FLOPs, its backward (input grad + weight grad into the fp32 main grad), an
 * elementwise kernel, a collective.  Kernel bytes are left to the builder
 * (inputs + outputs) unless an op moves less than it names. */
#include "workload_model.h"

#include <stdio.h>

/* Joined, not formatted: every op of a layer is named here. */
const char *wl_name(wm *m, const char *module, const char *suffix)
{
    return wl_build_name_join(m->name, sizeof m->name, m->b->layer, module, suffix, (char *)NULL);
}

uint64_t wl_bytes(const wm *m, uint32_t t)
{
    return m->b->err == MS_OK && t < m->b->n_tensors ? m->b->tensors[t].bytes : 0;
}

static ms_kernel kernel(const char *kname, ms_kernel_class cls, ms_dtype dt, double flops)
{
    return (ms_kernel){.name = kname, .cls = cls, .dtype = dt, .flops = flops, .bytes = -1,
                       .comm = MS_COMM_NONE, .peer = -1};
}

/* --tp-comm-overlap: the TP collective next to a linear layer's GEMM runs
 * inside it, chunk by chunk (the cost model's overlapped GEMM), as
 * Transformer Engine's userbuffers do, and its buffers are TE's, not the
 * caching allocator's.  A gather in front of a GEMM is held until that
 * GEMM is emitted; a reduce-scatter after it joins the GEMM just emitted. */
static void overlap_fields(const wm *m, ms_kernel *k, ms_comm_kind kind, double bytes)
{
    k->comm = kind;
    k->comm_bytes = bytes;
    k->group_size = (int)m->t;
    k->link = m->tp_link;
    k->ranks_per_node = wl_ranks_per_node(m, wl_tp_group(m), m->tp_link);
}

/* Only the transformer layers' linear layers are TE modules that overlap;
 * the embedding and the output layer keep their collectives. */
static bool overlaps(const wm *m)
{
    return m->tp_overlap && m->b->layer != MS_NONE;
}

static void take_held(wm *m, ms_kernel *k)
{
    if (m->held_gather > 0)
        overlap_fields(m, k, MS_COMM_ALLGATHER, m->held_gather);
    m->held_gather = 0;
}

/* Ring all-gathers and reduce-scatters cost the same per byte, so a GEMM
 * overlapping both (a column-parallel layer's backward) carries their sum. */
static bool join_last_gemm(wm *m, ms_comm_kind kind, double bytes)
{
    ms_op *op = wl_build_last_op(m->b);
    if (!overlaps(m) || op == NULL || op->kernel.cls != MS_KC_MATMUL)
        return false;
    if (op->kernel.comm == MS_COMM_NONE)
        overlap_fields(m, &op->kernel, kind, bytes);
    else
        op->kernel.comm_bytes += bytes;
    return true;
}

static bool fp8_linear(const wm *m, const wm_param *w)
{
    return m->fp8 && w->w8 != WB_NO_TENSOR;
}

static ms_kernel gemm(const char *kname, ms_dtype dt, double flops, uint64_t M, uint64_t N,
                      uint64_t K)
{
    ms_kernel k = kernel(kname, MS_KC_MATMUL, dt, flops);
    k.shape[0] = (int64_t)M;
    k.shape[1] = (int64_t)N;
    k.shape[2] = (int64_t)K;
    k.shape[3] = 1;
    return k;
}

/* y[M x N] = x[M x K] . w[K x N]; an FP8 linear layer reads the FP8 copy
 * of its weight (x is already FP8: wl_fp8_input) and writes 16 bits. */
uint32_t wl_matmul(wm *m, const char *name, uint32_t x, const wm_param *w, uint64_t M, uint64_t N,
                   uint64_t K)
{
    double flops = 2.0 * (double)M * (double)N * (double)K;
    bool fp8 = fp8_linear(m, w);
    ms_kernel k = gemm("matmul", fp8 ? MS_DTYPE_FP8 : m->dt, flops, M, N, K);
    take_held(m, &k);
    uint32_t in[2] = {x, fp8 ? w->w8 : w->w};
    wl_build_op_add(m->b, &k, flops, in, 2, "%s", name);
    return wl_build_out(m->b, "out", M * N * m->es, m->dt, MS_TK_ACTIVATION);
}

/* TE's backward of an FP8 linear layer casts the output grad to FP8 (E5M2
 * under the hybrid format) together with its transpose, one kernel, for
 * the input-grad and the weight-grad GEMMs: a temporary of 2 M N bytes. */
static uint32_t fp8_grad_input(wm *m, const char *name, uint32_t dy, uint64_t M, uint64_t N)
{
    ms_kernel k = kernel("cast_transpose_to_fp8", MS_KC_ELEMENTWISE, m->dt, (double)(M * N));
    wl_build_op_add(m->b, &k, 0, &dy, 1, "%s.cast_transpose_to_fp8", name);
    return wl_build_out(m->b, "grad_fp8", 2 * M * N, MS_DTYPE_FP8, MS_TK_TEMP);
}

/* dX = dY . w^T and dW += X^T . dY: twice the forward FLOPs in one op, the
 * weight grad accumulated straight into the main grad (Megatron's
 * gradient_accumulation_fusion).  acc != WB_NO_TENSOR: dX is added into acc
 * (the other projections of the same input) instead of a new tensor. */
uint32_t wl_matmul_bwd(wm *m, const char *name, uint32_t dy, uint32_t x, const wm_param *w,
                       uint64_t M, uint64_t N, uint64_t K, uint32_t acc)
{
    double flops = 4.0 * (double)M * (double)N * (double)K;
    bool fp8 = fp8_linear(m, w);
    char own[sizeof m->name];
    if (fp8) { /* name may be m->name, which the cast's name would overwrite */
        snprintf(own, sizeof own, "%s", name);
        name = own;
        dy = fp8_grad_input(m, name, dy, M, N);
    }
    ms_kernel k = gemm("matmul_backward", fp8 ? MS_DTYPE_FP8 : m->dt, flops, M, N, K);
    take_held(m, &k);
    uint32_t in[5] = {dy, x, fp8 ? w->w8 : w->w, w->g, acc};
    wl_build_op_add(m->b, &k, flops, in, acc == WB_NO_TENSOR ? 4 : 5, "%s", name);
    wl_build_inplace(m->b, w->g);
    if (acc != WB_NO_TENSOR) {
        wl_build_inplace(m->b, acc);
        return acc;
    }
    return wl_build_out(m->b, "grad_in", M * K * m->es, m->dt, MS_TK_TEMP);
}

uint32_t wl_elementwise(wm *m, const char *name, const char *kname, ms_kernel_class cls,
                        const uint32_t *in, uint32_t n_in, double elems, double flops_per_elem)
{
    ms_kernel k = kernel(kname, cls, m->dt, elems * flops_per_elem);
    return wl_build_op_add(m->b, &k, 0, in, n_in, "%s", name);
}

/* Distance between consecutive ranks of a group in Megatron's rank order
 * (tp fastest, then cp, dp), or 0 for a group counted one rank a node (the
 * embedding pair of the first and last stage, the grad-norm group).  The
 * grads are reduced over the dp-cp group (mcore's DDP asks for the data
 * parallel group with_context_parallel), which is every tp-th rank; expert
 * parallelism takes consecutive ranks of it, and an expert's grads are
 * reduced over every (tp x ep)-th. */
static int64_t group_stride(const wm *m, wl_group_kind kind)
{
    switch (kind) {
    case WL_GROUP_TP: return 1;
    case WL_GROUP_DP: return (int64_t)m->t;
    case WL_GROUP_EP: return (int64_t)m->t;
    case WL_GROUP_EXPERT_DP: return (int64_t)m->t * (int64_t)m->ep;
    case WL_GROUP_OTHER: break;
    }
    return 0;
}

int wl_ranks_per_node(const wm *m, wl_group group, ms_link_kind link)
{
    int per = m->sc->device.devices_per_node;
    int64_t stride = group_stride(m, group.kind);
    if (link != MS_LINK_INTER_NODE || per <= 1 || stride <= 0 || stride >= per)
        return 1;
    int64_t k = per / stride;
    return (int)(k < group.size ? k : group.size);
}

wl_group wl_tp_group(const wm *m)
{
    return (wl_group){m->tp_group, WL_GROUP_TP};
}

static ms_kernel comm_kernel(const wm *m, const char *kname, ms_comm_kind kind, wl_group group,
                             ms_link_kind link, ms_dtype dt, double comm_bytes)
{
    ms_kernel k = kernel(kname, MS_KC_COMM, dt, 0);
    k.comm = kind;
    k.group_size = group.size;
    k.link = link;
    k.comm_bytes = comm_bytes;
    k.ranks_per_node = wl_ranks_per_node(m, group, link);
    return k;
}

static const char *comm_kname(ms_comm_kind kind)
{
    switch (kind) {
    case MS_COMM_ALLGATHER:
        return "all_gather";
    case MS_COMM_REDUCE_SCATTER:
        return "reduce_scatter";
    case MS_COMM_ALLREDUCE:
        return "all_reduce";
    case MS_COMM_SEND:
        return "send";
    case MS_COMM_RECV:
        return "recv";
    default:
        return "collective";
    }
}

/* A collective with a new output (all-gather, reduce-scatter); comm_bytes
 * is the full buffer as the cost model and nccl-tests count it: the
 * gathered output of an all-gather, the input of a reduce-scatter. */
uint32_t wl_collective(wm *m, const char *name, ms_comm_kind kind, wl_group group,
                       ms_link_kind link, uint32_t in, uint64_t out_bytes, ms_tensor_kind out_kind)
{
    double full = kind == MS_COMM_ALLGATHER ? (double)out_bytes : (double)wl_bytes(m, in);
    ms_kernel k = comm_kernel(m, comm_kname(kind), kind, group, link, m->dt, full);
    wl_build_op_add(m->b, &k, 0, &in, 1, "%s", name);
    return wl_build_out(m->b, "out", out_bytes, m->dt, out_kind);
}

/* A collective that rewrites its buffers in place (NCCL/HCCL all-reduce,
 * the DP grad reduce-scatter and the parameter all-gather of the
 * distributed optimizer, which work on views of one contiguous buffer). */
void wl_collective_inplace(wm *m, const char *name, ms_comm_kind kind, wl_group group,
                           ms_link_kind link, const uint32_t *ts, uint32_t n, double comm_bytes)
{
    if (m->b->err != MS_OK)
        return;
    ms_kernel k = comm_kernel(m, comm_kname(kind), kind, group, link,
                              n ? m->b->tensors[ts[0]].dtype : m->dt, comm_bytes);
    wl_build_op_add(m->b, &k, 0, ts, n, "%s", name);
    for (uint32_t i = 0; i < n; i++)
        wl_build_inplace(m->b, ts[i]);
}

uint64_t wl_act_bytes(const wm *m)
{
    return m->rows_act * m->h * m->es;
}

static uint32_t norm_out(wm *m, const char *op, uint32_t x, const wm_param *w, ms_dtype dt)
{
    uint64_t n = m->rows_act * m->h;
    wl_elementwise(m, wl_name(m, op, ""), m->rms ? "rms_norm" : "layer_norm", MS_KC_NORM,
                   WM_IN(x, w->w), (double)n, m->rms ? 4 : 8);
    return wl_build_out(m->b, "out", n * ms_dtype_size(dt), dt, MS_TK_ACTIVATION);
}

uint32_t wl_norm(wm *m, const char *op, uint32_t x, const wm_param *w)
{
    return norm_out(m, op, x, w, m->dt);
}

uint32_t wl_norm_to_linear(wm *m, const char *op, uint32_t x, const wm_param *w)
{
    return norm_out(m, op, x, w, m->fp8 ? MS_DTYPE_FP8 : m->dt);
}

uint32_t wl_fp8_input(wm *m, const char *module, uint32_t x)
{
    if (!m->fp8 || m->b->err != MS_OK || m->b->tensors[x].dtype == MS_DTYPE_FP8)
        return x;
    uint64_t n = wl_bytes(m, x) / m->es;
    wl_elementwise(m, wl_name(m, module, ".cast_to_fp8"), "cast_to_fp8", MS_KC_ELEMENTWISE,
                   WM_IN(x), (double)n, 1);
    return wl_build_out(m->b, "out", n, MS_DTYPE_FP8, MS_TK_ACTIVATION);
}

/* The norm's input grad; with a residual grad (pre-norm layers) the sum of
 * both, as autograd accumulates them; the weight grad into the main grad. */
uint32_t wl_norm_bwd(wm *m, const char *op, uint32_t x, const wm_param *w, uint32_t dy,
                     uint32_t d_residual)
{
    const char *k = m->rms ? "rms_norm_backward" : "layer_norm_backward";
    double n = (double)(m->rows_act * m->h);
    if (d_residual != WB_NO_TENSOR)
        wl_elementwise(m, wl_name(m, op, ".backward"), k, MS_KC_NORM,
                       WM_IN(dy, x, w->w, w->g, d_residual), n, 10);
    else
        wl_elementwise(m, wl_name(m, op, ".backward"), k, MS_KC_NORM, WM_IN(dy, x, w->w, w->g), n,
                       10);
    wl_build_inplace(m->b, w->g);
    return wl_build_out(m->b, "grad_in", wl_act_bytes(m), m->dt, MS_TK_TEMP);
}

uint32_t wl_dropout_bwd(wm *m, const char *name, uint32_t dy, uint32_t mask)
{
    wl_elementwise(m, name, "dropout_backward", MS_KC_ELEMENTWISE, WM_IN(dy, mask),
                   (double)(m->rows_act * m->h), 1);
    return wl_build_out(m->b, "grad_in", wl_act_bytes(m), m->dt, MS_TK_TEMP);
}

static bool gathered(const wm *m)
{
    return m->sp && m->t > 1;
}

/* The s/t shard x of [rows_act x h] gathered to [rows x h] (sequence
 * parallelism) in its own dtype (TE gathers an FP8 norm output as FP8). */
static uint64_t gathered_bytes(const wm *m, uint32_t x)
{
    return m->rows * m->h * ms_dtype_size(m->b->tensors[x].dtype);
}

uint32_t wl_gather(wm *m, const char *name, uint32_t x, ms_tensor_kind kind)
{
    if (m->b->err != MS_OK)
        return x;
    ms_dtype dt = m->b->tensors[x].dtype;
    uint64_t bytes = gathered_bytes(m, x);
    ms_kernel k = comm_kernel(m, "all_gather", MS_COMM_ALLGATHER, wl_tp_group(m), m->tp_link, dt,
                              (double)bytes);
    wl_build_op_add(m->b, &k, 0, &x, 1, "%s", name);
    return wl_build_out(m->b, "out", bytes, dt, kind);
}

/* The gather in front of a GEMM: an op of its own, or with
 * --tp-comm-overlap held for the GEMM (take_held); nothing without SP. */
static uint32_t gather_for_gemm(wm *m, const char *module, const char *suffix, uint32_t x,
                                ms_tensor_kind kind)
{
    if (!gathered(m) || m->b->err != MS_OK)
        return x;
    if (overlaps(m)) {
        m->held_gather = (double)gathered_bytes(m, x);
        return x;
    }
    return wl_gather(m, wl_name(m, module, suffix), x, kind);
}

/* Before a column-parallel block.  Without SP its input is already whole
 * (Megatron's copy_to_tensor_model_parallel_region is the identity). */
uint32_t wl_gather_in(wm *m, const char *module, uint32_t x)
{
    return gather_for_gemm(m, module, ".all_gather", x, MS_TK_COMM_BUFFER);
}

uint32_t wl_regather_in(wm *m, const char *module, uint32_t x)
{
    return gather_for_gemm(m, module, ".backward.all_gather", x, MS_TK_COMM_BUFFER);
}

/* Backward of a column-parallel block's input side: the partial input grad
 * is reduce-scattered (SP) or all-reduced in place. */
uint32_t wl_reduce_in_grad(wm *m, const char *module, uint32_t dx)
{
    if (m->t == 1)
        return dx;
    if (gathered(m) && join_last_gemm(m, MS_COMM_REDUCE_SCATTER, (double)wl_bytes(m, dx)))
        return wl_build_out(m->b, "grad_in", wl_act_bytes(m), m->dt, MS_TK_TEMP);
    if (gathered(m))
        return wl_collective(m, wl_name(m, module, ".all_gather.backward"), MS_COMM_REDUCE_SCATTER,
                             wl_tp_group(m), m->tp_link, dx, wl_act_bytes(m), MS_TK_TEMP);
    wl_collective_inplace(m, wl_name(m, module, ".backward.all_reduce"), MS_COMM_ALLREDUCE,
                          wl_tp_group(m), m->tp_link, &dx, 1, (double)wl_bytes(m, dx));
    return dx;
}

/* After a row-parallel matmul: reduce the partial sums over TP. */
uint32_t wl_reduce_out(wm *m, const char *module, uint32_t y)
{
    if (m->t == 1)
        return y;
    if (gathered(m) && join_last_gemm(m, MS_COMM_REDUCE_SCATTER, (double)wl_bytes(m, y)))
        return wl_build_out(m->b, "out", wl_act_bytes(m), m->dt, MS_TK_ACTIVATION);
    if (gathered(m))
        return wl_collective(m, wl_name(m, module, ".reduce_scatter"), MS_COMM_REDUCE_SCATTER,
                             wl_tp_group(m), m->tp_link, y, wl_act_bytes(m), MS_TK_ACTIVATION);
    wl_collective_inplace(m, wl_name(m, module, ".all_reduce"), MS_COMM_ALLREDUCE, wl_tp_group(m),
                          m->tp_link, &y, 1, (double)wl_bytes(m, y));
    return y;
}

/* Backward of the row-parallel reduction: all-gather the grad (SP); the
 * all-reduce's backward is the identity. */
uint32_t wl_gather_out_grad(wm *m, const char *module, uint32_t dy)
{
    return gather_for_gemm(m, module, ".reduce_scatter.backward", dy, MS_TK_TEMP);
}
