/* Expandable segments (Note [Expandable Segments], CUDACachingAllocator.cpp)
 * on the fake device.  With 1 GiB of device memory a reservation holds
 * ceil((1 GiB + 1 GiB / 8) / page) pages: 58 pages of 20 MiB (1160 MiB) for
 * the large pool, 576 pages of 2 MiB (1152 MiB) for the small pool.  V below
 * is the first address va_reserve returns. */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "memsim/allocator.h"
#include "test_allocator_fixture.h"

#define V FAKE_VA_BASE
static void fx_open_expandable(fx *f, ms_alloc_flavour flavour, uint64_t capacity)
{
    fx_open(f, flavour, "expandable_segments:True", capacity);
}

START_TEST(test_map_whole_pages)
{
    fx f;
    fx_open_expandable(&f, MS_ALLOC_CUDA, 1024 * MiB);
    /* 5 MiB: a new large reservation, one 20 MiB page mapped at its start,
     * the block split (expandable: remaining >= 512). */
    ck_assert_uint_eq(fx_m(&f, 5 * MiB), V);
    ck_assert_int_eq(fx_counts(&f)->va_reserve_calls, 1);
    ck_assert_int_eq(fx_counts(&f)->map_calls, 1);
    ms_alloc_stats s = fx_stats(&f);
    ck_assert_int_eq(s.reserved_bytes[MS_STAT_LARGE_POOL].current, 20 * MiB);
    ck_assert_int_eq(s.segment[MS_STAT_ALL].current, 0); /* maps are not segments */
    ck_assert_int_eq(s.num_device_alloc, 1);
    ck_assert_int_eq(f.ev[0].action, MS_AA_SEGMENT_MAP);
    ck_assert_uint_eq(f.ev[0].addr, V);
    ck_assert_uint_eq(f.ev[0].size, 20 * MiB);
    /* 30 MiB: the free 15 MiB before the unmapped space plus one more page
     * at the lowest unmapped address (V + 20 MiB) give room. */
    ck_assert_uint_eq(fx_m(&f, 30 * MiB), V + 5 * MiB);
    ck_assert_int_eq(fx_counts(&f)->map_calls, 2);
    const ms_alloc_event *map = fx_last(&f, MS_AA_SEGMENT_MAP);
    ck_assert_uint_eq(map->addr, V + 20 * MiB);
    ck_assert_uint_eq(map->size, 20 * MiB);
    s = fx_stats(&f);
    ck_assert_int_eq(s.reserved_bytes[MS_STAT_ALL].current, 40 * MiB);
    ck_assert_int_eq(s.inactive_split[MS_STAT_ALL].current, 0); /* never for expandable */
    /* The snapshot shows the mapped range as one segment of three blocks. */
    fx_blocks bs = fx_visit(&f);
    ck_assert_int_eq(bs.n, 3);
    ck_assert_uint_eq(bs.b[0].segment_addr, V);
    ck_assert_uint_eq(bs.b[0].segment_size, 40 * MiB);
    ck_assert_uint_eq(bs.b[2].addr, V + 35 * MiB);
    ck_assert_uint_eq(bs.b[2].size, 5 * MiB);
    ck_assert(bs.b[2].expandable && !bs.b[2].allocated && !bs.b[2].small);
    fx_close(&f);
}
END_TEST

START_TEST(test_best_fit_counts_unmapped)
{
    fx f;
    fx_open_expandable(&f, MS_ALLOC_CUDA, 1024 * MiB);
    uint64_t a = fx_m(&f, 14 * MiB); /* V; free 6 MiB @V+14 before unmapped */
    ck_assert_uint_eq(fx_m(&f, 20 * MiB), V + 14 * MiB); /* maps page 1; free 6 @V+34 */
    fx_f(&f, a); /* free 14 MiB @V, between nothing and b */
    /* 5 MiB: by size the 6 MiB block comes first, but best fit counts the
     * 1120 MiB unmapped after it (1126 MiB), so the 14 MiB block wins. */
    ck_assert_uint_eq(fx_m(&f, 5 * MiB), V);
    ck_assert_int_eq(fx_counts(&f)->map_calls, 2);
    fx_close(&f);
}
END_TEST

