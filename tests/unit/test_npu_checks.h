/* Checks of backend_npu that hold on any runtime (included by the ACL and
 * CUDA tests on their test doubles, and by the CUDA test run on a GPU when
 * the machine has one): real bytes through streams ordered by events,
 * device times for every copy and kernel, proxies of the op's shape, a
 * whole run with the data check, errors that name the runtime's call, and
 * a device left as it was found.  What each runtime says in its own words
 * comes in as an argument; what each double counts stays in its test. */
#ifndef MEMSIM_TEST_NPU_CHECKS_H
#define MEMSIM_TEST_NPU_CHECKS_H

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend_npu/runtime.h"
#include "memsim/run.h"
#include "memsim/scenario.h"
#include "test_paths.h"

#define MiB (1024ull * 1024ull)

static ms_device_spec npu_any_spec(void)
{
    ms_device_spec s;
    memset(&s, 0, sizeof s);
    s.hbm_bytes = 1ull << 30;
    return s;
}

static ms_device_group *npu_open(const char *backend, int ordinal, ms_diag *d)
{
    ms_device_spec spec = npu_any_spec();
    ms_group_config cfg = {.spec = &spec, .n_devices = 1, .ordinal = ordinal};
    ms_device_group *g = NULL;
    ms_status st = ms_group_open(backend, &cfg, &g, d);
    return st == MS_OK ? g : NULL;
}

enum { NPU_TRACE_MAX = 64 };
typedef struct npu_trace {
    ms_work_record r[NPU_TRACE_MAX];
    int n;
} npu_trace;

static void npu_on_work(void *user, const ms_work_record *rec)
{
    npu_trace *t = user;
    if (t->n < NPU_TRACE_MAX)
        t->r[t->n++] = *rec;
}

static const ms_work_record *npu_by_tag(const npu_trace *t, uint64_t tag)
{
    for (int i = 0; i < t->n; i++)
        if (t->r[i].tag == tag)
            return &t->r[i];
    ck_abort_msg("no work record with tag %llu", (unsigned long long)tag);
    return NULL;
}

#define NPU_OK(call) ck_assert_int_eq((call), MS_OK)

/* Open backend's device 0, which must open: its group, the device in *b. */
static ms_device_group *npu_open_ok(const char *backend, ms_backend **b)
{
    ms_diag d = {0};
    ms_device_group *g = npu_open(backend, 0, &d);
    ck_assert_msg(g != NULL, "%s", d.msg);
    *b = ms_group_device(g, 0);
    return g;
}

/* H2D on one stream, an event, a D2H on another stream that waits for it:
 * the bytes come back, and the device times say the D2H ran after the H2D. */
static void npu_check_copies_and_times(const char *backend)
{
    ms_backend *b = NULL;
    ms_device_group *g = npu_open_ok(backend, &b);
    ck_assert(b->carries_data);
    const ms_backend_ops *o = b->ops;
    npu_trace tr = {0};
    NPU_OK(o->set_tracer(b->inst, npu_on_work, &tr));
    enum { N = 4 << 20 };
    uint64_t h0 = 0, h1 = 0, dev = 0;
    NPU_OK(o->malloc_host(b->inst, N, &h0));
    NPU_OK(o->malloc_host(b->inst, N, &h1));
    NPU_OK(o->malloc_device(b->inst, N, &dev));
    for (size_t i = 0; i < N; i++)
        ((unsigned char *)(uintptr_t)h0)[i] = (unsigned char)(i * 13 + 5);
    memset((void *)(uintptr_t)h1, 0, N);
    ms_stream *s0 = NULL, *s1 = NULL;
    ms_event *e0 = NULL, *e1 = NULL;
    NPU_OK(o->stream_create(b->inst, 0, &s0));
    NPU_OK(o->stream_create(b->inst, 1, &s1));
    NPU_OK(o->event_create(b->inst, &e0));
    NPU_OK(o->event_create(b->inst, &e1));
    NPU_OK(o->event_record(b->inst, e0, s0));
    NPU_OK(o->memcpy_async(b->inst, dev, h0, N, MS_COPY_H2D, s0, 1));
    NPU_OK(o->event_record(b->inst, e1, s0));
    NPU_OK(o->stream_wait_event(b->inst, s1, e1));
    NPU_OK(o->memcpy_async(b->inst, h1, dev, N, MS_COPY_D2H, s1, 2));
    NPU_OK(o->device_synchronize(b->inst));
    ck_assert_int_eq(memcmp((void *)(uintptr_t)h0, (void *)(uintptr_t)h1, N), 0);
    const ms_work_record *in = npu_by_tag(&tr, 1), *out = npu_by_tag(&tr, 2);
    ck_assert(in->is_copy && in->copy_kind == MS_COPY_H2D && in->bytes == N);
    ck_assert(out->is_copy && out->copy_kind == MS_COPY_D2H);
    ck_assert_int_le(in->start_ns, in->end_ns);
    ck_assert_int_ge(out->start_ns, in->end_ns);
    int64_t ns = -1;
    NPU_OK(o->event_elapsed_ns(b->inst, e0, e1, &ns));
    ck_assert_int_ge(ns, 0);
    NPU_OK(o->event_destroy(b->inst, e0));
    NPU_OK(o->event_destroy(b->inst, e1));
    NPU_OK(o->stream_destroy(b->inst, s0));
    NPU_OK(o->stream_destroy(b->inst, s1));
    NPU_OK(o->free_device(b->inst, dev));
    ck_assert_int_eq(o->free_device(b->inst, dev), MS_EINVAL);
    NPU_OK(o->free_host(b->inst, h0));
    NPU_OK(o->free_host(b->inst, h1));
    NPU_OK(ms_group_close(g));
}

