/* Allocator configuration and size rules: defaults, the conf string (both
 * roundup_power2_divisions forms, every key, errors naming key and offset),
 * round_size, get_allocation_size and format_size.  Figures are derived by
 * hand from the rules in ../shared/reference/caching-allocator.md and the
 * c10 sources cited in docs/allocator.md. */
#include <check.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "memsim/allocator.h"

#define MiB (UINT64_C(1) << 20)

static ms_alloc_config cuda_cfg(void)
{
    ms_alloc_config c;
    ck_assert_int_eq(ms_alloc_config_default(MS_ALLOC_CUDA, &c), MS_OK);
    return c;
}

static ms_alloc_config npu_cfg(void)
{
    ms_alloc_config c;
    ck_assert_int_eq(ms_alloc_config_default(MS_ALLOC_NPU, &c), MS_OK);
    return c;
}

static uint64_t rnd(const ms_alloc_config *c, uint64_t size)
{
    uint64_t r = 0;
    ck_assert_int_eq(ms_alloc_config_round_size(c, size, &r), MS_OK);
    return r;
}

static uint64_t seg(const ms_alloc_config *c, uint64_t rounded, bool exact)
{
    uint64_t s = 0;
    ck_assert_int_eq(ms_alloc_config_allocation_size(c, rounded, exact, &s), MS_OK);
    return s;
}

START_TEST(test_defaults)
{
    /* CUDAAllocatorConfig(): max_split unlimited, max_non_split_rounding
     * kLargeBuffer, no gc, no divisions, one register thread. */
    ms_alloc_config c = cuda_cfg();
    ck_assert_int_eq(c.flavour, MS_ALLOC_CUDA);
    ck_assert_uint_eq(c.max_split_size, UINT64_MAX);
    ck_assert_uint_eq(c.max_non_split_rounding, 20 * MiB);
    ck_assert(c.garbage_collection_threshold == 0.0);
    ck_assert(!c.expandable_segments);
    ck_assert(c.memory_fraction == 0.0);
    ck_assert_uint_eq(c.pinned_num_register_threads, 1);
    for (int i = 0; i < MS_ALLOC_BANDS; i++)
        ck_assert_uint_eq(c.roundup_power2_divisions[i], 0);
    ck_assert_int_eq(npu_cfg().flavour, MS_ALLOC_NPU);
    ck_assert_int_eq(ms_alloc_config_default((ms_alloc_flavour)7, &c), MS_EINVAL);
    ck_assert_int_eq(ms_alloc_config_default(MS_ALLOC_CUDA, NULL), MS_EINVAL);
}
END_TEST

START_TEST(test_round_plain)
{
    /* round_size: below kMinBlockSize -> 512; else a multiple of 512. */
    ms_alloc_config c = cuda_cfg();
    ck_assert_uint_eq(rnd(&c, 1), 512);
    ck_assert_uint_eq(rnd(&c, 511), 512);
    ck_assert_uint_eq(rnd(&c, 512), 512);
    ck_assert_uint_eq(rnd(&c, 513), 1024);
    ck_assert_uint_eq(rnd(&c, 1200), 1536);
    ck_assert_uint_eq(rnd(&c, 11 * MiB), 11 * MiB);
}
END_TEST

START_TEST(test_round_divisions)
{
    /* roundup_power2_divisions:4 applies when size > 512 * 4 = 2048: the gap
     * to the next power of two is cut in 4 steps.  1 MiB + 1 lies in
     * [1 MiB, 2 MiB) cut at 1.25 MiB -> 1310720.  1200 MiB lies in
     * [1 GiB, 2 GiB) cut every 256 MiB -> 1280 MiB (PyTorch's 1200 -> 1280
     * example scaled to where the rule applies).  A power of two stays.  The
     * 1200-byte example itself is <= 2048, so round_size gives the plain
     * 1536. */
    ms_alloc_config c = cuda_cfg();
    ck_assert_int_eq(ms_alloc_config_parse("roundup_power2_divisions:4", &c, NULL), MS_OK);
    for (int i = 0; i < MS_ALLOC_BANDS; i++)
        ck_assert_uint_eq(c.roundup_power2_divisions[i], 4);
    ck_assert_uint_eq(rnd(&c, MiB + 1), 1310720);
    ck_assert_uint_eq(rnd(&c, 1200 * MiB), 1280 * MiB);
    ck_assert_uint_eq(rnd(&c, 2 * MiB), 2 * MiB);
    ck_assert_uint_eq(rnd(&c, 1200), 1536);
    /* 3000 > 2048: [2048, 4096) cut every 512 -> 3072, same as plain. */
    ck_assert_uint_eq(rnd(&c, 3000), 3072);
}
END_TEST

