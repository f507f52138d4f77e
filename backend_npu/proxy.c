/* Proxy kernels: device work with an op's shape, so that a policy running on
 * a real device sees real timings (docs/backends.md says what each proxy
 * does and does not reproduce).
 *
 * - matmul: GEMMs of the op's (M, N, K, batch) until its FLOPs are done (a
 *   backward matmul's 4MNK FLOPs are two GEMMs of the forward shape), in the
 *   op's dtype (fp8 where the runtime has FP8 GEMMs and the shape suits
 *   them, cuda_fp8.c; otherwise fp8, and int8 always, run as fp16);
 * - attention: its two batched GEMMs, Q.K^T (s x s x d) and P.V (s x d x s),
 *   alternated until its FLOPs are done;
 * - elementwise and norm kernels (and the optimizer): a device-to-device copy
 *   of half the op's bytes, which reads and writes its bytes once;
 * - collectives and p2p: a device-local copy of the op's buffer (one device:
 *   no link, no peer).
 * Operands live in one workspace the device allocates at open, outside the
 * caching allocator; a GEMM whose operands do not fit in it runs as tiles
 * of the same total FLOPs, a copy larger than it as several copies. */
#include <math.h>

#include "runtime.h"

/* The GEMMs an op runs as: reps GEMMs cycling through n_shapes shapes. */
typedef struct gemm_shape {
    int64_t m, n, k, batch;
} gemm_shape;

typedef struct gemm_work {
    gemm_shape shapes[2];
    int n_shapes;
    int64_t reps;
    ms_dtype dtype;
} gemm_work;

static ms_dtype gemm_dtype(ms_dtype t)
{
    return t == MS_DTYPE_FP32 || t == MS_DTYPE_BF16 || t == MS_DTYPE_FP8 ? t : MS_DTYPE_FP16;
}

static double shape_flops(const gemm_shape *s)
{
    return 2.0 * (double)s->m * (double)s->n * (double)s->k * (double)s->batch;
}

/* A square GEMM of about the op's FLOPs, for a kernel without a usable
 * shape. */
static gemm_shape square_of(double flops)
{
    int64_t side = (int64_t)llround(cbrt(flops / 2.0));
    side = side < 16 ? 16 : side;
    return (gemm_shape){side, side, side, 1};
}

static bool valid_shape(const int64_t *s)
{
    return s[0] > 0 && s[1] > 0 && s[2] > 0 && s[3] > 0;
}

static gemm_work gemm_work_of(const ms_kernel *k)
{
    gemm_work w = {.n_shapes = 1, .dtype = gemm_dtype(k->dtype)};
    const int64_t *s = k->shape;
    if (!valid_shape(s))
        w.shapes[0] = square_of(k->flops);
    else if (k->cls == MS_KC_ATTENTION) {
        /* shape = (s_q, s_k, head dim, batch x heads) */
        w.shapes[0] = (gemm_shape){s[0], s[1], s[2], s[3]};
        w.shapes[1] = (gemm_shape){s[0], s[2], s[1], s[3]};
        w.n_shapes = 2;
    } else
        w.shapes[0] = (gemm_shape){s[0], s[1], s[2], s[3]};
    double per = shape_flops(&w.shapes[0]);
    w.reps = per > 0 ? llround(k->flops / per) : 0;
    if (w.reps < 1 && k->flops > 0)
        w.reps = 1;
    return w;
}

static int64_t div_up(int64_t a, int64_t b)
{
    return (a + b - 1) / b;
}

/* Split n into the fewest equal parts of at most most each. */
static int64_t part_of(int64_t n, int64_t most)
{
    if (most < 1)
        most = 1;
    return div_up(n, div_up(n, most));
}

/* Tiles of a GEMM whose three operands each fit in `room` elements. */
typedef struct gemm_tiles {
    int64_t mc, nc, kc, bc;
} gemm_tiles;

