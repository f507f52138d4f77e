/* The executor on hand-built programs, over the real mock NPU and the real
 * allocator model: frees at last use, swap (and the memory its deferred free
 * costs), recompute, hazards, OOM. */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "memsim/allocator.h"
#include "backend_mock/mock.h"
#include "memsim/exec.h"
#include "lib/exec/exec_spans.h"
#include "sim/sim.h"

#include "test_device_spec.h"

#define MiB (1024ull * 1024ull)

/* The shared unit-test device (test_device_spec.h) with this file's HBM
 * size, a 100 TFLOP/s bf16 peak (each 1e9-FLOP op takes 10 us, so a step
 * is longer than 40 us) and 1 us added to every kernel.  Its host link,
 * 10 GB/s each way, makes a 64 MiB copy take 6.7 ms, far longer than the
 * microseconds the host needs to issue the whole program. */
static ms_device_spec test_device(uint64_t hbm)
{
    ms_device_spec s = spec_base();
    s.hbm_bytes = hbm;
    s.peak_flops[MS_DTYPE_BF16] = 100e12;
    s.kernel_overhead_ns = 1000;
    return s;
}

/* A four-op program: x = f(); y = g(x); [backward] gy = h(y, x); k(gy).
 * Sizes are multiples of 2 MiB so allocator rounding is the identity. */
enum { T_X, T_Y, T_GY, T_W, NT };
static uint32_t in0[] = {T_W}, out0[] = {T_X};
static uint32_t in1[] = {T_X}, out1[] = {T_Y};
static uint32_t in2[] = {T_Y, T_X}, out2[] = {T_GY};
static uint32_t in3[] = {T_GY};
static uint32_t uses_x[] = {1, 2}, uses_y[] = {2}, uses_gy[] = {3}, uses_w[] = {0};
static uint32_t seg_inputs[] = {T_W};

static ms_op ops[4];
static ms_tensor tensors[NT];
static ms_segment segs[1];
static ms_program_view view;

static ms_op make_op(uint32_t id, const char *name, ms_phase ph, uint32_t *in, uint32_t nin,
                     uint32_t *out, uint32_t nout)
{
    ms_op o;
    memset(&o, 0, sizeof o);
    o.id = id;
    o.name = name;
    o.phase = ph;
    o.micro_batch = 0;
    o.layer = 0;
    o.stream = MS_SR_COMPUTE;
    o.inputs = in;
    o.n_inputs = nin;
    o.outputs = out;
    o.n_outputs = nout;
    o.segment = MS_NONE;
    o.kernel.name = name;
    o.kernel.cls = MS_KC_MATMUL;
    o.kernel.dtype = MS_DTYPE_BF16;
    o.kernel.flops = 1e9; /* 10 us at 100 TFLOP/s */
    o.kernel.bytes = 1e6;
    return o;
}

static ms_tensor make_tensor(uint32_t id, const char *name, uint64_t bytes, ms_tensor_kind k,
                             int32_t producer, bool saved, uint32_t *uses, uint32_t n)
{
    ms_tensor t;
    memset(&t, 0, sizeof t);
    t.id = id;
    t.name = name;
    t.bytes = bytes;
    t.dtype = MS_DTYPE_BF16;
    t.kind = k;
    t.producer = producer;
    t.persistent = k == MS_TK_WEIGHT;
    t.saved_for_backward = saved;
    t.layer = 0;
    t.micro_batch = k == MS_TK_WEIGHT ? MS_NONE : 0;
    t.uses = uses;
    t.n_uses = n;
    return t;
}