START_TEST(test_round_bands)
{
    /* [256:1,512:2,>:4]: 256 MiB is band log2(256) = 8, 512 MiB band 9.  The
     * first pair also fills bands 0..7 with 1; '>' fills from the last named
     * band (9) on, so band 9 ends up 4 (c10 parseRoundUpPower2Divisions). */
    ms_alloc_config c = cuda_cfg();
    ck_assert_int_eq(ms_alloc_config_parse("roundup_power2_divisions:[256:1,512:2,>:4]", &c, NULL),
                     MS_OK);
    for (int i = 0; i <= 8; i++)
        ck_assert_uint_eq(c.roundup_power2_divisions[i], 1);
    for (int i = 9; i < MS_ALLOC_BANDS; i++)
        ck_assert_uint_eq(c.roundup_power2_divisions[i], 4);
    /* Band of 1 MiB + 1 (index 0) has 1 division: plain rounding. */
    ck_assert_uint_eq(rnd(&c, MiB + 1), MiB + 512);
    /* 600 MiB is band log2(600 MiB) - 20 = 9: 4 divisions of [512, 1024)
     * MiB -> steps of 128 MiB -> 640 MiB. */
    ck_assert_uint_eq(rnd(&c, 600 * MiB), 640 * MiB);
    /* Without '>' the bands past the last interval keep their value. */
    ms_alloc_config d = cuda_cfg();
    ck_assert_int_eq(ms_alloc_config_parse("roundup_power2_divisions:[1:2,64:8]", &d, NULL), MS_OK);
    ck_assert_uint_eq(d.roundup_power2_divisions[0], 2);
    ck_assert_uint_eq(d.roundup_power2_divisions[5], 0);
    ck_assert_uint_eq(d.roundup_power2_divisions[6], 8);
    ck_assert_uint_eq(d.roundup_power2_divisions[7], 0);
    /* An interval of 1 TiB clamps to the last band. */
    ck_assert_int_eq(ms_alloc_config_parse("roundup_power2_divisions:[1048576:16]", &d, NULL),
                     MS_OK);
    ck_assert_uint_eq(d.roundup_power2_divisions[15], 16);
    ck_assert_uint_eq(d.roundup_power2_divisions[14], 16);
}
END_TEST

START_TEST(test_round_npu)
{
    /* torch_npu round_size: size + 32, then the same rounding. */
    ms_alloc_config c = npu_cfg();
    ck_assert_uint_eq(rnd(&c, 1), 512);
    ck_assert_uint_eq(rnd(&c, 480), 512);
    ck_assert_uint_eq(rnd(&c, 481), 1024);
    ck_assert_uint_eq(rnd(&c, MiB - 32), MiB);
    /* A 1 MiB request becomes 1 MiB + 512: the large pool on NPU. */
    ck_assert_uint_eq(rnd(&c, MiB), MiB + 512);
}
END_TEST