static gemm_tiles tiles_of(const gemm_shape *s, int64_t room)
{
    gemm_tiles t;
    t.kc = part_of(s->k, room);
    t.mc = part_of(s->m, room / t.kc);
    int64_t wider = t.kc > t.mc ? t.kc : t.mc;
    t.nc = part_of(s->n, room / wider);
    int64_t per = t.mc * t.kc;
    per = t.kc * t.nc > per ? t.kc * t.nc : per;
    per = t.mc * t.nc > per ? t.mc * t.nc : per;
    t.bc = part_of(s->batch, room / per);
    return t;
}

static int64_t min64(int64_t a, int64_t b)
{
    return a < b ? a : b;
}

typedef struct gemm_sink {
    const npu_runtime *rt;
    void *ctx;
    const npu_proxy *p;
    void *stream;
    npu_proxy_plan *plan; /* describe only */
} gemm_sink;

/* A third of the operand area, rounded down to 256 bytes: GEMM libraries
 * pick their vectorised kernels only for aligned operands (cuBLASLt's FP8
 * ones need 16 bytes). */
static uint64_t operand_region(const npu_proxy *p)
{
    return (p->bytes - p->scratch_bytes) / 3 / 256 * 256;
}

static npu_gemm gemm_call(const npu_proxy *p, ms_dtype dt, int64_t m, int64_t n, int64_t k,
                          int64_t batch)
{
    uint64_t region = operand_region(p);
    return (npu_gemm){.dtype = dt,
                      .m = m,
                      .n = n,
                      .k = k,
                      .batch = batch,
                      .a = p->base,
                      .b = p->base + region,
                      .c = p->base + 2 * region,
                      .scratch = p->scratch,
                      .scratch_bytes = p->scratch_bytes};
}

/* The dtype the runtime runs `call` in: its own, or fp16 in its place. */
static ms_dtype taken_dtype(const npu_runtime *rt, void *ctx, const npu_gemm *call)
{
    return rt->gemm_takes(ctx, call) ? call->dtype : MS_DTYPE_FP16;
}

static ms_status emit_gemm(gemm_sink *g, ms_dtype dt, int64_t m, int64_t n, int64_t k,
                           int64_t batch)
{
    if (g->plan != NULL) {
        g->plan->gemms++;
        g->plan->gemm_flops += 2.0 * (double)m * (double)n * (double)k * (double)batch;
        return MS_OK;
    }
    npu_gemm call = gemm_call(g->p, dt, m, n, k, batch);
    call.dtype = taken_dtype(g->rt, g->ctx, &call);
    return g->rt->gemm(g->ctx, &call, g->stream);
}

/* Tiles whose operands fit their regions (an FP8 GEMM's bf16 result is
 * its widest operand). */
static gemm_tiles tiles_in(const npu_proxy *p, const gemm_shape *s, ms_dtype dt)
{
    int64_t es = dt == MS_DTYPE_FP32 ? 4 : 2;
    return tiles_of(s, (int64_t)operand_region(p) / es);
}

static ms_status emit_tiled(gemm_sink *g, const gemm_shape *s, ms_dtype dt)
{
    gemm_tiles t = tiles_in(g->p, s, dt);
    ms_status st = MS_OK;
    for (int64_t b = 0; st == MS_OK && b < s->batch; b += t.bc)
        for (int64_t m = 0; st == MS_OK && m < s->m; m += t.mc)
            for (int64_t n = 0; st == MS_OK && n < s->n; n += t.nc)
                for (int64_t k = 0; st == MS_OK && k < s->k; k += t.kc)
                    st = emit_gemm(g, dt, min64(t.mc, s->m - m), min64(t.nc, s->n - n),
                                   min64(t.kc, s->k - k), min64(t.bc, s->batch - b));
    return st;
}

static ms_status emit_gemms(gemm_sink *g, const ms_kernel *k)
{
    gemm_work w = gemm_work_of(k);
    ms_status st = MS_OK;
    for (int64_t r = 0; st == MS_OK && r < w.reps; r++)
        st = emit_tiled(g, &w.shapes[r % w.n_shapes], w.dtype);
    return st;
}