static void build_program(void)
{
    ops[0] = make_op(0, "layers.0.f", MS_PHASE_FORWARD, in0, 1, out0, 1);
    ops[1] = make_op(1, "layers.0.g", MS_PHASE_FORWARD, in1, 1, out1, 1);
    ops[2] = make_op(2, "layers.0.g.backward", MS_PHASE_BACKWARD, in2, 2, out2, 1);
    ops[3] = make_op(3, "layers.0.f.backward", MS_PHASE_BACKWARD, in3, 1, NULL, 0);
    tensors[T_X] = make_tensor(T_X, "x", 64 * MiB, MS_TK_ACTIVATION, 0, true, uses_x, 2);
    tensors[T_Y] = make_tensor(T_Y, "y", 32 * MiB, MS_TK_ACTIVATION, 1, true, uses_y, 1);
    tensors[T_GY] = make_tensor(T_GY, "gy", 32 * MiB, MS_TK_TEMP, 2, false, uses_gy, 1);
    tensors[T_W] = make_tensor(T_W, "w", 2 * MiB, MS_TK_WEIGHT, MS_NONE, false, uses_w, 1);
    memset(segs, 0, sizeof segs);
    segs[0] = (ms_segment){.id = 0, .name = "layers.0", .layer = 0, .micro_batch = 0,
                           .parent = MS_NONE, .first_op = 0, .last_op = 1,
                           .inputs = seg_inputs, .n_inputs = 1, .first_backward_op = 2};
    view = (ms_program_view){.ops = ops, .n_ops = 4, .tensors = tensors, .n_tensors = NT,
                             .segments = segs, .n_segments = 1, .stage = 0,
                             .model_flops = 4e9};
}

typedef struct fixture {
    ms_device_spec spec;
    ms_sim *engine;
    ms_backend *be;
    ms_alloc *alloc;
    ms_exec *exec;
    ms_run_record *rec;
    ms_op_profile prof[4];
} fixture;

/* verify: the executor's data check, on the mock's functional mode. */
static void open_fixture_faulty(fixture *f, uint64_t hbm, bool verify, ms_exec_fault fault)
{
    memset(f, 0, sizeof *f);
    build_program();
    f->spec = test_device(hbm);
    ck_assert_int_eq(sim_create(&f->engine), MS_OK);
    ck_assert_int_eq(mock_create(f->engine, &f->spec, 0, 1, &f->be), MS_OK);
    if (verify)
        ck_assert_int_eq(mock_enable_data(f->be), MS_OK);
    ms_alloc_config cfg;
    ck_assert_int_eq(ms_alloc_config_default(MS_ALLOC_CUDA, &cfg), MS_OK);
    ck_assert_int_eq(ms_alloc_create(f->be, &cfg, &f->alloc), MS_OK);
    ck_assert_int_eq(ms_record_create(&f->rec), MS_OK);
    ms_exec_config ec = {.program = &view,
                         .backend = f->be,
                         .alloc = f->alloc,
                         .record = f->rec,
                         .device = &f->spec,
                         .verify = verify,
                         .fault = fault};
    bool setup_oom = true;
    ms_diag d = {0};
    ck_assert_msg(ms_exec_create(&ec, &f->exec, &setup_oom, &d) == MS_OK, "%s", d.msg);
    ck_assert(!setup_oom);
}

static void open_fixture_checked(fixture *f, uint64_t hbm, bool verify)
{
    open_fixture_faulty(f, hbm, verify, MS_FAULT_NONE);
}

static void open_fixture(fixture *f, uint64_t hbm)
{
    open_fixture_checked(f, hbm, false);
}

static void close_fixture(fixture *f)
{
    ms_exec_destroy(f->exec);
    ms_alloc_destroy(f->alloc);
    ms_backend_close(f->be);
    sim_destroy(f->engine);
    ms_record_free(f->rec);
}

static ms_step_result step(fixture *f, const ms_plan *plan)
{
    ms_step_result res;
    ms_diag d = {0};
    ck_assert_msg(ms_exec_step(f->exec, 0, plan, f->prof, &res, &d) == MS_OK, "%s", d.msg);
    return res;
}