START_TEST(test_allocation_size)
{
    /* get_allocation_size: <= 1 MiB -> 2 MiB; < 10 MiB -> 20 MiB; else up to
     * a multiple of 2 MiB.  exact (MindSpeed LONG_LC): no 20 MiB packing. */
    ms_alloc_config c = cuda_cfg();
    ck_assert_uint_eq(seg(&c, 512, false), 2 * MiB);
    ck_assert_uint_eq(seg(&c, MiB, false), 2 * MiB);
    ck_assert_uint_eq(seg(&c, MiB + 512, false), 20 * MiB);
    ck_assert_uint_eq(seg(&c, 5 * MiB, false), 20 * MiB);
    ck_assert_uint_eq(seg(&c, 10 * MiB - 512, false), 20 * MiB);
    ck_assert_uint_eq(seg(&c, 10 * MiB, false), 10 * MiB);
    ck_assert_uint_eq(seg(&c, 11 * MiB, false), 12 * MiB);
    ck_assert_uint_eq(seg(&c, 5 * MiB, true), 6 * MiB);
    ck_assert_uint_eq(seg(&c, 3 * MiB + 512, true), 4 * MiB);
    ck_assert_uint_eq(seg(&c, MiB, true), 2 * MiB);
}
END_TEST

static const char *fmt(uint64_t size)
{
    static char buf[32];
    ck_assert_int_eq(ms_alloc_format_size(size, buf, sizeof buf), MS_OK);
    return buf;
}

START_TEST(test_format_size)
{
    /* format_size: <= 1024 "N bytes"; <= 1 MiB KiB; <= 1 GiB MiB; else GiB;
     * std::fixed precision 2. */
    ck_assert_str_eq(fmt(0), "0 bytes");
    ck_assert_str_eq(fmt(1024), "1024 bytes");
    ck_assert_str_eq(fmt(1025), "1.00 KiB");
    ck_assert_str_eq(fmt(1536), "1.50 KiB");
    ck_assert_str_eq(fmt(MiB), "1024.00 KiB");
    ck_assert_str_eq(fmt(MiB + 1), "1.00 MiB");
    ck_assert_str_eq(fmt(30 * MiB), "30.00 MiB");
    ck_assert_str_eq(fmt(1024 * MiB), "1024.00 MiB");
    ck_assert_str_eq(fmt(1024 * MiB + 1), "1.00 GiB");
    /* 61.22 GiB as in MindSpeed's sample NPU OOM line: 65733984256 bytes. */
    ck_assert_str_eq(fmt(UINT64_C(65733984256)), "61.22 GiB");
    char small[4];
    ck_assert_int_eq(ms_alloc_format_size(1025, small, sizeof small), MS_ERANGE);
    ck_assert_int_eq(ms_alloc_format_size(1, NULL, 8), MS_EINVAL);
}
END_TEST

START_TEST(test_parse_keys)
{
    ms_alloc_config c = cuda_cfg();
    ms_diag d = {0};
    ck_assert_int_eq(ms_alloc_config_parse(
                         " max_split_size_mb : 128 , garbage_collection_threshold:0.6,"
                         "expandable_segments:True,release_lock_on_cudamalloc:True,"
                         "pinned_use_cuda_host_register:True,pinned_num_register_threads:8,"
                         "max_non_split_rounding_mb:64,backend:native,"
                         "pinned_use_background_threads:False",
                         &c, &d),
                     MS_OK);
    ck_assert_uint_eq(c.max_split_size, 128 * MiB);
    ck_assert(c.garbage_collection_threshold == 0.6);
    ck_assert(c.expandable_segments);
    ck_assert(c.release_lock_on_malloc);
    ck_assert(c.pinned_use_host_register);
    ck_assert_uint_eq(c.pinned_num_register_threads, 8);
    ck_assert_uint_eq(c.max_non_split_rounding, 64 * MiB);
    /* Applied on top: a later string changes only what it names. */
    ck_assert_int_eq(ms_alloc_config_parse("expandable_segments:False", &c, &d), MS_OK);
    ck_assert(!c.expandable_segments);
    ck_assert_uint_eq(c.max_split_size, 128 * MiB);
    /* c10 accepts max_split_size_mb >= 20. */
    ck_assert_int_eq(ms_alloc_config_parse("max_split_size_mb:20", &c, &d), MS_OK);
    ck_assert_uint_eq(c.max_split_size, 20 * MiB);
    ck_assert_int_eq(ms_alloc_config_parse("", &c, &d), MS_OK);
}
END_TEST