/* Copies of `bytes` in all, each at most half the operand area (source in
 * one half, destination in the other). */
static ms_status emit_copies(gemm_sink *g, double bytes)
{
    uint64_t half = (g->p->bytes - g->p->scratch_bytes) / 2;
    uint64_t left = bytes > 0 ? (uint64_t)llround(bytes) : 0;
    ms_status st = MS_OK;
    while (st == MS_OK && left > 0) {
        uint64_t n = left < half ? left : half;
        if (g->plan != NULL) {
            g->plan->copies++;
            g->plan->copy_bytes_moved += 2.0 * (double)n;
        } else
            st = g->rt->memcpy_async(g->ctx, g->p->base + half, g->p->base, n, MS_COPY_D2D,
                                     g->stream);
        left -= n;
    }
    return st;
}

static ms_status emit(gemm_sink *g, const ms_kernel *k)
{
    switch (k->cls) {
    case MS_KC_MATMUL:
    case MS_KC_ATTENTION: return emit_gemms(g, k);
    case MS_KC_COMM: return emit_copies(g, k->comm_bytes);
    default:
        /* A copy reads n bytes and writes n: half the op's bytes each way. */
        return emit_copies(g, k->bytes / 2.0);
    }
}

ms_status npu_proxy_launch(const npu_runtime *rt, void *ctx, const npu_proxy *p, const ms_kernel *k,
                           void *s)
{
    if (rt == NULL || p == NULL || k == NULL || s == NULL || p->bytes == 0)
        return MS_EINVAL;
    gemm_sink g = {.rt = rt, .ctx = ctx, .p = p, .stream = s};
    return emit(&g, k);
}

ms_dtype npu_proxy_matmul_dtype(const npu_runtime *rt, void *ctx, const npu_proxy *p,
                                const ms_kernel *k)
{
    gemm_work w = gemm_work_of(k);
    gemm_tiles t = tiles_in(p, &w.shapes[0], w.dtype);
    npu_gemm call = gemm_call(p, w.dtype, t.mc, t.nc, t.kc, t.bc);
    return taken_dtype(rt, ctx, &call);
}

ms_status npu_proxy_describe(const npu_proxy *p, const ms_kernel *k, npu_proxy_plan *out)
{
    if (p == NULL || k == NULL || out == NULL || p->bytes == 0)
        return MS_EINVAL;
    *out = (npu_proxy_plan){0};
    gemm_sink g = {.p = p, .plan = out};
    return emit(&g, k);
}

ms_status npu_proxy_init(const npu_runtime *rt, void *ctx, npu_proxy *p, ms_diag *d)
{
    *p = (npu_proxy){0};
    uint64_t base = 0, bytes = NPU_PROXY_WORKSPACE_BYTES;
    ms_status st = rt->malloc_device(ctx, bytes, &base);
    if (st != MS_OK)
        return ms_diag_set(d, st, "%s: cannot allocate the proxy kernels' %llu MiB workspace: %s",
                           rt->name, (unsigned long long)(bytes >> 20), rt->last_error(ctx));
    /* 0x3c in every byte: finite fp16/bf16/fp32 operands (about 1.06 in
     * fp16), so the GEMMs never meet NaNs or denormals. */
    if ((st = rt->memset_device(ctx, base, 0x3c, bytes)) != MS_OK) {
        rt->free_device(ctx, base);
        return ms_diag_set(d, st, "%s: cannot initialise the proxy workspace: %s", rt->name,
                           rt->last_error(ctx));
    }
    *p = (npu_proxy){.base = base,
                     .bytes = bytes,
                     .scratch = base + bytes - NPU_GEMM_SCRATCH_BYTES,
                     .scratch_bytes = NPU_GEMM_SCRATCH_BYTES};
    return MS_OK;
}

void npu_proxy_fini(const npu_runtime *rt, void *ctx, npu_proxy *p)
{
    if (p->bytes != 0)
        rt->free_device(ctx, p->base);
    *p = (npu_proxy){0};
}
