/* backend_npu's ACL runtime layer against the test double (host memory,
 * one thread per stream, CANN's signatures): what configure --with-ascend
 * builds, tested without an Ascend NPU.  The double's accounting proves
 * that every path leaves the device as it found it. */
#include "test_npu_checks.h"

#include "acl_double.h"

static void assert_device_released(void)
{
    acl_double_stats s = acl_double_get_stats();
    ck_assert_uint_eq(s.device_bytes, 0);
    ck_assert_uint_eq(s.device_allocs, 0);
    ck_assert_uint_eq(s.host_bytes, 0);
    ck_assert_uint_eq(s.streams, 0);
    ck_assert_uint_eq(s.events, 0);
    ck_assert_uint_eq(s.tensors, 0);
    /* Released by the backend, not swept up by the device reset. */
    ck_assert_uint_eq(s.swept_objects, 0);
    ck_assert_uint_eq(s.rejected, 0);
}

static void setup_two_gib(void)
{
    acl_double_configure(1, 2ull << 30);
}

START_TEST(no_device_says_so)
{
    acl_double_configure(0, 1ull << 30);
    npu_check_no_device("npu", "no Ascend NPU: error 207004: EE1001: no device found");
    assert_device_released();
}
END_TEST

START_TEST(missing_device_index_lists_the_devices)
{
    acl_double_configure(2, 1ull << 30);
    npu_check_no_such_ordinal(
        "npu:2", 2, "npu:2 does not exist: this machine has 2 Ascend NPUs (npu:0 .. npu:1)");
    acl_double_configure(1, 1ull << 30);
    npu_check_no_such_ordinal("npu:1", 1,
                              "npu:1 does not exist: this machine has one Ascend NPU (npu:0)");
    /* A pipeline of two devices is two processes on a real machine. */
    ms_device_spec spec = npu_any_spec();
    ms_group_config cfg = {.spec = &spec, .n_devices = 2};
    ms_device_group *g = NULL;
    ms_diag d = {0};
    ck_assert_int_eq(ms_group_open("npu", &cfg, &g, &d), MS_EUNSUPPORTED);
    ck_assert_ptr_nonnull(strstr(d.msg, "--stage K"));
    assert_device_released();
}
END_TEST

/* A device too small for the proxy workspace fails at open, releasing what
 * it took. */
START_TEST(device_too_small_for_the_workspace)
{
    acl_double_configure(1, 64 * MiB);
    npu_check_too_small("npu", "aclrtMalloc(&p, bytes, ACL_MEM_MALLOC_HUGE_FIRST): error 207001");
    assert_device_released();
}
END_TEST

START_TEST(copies_and_times)
{
    npu_check_copies_and_times("npu");
    acl_double_stats s = acl_double_get_stats();
    ck_assert_uint_eq(s.bytes_h2d, 4 * MiB);
    ck_assert_uint_eq(s.bytes_d2h, 4 * MiB);
    assert_device_released();
}
END_TEST

START_TEST(proxy_plans)
{
    npu_check_proxy_plans();
}
END_TEST

/* What the proxies asked the runtime for: their FLOPs as batch matmuls,
 * their bytes as device-to-device copies. */
START_TEST(launches_run_their_shapes)
{
    npu_launched l = npu_check_launches("npu");
    acl_double_stats s = acl_double_get_stats();
    ck_assert_double_eq_tol(s.gemm_flops, l.matmul_flops + l.attention_flops, 1.0);
    ck_assert_uint_eq(s.gemms, 3);
    /* add: 3 MiB moved = 1.5 MiB copied; send: its 1 MiB buffer copied. */
    ck_assert_uint_eq(s.bytes_d2d, 3 * MiB / 2 + MiB);
    assert_device_released();
}
END_TEST

/* The 910B has no FP8: the backend says an FP8 matmul runs as fp16 (so
 * calibrate does not fit it as FP8), and its proxy is an fp16 GEMM; a bf16
 * one runs as itself. */
START_TEST(fp8_matmuls_run_as_fp16)
{
    ms_backend *b = NULL;
    ms_device_group *g = npu_open_ok("npu", &b);
    ms_kernel bf16 = npu_matmul(512, 512, 512, 1), fp8 = bf16;
    fp8.dtype = MS_DTYPE_FP8;
    ck_assert_int_eq(npu_runs_as(b, bf16, MS_DTYPE_FP8), MS_DTYPE_FP16);
    ck_assert_int_eq(npu_runs_as(b, bf16, MS_DTYPE_BF16), MS_DTYPE_BF16);
    ms_stream *s = NULL;
    NPU_OK(b->ops->stream_create(b->inst, 0, &s));
    NPU_OK(b->ops->launch(b->inst, &fp8, s, 1));
    NPU_OK(b->ops->launch(b->inst, &bf16, s, 2));
    NPU_OK(b->ops->device_synchronize(b->inst));
    acl_double_stats st = acl_double_get_stats();
    ck_assert_uint_eq(st.gemms, 2);
    ck_assert_uint_eq(st.fp16_gemms, 1);
    NPU_OK(b->ops->stream_destroy(b->inst, s));
    NPU_OK(ms_group_close(g));
    assert_device_released();
}
END_TEST