START_TEST(frees_at_last_use)
{
    fixture f;
    open_fixture(&f, 1024 * MiB);
    ms_step_result r = step(&f, NULL);
    ck_assert(!r.oom);
    /* Live at op 2: w 2 + x 64 + y 32 + gy 32 = 130 MiB; nothing is live
     * together beyond that (op 1: w + x + y = 98). */
    ck_assert_uint_eq(r.peak_allocated, 130 * MiB);
    ms_alloc_stats s;
    s = ms_alloc_get_stats(f.alloc);
    ck_assert_int_eq(s.allocated_bytes[MS_STAT_ALL].current, (int64_t)(2 * MiB));
    /* Ops ran in order on one stream, each after the last. */
    for (int i = 1; i < 4; i++)
        ck_assert_int_ge(f.prof[i].start_ns, f.prof[i - 1].end_ns);
    ck_assert_int_gt(r.step_time_ns, 4 * 10000);
    close_fixture(&f);
}
END_TEST

/* The swapped block comes back to the allocator only when the D2H copy has
 * finished on the device (record_stream); the host issues the backward long
 * before that, so the swap-in cannot reuse it: swapping x out and straight
 * back costs memory instead of saving it.  This is the effect DESIGN.md's
 * separate host and device clocks exist to show. */
START_TEST(swap_block_returns_only_after_copy)
{
    fixture f;
    open_fixture(&f, 1024 * MiB);
    ms_plan plan;
    ms_plan_init(&plan);
    ms_decision dec = {.kind = MS_DEC_SWAP, .tensor = T_X, .out_after = 1, .in_before = 2,
                       .prefetch = 1};
    ck_assert_int_eq(ms_plan_add(&plan, &dec), MS_OK);
    ms_step_result r = step(&f, &plan);
    ck_assert(!r.oom);
    ck_assert_uint_eq(r.swapped_bytes, 64 * MiB);
    /* Unswapped, segments are w's 20 MiB + x 64 + y 32 + gy 32 = 148 MiB.
     * Swapped, x's old block is still being copied when x comes back, so the
     * swap-in needs a second 64 MiB segment: 212 MiB. */
    ck_assert_uint_eq(r.peak_reserved, 212 * MiB);
    /* The swap-in starts only after the swap-out finished reading... and the
     * consumer (op 2) starts after the swap-in completed. */
    size_t n;
    n = ms_record_n_ops(f.rec);
    int64_t out_end = -1, in_start = -1, in_end = -1;
    for (size_t i = 0; i < n; i++) {
        const ms_op_row *row;
        row = ms_record_op(f.rec, i);
        if (row->kind == MS_WK_SWAP_OUT)
            out_end = row->end_ns;
        if (row->kind == MS_WK_SWAP_IN) {
            in_start = row->start_ns;
            in_end = row->end_ns;
        }
    }
    ck_assert_int_gt(out_end, 0);
    ck_assert_int_gt(in_end, in_start);
    /* 64 MiB at 10 GB/s = 6.71 ms per copy. */
    ck_assert_int_ge(in_end - in_start, 6700000);
    ck_assert_int_ge(f.prof[2].start_ns, in_end);
    ms_plan_free(&plan);
    close_fixture(&f);
}
END_TEST

/* The data check: one check per tensor that comes back, of all its bytes. */
START_TEST(verify_checks_what_comes_back)
{
    fixture f;
    open_fixture_checked(&f, 1024 * MiB, true);
    ms_plan plan;
    ms_plan_init(&plan);
    ms_decision dec = {
        .kind = MS_DEC_SWAP, .tensor = T_X, .out_after = 1, .in_before = 2, .prefetch = 1};
    ck_assert_int_eq(ms_plan_add(&plan, &dec), MS_OK);
    ms_step_result r = step(&f, &plan);
    ck_assert_uint_eq(r.verified_tensors, 1);
    ck_assert_uint_eq(r.verified_bytes, 64 * MiB);
    ms_plan_free(&plan);
    ms_plan_init(&plan);
    dec = (ms_decision){.kind = MS_DEC_RECOMPUTE, .segment = 0};
    ck_assert_int_eq(ms_plan_add(&plan, &dec), MS_OK);
    r = step(&f, &plan);
    /* The segment's saved x and y are re-made and read by op 2. */
    ck_assert_uint_eq(r.recomputed_ops, 2);
    ck_assert_uint_eq(r.verified_tensors, 2);
    ck_assert_uint_eq(r.verified_bytes, 96 * MiB);
    r = step(&f, NULL);
    ck_assert_uint_eq(r.verified_tensors, 0);
    ms_plan_free(&plan);
    close_fixture(&f);
}
END_TEST