START_TEST(test_release_unmaps_free_pages_only)
{
    fx f;
    fx_open_expandable(&f, MS_ALLOC_CUDA, 1024 * MiB);
    uint64_t a = fx_m(&f, 5 * MiB);
    uint64_t b = fx_m(&f, 30 * MiB); /* [a 0..5)[b 5..35)[free 35..40) pages 0,1 */
    fx_f(&f, b);                     /* free [5, 40) */
    /* Only page 1 ([20, 40)) lies wholly in the free block; [5, 20) stays
     * mapped and free.  The segment's stream is synchronized first. */
    ck_assert_int_eq(ms_alloc_empty_cache(f.a), MS_OK);
    ck_assert_int_eq(fx_counts(&f)->unmap_calls, 1);
    ck_assert_int_eq(fx_counts(&f)->stream_syncs, 1);
    const ms_alloc_event *un = fx_last(&f, MS_AA_SEGMENT_UNMAP);
    ck_assert_uint_eq(un->addr, V + 20 * MiB);
    ck_assert_uint_eq(un->size, 20 * MiB);
    ms_alloc_stats s = fx_stats(&f);
    ck_assert_int_eq(s.reserved_bytes[MS_STAT_ALL].current, 20 * MiB);
    ck_assert_int_eq(s.num_device_free, 1);
    fx_blocks bs = fx_visit(&f);
    ck_assert_int_eq(bs.n, 2);
    ck_assert_uint_eq(bs.b[1].addr, V + 5 * MiB);
    ck_assert_uint_eq(bs.b[1].size, 15 * MiB);
    /* Everything free: page 0 goes, the reservation is released. */
    fx_f(&f, a);
    ck_assert_int_eq(ms_alloc_empty_cache(f.a), MS_OK);
    ck_assert_int_eq(fx_counts(&f)->unmap_calls, 2);
    ck_assert_int_eq(fx_counts(&f)->va_release_calls, 1);
    ck_assert_int_eq(fx_stats(&f).reserved_bytes[MS_STAT_ALL].current, 0);
    ck_assert_int_eq(fx_visit(&f).n, 0);
    /* A new request reserves again, after the first 1160 MiB. */
    ck_assert_uint_eq(fx_m(&f, 5 * MiB), V + 1160 * MiB);
    fx_close(&f);
}
END_TEST

START_TEST(test_segment_per_stream_and_pool)
{
    fx f;
    fx_open_expandable(&f, MS_ALLOC_CUDA, 1024 * MiB);
    /* Small pool: 2 MiB pages, 576 of them. */
    ck_assert_uint_eq(fx_m(&f, 1000), V);
    ck_assert_uint_eq(fx_m(&f, 5 * MiB), V + 1152 * MiB);
    ck_assert_uint_eq(fx_ms(&f, 5 * MiB, f.s1), V + 1152 * MiB + 1160 * MiB);
    ck_assert_int_eq(fx_counts(&f)->va_reserve_calls, 3);
    ms_alloc_stats s = fx_stats(&f);
    ck_assert_int_eq(s.reserved_bytes[MS_STAT_SMALL_POOL].current, 2 * MiB);
    ck_assert_int_eq(s.reserved_bytes[MS_STAT_LARGE_POOL].current, 40 * MiB);
    /* s0's large segment still has 15 MiB mapped and free. */
    ck_assert_uint_eq(fx_m(&f, 6 * MiB), V + 1152 * MiB + 5 * MiB);
    ck_assert_int_eq(fx_counts(&f)->map_calls, 3);
    fx_close(&f);
}
END_TEST

