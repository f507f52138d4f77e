/* MindSpeed's memory-fragmentation allocator (seeds 001/004), the rules that
 * decide how far reserved memory grows: the pre-judgment that keeps a first
 * attempt at a new segment out of the device's last 200 MiB, and what a
 * default-pool request may take from the long pool.  The fake device's
 * mallocs bump from FAKE_DEV_BASE (DEV below); every address and count is
 * derived by hand in the comment beside it from
 * mindspeed/ops/csrc/pluggable_allocator/memory_fragmentation/
 * DeviceCachingAllocator.cpp (docs/allocator.md cites each rule). */
#include <check.h>
#include <stdlib.h>

#include "memsim/allocator.h"
#include "test_allocator_fixture.h"

#define DEV FAKE_DEV_BASE

/* The long pool as lifetime_pools declares it, and the allocator past its
 * first forward (that forward sends every request to the long pool). */
static int open_past_first_forward(fx *f, uint64_t capacity)
{
    fx_open(f, MS_ALLOC_MINDSPEED, "", capacity);
    ms_pool_options long_lc = {.exact_segments = true, .lendable = true};
    int id = 0;
    ck_assert_int_eq(ms_alloc_pool_create(f->a, "long", &long_lc, &id), MS_OK);
    ck_assert_int_eq(ms_alloc_set_forward(f->a, true), MS_OK);
    ck_assert_int_eq(ms_alloc_set_forward(f->a, false), MS_OK);
    return id;
}

/* alloc_block: "prediction is made in advance" - once a segment exists, a
 * first attempt asks for none when segment + memory_fail_prejudgment
 * (200 MiB) is more than the device has free; the request goes on to
 * get_free_block_after_alloc, which takes a cached block of either pool
 * with the oversize rules alone. */
START_TEST(test_prejudgment_reuses_cached_blocks_first)
{
    fx f;
    int lp = open_past_first_forward(&f, 1024 * MiB);
    /* A long block of 700 MiB (its own exact segment @DEV), then idle:
     * 1024 - 700 = 324 MiB free on the device. */
    fx_f(&f, fx_mp(&f, 700 * MiB, f.s0, lp));
    ck_assert_int_eq(ms_alloc_set_forward(f.a, true), MS_OK);
    /* 120 MiB long: the idle block is not exact (700 != 120), and
     * 120 + 200 = 320 <= 324: a new segment @DEV+700MiB (204 MiB left). */
    uint64_t a = fx_mp(&f, 120 * MiB, f.s0, lp);
    ck_assert_uint_eq(a, DEV + 700 * MiB);
    ck_assert_int_eq(fx_counts(&f)->malloc_calls, 2);
    fx_f(&f, a);
    /* 130 MiB long: lower_bound(130 MiB) is the 700 MiB block, not exact;
     * 130 + 200 = 330 > 204: no device malloc.  get_free_block_after_alloc
     * (the default pool, empty, then the long pool) splits the 700 MiB
     * block: 130 MiB @DEV, 570 MiB left idle in the long pool. */
    uint64_t b = fx_mp(&f, 130 * MiB, f.s0, lp);
    ck_assert_uint_eq(b, DEV);
    ck_assert_int_eq(fx_counts(&f)->malloc_calls, 2);
    ms_alloc_stats s = fx_stats(&f);
    ck_assert_int_eq(s.reserved_bytes[MS_STAT_ALL].current, 820 * MiB);
    ck_assert_int_eq(s.allocated_bytes[MS_STAT_ALL].current, 130 * MiB);
    ck_assert_int_eq(s.num_alloc_retries, 0);
    fx_f(&f, b);
    fx_close(&f);
}
END_TEST

/* The retry after the cache is emptied skips the pre-judgment: what fits on
 * the device is still allocated, one alloc retry later (PyTorch's
 * allocator, which has no pre-judgment, takes it at once). */