/* Without real bytes there is nothing to check: refused, not faked. */
START_TEST(verify_needs_a_backend_that_carries_data)
{
    fixture f;
    open_fixture(&f, 1024 * MiB);
    ms_exec_config ec = {
        .program = &view, .backend = f.be, .alloc = f.alloc, .device = &f.spec, .verify = true};
    ms_exec *e = NULL;
    bool setup_oom = false;
    ms_diag d = {0};
    ck_assert_int_eq(ms_exec_create(&ec, &e, &setup_oom, &d), MS_EUNSUPPORTED);
    ck_assert_ptr_null(e);
    ck_assert_ptr_nonnull(strstr(d.msg, "verify needs a backend that carries data"));
    close_fixture(&f);
}
END_TEST

START_TEST(recompute_drops_and_replays)
{
    fixture f;
    open_fixture(&f, 1024 * MiB);
    ms_plan plan;
    ms_plan_init(&plan);
    ms_decision dec = {.kind = MS_DEC_RECOMPUTE, .segment = 0};
    ck_assert_int_eq(ms_plan_add(&plan, &dec), MS_OK);
    ms_step_result r = step(&f, &plan);
    ck_assert(!r.oom);
    /* Both ops of the segment are re-issued before op 2. */
    ck_assert_uint_eq(r.recomputed_ops, 2);
    /* x and y are dropped after forward and re-made: the peak is unchanged
     * (they are all live again at op 2) but the forward ends with only w. */
    ck_assert_uint_eq(r.peak_allocated, 130 * MiB);
    ms_plan_free(&plan);
    close_fixture(&f);
}
END_TEST

START_TEST(swap_that_hides_a_use_is_rejected)
{
    fixture f;
    open_fixture(&f, 1024 * MiB);
    ms_plan plan;
    ms_plan_init(&plan);
    /* x is read by op 1: it cannot be on the host between op 0 and op 2. */
    ms_decision dec = {.kind = MS_DEC_SWAP, .tensor = T_X, .out_after = 0, .in_before = 2,
                       .prefetch = 1};
    ms_plan_add(&plan, &dec);
    ms_step_result res;
    ms_diag d = {0};
    ck_assert_int_eq(ms_exec_step(f.exec, 0, &plan, f.prof, &res, &d), MS_EINVAL);
    ck_assert_ptr_nonnull(strstr(d.msg, "op 1 reads it while it is on the host"));
    ms_plan_free(&plan);
    close_fixture(&f);
}
END_TEST

/* Main grads are views into one contiguous buffer (Megatron's DDP grad
 * buffer): weights w1 (2 MiB), w2 (2 MiB) and grads g1 (3 MiB), g2 (5 MiB)
 * make three allocations, w1, the 8 MiB buffer, w2, not four; g2 starts
 * where g1 ends; a swap of a main grad is refused; destroying the executor
 * frees the buffer once. */
enum { G_W1, G_G1, G_W2, G_G2, NG };
static uint32_t grad_in[] = {G_W1, G_G1, G_W2, G_G2}, grad_uses[] = {0};