START_TEST(test_expandable_oom)
{
    fx f;
    fx_open_expandable(&f, MS_ALLOC_CUDA, 60 * MiB);
    /* 60 MiB device: ceil(67.5 / 20) = 4 pages reserved.  50 MiB maps
     * pages 0-2, all the device has. */
    ck_assert_uint_eq(fx_m(&f, 50 * MiB), V);
    uint64_t addr = 0;
    /* 20 MiB: the free 10 MiB plus page 3 would do, but mapping it fails;
     * release_cached_blocks cannot unmap a page from [50, 60). */
    ck_assert_int_eq(ms_alloc_malloc(f.a, 20 * MiB, f.s0, 0, &addr, &f.d), MS_ENOMEM);
    ck_assert_str_eq(
        f.d.msg,
        "CUDA out of memory. Tried to allocate 20.00 MiB. GPU 0 has a total capacity of 60.00 MiB "
        "of which 0 bytes is free. Including non-PyTorch memory, this process has 60.00 MiB "
        "memory in use. Of the allocated memory 50.00 MiB is allocated by PyTorch, and 10.00 MiB "
        "is reserved by PyTorch but unallocated. If reserved but unallocated memory is large try "
        "setting PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True to avoid fragmentation.  See "
        "documentation for Memory Management  "
        "(https://pytorch.org/docs/stable/notes/cuda.html#environment-variables)");
    ck_assert_int_eq(fx_counts(&f)->map_calls, 5); /* 3 pages, then two failed tries */
    ms_alloc_stats s = fx_stats(&f);
    ck_assert_int_eq(s.num_alloc_retries, 1);
    ck_assert_int_eq(s.num_ooms, 1);
    ck_assert_int_eq(fx_counts(&f)->unmap_calls, 0);
    fx_close(&f);
}
END_TEST

START_TEST(test_npu_align_16k)
{
    fx f;
    fx_open_expandable(&f, MS_ALLOC_NPU, 1024 * MiB);
    /* 3 MiB + 32 -> 3 MiB + 512 at V; the free rest starts at V + 3 MiB +
     * 512, 512 bytes past a 16 KiB boundary. */
    ck_assert_uint_eq(fx_m(&f, 3 * MiB), V);
    /* torch_npu: a request >= 2 MiB starts on a 16 KiB boundary, so the
     * 15872 bytes before V + 3 MiB + 16 KiB stay a free block. */
    ck_assert_uint_eq(fx_m(&f, 2 * MiB), V + 3 * MiB + 16 * KiB);
    fx_blocks bs = fx_visit(&f);
    ck_assert_int_eq(bs.n, 4);
    ck_assert_uint_eq(bs.b[1].addr, V + 3 * MiB + 512);
    ck_assert_uint_eq(bs.b[1].size, 15872);
    ck_assert(!bs.b[1].allocated);
    /* Below 2 MiB no alignment: 1 MiB + 100 -> 1 MiB + 512 right after. */
    ck_assert_uint_eq(fx_m(&f, MiB + 100), V + 3 * MiB + 16 * KiB + 2 * MiB + 512);
    fx_close(&f);
}
END_TEST

START_TEST(test_import_expandable)
{
    fx f;
    fx_open_expandable(&f, MS_ALLOC_CUDA, 1024 * MiB);
    const uint64_t X = UINT64_C(1) << 40;
    /* The replay backend holds the imported pages: map them on the fake. */
    for (int i = 0; i < 3; i++)
        f.be->ops->mem_map(f.be->inst, X, 20 * MiB);
    ms_seed_block r1[2] = {{X, 16 * MiB, 16 * MiB, true}, {X + 16 * MiB, 24 * MiB, 0, false}};
    ms_seed_segment s1 = {X, 40 * MiB, f.s0, true, false, 0, r1, 2};
    ck_assert_int_eq(ms_alloc_import_seed(f.a, &s1), MS_OK);
    ms_seed_block r2[1] = {{X + 60 * MiB, 20 * MiB, 0, false}};
    ms_seed_segment s2 = {X + 60 * MiB, 20 * MiB, f.s0, true, false, 0, r2, 1};
    ck_assert_int_eq(ms_alloc_import_seed(f.a, &s2), MS_OK);
    ms_alloc_stats s = fx_stats(&f);
    ck_assert_int_eq(s.reserved_bytes[MS_STAT_LARGE_POOL].current, 60 * MiB);
    ck_assert_int_eq(s.allocated_bytes[MS_STAT_ALL].current, 16 * MiB);
    ck_assert_int_eq(s.segment[MS_STAT_ALL].current, 0);
    fx_blocks bs = fx_visit(&f);
    ck_assert_int_eq(bs.n, 3);
    ck_assert_uint_eq(bs.b[2].segment_addr, X + 60 * MiB);
    ck_assert_uint_eq(bs.b[2].segment_size, 20 * MiB);
    /* Misaligned ranges are refused. */
    ms_seed_block r3[1] = {{X + 90 * MiB, 20 * MiB, 0, false}};
    ms_seed_segment s3 = {X + 90 * MiB, 20 * MiB, f.s0, true, false, 0, r3, 1};
    ck_assert_int_eq(ms_alloc_import_seed(f.a, &s3), MS_EINVAL);
    /* 10 MiB: 20 MiB @X+60 is smaller than 24 MiB @X+16, but counts the
     * 1080 MiB unmapped after it; the 24 MiB block counts only the 20 MiB
     * gap before X+60 (44 MiB), so it wins. */
    ck_assert_uint_eq(fx_m(&f, 10 * MiB), X + 16 * MiB);
    ck_assert_int_eq(fx_counts(&f)->va_reserve_calls, 0);
    fx_f(&f, X + 16 * MiB);
    fx_f(&f, X);
    /* All free: every page unmapped; the imported reservation is not the
     * backend's to release. */
    ck_assert_int_eq(ms_alloc_empty_cache(f.a), MS_OK);
    ck_assert_int_eq(fx_counts(&f)->unmap_calls, 3);
    ck_assert_int_eq(fx_counts(&f)->va_release_calls, 0);
    ck_assert_int_eq(fx_stats(&f).reserved_bytes[MS_STAT_ALL].current, 0);
    fx_close(&f);
}
END_TEST

