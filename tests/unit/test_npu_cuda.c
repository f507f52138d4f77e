/* backend_npu's CUDA runtime layer on a GPU.  Without a CUDA device (CI,
 * the project's build machines: the toolkit but no driver and no GPU) it
 * says why and skips (exit 77); with one, the checks every runtime must
 * pass run on it, and the device's free memory comes back to what it was. */
#include <unistd.h>

#include "test_npu_checks.h"

static uint64_t free_now(void)
{
    ms_backend *b = NULL;
    ms_device_group *g = npu_open_ok("cuda", &b);
    uint64_t f = 0, t = 0;
    NPU_OK(b->ops->mem_get_info(b->inst, &f, &t));
    NPU_OK(ms_group_close(g));
    return f;
}

START_TEST(copies_and_times)
{
    uint64_t before = free_now();
    npu_check_copies_and_times("cuda");
    ck_assert_uint_eq(free_now(), before);
}
END_TEST

START_TEST(proxy_plans)
{
    npu_check_proxy_plans();
}
END_TEST

START_TEST(launches_run_their_shapes)
{
    npu_check_launches("cuda");
}
END_TEST

/* What the runtime says the run took covers what the allocator reserved. */
START_TEST(a_run_verifies_its_swaps)
{
    uint64_t before = free_now();
    npu_check_swaps("cuda", false);
    ck_assert_uint_eq(free_now(), before);
}
END_TEST

START_TEST(pinned_memory_is_reused)
{
    npu_check_pinned_reuse("cuda");
}
END_TEST

START_TEST(the_runtime_says_why_a_call_failed)
{
    npu_check_failure_says("cuda",
                           "cudaMalloc(&p, bytes): out of memory (cudaErrorMemoryAllocation)");
}
END_TEST

/* Device ns of one launch of k (a second one: the first carries cuBLAS's
 * and cuBLASLt's set-up). */
static int64_t timed_launch(ms_backend *b, ms_stream *s, npu_trace *tr, const ms_kernel *k,
                            uint64_t tag)
{
    NPU_OK(b->ops->launch(b->inst, k, s, tag));
    NPU_OK(b->ops->launch(b->inst, k, s, tag + 1));
    NPU_OK(b->ops->device_synchronize(b->inst));
    const ms_work_record *w = npu_by_tag(tr, tag + 1);
    return w->end_ns - w->start_ns;
}

/* On a GPU with FP8 tensor cores (compute capability 8.9 or later) an FP8
 * matmul runs as FP8 through cuBLASLt, at up to twice bf16's rate, which
 * an 8192-cubed GEMM shows; on an older one it runs as fp16. */
START_TEST(fp8_matmuls_run_in_fp8_where_the_gpu_has_it)
{
    ms_backend *b = NULL;
    ms_device_group *g = npu_open_ok("cuda", &b);
    ms_kernel bf16 = npu_matmul(8192, 8192, 8192, 1), fp8 = bf16;
    fp8.dtype = MS_DTYPE_FP8;
    ms_dtype runs_as = npu_runs_as(b, bf16, MS_DTYPE_FP8);
    ck_assert(runs_as == MS_DTYPE_FP8 || runs_as == MS_DTYPE_FP16);
    if (runs_as == MS_DTYPE_FP8) {
        npu_trace tr = {0};
        NPU_OK(b->ops->set_tracer(b->inst, npu_on_work, &tr));
        ms_stream *s = NULL;
        NPU_OK(b->ops->stream_create(b->inst, 0, &s));
        int64_t t_bf16 = timed_launch(b, s, &tr, &bf16, 10);
        int64_t t_fp8 = timed_launch(b, s, &tr, &fp8, 20);
        ck_assert_msg(t_fp8 < t_bf16, "fp8 %lld ns, bf16 %lld ns", (long long)t_fp8,
                      (long long)t_bf16);
        NPU_OK(b->ops->stream_destroy(b->inst, s));
    }
    NPU_OK(ms_group_close(g));
}
END_TEST

int main(void)
{
    ms_diag d = {0};
    ms_device_group *g = npu_open("cuda", 0, &d);
    if (g == NULL) {
        printf("SKIP: the cuda backend needs a GPU: %s\n", d.msg);
        return 77;
    }
    ms_group_close(g);
    Suite *s = suite_create("npu (CUDA layer on a GPU)");
    TCase *tc = tcase_create("device");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, copies_and_times);
    tcase_add_test(tc, proxy_plans);
    tcase_add_test(tc, launches_run_their_shapes);
    tcase_add_test(tc, a_run_verifies_its_swaps);
    tcase_add_test(tc, pinned_memory_is_reused);
    tcase_add_test(tc, the_runtime_says_why_a_call_failed);
    tcase_add_test(tc, fp8_matmuls_run_in_fp8_where_the_gpu_has_it);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    /* A forked child would inherit an initialised CUDA context. */
    srunner_set_fork_status(sr, CK_NOFORK);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
