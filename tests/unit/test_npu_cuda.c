/* backend_npu's CUDA runtime layer on a GPU.  Without a CUDA device (CI,
 * the project's build machines: the toolkit but no driver and no GPU) it
 * says why and skips (exit 77); with one, the checks every runtime must
 * pass run on it, and the device's free memory comes back to what it was. */
#include <unistd.h>

#include "test_npu_checks.h"

static uint64_t free_now(void)
{
    ms_diag d = {0};
    ms_device_group *g = npu_open("cuda", 0, &d);
    ck_assert_msg(g != NULL, "%s", d.msg);
    ms_backend *b = ms_group_device(g, 0);
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

START_TEST(a_run_verifies_its_swaps)
{
    uint64_t before = free_now();
    ms_run_notes n;
    ms_run_summary s;
    npu_check_run("cuda", NULL, &n, &s);
    ck_assert_uint_gt(s.swapped_bytes, 0);
    /* What the runtime says the run took covers what the allocator reserved
     * (CUDA adds its own: lazily loaded kernels, page rounding). */
    ck_assert_uint_ge(n.device_free_before - n.device_free_after, n.reserved_after);
    ck_assert_uint_eq(free_now(), before);
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
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    /* A forked child would inherit an initialised CUDA context. */
    srunner_set_fork_status(sr, CK_NOFORK);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