/* torch_npu with expandable segments, and a plain (not expandable) segment
 * imported from a trace whose free block does not start on a 16 KiB
 * boundary: the 16 KiB alignment of a >= 2 MiB request splits that block
 * twice.  Splitting the tail in place as well once left the block in the
 * ordered set twice, and the next search looped forever (Check's timeout
 * catches that).  The segment is memory the fake device handed out (so
 * destroying the allocator gives it back): 3072 B allocated at X, free from
 * X + 3072 to X + 40 MiB. */
START_TEST(test_npu_align_in_imported_plain_segment)
{
    fx f;
    fx_open_expandable(&f, MS_ALLOC_NPU, 4096 * MiB);
    uint64_t X = 0;
    ck_assert_int_eq(f.be->ops->malloc_device(f.be->inst, 40 * MiB, &X), MS_OK);
    ms_seed_block odd[2] = {{X, 3072, 3000, true}, {X + 3072, 40 * MiB - 3072, 0, false}};
    ck_assert_int_eq(ms_alloc_import_segment(f.a, X, 40 * MiB, f.s0, false, odd, 2), MS_OK);
    /* 4 MiB + 32 -> 4 MiB + 512, on the first 16 KiB boundary: X + 16 KiB,
     * leaving 13312 B free before it. */
    uint64_t a = fx_m(&f, 4 * MiB);
    ck_assert_uint_eq(a, X + 16 * KiB);
    fx_blocks bs = fx_visit(&f);
    ck_assert_int_eq(bs.n, 4);
    ck_assert_uint_eq(bs.b[1].addr, X + 3072);
    ck_assert_uint_eq(bs.b[1].size, 13312);
    ck_assert_uint_eq(bs.b[2].size, 4 * MiB + 512);
    ck_assert_uint_eq(bs.b[3].addr, X + 16 * KiB + 4 * MiB + 512);
    uint64_t b = fx_m(&f, 3 * MiB);
    fx_f(&f, a);
    fx_f(&f, b);
    /* Freed and merged back: the imported block, then one free block to the
     * segment's end. */
    bs = fx_visit(&f);
    ck_assert_int_eq(bs.n, 2);
    ck_assert_uint_eq(bs.b[1].addr, X + 3072);
    ck_assert_uint_eq(bs.b[1].size, 40 * MiB - 3072);
    fx_f(&f, X);
    fx_close(&f);
}
END_TEST

static Suite *expandable_suite(void)
{
    Suite *s = suite_create("allocator_expandable");
    TCase *tc = tcase_create("expandable");
    tcase_add_test(tc, test_map_whole_pages);
    tcase_add_test(tc, test_best_fit_counts_unmapped);
    tcase_add_test(tc, test_release_unmaps_free_pages_only);
    tcase_add_test(tc, test_segment_per_stream_and_pool);
    tcase_add_test(tc, test_expandable_oom);
    tcase_add_test(tc, test_npu_align_16k);
    tcase_add_test(tc, test_import_expandable);
    tcase_add_test(tc, test_npu_align_in_imported_plain_segment);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(expandable_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