/* Kernels as the workload builds them (workload_ops.c, workload_layer.c). */
static ms_kernel npu_matmul(int64_t m, int64_t n, int64_t k, double times)
{
    return (ms_kernel){.name = "matmul",
                       .cls = MS_KC_MATMUL,
                       .dtype = MS_DTYPE_BF16,
                       .flops = times * 2.0 * (double)m * (double)n * (double)k,
                       .shape = {m, n, k, 1},
                       .bytes = -1,
                       .peer = -1};
}

/* The dtype b runs k in, as dt (k's shape, another dtype). */
static ms_dtype npu_runs_as(ms_backend *b, ms_kernel k, ms_dtype dt)
{
    k.dtype = dt;
    ms_dtype runs_as = MS_DTYPE_COUNT;
    NPU_OK(ms_backend_matmul_dtype(b, &k, &runs_as));
    return runs_as;
}

static ms_kernel npu_attention(int64_t s, int64_t dh, int64_t bh, double gemms)
{
    return (ms_kernel){.name = "flash_attention",
                       .cls = MS_KC_ATTENTION,
                       .dtype = MS_DTYPE_FP16,
                       .flops = gemms * 2.0 * (double)s * (double)s * (double)dh * (double)bh,
                       .shape = {s, s, dh, bh},
                       .peer = -1};
}

/* What each proxy issues: its FLOPs as GEMMs, its bytes as copies. */
static void npu_check_proxy_plans(void)
{
    npu_proxy p = {.base = 1ull << 40,
                   .bytes = NPU_PROXY_WORKSPACE_BYTES,
                   .scratch = (1ull << 40) + NPU_PROXY_WORKSPACE_BYTES - NPU_GEMM_SCRATCH_BYTES,
                   .scratch_bytes = NPU_GEMM_SCRATCH_BYTES};
    npu_proxy_plan plan;
    /* llama2-7B's MLP up-projection at 4096 tokens: B (4096 x 11008 bf16,
     * 86 MiB) is over a third of the 224 MiB operand area: tiles of the same
     * FLOPs; its backward is twice the forward. */
    ms_kernel k = npu_matmul(4096, 11008, 4096, 1);
    NPU_OK(npu_proxy_describe(&p, &k, &plan));
    ck_assert_double_eq_tol(plan.gemm_flops, k.flops, k.flops * 1e-12);
    ck_assert_uint_eq(plan.gemms, 2);
    k = npu_matmul(4096, 11008, 4096, 2);
    NPU_OK(npu_proxy_describe(&p, &k, &plan));
    ck_assert_double_eq_tol(plan.gemm_flops, k.flops, k.flops * 1e-12);
    ck_assert_uint_eq(plan.gemms, 4);
    /* Flash attention forward (Q.K^T and P.V) at s = 4096, d = 128, 32
     * heads: scores of 1 GiB per GEMM run in batch tiles. */
    k = npu_attention(4096, 128, 32, 2);
    NPU_OK(npu_proxy_describe(&p, &k, &plan));
    ck_assert_double_eq_tol(plan.gemm_flops, k.flops, k.flops * 1e-12);
    ck_assert_uint_gt(plan.gemms, 2);
    /* A norm of 300 MB read + written: copies that move exactly that. */
    k = (ms_kernel){
        .name = "rmsnorm", .cls = MS_KC_NORM, .dtype = MS_DTYPE_BF16, .flops = 1e8, .bytes = 3e8};
    NPU_OK(npu_proxy_describe(&p, &k, &plan));
    ck_assert_uint_eq(plan.gemms, 0);
    ck_assert_double_eq_tol(plan.copy_bytes_moved, 3e8, 1.0);
    ck_assert_uint_eq(plan.copies, 2);
    /* An all-reduce of 100 MB: a local copy of the buffer. */
    k = (ms_kernel){.name = "all_reduce",
                    .cls = MS_KC_COMM,
                    .comm = MS_COMM_ALLREDUCE,
                    .comm_bytes = 1e8,
                    .group_size = 8,
                    .bytes = 2e8};
    NPU_OK(npu_proxy_describe(&p, &k, &plan));
    ck_assert_double_eq_tol(plan.copy_bytes_moved, 2e8, 1.0);
    /* A kernel without a shape runs as a square GEMM of its FLOPs. */
    k = (ms_kernel){.name = "odd", .cls = MS_KC_MATMUL, .dtype = MS_DTYPE_FP32, .flops = 2e9};
    NPU_OK(npu_proxy_describe(&p, &k, &plan));
    ck_assert_uint_eq(plan.gemms, 1);
    ck_assert_double_eq_tol(plan.gemm_flops, 2e9, 2e9 * 0.01);
}