START_TEST(test_parse_npu_keys)
{
    ms_alloc_config c = npu_cfg();
    ms_diag d = {0};
    ck_assert_int_eq(ms_alloc_config_parse("release_lock_on_npumalloc:True,pinned_mem_register:True,"
                                           "per_process_memory_fraction:0.75",
                                           &c, &d),
                     MS_OK);
    ck_assert(c.release_lock_on_malloc);
    ck_assert(c.pinned_use_host_register);
    ck_assert(c.memory_fraction == 0.75);
    /* The CUDA spelling is not an NPU key, and the reverse. */
    ck_assert_int_eq(ms_alloc_config_parse("release_lock_on_cudamalloc:True", &c, &d), MS_EINVAL);
    ck_assert_str_eq(d.msg, "PYTORCH_NPU_ALLOC_CONF: key 'release_lock_on_cudamalloc' at offset 0: "
                            "unrecognized CachingAllocator option (NPU flavour)");
    ms_alloc_config k = cuda_cfg();
    ck_assert_int_eq(ms_alloc_config_parse("per_process_memory_fraction:0.5", &k, &d), MS_EINVAL);
    /* torch_npu: max_split_size_mb must be > 20. */
    ck_assert_int_eq(ms_alloc_config_parse("max_split_size_mb:20", &c, &d), MS_ERANGE);
    ck_assert_int_eq(ms_alloc_config_parse("max_split_size_mb:21", &c, &d), MS_OK);
    /* torch_npu refuses expandable segments next to max_split_size_mb. */
    ck_assert_int_eq(ms_alloc_config_parse("expandable_segments:True,max_split_size_mb:64", &c, &d),
                     MS_EINVAL);
    ck_assert_ptr_nonnull(strstr(d.msg, "cannot be enabled with `expandable_segments`"));
    /* Recognised torch_npu options that memsim does not model. */
    ck_assert_int_eq(ms_alloc_config_parse("expandable_segments:False,segment_size_mb:64", &c, &d),
                     MS_EUNSUPPORTED);
    ck_assert_str_eq(d.msg, "PYTORCH_NPU_ALLOC_CONF: key 'segment_size_mb' at offset 26: "
                            "torch_npu option not modelled by memsim");
}
END_TEST