/* One aclrtMallocHost for two requests of one size class. */
START_TEST(pinned_memory_is_reused)
{
    npu_check_pinned_reuse("npu");
    ck_assert_uint_eq(acl_double_get_stats().host_allocs_made, 1);
    assert_device_released();
}
END_TEST

START_TEST(the_runtime_says_why_a_call_failed)
{
    npu_check_failure_says("npu", "aclrtMalloc(&p, bytes, ACL_MEM_MALLOC_HUGE_FIRST): error "
                                  "207001: EL0004: failed to allocate memory (acl double)");
    assert_device_released();
}
END_TEST

/* A whole run: MindFormers' default swap with every swap checked, the
 * allocator's reserve against aclrtGetMemInfo (exactly: the double's
 * memory is the allocator's segments and nothing else). */
START_TEST(a_run_verifies_its_swaps)
{
    ck_assert_uint_eq(npu_check_swaps("npu", true).device_total, 2ull << 30);
    assert_device_released();
}
END_TEST

/* A swap-out stream that lags (its copies out slowed, as a busy D2H engine
 * or a starved stream thread would) must not let the swap-in read the host
 * buffer first, nor that buffer go to the next swap while the late copy out
 * still writes it: the data check catches a wrong byte either way. */
START_TEST(swaps_stay_ordered_when_copies_out_lag)
{
    acl_double_set_copy_delay(ACL_MEMCPY_DEVICE_TO_HOST, 20000);
    npu_check_swaps("npu", true);
    assert_device_released();
}
END_TEST

START_TEST(a_run_verifies_its_recomputes)
{
    ms_run_notes n;
    ms_run_summary s;
    npu_check_run("npu", "full_recompute", &n, &s);
    ck_assert_uint_gt(s.recomputed_ops, 0);
    assert_device_released();
}
END_TEST

static ms_status run_tiny(const char *const *sets, size_t n_sets, ms_run_options opt, ms_run **run,
                          ms_diag *d)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/tests/data/npu/tiny-llama-swap.lua", srcdir());
    const ms_scenario *sc = NULL;
    ck_assert_msg(ms_scenario_load(path, sets, n_sets, &sc, d) == MS_OK, "%s", d->msg);
    opt.overrides = sets;
    opt.n_overrides = n_sets;
    ms_status st = ms_run_execute(sc, &opt, run, d);
    ms_scenario_free(sc);
    return st;
}

/* A device that holds only some of the layers runs the most that fit, and
 * says so in the summary. */
START_TEST(a_model_too_big_runs_fewer_layers)
{
    acl_double_configure(1, 256 * MiB + 420 * MiB);
    ms_diag d = {0};
    ms_run *run = NULL;
    ms_run_options opt = {.backend = "npu", .record = false};
    ck_assert_msg(run_tiny(NULL, 0, opt, &run, &d) == MS_OK, "%s", d.msg);
    const ms_run_notes *n = ms_run_notes_get(run);
    const ms_run_summary *s = ms_run_summary_get(run);
    ck_assert(n->scaled);
    ck_assert_int_eq(n->scenario_layers, 8);
    ck_assert_int_gt(n->layers, 0);
    ck_assert_int_lt(n->layers, 8);
    ck_assert(!s->oom);
    char want[64];
    snprintf(want, sizeof want, "tiny-llama-swap (%d of 8 layers)", n->layers);
    ck_assert_str_eq(s->scenario, want);
    ms_run_free(run);
    assert_device_released();
}
END_TEST

START_TEST(a_model_that_cannot_fit_even_scaled)
{
    acl_double_configure(1, 256 * MiB + 24 * MiB);
    ms_diag d = {0};
    ms_run *run = NULL;
    ms_run_options opt = {.backend = "npu"};
    ck_assert_int_eq(run_tiny(NULL, 0, opt, &run, &d), MS_ENOMEM);
    ck_assert_ptr_null(run);
    ck_assert_msg(strstr(d.msg, "tiny-llama-swap cannot run on backend 'npu': stage 0 does not "
                                "fit in the 0.02 GiB the device has free (of 0.27 GiB), even "
                                "with 1 of its 8 layers") != NULL,
                  "%s", d.msg);
    ck_assert_ptr_nonnull(strstr(d.msg, "out of memory"));
    assert_device_released();
}
END_TEST