START_TEST(test_prejudgment_yields_to_the_retry)
{
    static const ms_alloc_flavour flavours[] = {MS_ALLOC_MINDSPEED, MS_ALLOC_CUDA};
    static const int64_t retries[] = {1, 0};
    for (int i = 0; i < 2; i++) {
        fx f;
        fx_open(&f, flavours[i], "", 1024 * MiB);
        ck_assert_int_eq(ms_alloc_set_forward(f.a, true), MS_OK);
        ck_assert_int_eq(ms_alloc_set_forward(f.a, false), MS_OK);
        /* 900 MiB, kept: a 900 MiB segment, 124 MiB free. */
        uint64_t big = fx_m(&f, 900 * MiB);
        /* 100 MiB: 100 + 200 > 124, nothing cached, nothing to release;
         * the retry allocates @DEV+900MiB. */
        uint64_t b = fx_m(&f, 100 * MiB);
        ck_assert_uint_eq(b, DEV + 900 * MiB);
        ck_assert_int_eq(fx_counts(&f)->malloc_calls, 2);
        ck_assert_int_eq(fx_stats(&f).num_alloc_retries, retries[i]);
        fx_f(&f, b);
        fx_f(&f, big);
        fx_close(&f);
    }
    /* With expandable segments MindSpeed maps memory without ever setting
     * usable_total: no pre-judgment, the 100 MiB are mapped at once. */
    fx f;
    fx_open(&f, MS_ALLOC_MINDSPEED, "expandable_segments:True", 1024 * MiB);
    uint64_t big = fx_m(&f, 900 * MiB);
    uint64_t b = fx_m(&f, 100 * MiB);
    ck_assert_int_eq(fx_stats(&f).num_alloc_retries, 0);
    ck_assert_int_eq(fx_stats(&f).reserved_bytes[MS_STAT_ALL].current, 1000 * MiB);
    fx_f(&f, b);
    fx_f(&f, big);
    fx_close(&f);
}
END_TEST

/* A default request searches the long pool right after its own: outside
 * the forward any idle long block, even one of 1.8e9 bytes or more (the
 * protection of large blocks is tested for default_lc_pools.large_blocks
 * alone). */
START_TEST(test_default_borrows_large_long_blocks)
{
    fx f;
    int lp = open_past_first_forward(&f, 8192 * MiB);
    /* 1900 MiB long (>= 1.8e9 bytes) @DEV, then idle. */
    fx_f(&f, fx_mp(&f, 1900 * MiB, f.s0, lp));
    /* Backward: 100 MiB default takes it, split (1800 MiB stays in the long
     * pool): no new segment. */
    uint64_t b = fx_m(&f, 100 * MiB);
    ck_assert_uint_eq(b, DEV);
    ck_assert_int_eq(fx_counts(&f)->malloc_calls, 1);
    fx_blocks bs = fx_visit(&f);
    ck_assert_int_eq(bs.n, 2);
    ck_assert_int_eq(bs.b[0].pool, lp);
    ck_assert(bs.b[0].allocated);
    ck_assert_uint_eq(bs.b[1].size, 1800 * MiB);
    fx_f(&f, b);
    fx_close(&f);
}
END_TEST

/* Inside the forward only the long pool's small blocks may serve a default
 * request ("Short lifecycle tensor, not allowed to be placed in the long
 * lifecycle memory pool in the forward phase" is tested for
 * long_lc_pools.large_blocks). */
START_TEST(test_forward_borrows_small_long_blocks_only)
{
    fx f;
    int lp = open_past_first_forward(&f, 1024 * MiB);
    /* 512 KiB long: a 2 MiB small segment @DEV; 4 MiB long: an exact 4 MiB
     * segment @DEV+2MiB; both idle. */
    fx_f(&f, fx_mp(&f, 512 * KiB, f.s0, lp));
    fx_f(&f, fx_mp(&f, 4 * MiB, f.s0, lp));
    ck_assert_int_eq(ms_alloc_set_forward(f.a, true), MS_OK);
    /* 256 KiB default: the long pool's small block, split. */
    uint64_t s = fx_m(&f, 256 * KiB);
    ck_assert_uint_eq(s, DEV);
    ck_assert_int_eq(fx_counts(&f)->malloc_calls, 2);
    /* 3 MiB default: not the idle 4 MiB long block; a 20 MiB default
     * segment @DEV+6MiB. */
    uint64_t l = fx_m(&f, 3 * MiB);
    ck_assert_uint_eq(l, DEV + 6 * MiB);
    ck_assert_int_eq(fx_counts(&f)->malloc_calls, 3);
    fx_f(&f, l);
    fx_f(&f, s);
    fx_close(&f);
}
END_TEST

static Suite *mindspeed_suite(void)
{
    Suite *s = suite_create("allocator_mindspeed");
    TCase *tc = tcase_create("rules");
    tcase_add_test(tc, test_prejudgment_reuses_cached_blocks_first);
    tcase_add_test(tc, test_prejudgment_yields_to_the_retry);
    tcase_add_test(tc, test_default_borrows_large_long_blocks);
    tcase_add_test(tc, test_forward_borrows_small_long_blocks_only);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(mindspeed_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