/* The FLOPs npu_check_launches launched as a matmul and as attention, for
 * a double's test to find in its counters. */
typedef struct npu_launched {
    double matmul_flops, attention_flops;
} npu_launched;

/* The proxies really run on the device: a launch of each class, timed. */
static npu_launched npu_check_launches(const char *backend)
{
    ms_backend *b = NULL;
    ms_device_group *g = npu_open_ok(backend, &b);
    npu_trace tr = {0};
    NPU_OK(b->ops->set_tracer(b->inst, npu_on_work, &tr));
    ms_stream *s = NULL;
    NPU_OK(b->ops->stream_create(b->inst, 0, &s));
    ms_kernel ks[4] = {
        npu_matmul(512, 1376, 512, 1),
        npu_attention(512, 64, 8, 2),
        {.name = "add", .cls = MS_KC_ELEMENTWISE, .dtype = MS_DTYPE_BF16, .bytes = 3 * MiB},
        {.name = "send", .cls = MS_KC_COMM, .comm = MS_COMM_SEND, .comm_bytes = MiB, .peer = 1},
    };
    for (uint64_t i = 0; i < 4; i++)
        NPU_OK(b->ops->launch(b->inst, &ks[i], s, 10 + i));
    NPU_OK(b->ops->device_synchronize(b->inst));
    for (uint64_t i = 0; i < 4; i++) {
        const ms_work_record *w = npu_by_tag(&tr, 10 + i);
        ck_assert(!w->is_copy);
        ck_assert_str_eq(w->name, ks[i].name);
        ck_assert_int_le(w->start_ns, w->end_ns);
        if (i > 0)
            ck_assert_int_ge(w->start_ns, npu_by_tag(&tr, 9 + i)->end_ns);
    }
    NPU_OK(b->ops->stream_destroy(b->inst, s));
    NPU_OK(ms_group_close(g));
    return (npu_launched){ks[0].flops, ks[1].flops};
}

/* A run: stage, policy and allocator on the device, every swapped tensor
 * checked, times from device events, and the runtime's own account of the
 * memory agreeing with the allocator's. */
static void npu_check_run(const char *backend, const char *policy, ms_run_notes *notes_out,
                          ms_run_summary *summary_out)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/tests/data/npu/tiny-llama-swap.lua", srcdir());
    const ms_scenario *sc = NULL;
    ms_diag d = {0};
    ck_assert_msg(ms_scenario_load(path, NULL, 0, &sc, &d) == MS_OK, "%s", d.msg);
    ms_run_options opt = {.policy = policy, .backend = backend, .record = true, .verify = true};
    ms_run *run = NULL;
    ck_assert_msg(ms_run_execute(sc, &opt, &run, &d) == MS_OK, "%s", d.msg);
    size_t n = 0;
    const ms_run_summary *s = ms_run_summaries(run, &n);
    const ms_run_notes *notes = ms_run_notes_get(run);
    ck_assert_uint_eq(n, 1);
    ck_assert(!s[0].oom);
    ck_assert_int_eq(s[0].steps, 2);
    ck_assert_double_gt(s[0].step_time_ms, 0);
    ck_assert(notes->device_memory_checked);
    ck_assert_uint_gt(notes->verified_tensors, 0);
    ck_assert_uint_ge(notes->verified_bytes, s[0].swapped_bytes);
    /* Every kernel of the last step got its device times. */
    const ms_run_record *rec = ms_run_record_get(run);
    size_t kernels = 0;
    for (size_t i = 0; i < ms_record_n_ops(rec); i++) {
        const ms_op_row *row = ms_record_op(rec, i);
        if (row->step != 1)
            continue;
        ck_assert_int_ge(row->start_ns, 0);
        ck_assert_int_ge(row->end_ns, row->start_ns);
        kernels++;
    }
    ck_assert_uint_gt(kernels, 100);
    *notes_out = *notes;
    *summary_out = s[0];
    ms_run_free(run);
    ms_scenario_free(sc);
}