START_TEST(main_grads_share_one_buffer)
{
    fixture f;
    memset(&f, 0, sizeof f);
    ms_tensor gt[NG];
    const char *names[NG] = {"w1", "w1.main_grad", "w2", "w2.main_grad"};
    const uint64_t mib[NG] = {2, 3, 2, 5};
    for (uint32_t i = 0; i < NG; i++) {
        gt[i] = make_tensor(i, names[i], mib[i] * MiB, i % 2 ? MS_TK_GRAD : MS_TK_WEIGHT, MS_NONE,
                            false, grad_uses, 1);
        gt[i].persistent = true;
        gt[i].micro_batch = MS_NONE;
    }
    ms_op op = make_op(0, "layers.0.f.backward", MS_PHASE_BACKWARD, grad_in, NG, NULL, 0);
    ms_program_view v = {.ops = &op, .n_ops = 1, .tensors = gt, .n_tensors = NG};
    f.spec = test_device(1024 * MiB);
    ck_assert_int_eq(sim_create(&f.engine), MS_OK);
    ck_assert_int_eq(mock_create(f.engine, &f.spec, 0, 1, &f.be), MS_OK);
    ms_alloc_config cfg;
    ck_assert_int_eq(ms_alloc_config_default(MS_ALLOC_CUDA, &cfg), MS_OK);
    ck_assert_int_eq(ms_alloc_create(f.be, &cfg, &f.alloc), MS_OK);
    ms_exec_config ec = {.program = &v, .backend = f.be, .alloc = f.alloc, .device = &f.spec};
    bool setup_oom = true;
    ms_diag d = {0};
    ck_assert_msg(ms_exec_create(&ec, &f.exec, &setup_oom, &d) == MS_OK, "%s", d.msg);
    ms_alloc_stats s = ms_alloc_get_stats(f.alloc);
    ck_assert_int_eq(s.allocation[MS_STAT_ALL].current, 3);
    ck_assert_int_eq(s.allocated_bytes[MS_STAT_ALL].current, (int64_t)(12 * MiB));
    ms_plan plan;
    ms_plan_init(&plan);
    ms_decision dec = {.kind = MS_DEC_SWAP, .tensor = G_G2, .out_after = 0, .in_before = 0};
    ms_plan_add(&plan, &dec);
    ms_step_result res;
    ck_assert_int_eq(ms_exec_step(f.exec, 0, &plan, f.prof, &res, &d), MS_EINVAL);
    ck_assert_msg(strstr(d.msg, "tensor 3 (w2.main_grad): a main grad is a view") != NULL, "%s",
                  d.msg);
    ms_plan_free(&plan);
    ck_assert_int_eq(ms_exec_destroy(f.exec), MS_OK);
    s = ms_alloc_get_stats(f.alloc);
    ck_assert_int_eq(s.allocation[MS_STAT_ALL].current, 0);
    ck_assert_int_eq(s.allocated_bytes[MS_STAT_ALL].current, 0);
    ms_alloc_destroy(f.alloc);
    ms_backend_close(f.be);
    sim_destroy(f.engine);
}
END_TEST

START_TEST(oom_is_a_result_not_a_crash)
{
    fixture f;
    /* Segments: w's 2 MiB request opens a 20 MiB segment (get_allocation_size:
     * 1..10 MiB -> 20 MiB), x 64 MiB, y 32 MiB: 116 MiB reserved by op 1.  In
     * 130 MiB, gy's 32 MiB segment at op 2 does not fit and nothing cached is
     * free to release. */
    open_fixture(&f, 130 * MiB);
    ms_step_result r = step(&f, NULL);
    ck_assert(r.oom);
    ck_assert_int_eq(r.oom_op, 2);
    ck_assert_ptr_nonnull(strstr(r.oom_message, "out of memory"));
    /* The step's tensors were released: only the weight stays. */
    ms_alloc_stats s;
    s = ms_alloc_get_stats(f.alloc);
    ck_assert_int_eq(s.allocated_bytes[MS_STAT_ALL].current, (int64_t)(2 * MiB));
    close_fixture(&f);
}
END_TEST

/* The hazard check: with the swap-out's record_stream left out, x's block
 * goes back to the allocator while the 6.7 ms D2H still reads it, and x's
 * own swap-in (issued microseconds later, before op 2) gets that block; the
 * executor stops the step, naming x and the copy's range, instead of
 * letting the H2D overwrite what the D2H is reading. */