/* A pipeline runs one stage on a real device, chosen with --stage. */
START_TEST(a_pipeline_runs_the_stage_asked_for)
{
    static const char *const sets[] = {"parallel.pipeline_model_parallel_size=2",
                                       "parallel.world_size=2", "parallel.global_batch_size=4"};
    ms_diag d = {0};
    ms_run *run = NULL;
    ms_run_options opt = {.backend = "npu"};
    ck_assert_int_eq(run_tiny(sets, 3, opt, &run, &d), MS_EINVAL);
    ck_assert_ptr_nonnull(strstr(d.msg, "choose it with --stage K (0..1)"));
    opt.single_stage = true;
    opt.stage = 2;
    ck_assert_int_eq(run_tiny(sets, 3, opt, &run, &d), MS_ERANGE);
    ck_assert_ptr_nonnull(strstr(d.msg, "--stage 2: tiny-llama-swap has 2 pipeline stages"));
    opt.stage = 1;
    opt.verify = true;
    ck_assert_msg(run_tiny(sets, 3, opt, &run, &d) == MS_OK, "%s", d.msg);
    ck_assert_int_eq(ms_run_summary_get(run)->stage, 1);
    ck_assert(!ms_run_summary_get(run)->oom);
    ms_run_free(run);
    assert_device_released();
}
END_TEST

/* Expandable segments need the runtime's virtual-memory calls, which the
 * real backends do not implement yet: refused up front. */
START_TEST(expandable_segments_are_refused)
{
    static const char *const sets[] = {"allocator.conf=expandable_segments:True"};
    ms_diag d = {0};
    ms_run *run = NULL;
    ms_run_options opt = {.backend = "npu"};
    ck_assert_int_eq(run_tiny(sets, 1, opt, &run, &d), MS_EUNSUPPORTED);
    ck_assert_msg(strstr(d.msg, "asks for expandable segments, which backend 'npu' does not "
                                "implement yet") != NULL,
                  "%s", d.msg);
    assert_device_released();
}
END_TEST

/* The deliberately broken recompute fails on the device path too, and the
 * failed run still releases everything. */
START_TEST(a_broken_schedule_fails_and_releases)
{
    static const char *const sets[] = {"steps=1"};
    ms_diag d = {0};
    ms_run *run = NULL;
    ms_run_options opt = {.backend = "npu",
                          .policy = "full_recompute",
                          .verify = true,
                          .fault = MS_FAULT_RECOMPUTE_SKIPPED};
    ck_assert_int_eq(run_tiny(sets, 1, opt, &run, &d), MS_EHAZARD);
    ck_assert_ptr_nonnull(strstr(d.msg, "after its recompute does not hold what was written"));
    assert_device_released();
}
END_TEST

static Suite *npu_acl_suite(void)
{
    Suite *s = suite_create("npu (ACL layer on the test double)");
    TCase *tc = tcase_create("device");
    tcase_add_checked_fixture(tc, setup_two_gib, NULL);
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, no_device_says_so);
    tcase_add_test(tc, missing_device_index_lists_the_devices);
    tcase_add_test(tc, device_too_small_for_the_workspace);
    tcase_add_test(tc, copies_and_times);
    tcase_add_test(tc, proxy_plans);
    tcase_add_test(tc, launches_run_their_shapes);
    tcase_add_test(tc, fp8_matmuls_run_as_fp16);
    tcase_add_test(tc, pinned_memory_is_reused);
    tcase_add_test(tc, the_runtime_says_why_a_call_failed);
    suite_add_tcase(s, tc);
    tc = tcase_create("run");
    tcase_add_checked_fixture(tc, setup_two_gib, NULL);
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, a_run_verifies_its_swaps);
    tcase_add_test(tc, swaps_stay_ordered_when_copies_out_lag);
    tcase_add_test(tc, a_run_verifies_its_recomputes);
    tcase_add_test(tc, a_model_too_big_runs_fewer_layers);
    tcase_add_test(tc, a_model_that_cannot_fit_even_scaled);
    tcase_add_test(tc, a_pipeline_runs_the_stage_asked_for);
    tcase_add_test(tc, a_broken_schedule_fails_and_releases);
    tcase_add_test(tc, expandable_segments_are_refused);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(npu_acl_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