/* A run with the default swap (npu_check_run) swaps at full size, and the
 * runtime's account of what the run took is the allocator's reserve
 * exactly (a double: nothing else takes device memory) or covers it (a
 * GPU: CUDA adds its own, lazily loaded kernels and page rounding).  Its
 * notes, for what a runtime's test checks beyond. */
static ms_run_notes npu_check_swaps(const char *backend, bool exact)
{
    ms_run_notes n;
    ms_run_summary s;
    npu_check_run(backend, NULL, &n, &s);
    ck_assert_uint_gt(s.swapped_bytes, 0);
    ck_assert(!n.scaled);
    if (exact)
        ck_assert_uint_eq(n.device_free_before - n.device_free_after, n.reserved_after);
    else
        ck_assert_uint_ge(n.device_free_before - n.device_free_after, n.reserved_after);
    ck_assert_uint_ge(n.reserved_after, s.peak_reserved);
    return n;
}

/* Pinned host memory is cached by size class (pinned.c, as PyTorch's host
 * allocator): a request of a class freed before gets that block back, a
 * free of what is not a block or no longer held is refused; the runtime's
 * own allocations are its test's to count.  Expandable segments are not
 * implemented on real devices. */
static void npu_check_pinned_reuse(const char *backend)
{
    ms_backend *b = NULL;
    ms_device_group *g = npu_open_ok(backend, &b);
    uint64_t a = 0, c = 0;
    NPU_OK(b->ops->malloc_host(b->inst, 5000, &a));
    NPU_OK(b->ops->free_host(b->inst, a));
    NPU_OK(b->ops->malloc_host(b->inst, 8192, &c));
    ck_assert_uint_eq(a, c);
    ck_assert_int_eq(b->ops->free_host(b->inst, c + 8), MS_EINVAL);
    NPU_OK(b->ops->free_host(b->inst, c));
    ck_assert_int_eq(b->ops->free_host(b->inst, c), MS_EINVAL);
    ck_assert_int_eq(b->ops->va_reserve(b->inst, 1 << 21, &a), MS_EUNSUPPORTED);
    NPU_OK(ms_group_close(g));
}

/* A failed call leaves the runtime's own message, `says`, where the
 * executor looks for it (backend.h's last_error), and nothing before it.
 * The call: an allocation of a PiB, more than any device has. */
static void npu_check_failure_says(const char *backend, const char *says)
{
    ms_backend *b = NULL;
    ms_device_group *g = npu_open_ok(backend, &b);
    ck_assert_str_eq(b->ops->last_error(b->inst), "");
    uint64_t a = 0;
    ck_assert_int_eq(b->ops->malloc_device(b->inst, 1ull << 50, &a), MS_ENOMEM);
    ck_assert_str_eq(b->ops->last_error(b->inst), says);
    NPU_OK(ms_group_close(g));
}

/* ---- checks of a device a double makes up ---------------------------------
 * They need a device count or size the test chooses, which a GPU does not
 * offer: test_npu_cuda has no use for them (hence unused there). */
#define NPU_DOUBLE_ONLY __attribute__((unused))

/* No device: the open fails saying so in the runtime's words, `says`, and
 * lists the backends there are (which this build's configuration decides
 * beyond the mock). */
NPU_DOUBLE_ONLY static void npu_check_no_device(const char *backend, const char *says)
{
    ms_diag d = {0};
    ck_assert_ptr_null(npu_open(backend, 0, &d));
    ck_assert_int_eq(d.code, MS_ENOENT);
    ck_assert_msg(strstr(d.msg, says) != NULL, "%s", d.msg);
    ck_assert_msg(strstr(d.msg, " (backends in this build: mock") != NULL, "%s", d.msg);
}

/* backend names device `ordinal`, past the last: the open says which there are. */
NPU_DOUBLE_ONLY static void npu_check_no_such_ordinal(const char *backend, int ordinal,
                                                      const char *says)
{
    ms_diag d = {0};
    ck_assert_ptr_null(npu_open(backend, ordinal, &d));
    ck_assert_int_eq(d.code, MS_ERANGE);
    ck_assert_str_eq(d.msg, says);
}

/* A device too small for the proxy workspace fails at open, with the
 * runtime's failed call (`says`) in the message. */
NPU_DOUBLE_ONLY static void npu_check_too_small(const char *backend, const char *says)
{
    ms_diag d = {0};
    ck_assert_ptr_null(npu_open(backend, 0, &d));
    ck_assert_int_eq(d.code, MS_ENOMEM);
    ck_assert_msg(strstr(d.msg, "proxy kernels' 256 MiB workspace") != NULL &&
                      strstr(d.msg, says) != NULL,
                  "%s", d.msg);
}

#endif