START_TEST(test_parse_errors)
{
    ms_alloc_config c = cuda_cfg();
    ms_alloc_config before = c;
    ms_diag d = {0};
    /* "max_split_size_mb:128," is 22 characters: foo starts at offset 22. */
    ck_assert_int_eq(ms_alloc_config_parse("max_split_size_mb:128,foo:1", &c, &d), MS_EINVAL);
    ck_assert_str_eq(d.msg, "PYTORCH_CUDA_ALLOC_CONF: key 'foo' at offset 22: "
                            "unrecognized CachingAllocator option (CUDA flavour)");
    /* A failed parse leaves the config untouched (max_split came first). */
    ck_assert_int_eq(memcmp(&c, &before, sizeof c), 0);
    ck_assert_int_eq(ms_alloc_config_parse("expandable_segments:Yes", &c, &d), MS_EINVAL);
    ck_assert_str_eq(d.msg, "PYTORCH_CUDA_ALLOC_CONF: key 'expandable_segments' at offset 0: "
                            "expected a single True/False argument, found 'Yes' at offset 20");
    ck_assert_int_eq(ms_alloc_config_parse("garbage_collection_threshold:1.5", &c, &d), MS_ERANGE);
    ck_assert_str_eq(d.msg, "PYTORCH_CUDA_ALLOC_CONF: key 'garbage_collection_threshold' at offset 0: "
                            "garbage_collect_threshold is invalid, set it in (0.0, 1.0), found "
                            "'1.5' at offset 29");
    ck_assert_int_eq(ms_alloc_config_parse("max_split_size_mb:10", &c, &d), MS_ERANGE);
    ck_assert_str_eq(d.msg, "PYTORCH_CUDA_ALLOC_CONF: key 'max_split_size_mb' at offset 0: "
                            "too small, must be >= 20, found '10' at offset 18");
    ck_assert_int_eq(ms_alloc_config_parse("max_split_size_mb:12x", &c, &d), MS_EINVAL);
    /* "roundup_power2_divisions:[256:" is 30 characters: the 3 is at 30. */
    ck_assert_int_eq(ms_alloc_config_parse("roundup_power2_divisions:[256:3]", &c, &d), MS_EINVAL);
    ck_assert_str_eq(d.msg, "PYTORCH_CUDA_ALLOC_CONF: key 'roundup_power2_divisions' at offset 0: "
                            "the divisions have to be a power of 2 or 0, found '3' at offset 30");
    ck_assert_int_eq(ms_alloc_config_parse("roundup_power2_divisions:[300:2]", &c, &d), MS_EINVAL);
    ck_assert_int_eq(ms_alloc_config_parse("roundup_power2_divisions:[256:2", &c, &d), MS_EINVAL);
    ck_assert_str_eq(d.msg, "PYTORCH_CUDA_ALLOC_CONF: key 'roundup_power2_divisions' at offset 0: "
                            "missing ']' at the end of the string");
    ck_assert_int_eq(ms_alloc_config_parse("roundup_power2_divisions:3", &c, &d), MS_EINVAL);
    /* Missing colon: spaces are dropped inside words, as c10 lexes. */
    ck_assert_int_eq(ms_alloc_config_parse("max_split_size_mb 128", &c, &d), MS_EINVAL);
    ck_assert_str_eq(d.msg, "PYTORCH_CUDA_ALLOC_CONF: key 'max_split_size_mb128' at offset 0: "
                            "unrecognized CachingAllocator option (CUDA flavour)");
    ck_assert_int_eq(ms_alloc_config_parse("expandable_segments", &c, &d), MS_EINVAL);
    ck_assert_str_eq(d.msg, "PYTORCH_CUDA_ALLOC_CONF: key 'expandable_segments' at offset 0: "
                            "expected ':' at the end of the string");
    ck_assert_int_eq(ms_alloc_config_parse("expandable_segments:True;x", &c, &d), MS_EINVAL);
    ck_assert_int_eq(ms_alloc_config_parse("expandable_segments:True,,", &c, &d), MS_EINVAL);
    ck_assert_str_eq(d.msg, "PYTORCH_CUDA_ALLOC_CONF: expected a key at offset 25, found ','");
    ck_assert_int_eq(ms_alloc_config_parse("expandable_segments:True max_split_size_mb:64", &c, &d),
                     MS_EINVAL);
    ck_assert_int_eq(ms_alloc_config_parse("pinned_num_register_threads:3", &c, &d), MS_EINVAL);
    ck_assert_int_eq(ms_alloc_config_parse("pinned_num_register_threads:256", &c, &d), MS_ERANGE);
    ck_assert_int_eq(ms_alloc_config_parse("backend:cudaMallocAsync", &c, &d), MS_EUNSUPPORTED);
    ck_assert_int_eq(ms_alloc_config_parse("max_split_size_mb:", &c, &d), MS_EINVAL);
    ck_assert_str_eq(d.msg, "PYTORCH_CUDA_ALLOC_CONF: key 'max_split_size_mb' at offset 0: "
                            "missing value at the end of the string");
    ck_assert_int_eq(memcmp(&c, &before, sizeof c), 0);
    ck_assert_int_eq(ms_alloc_config_parse(NULL, &c, &d), MS_EINVAL);
}
END_TEST

static Suite *conf_suite(void)
{
    Suite *s = suite_create("allocator_conf");
    TCase *tc = tcase_create("conf");
    tcase_add_test(tc, test_defaults);
    tcase_add_test(tc, test_round_plain);
    tcase_add_test(tc, test_round_divisions);
    tcase_add_test(tc, test_round_bands);
    tcase_add_test(tc, test_round_npu);
    tcase_add_test(tc, test_allocation_size);
    tcase_add_test(tc, test_format_size);
    tcase_add_test(tc, test_parse_keys);
    tcase_add_test(tc, test_parse_npu_keys);
    tcase_add_test(tc, test_parse_errors);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(conf_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