START_TEST(block_under_a_running_copy_is_a_hazard)
{
    fixture f;
    open_fixture_faulty(&f, 1024 * MiB, false, MS_FAULT_SWAP_OUT_UNRECORDED);
    ms_plan plan;
    ms_plan_init(&plan);
    ms_decision dec = {.kind = MS_DEC_SWAP, .tensor = T_X, .out_after = 1, .in_before = 2,
                       .prefetch = 1};
    ck_assert_int_eq(ms_plan_add(&plan, &dec), MS_OK);
    ms_step_result res;
    ms_diag d = {0};
    ck_assert_int_eq(ms_exec_step(f.exec, 0, &plan, f.prof, &res, &d), MS_EHAZARD);
    ck_assert_msg(strstr(d.msg, "hazard: tensor 0 (x) got block") != NULL, "%s", d.msg);
    ck_assert_msg(strstr(d.msg, "(+67108864) while a swap-out copy still reads") != NULL, "%s",
                  d.msg);
    ms_plan_free(&plan);
    close_fixture(&f);
}
END_TEST

/* The address index of in-flight copies (exec_spans.h): every span over a
 * block is found from exec_spans_from on, whatever order the spans came in,
 * and a span removed is not found.  Spans: A [0x1000, 0x1100), B [0x2000,
 * 0x2800), C [0x3000, 0x3010); the longest is B's 0x800 bytes. */
static size_t overlaps(const exec_spans *s, uint64_t addr, uint64_t bytes, const void **hit)
{
    size_t n = 0;
    for (size_t i = exec_spans_from(s, addr); i < s->n && s->v[i].addr < addr + bytes; i++)
        if (s->v[i].addr + s->v[i].bytes > addr)
            hit[n++] = s->v[i].key;
    return n;
}

START_TEST(copy_spans_find_every_overlap)
{
    static const char a = 'A', b = 'B', c = 'C';
    exec_spans s = {0};
    ck_assert(exec_spans_add(&s, 0x3000, 0x10, &c));
    ck_assert(exec_spans_add(&s, 0x1000, 0x100, &a));
    ck_assert(exec_spans_add(&s, 0x2000, 0x800, &b));
    ck_assert_uint_eq(s.max_bytes, 0x800);
    const void *hit[3];
    /* 0x27ff is B's last byte; the search starts after 0x27ff - 0x800. */
    ck_assert_uint_eq(overlaps(&s, 0x27ff, 1, hit), 1);
    ck_assert_ptr_eq(hit[0], &b);
    ck_assert_uint_eq(overlaps(&s, 0x2800, 0x800, hit), 0); /* just past B, before C */
    ck_assert_uint_eq(overlaps(&s, 0x10ff, 0x2000, hit), 3); /* A's last byte to C */
    ck_assert_ptr_eq(hit[0], &a);
    ck_assert_ptr_eq(hit[2], &c);
    /* Removing needs the key too: another copy at B's address stays. */
    exec_spans_remove(&s, 0x2000, &a);
    ck_assert_uint_eq(s.n, 3);
    exec_spans_remove(&s, 0x2000, &b);
    ck_assert_uint_eq(s.n, 2);
    ck_assert_uint_eq(overlaps(&s, 0x2000, 0x800, hit), 0);
    ck_assert_uint_eq(overlaps(&s, 0, 0x1001, hit), 1);
    exec_spans_free(&s);
    ck_assert_uint_eq(s.n, 0);
}
END_TEST

static Suite *exec_suite(void)
{
    Suite *s = suite_create("exec");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, frees_at_last_use);
    tcase_add_test(tc, swap_block_returns_only_after_copy);
    tcase_add_test(tc, recompute_drops_and_replays);
    tcase_add_test(tc, verify_checks_what_comes_back);
    tcase_add_test(tc, verify_needs_a_backend_that_carries_data);
    tcase_add_test(tc, swap_that_hides_a_use_is_rejected);
    tcase_add_test(tc, main_grads_share_one_buffer);
    tcase_add_test(tc, oom_is_a_result_not_a_crash);
    tcase_add_test(tc, copy_spans_find_every_overlap);
    tcase_add_test(tc, block_under_a_running_copy_is_a_hazard);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(exec_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
