/* The caching allocator, rule by rule, on a fake device whose mallocs bump
 * from FAKE_DEV_BASE (written DEV below).  Every expected address and byte
 * count is derived by hand in the comment next to it from the rules in
 * ../shared/reference/caching-allocator.md; docs/allocator.md cites the
 * PyTorch / torch_npu / MindSpeed code each rule comes from. */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "memsim/allocator.h"
#include "test_allocator_fixture.h"

#define DEV FAKE_DEV_BASE

static void assert_stat(ms_stat s, int64_t cur, int64_t peak, int64_t alloc, int64_t freed)
{
    ck_assert_int_eq(s.current, cur);
    ck_assert_int_eq(s.peak, peak);
    ck_assert_int_eq(s.allocated, alloc);
    ck_assert_int_eq(s.freed, freed);
}

/* ------------------------------------------------------------------ sizes */

START_TEST(test_pools_and_segment_sizes)
{
    fx f;
    fx_open(&f, MS_ALLOC_CUDA, "", 1024 * MiB);
    /* 1 MiB rounds to itself (<= kSmallSize): small pool, 2 MiB segment,
     * split (the 1 MiB left is >= 512). */
    ck_assert_uint_eq(fx_m(&f, MiB), DEV);
    ms_alloc_stats s = fx_stats(&f);
    ck_assert_int_eq(s.segment[MS_STAT_SMALL_POOL].current, 1);
    ck_assert_int_eq(s.reserved_bytes[MS_STAT_SMALL_POOL].current, 2 * MiB);
    ck_assert_int_eq(s.allocated_bytes[MS_STAT_SMALL_POOL].current, MiB);
    /* 11 MiB: >= 10 MiB -> rounded up to a 12 MiB segment; the 1 MiB left
     * is not > 1 MiB, so the block stays whole: 12 MiB allocated. */
    ck_assert_uint_eq(fx_m(&f, 11 * MiB), DEV + 2 * MiB);
    s = fx_stats(&f);
    ck_assert_int_eq(s.reserved_bytes[MS_STAT_LARGE_POOL].current, 12 * MiB);
    ck_assert_int_eq(s.allocated_bytes[MS_STAT_LARGE_POOL].current, 12 * MiB);
    /* 5 MiB: large pool, < 10 MiB -> a 20 MiB segment, split (15 MiB left). */
    ck_assert_uint_eq(fx_m(&f, 5 * MiB), DEV + 14 * MiB);
    s = fx_stats(&f);
    ck_assert_int_eq(s.reserved_bytes[MS_STAT_LARGE_POOL].current, 32 * MiB);
    ck_assert_int_eq(s.allocated_bytes[MS_STAT_LARGE_POOL].current, 17 * MiB);
    /* 1 MiB + 1 rounds to 1 MiB + 512: large pool, where the 15 MiB left of
     * the 20 MiB segment fits; the small pool's free 1 MiB is not used. */
    ck_assert_uint_eq(fx_m(&f, MiB + 1), DEV + 19 * MiB);
    ck_assert_int_eq(fx_counts(&f)->malloc_calls, 3);
    fx_close(&f);
}
END_TEST

/* Observers get the allocator's totals once each event has taken effect
 * (memory.csv's allocated/reserved/active columns), the same figures
 * ms_alloc_current and get_stats report at that point. */
START_TEST(test_event_totals_after_the_event)
{
    fx f;
    fx_open(&f, MS_ALLOC_CUDA, "", 1024 * MiB);
    uint64_t p = fx_m(&f, MiB); /* small pool: a 2 MiB segment, 1 MiB block */
    const ms_alloc_event *seg = fx_last(&f, MS_AA_SEGMENT_ALLOC);
    const ms_alloc_event *al = fx_last(&f, MS_AA_ALLOC);
    ck_assert_ptr_nonnull(seg);
    ck_assert_ptr_nonnull(al);
    ck_assert_uint_eq(seg->reserved, 2 * MiB);
    ck_assert_uint_eq(seg->allocated, 0);
    ck_assert_uint_eq(al->allocated, MiB);
    ck_assert_uint_eq(al->active, MiB);
    ck_assert_uint_eq(al->reserved, 2 * MiB);
    ms_alloc_totals now = ms_alloc_current(f.a);
    ck_assert_uint_eq(now.allocated, MiB);
    ck_assert_uint_eq(now.reserved, 2 * MiB);
    ck_assert_uint_eq(now.active, MiB);
    fx_f(&f, p); /* no other stream used it: completed at once */
    const ms_alloc_event *req = fx_last(&f, MS_AA_FREE_REQUESTED);
    const ms_alloc_event *done = fx_last(&f, MS_AA_FREE_COMPLETED);
    ck_assert_ptr_nonnull(req);
    ck_assert_ptr_nonnull(done);
    ck_assert_uint_eq(req->allocated, 0);
    ck_assert_uint_eq(req->active, MiB); /* still active until completed */
    ck_assert_uint_eq(done->active, 0);
    ck_assert_uint_eq(done->reserved, 2 * MiB); /* cached, not released */
    ck_assert_int_eq(ms_alloc_empty_cache(f.a), MS_OK);
    const ms_alloc_event *sf = fx_last(&f, MS_AA_SEGMENT_FREE);
    ck_assert_ptr_nonnull(sf);
    ck_assert_uint_eq(sf->reserved, 0);
    now = ms_alloc_current(NULL);
    ck_assert_uint_eq(now.allocated + now.reserved + now.active, 0);
    fx_close(&f);
}
END_TEST

/* ---------------------------------------------------------------- best fit */

START_TEST(test_best_fit_size)
{
    fx f;
    fx_open(&f, MS_ALLOC_CUDA, "", 1024 * MiB);
    /* Small segment at DEV: A 512K | B 64K | C 256K | D 64K | free 1152K. */
    uint64_t a = fx_m(&f, 512 * KiB), b = fx_m(&f, 64 * KiB), c = fx_m(&f, 256 * KiB);
    uint64_t d = fx_m(&f, 64 * KiB);
    ck_assert_uint_eq(c, DEV + 576 * KiB);
    ck_assert_uint_eq(d, DEV + 832 * KiB);
    fx_f(&f, a);
    fx_f(&f, c);
    /* Free: 256K @576K, 512K @0, 1152K @896K.  200K takes the smallest
     * block that fits (256K) although 512K has the lower address. */
    ck_assert_uint_eq(fx_m(&f, 200 * KiB), DEV + 576 * KiB);
    /* 512K: the exact 512K block, not the larger tail. */
    ck_assert_uint_eq(fx_m(&f, 512 * KiB), DEV);
    (void)b;
    fx_close(&f);
}
END_TEST

START_TEST(test_best_fit_address_and_stream)
{
    fx f;
    fx_open(&f, MS_ALLOC_CUDA, "", 1024 * MiB);
    /* A 64K | X 64K | B 64K | Y 64K | free tail @256K. */
    uint64_t a = fx_m(&f, 64 * KiB), x = fx_m(&f, 64 * KiB), b = fx_m(&f, 64 * KiB);
    uint64_t y = fx_m(&f, 64 * KiB);
    fx_f(&f, b);
    fx_f(&f, a);
    /* Two free 64K blocks: the lower address wins, whatever the free order. */
    ck_assert_uint_eq(fx_m(&f, 64 * KiB), DEV);
    ck_assert_uint_eq(fx_m(&f, 64 * KiB), DEV + 128 * KiB);
    /* Stream s1 never takes stream s0's blocks: a new segment. */
    uint64_t z = fx_mp(&f, 64 * KiB, f.s1, 0);
    ck_assert_uint_eq(z, DEV + 2 * MiB);
    fx_f(&f, z);
    /* ...and s0 does not take s1's freed block: its own tail @256K. */
    ck_assert_uint_eq(fx_m(&f, 64 * KiB), DEV + 256 * KiB);
    ck_assert_int_eq(fx_counts(&f)->malloc_calls, 2);
    (void)x;
    (void)y;
    fx_close(&f);
}
END_TEST

/* --------------------------------------------------------------- splitting */

START_TEST(test_split_small)
{
    fx f;
    fx_open(&f, MS_ALLOC_CUDA, "", 1024 * MiB);
    uint64_t a = fx_m(&f, MiB);
    ck_assert_uint_eq(fx_m(&f, MiB), DEV + MiB); /* the exact 1 MiB tail */
    fx_f(&f, a);
    /* Small pool: split when remaining >= 512.  1 MiB - 512 in the free
     * 1 MiB block leaves exactly 512, which becomes its own block. */
    ck_assert_uint_eq(fx_m(&f, MiB - 512), DEV);
    ck_assert_uint_eq(fx_m(&f, 512), DEV + MiB - 512);
    ms_alloc_stats s = fx_stats(&f);
    ck_assert_int_eq(s.inactive_split[MS_STAT_SMALL_POOL].current, 0);
    ck_assert_int_eq(s.allocated_bytes[MS_STAT_SMALL_POOL].current, 2 * MiB);
    fx_close(&f);
}
END_TEST

START_TEST(test_split_large)
{
    fx f;
    fx_open(&f, MS_ALLOC_CUDA, "", 1024 * MiB);
    /* Large pool: split only when remaining > 1 MiB.  19 MiB in its 20 MiB
     * segment leaves exactly 1 MiB: not split, 20 MiB allocated. */
    ck_assert_uint_eq(fx_m(&f, 19 * MiB), DEV);
    ck_assert_int_eq(fx_stats(&f).allocated_bytes[MS_STAT_LARGE_POOL].current, 20 * MiB);
    /* 19 MiB - 512 leaves 1 MiB + 512: split. */
    ck_assert_uint_eq(fx_m(&f, 19 * MiB - 512), DEV + 20 * MiB);
    ms_alloc_stats s = fx_stats(&f);
    ck_assert_int_eq(s.allocated_bytes[MS_STAT_LARGE_POOL].current, 39 * MiB - 512);
    ck_assert_int_eq(s.inactive_split[MS_STAT_LARGE_POOL].current, 1);
    ck_assert_int_eq(s.inactive_split_bytes[MS_STAT_LARGE_POOL].current, MiB + 512);
    fx_close(&f);
}
END_TEST

/* ------------------------------------------------------------------- merge */

START_TEST(test_merge_on_free)
{
    fx f;
    fx_open(&f, MS_ALLOC_CUDA, "", 1024 * MiB);
    uint64_t a = fx_m(&f, 256 * KiB), b = fx_m(&f, 256 * KiB), c = fx_m(&f, 256 * KiB);
    ms_alloc_stats s = fx_stats(&f);
    /* One inactive split block: the 1280K tail. */
    ck_assert_int_eq(s.inactive_split[MS_STAT_SMALL_POOL].current, 1);
    ck_assert_int_eq(s.inactive_split_bytes[MS_STAT_SMALL_POOL].current, 1280 * KiB);
    fx_f(&f, b); /* neighbours allocated: no merge; 2 blocks, 1536K */
    s = fx_stats(&f);
    ck_assert_int_eq(s.inactive_split[MS_STAT_SMALL_POOL].current, 2);
    ck_assert_int_eq(s.inactive_split_bytes[MS_STAT_SMALL_POOL].current, 1536 * KiB);
    fx_f(&f, a); /* merges with B: still 2 blocks, 512K + 1280K */
    s = fx_stats(&f);
    ck_assert_int_eq(s.inactive_split[MS_STAT_SMALL_POOL].current, 2);
    ck_assert_int_eq(s.inactive_split_bytes[MS_STAT_SMALL_POOL].current, 1792 * KiB);
    fx_f(&f, c); /* merges both ways: one unsplit 2 MiB block */
    s = fx_stats(&f);
    assert_stat(s.inactive_split[MS_STAT_SMALL_POOL], 0, 2, 2, 2);
    ck_assert_int_eq(s.inactive_split_bytes[MS_STAT_SMALL_POOL].current, 0);
    fx_blocks bs = fx_visit(&f);
    ck_assert_int_eq(bs.n, 1);
    ck_assert_uint_eq(bs.b[0].addr, DEV);
    ck_assert_uint_eq(bs.b[0].size, 2 * MiB);
    ck_assert(!bs.b[0].allocated);
    /* Unsplit, so empty_cache returns it to the device. */
    ck_assert_int_eq(ms_alloc_empty_cache(f.a), MS_OK);
    ck_assert_int_eq(fx_counts(&f)->free_calls, 1);
    ck_assert_int_eq(fx_stats(&f).reserved_bytes[MS_STAT_ALL].current, 0);
    ck_assert_uint_eq(fx_m(&f, 256 * KiB), DEV + 2 * MiB);
    fx_close(&f);
}
END_TEST

/* --------------------------------------------------------- max_split_size */

START_TEST(test_max_split_size)
{
    fx f;
    fx_open(&f, MS_ALLOC_CUDA, "max_split_size_mb:20", 1024 * MiB);
    ck_assert_int_eq(fx_stats(&f).max_split_size, 20 * MiB);
    uint64_t a = fx_m(&f, 30 * MiB); /* a 30 MiB oversize segment */
    ms_alloc_stats s = fx_stats(&f);
    ck_assert_int_eq(s.oversize_segments.current, 1);
    ck_assert_int_eq(s.oversize_allocations.current, 1);
    fx_f(&f, a);
    /* 5 MiB < max_split may not take the cached 30 MiB block: new segment. */
    ck_assert_uint_eq(fx_m(&f, 5 * MiB), DEV + 30 * MiB);
    /* 25 MiB >= max_split takes the 30 MiB block (30 < 25 + 20), unsplit. */
    uint64_t c = fx_m(&f, 25 * MiB);
    ck_assert_uint_eq(c, DEV);
    ck_assert_int_eq(fx_stats(&f).allocated_bytes[MS_STAT_ALL].current, 35 * MiB);
    fx_f(&f, c);
    uint64_t e = fx_m(&f, 50 * MiB); /* oversize segment @50 MiB */
    ck_assert_uint_eq(e, DEV + 50 * MiB);
    fx_f(&f, e);
    /* 29 MiB takes the 30 MiB block; 25 MiB then meets only the 50 MiB one,
     * 50 >= 25 + 20, so it opens a 26 MiB segment. */
    ck_assert_uint_eq(fx_m(&f, 29 * MiB), DEV);
    ck_assert_uint_eq(fx_m(&f, 25 * MiB), DEV + 100 * MiB);
    ck_assert_int_eq(fx_counts(&f)->malloc_calls, 4);
    fx_close(&f);
}
END_TEST

START_TEST(test_oversize_limit_flavours)
{
    /* CUDA rounds an oversize request up to max_non_split_rounding (here 64
     * MiB); torch_npu's limit is kLargeBuffer whatever the config says. */
    for (int npu = 0; npu < 2; npu++) {
        ms_alloc_config cfg;
        ms_alloc_config_default(npu ? MS_ALLOC_NPU : MS_ALLOC_CUDA, &cfg);
        cfg.max_split_size = 21 * MiB;
        cfg.max_non_split_rounding = 64 * MiB;
        fx f;
        fx_open_cfg(&f, &cfg, 1024 * MiB, 0);
        fx_f(&f, fx_m(&f, 50 * MiB));
        /* CUDA: 25 MiB against the cached 50 MiB block, 50 < 25 + 64: taken.
         * NPU: 50 MiB + 32 made a 52 MiB segment; 25 MiB + 512 against it,
         * 52 >= 25 + 20: a new 26 MiB segment after it. */
        ck_assert_uint_eq(fx_m(&f, 25 * MiB), npu ? DEV + 52 * MiB : DEV);
        fx_close(&f);
    }
}
END_TEST

START_TEST(test_release_available_one)
{
    fx f;
    fx_open(&f, MS_ALLOC_CUDA, "max_split_size_mb:20", 64 * MiB);
    fx_f(&f, fx_m(&f, 50 * MiB));
    /* 25 MiB: the cached 50 MiB is too big (50 >= 45); a 26 MiB segment does
     * not fit next to it (76 > 64).  release_available_cached_blocks frees
     * the block >= max(25, 20) MiB and the retry succeeds, bump-allocated
     * after the first segment. */
    ck_assert_uint_eq(fx_m(&f, 25 * MiB), DEV + 50 * MiB);
    ms_alloc_stats s = fx_stats(&f);
    ck_assert_int_eq(s.num_device_free, 1);
    ck_assert_int_eq(s.num_alloc_retries, 0);
    ck_assert_int_eq(s.num_sync_all_streams, 0);
    ck_assert_int_eq(fx_counts(&f)->malloc_calls, 3);
    fx_close(&f);
}
END_TEST

START_TEST(test_release_available_largest_first)
{
    fx f;
    fx_open(&f, MS_ALLOC_CUDA, "max_split_size_mb:20", 64 * MiB);
    uint64_t a = fx_m(&f, 22 * MiB), b = fx_m(&f, 24 * MiB);
    fx_f(&f, a);
    fx_f(&f, b);
    /* 30 MiB: no cached block >= 30 MiB and 46 + 30 > 64, so oversize blocks
     * go largest first: 24 MiB (24 < 30), then 22 MiB (46 >= 30). */
    ck_assert_uint_eq(fx_m(&f, 30 * MiB), DEV + 46 * MiB);
    ck_assert_int_eq(f.n_ev >= 2, 1);
    int frees = 0;
    uint64_t order[2] = {0, 0};
    for (int i = 0; i < f.n_ev; i++)
        if (f.ev[i].action == MS_AA_SEGMENT_FREE && frees < 2)
            order[frees++] = f.ev[i].addr;
    ck_assert_int_eq(frees, 2);
    ck_assert_uint_eq(order[0], DEV + 22 * MiB);
    ck_assert_uint_eq(order[1], DEV);
    fx_close(&f);
}
END_TEST

/* ----------------------------------------------------------- record_stream */

START_TEST(test_record_stream_cuda)
{
    fx f;
    fx_open(&f, MS_ALLOC_CUDA, "", 1024 * MiB);
    uint64_t a = fx_m(&f, MiB);
    ck_assert_int_eq(ms_alloc_record_stream(f.a, a, f.s1), MS_OK);
    fx_f(&f, a);
    ck_assert_int_eq(fx_counts(&f)->event_records, 1); /* recorded on s1 at free */
    fx_blocks bs = fx_visit(&f);
    ck_assert(bs.b[0].pending_free && !bs.b[0].allocated);
    ms_alloc_stats s = fx_stats(&f);
    ck_assert_int_eq(s.allocated_bytes[MS_STAT_SMALL_POOL].current, 0);
    ck_assert_int_eq(s.active[MS_STAT_SMALL_POOL].current, 1); /* still active */
    /* s1 has not finished: A is not reused.  The tail serves the first
     * request, a new segment the second. */
    ck_assert_uint_eq(fx_m(&f, MiB), DEV + MiB);
    ck_assert_uint_eq(fx_m(&f, MiB), DEV + 2 * MiB);
    /* Once s1's work is done, process_events at the next malloc frees A. */
    fake_finish(f.be, f.s1);
    uint64_t d = fx_m(&f, MiB);
    ck_assert_uint_eq(d, DEV);
    /* A use on the allocation stream needs no event (CUDA). */
    ck_assert_int_eq(ms_alloc_record_stream(f.a, d, f.s0), MS_OK);
    fx_f(&f, d);
    ck_assert_int_eq(fx_counts(&f)->event_records, 1);
    ck_assert_uint_eq(fx_m(&f, MiB), DEV);
    ck_assert_int_eq(ms_alloc_record_stream(f.a, DEV + 5 * MiB, f.s1), MS_EINVAL);
    ck_assert_int_eq(ms_alloc_record_stream(f.a, 0, f.s1), MS_OK);
    fx_close(&f);
}
END_TEST

START_TEST(test_record_stream_npu_own_stream)
{
    fx f;
    fx_open(&f, MS_ALLOC_NPU, "", 1024 * MiB);
    /* torch_npu records the allocation stream too: the free waits on it. */
    uint64_t a = fx_m(&f, 1000); /* 1032 -> 1536 */
    ck_assert_int_eq(ms_alloc_record_stream(f.a, a, f.s0), MS_OK);
    fx_f(&f, a);
    ck_assert_int_eq(fx_counts(&f)->event_records, 1);
    ck_assert_uint_eq(fx_m(&f, 1000), DEV + 1536);
    fake_finish(f.be, f.s0);
    ck_assert_uint_eq(fx_m(&f, 1000), DEV);
    fx_close(&f);
}
END_TEST

START_TEST(test_empty_cache_waits_for_events)
{
    fx f;
    fx_open(&f, MS_ALLOC_CUDA, "", 1024 * MiB);
    uint64_t a = fx_m(&f, MiB);
    ms_alloc_record_stream(f.a, a, f.s1);
    fx_f(&f, a);
    /* release_cached_blocks synchronizes the outstanding event, frees A,
     * and the now unsplit segment goes back. */
    ck_assert_int_eq(ms_alloc_empty_cache(f.a), MS_OK);
    ck_assert_int_eq(fx_counts(&f)->event_syncs, 1);
    ck_assert_int_eq(fx_counts(&f)->free_calls, 1);
    ck_assert_int_eq(fx_stats(&f).num_sync_all_streams, 1);
    fx_close(&f);
}
END_TEST

/* ------------------------------------------------------ retry, OOM, limits */

static const char *action_names(const fx *f, char *buf, size_t len)
{
    buf[0] = '\0';
    for (int i = 0; i < f->n_ev; i++) {
        if (i)
            strncat(buf, ",", len - strlen(buf) - 1);
        strncat(buf, ms_alloc_action_name(f->ev[i].action), len - strlen(buf) - 1);
    }
    return buf;
}

START_TEST(test_release_cached_retry)
{
    fx f;
    fx_open(&f, MS_ALLOC_CUDA, "", 40 * MiB);
    fx_f(&f, fx_m(&f, 5 * MiB)); /* a cached, unsplit 20 MiB segment */
    /* 30 MiB: 20 + 30 > 40; no max_split_size, so release_cached_blocks
     * frees the 20 MiB segment and the retry (num_alloc_retries) works. */
    ck_assert_uint_eq(fx_m(&f, 30 * MiB), DEV + 20 * MiB);
    ms_alloc_stats s = fx_stats(&f);
    ck_assert_int_eq(s.num_alloc_retries, 1);
    ck_assert_int_eq(s.num_sync_all_streams, 1);
    ck_assert_int_eq(s.num_device_free, 1);
    ck_assert_int_eq(s.num_device_alloc, 2);
    ck_assert_int_eq(s.num_ooms, 0);
    char names[512];
    ck_assert_str_eq(action_names(&f, names, sizeof names),
                     "segment_alloc,alloc,free_requested,free_completed,segment_free,"
                     "segment_alloc,alloc");
    ck_assert_uint_eq(f.ev[4].addr, DEV);
    ck_assert_uint_eq(f.ev[4].size, 20 * MiB);
    ck_assert_uint_eq(f.ev[6].size, 30 * MiB);
    fx_close(&f);
}
END_TEST

START_TEST(test_oom_cuda_message)
{
    fx f;
    fx_open(&f, MS_ALLOC_CUDA, "", 48 * MiB);
    fx_m(&f, 5 * MiB); /* 20 MiB reserved, 5 MiB allocated */
    uint64_t addr = 77;
    /* 30 MiB: 20 + 30 > 48, the split 20 MiB segment cannot be released. */
    ck_assert_int_eq(ms_alloc_malloc(f.a, 30 * MiB, f.s0, 0, &addr, &f.d), MS_ENOMEM);
    ck_assert_uint_eq(addr, 0);
    ck_assert_int_eq(f.d.code, MS_ENOMEM);
    ck_assert_str_eq(
        f.d.msg,
        "CUDA out of memory. Tried to allocate 30.00 MiB. GPU 0 has a total capacity of 48.00 MiB "
        "of which 28.00 MiB is free. Including non-PyTorch memory, this process has 20.00 MiB "
        "memory in use. Of the allocated memory 5.00 MiB is allocated by PyTorch, and 15.00 MiB "
        "is reserved by PyTorch but unallocated. If reserved but unallocated memory is large try "
        "setting PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True to avoid fragmentation.  See "
        "documentation for Memory Management  "
        "(https://pytorch.org/docs/stable/notes/cuda.html#environment-variables)");
    ms_alloc_stats s = fx_stats(&f);
    ck_assert_int_eq(s.num_ooms, 1);
    ck_assert_int_eq(s.num_alloc_retries, 1);
    /* The oom entry carries device_free and the rounded request. */
    ms_alloc_event last = f.ev[f.n_ev - 1];
    ck_assert_int_eq(last.action, MS_AA_OOM);
    ck_assert_uint_eq(last.addr, 28 * MiB);
    ck_assert_uint_eq(last.size, 30 * MiB);
    fx_close(&f);
}
END_TEST

START_TEST(test_oom_npu_message)
{
    ms_alloc_config cfg;
    ms_alloc_config_default(MS_ALLOC_NPU, &cfg);
    fx f;
    fx_open_cfg(&f, &cfg, 48 * MiB, 3);
    /* 5 MiB + 32 -> 5 MiB + 512 in a 20 MiB segment: "5.00 MiB". */
    fx_m(&f, 5 * MiB);
    uint64_t addr = 0;
    /* 30 MiB + 32 -> 30 MiB + 512 -> a 32 MiB segment; 20 + 32 > 48. */
    ck_assert_int_eq(ms_alloc_malloc(f.a, 30 * MiB, f.s0, 0, &addr, &f.d), MS_ENOMEM);
    ck_assert_str_eq(f.d.msg,
                     "NPU out of memory. Tried to allocate 32.00 MiB (NPU 3; 48.00 MiB total "
                     "capacity; 5.00 MiB already allocated; 5.00 MiB current active; 28.00 MiB "
                     "free; 20.00 MiB reserved in total by PyTorch) If reserved memory is >> "
                     "allocated memory try setting max_split_size_mb to avoid fragmentation.");
    /* torch_npu synchronizes the device before releasing cached blocks. */
    ck_assert_int_eq(fx_counts(&f)->device_syncs, 1);
    ck_assert_int_eq(fx_stats(&f).num_ooms, 1);
    fx_close(&f);
}
END_TEST

START_TEST(test_memory_fraction)
{
    ms_alloc_config cfg;
    ms_alloc_config_default(MS_ALLOC_CUDA, &cfg);
    cfg.memory_fraction = 0.5; /* allowed 50 MiB of 100 */
    fx f;
    fx_open_cfg(&f, &cfg, 100 * MiB, 0);
    fx_m(&f, 5 * MiB);  /* 20 MiB segment, total 20 */
    fx_m(&f, 25 * MiB); /* 26 MiB segment (25 in it, unsplit), total 46 */
    uint64_t addr = 0;
    /* 16 MiB: 46 + 16 > 50 -> fails without asking the device, twice. */
    ck_assert_int_eq(ms_alloc_malloc(f.a, 16 * MiB, f.s0, 0, &addr, &f.d), MS_ENOMEM);
    ck_assert_int_eq(fx_counts(&f)->malloc_calls, 2);
    ck_assert_str_eq(
        f.d.msg,
        "CUDA out of memory. Tried to allocate 16.00 MiB. GPU 0 has a total capacity of 100.00 "
        "MiB of which 54.00 MiB is free. Including non-PyTorch memory, this process has 46.00 MiB "
        "memory in use. 50.00 MiB allowed; Of the allocated memory 31.00 MiB is allocated by "
        "PyTorch, and 15.00 MiB is reserved by PyTorch but unallocated. If reserved but "
        "unallocated memory is large try setting PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True "
        "to avoid fragmentation.  See documentation for Memory Management  "
        "(https://pytorch.org/docs/stable/notes/cuda.html#environment-variables)");
    /* set_per_process_memory_fraction at run time lifts the limit. */
    ck_assert_int_eq(ms_alloc_set_memory_fraction(f.a, 1.0), MS_OK);
    ck_assert_uint_eq(fx_m(&f, 16 * MiB), DEV + 46 * MiB);
    ck_assert_int_eq(ms_alloc_set_memory_fraction(f.a, 1.5), MS_EINVAL);
    fx_close(&f);
}
END_TEST

/* ---------------------------------------------------------------- GC */

static void gc_sequence(fx *f, uint64_t *d)
{
    /* Large-pool get_free_block calls: a=1, b=2, c=3, d=4.  A is cached
     * after call 2, B and C after call 3. */
    uint64_t a = fx_m(f, 30 * MiB), b = fx_m(f, 30 * MiB);
    fx_f(f, a);
    uint64_t c = fx_mp(f, 42 * MiB, f->s1, 0);
    fx_f(f, b);
    fx_f(f, c);
    *d = fx_m(f, 50 * MiB);
}

START_TEST(test_gc_threshold)
{
    ms_alloc_config cfg;
    ms_alloc_config_default(MS_ALLOC_CUDA, &cfg);
    ms_alloc_config_parse("garbage_collection_threshold:0.5", &cfg, NULL);
    cfg.memory_fraction = 1.0; /* allowed 200 MiB, threshold 100 MiB */
    fx f;
    fx_open_cfg(&f, &cfg, 200 * MiB, 0);
    uint64_t d = 0;
    gc_sequence(&f, &d);
    /* At d: reserved 102 MiB > 100, target 2 MiB.  Ages A 4-2=2, B 4-3=1,
     * C 1; average 4/3.  Only A (age 2) is freed, reclaiming 30 MiB. */
    ck_assert_int_eq(fx_counts(&f)->free_calls, 1);
    int seen = 0;
    for (int i = 0; i < f.n_ev; i++)
        if (f.ev[i].action == MS_AA_SEGMENT_FREE) {
            ck_assert_uint_eq(f.ev[i].addr, DEV);
            seen++;
        }
    ck_assert_int_eq(seen, 1);
    ck_assert_uint_eq(d, DEV + 102 * MiB);
    ck_assert_int_eq(fx_stats(&f).reserved_bytes[MS_STAT_ALL].current, 122 * MiB);
    fx_close(&f);
}
END_TEST

START_TEST(test_gc_needs_fraction)
{
    /* The same run without a memory fraction: no garbage collection. */
    fx f;
    fx_open(&f, MS_ALLOC_CUDA, "garbage_collection_threshold:0.5", 200 * MiB);
    uint64_t d = 0;
    gc_sequence(&f, &d);
    ck_assert_int_eq(fx_counts(&f)->free_calls, 0);
    ck_assert_uint_eq(d, DEV + 102 * MiB);
    fx_close(&f);
}
END_TEST

/* ------------------------------------------------------------------ stats */

START_TEST(test_stats_sequence)
{
    fx f;
    fx_open(&f, MS_ALLOC_CUDA, "", 1024 * MiB);
    uint64_t m1 = fx_m(&f, 1000);  /* 1024 bytes, small, 2 MiB segment */
    fx_m(&f, 3 * MiB);             /* 3 MiB, large, 20 MiB segment */
    fx_f(&f, m1);
    ms_alloc_stats s = fx_stats(&f);
    assert_stat(s.allocation[MS_STAT_ALL], 1, 2, 2, 1);
    assert_stat(s.allocated_bytes[MS_STAT_ALL], 3 * MiB, 3 * MiB + 1024, 3 * MiB + 1024, 1024);
    assert_stat(s.allocated_bytes[MS_STAT_SMALL_POOL], 0, 1024, 1024, 1024);
    assert_stat(s.allocated_bytes[MS_STAT_LARGE_POOL], 3 * MiB, 3 * MiB, 3 * MiB, 0);
    /* requested_bytes counts what was asked for, not the rounded size. */
    assert_stat(s.requested_bytes[MS_STAT_ALL], 3 * MiB, 3 * MiB + 1000, 3 * MiB + 1000, 1000);
    assert_stat(s.active[MS_STAT_ALL], 1, 2, 2, 1);
    assert_stat(s.active_bytes[MS_STAT_ALL], 3 * MiB, 3 * MiB + 1024, 3 * MiB + 1024, 1024);
    assert_stat(s.segment[MS_STAT_ALL], 2, 2, 2, 0);
    assert_stat(s.reserved_bytes[MS_STAT_ALL], 22 * MiB, 22 * MiB, 22 * MiB, 0);
    assert_stat(s.reserved_bytes[MS_STAT_SMALL_POOL], 2 * MiB, 2 * MiB, 2 * MiB, 0);
    /* m1's split made the 2 MiB - 1024 tail inactive; its free merged it
     * back (-1 block, -(2 MiB - 1024) bytes). */
    assert_stat(s.inactive_split[MS_STAT_SMALL_POOL], 0, 1, 1, 1);
    assert_stat(s.inactive_split_bytes[MS_STAT_SMALL_POOL], 0, 2 * MiB - 1024, 2 * MiB - 1024,
                2 * MiB - 1024);
    assert_stat(s.inactive_split[MS_STAT_LARGE_POOL], 1, 1, 1, 0);
    assert_stat(s.inactive_split_bytes[MS_STAT_LARGE_POOL], 17 * MiB, 17 * MiB, 17 * MiB, 0);
    ck_assert_int_eq(s.num_device_alloc, 2);
    ck_assert_int_eq(s.oversize_allocations.current, 0);
    ck_assert_int_eq(s.max_split_size, -1); /* SIZE_MAX as memory_stats shows it */
    ck_assert_int_eq(ms_alloc_reset_peak_stats(f.a), MS_OK);
    s = fx_stats(&f);
    assert_stat(s.allocation[MS_STAT_ALL], 1, 1, 2, 1);
    ck_assert_int_eq(ms_alloc_reset_accumulated_stats(f.a), MS_OK);
    s = fx_stats(&f);
    assert_stat(s.allocation[MS_STAT_ALL], 1, 1, 0, 0);
    ck_assert_int_eq(s.num_device_alloc, 0);
    fx_close(&f);
}
END_TEST

/* ------------------------------------------------------------ named pools */

START_TEST(test_exact_segments_pool)
{
    fx f;
    fx_open(&f, MS_ALLOC_CUDA, "", 1024 * MiB);
    ms_pool_options opt = {.exact_segments = true};
    int lp = -1, found = -1;
    ck_assert_int_eq(ms_alloc_pool_create(f.a, "long", &opt, &lp), MS_OK);
    ck_assert_int_eq(lp, 1);
    ck_assert_int_eq(ms_alloc_pool_find(f.a, "long", &found), MS_OK);
    ck_assert_int_eq(found, 1);
    ck_assert_int_eq(ms_alloc_pool_find(f.a, "default", &found), MS_OK);
    ck_assert_int_eq(found, 0);
    ck_assert_int_eq(ms_alloc_pool_find(f.a, "nope", &found), MS_ENOENT);
    ck_assert_int_eq(ms_alloc_pool_create(f.a, "long", &opt, &found), MS_EINVAL);
    /* 3 MiB + 5 -> 3 MiB + 512 -> its own 4 MiB segment, never split. */
    uint64_t a = fx_mp(&f, 3 * MiB + 5, f.s0, lp);
    ck_assert_uint_eq(a, DEV);
    ck_assert_int_eq(fx_stats(&f).allocated_bytes[MS_STAT_LARGE_POOL].current, 4 * MiB);
    fx_f(&f, a);
    /* The same size reuses the exact, unsplit 4 MiB block. */
    uint64_t b = fx_mp(&f, 3 * MiB + 5, f.s0, lp);
    ck_assert_uint_eq(b, DEV);
    fx_f(&f, b);
    /* 5 MiB: a 6 MiB segment, not 20 MiB. */
    ck_assert_uint_eq(fx_mp(&f, 5 * MiB, f.s0, lp), DEV + 4 * MiB);
    /* 1 MiB + 1 -> 2 MiB segment: the cached 4 MiB block is not exact. */
    ck_assert_uint_eq(fx_mp(&f, MiB + 1, f.s0, lp), DEV + 10 * MiB);
    /* The default pool keeps PyTorch's rules: 5 MiB -> 20 MiB segment. */
    ck_assert_uint_eq(fx_m(&f, 5 * MiB), DEV + 12 * MiB);
    /* Small requests of the pool pack into a 2 MiB segment as usual. */
    ck_assert_uint_eq(fx_mp(&f, 1000, f.s0, lp), DEV + 32 * MiB);
    ck_assert_uint_eq(fx_mp(&f, 1000, f.s0, lp), DEV + 32 * MiB + 1024);
    fx_blocks bs = fx_visit(&f);
    ck_assert_int_eq(bs.b[0].pool, 1);
    ck_assert_uint_eq(bs.b[0].segment_size, 4 * MiB);
    uint64_t addr;
    ck_assert_int_eq(ms_alloc_malloc(f.a, 1, f.s0, 2, &addr, NULL), MS_EINVAL);
    fx_close(&f);
}
END_TEST

START_TEST(test_borrowing)
{
    fx f;
    fx_open(&f, MS_ALLOC_CUDA, "", 1024 * MiB);
    ms_pool_options lend_exact = {.exact_segments = true, .lendable = true};
    ms_pool_options lend = {.lendable = true};
    ms_pool_options keep = {.exact_segments = true};
    int p1, p2, p3;
    ck_assert_int_eq(ms_alloc_pool_create(f.a, "long", &lend_exact, &p1), MS_OK);
    ck_assert_int_eq(ms_alloc_pool_create(f.a, "long2", &lend, &p2), MS_OK);
    ck_assert_int_eq(ms_alloc_pool_create(f.a, "kept", &keep, &p3), MS_OK);
    fx_f(&f, fx_mp(&f, 3 * MiB, f.s0, p1)); /* idle 4 MiB @DEV in long */
    fx_f(&f, fx_mp(&f, 9 * MiB, f.s0, p2)); /* idle 20 MiB @DEV+4MiB in long2 */
    fx_f(&f, fx_mp(&f, 2 * MiB, f.s0, p3)); /* idle 2 MiB @DEV+24MiB, not lendable */
    ck_assert_int_eq(ms_alloc_set_borrowing(f.a, true), MS_OK);
    /* The default pool is empty: 3 MiB takes the smallest idle lendable
     * block that fits, long's 4 MiB (4 - 3 = 1 MiB left: not split). */
    uint64_t b = fx_m(&f, 3 * MiB);
    ck_assert_uint_eq(b, DEV);
    /* Next: long2's 20 MiB block, split (17 MiB stays in long2). */
    uint64_t c = fx_m(&f, 3 * MiB);
    ck_assert_uint_eq(c, DEV + 4 * MiB);
    ck_assert_int_eq(fx_counts(&f)->malloc_calls, 3);
    fx_blocks bs = fx_visit(&f);
    ck_assert_int_eq(bs.n, 4);
    ck_assert_int_eq(bs.b[0].pool, p1);
    ck_assert(bs.b[0].allocated);
    ck_assert_int_eq(bs.b[2].pool, p2);
    ck_assert_uint_eq(bs.b[2].size, 17 * MiB);
    fx_f(&f, b); /* back to long's set */
    ck_assert_int_eq(ms_alloc_set_borrowing(f.a, false), MS_OK);
    /* Borrowing off: a new default segment, although long's block is idle. */
    ck_assert_uint_eq(fx_m(&f, 3 * MiB), DEV + 26 * MiB);
    fx_close(&f);
}
END_TEST

/* ----------------------------------------------------------------- import */

START_TEST(test_import_and_visit)
{
    fx f;
    fx_open(&f, MS_ALLOC_CUDA, "", 1024 * MiB);
    /* The replay's backend holds the memory: here the fake, directly. */
    uint64_t base = 0;
    ck_assert_int_eq(f.be->ops->malloc_device(f.be->inst, 2 * MiB, &base), MS_OK);
    ms_seed_block seeds[2] = {{base, MiB, 1000000, true}, {base + MiB, MiB, 0, false}};
    ck_assert_int_eq(ms_alloc_import_segment(f.a, base, 2 * MiB, f.s0, false, seeds, 2), MS_OK);
    ms_alloc_stats s = fx_stats(&f);
    ck_assert_int_eq(s.segment[MS_STAT_SMALL_POOL].current, 1); /* 2 MiB: small */
    ck_assert_int_eq(s.reserved_bytes[MS_STAT_ALL].current, 2 * MiB);
    ck_assert_int_eq(s.allocated_bytes[MS_STAT_ALL].current, MiB);
    ck_assert_int_eq(s.requested_bytes[MS_STAT_ALL].current, 1000000);
    ck_assert_int_eq(s.inactive_split[MS_STAT_ALL].current, 1);
    ck_assert_int_eq(s.num_device_alloc, 0);
    fx_blocks bs = fx_visit(&f);
    ck_assert_int_eq(bs.n, 2);
    ck_assert_uint_eq(bs.b[0].segment_addr, base);
    ck_assert_uint_eq(bs.b[0].segment_size, 2 * MiB);
    ck_assert_uint_eq(bs.b[0].requested, 1000000);
    ck_assert(bs.b[0].allocated && bs.b[0].small && !bs.b[0].expandable);
    ck_assert(!bs.b[1].allocated);
    /* The imported free block serves a request without the device. */
    ck_assert_uint_eq(fx_m(&f, 512 * KiB), base + MiB);
    ck_assert_int_eq(fx_counts(&f)->malloc_calls, 1);
    fx_f(&f, base);
    /* Overlap and bad tiling are refused. */
    ck_assert_int_eq(ms_alloc_import_segment(f.a, base, 2 * MiB, f.s0, false, seeds, 2), MS_EINVAL);
    ms_seed_block gap[2] = {{0x9000000, MiB, 0, true}, {0x9000000 + 2 * MiB, MiB, 0, false}};
    ck_assert_int_eq(ms_alloc_import_segment(f.a, 0x9000000, 3 * MiB, f.s0, false, gap, 2),
                     MS_EINVAL);
    fx_close(&f);
}
END_TEST

START_TEST(test_invalid_arguments)
{
    fx f;
    fx_open(&f, MS_ALLOC_CUDA, "", 1024 * MiB);
    uint64_t addr = 5;
    ck_assert_int_eq(ms_alloc_malloc(f.a, 0, f.s0, 0, &addr, NULL), MS_OK);
    ck_assert_uint_eq(addr, 0); /* a zero-byte tensor has no block */
    ck_assert_int_eq(ms_alloc_free(f.a, 0), MS_OK);
    ck_assert_int_eq(ms_alloc_free(f.a, DEV), MS_EINVAL);
    ck_assert_int_eq(ms_alloc_malloc(f.a, 1, NULL, 0, &addr, NULL), MS_EINVAL);
    ck_assert_int_eq(ms_alloc_malloc(f.a, 1, f.s0, -1, &addr, NULL), MS_EINVAL);
    ck_assert_int_eq(ms_alloc_malloc(f.a, UINT64_C(1) << 60, f.s0, 0, &addr, &f.d), MS_ENOMEM);
    ck_assert_str_eq(f.d.msg, "CUDA out of memory. Tried to allocate more than 1EB memory.");
    ms_alloc_config bad;
    ms_alloc_config_default(MS_ALLOC_CUDA, &bad);
    bad.max_split_size = MiB;
    ms_alloc *x = NULL;
    ck_assert_int_eq(ms_alloc_create(f.be, &bad, &x), MS_ERANGE);
    ck_assert_int_eq(ms_alloc_create(NULL, NULL, &x), MS_EINVAL);
    ck_assert_str_eq(ms_alloc_action_name(MS_AA_SEGMENT_UNMAP), "segment_unmap");
    ck_assert_str_eq(ms_alloc_action_name(MS_AA_FREE_COMPLETED), "free_completed");
    ck_assert_str_eq(ms_alloc_action_name(MS_AA_OOM), "oom");
    ck_assert_str_eq(ms_alloc_action_name(MS_AA_COUNT), "unknown");
    fx_close(&f);
}
END_TEST

/* MindSpore's dynamic memory pool (seed 003's MindFormers jobs): requests
 * 512-byte aligned, best fit over blocks of 1 GiB doubled until the request
 * fits, any buffer split, blocks never given back (no empty-cache retry),
 * and its own out-of-memory message. */
START_TEST(test_mindspore_pool)
{
    fx f;
    fx_open(&f, MS_ALLOC_MINDSPORE, "", 4096 * MiB);
    uint64_t a = fx_m(&f, 1000); /* 1000 -> 1024 bytes, in a new 1 GiB block */
    ms_alloc_stats s = fx_stats(&f);
    ck_assert_int_eq(s.reserved_bytes[MS_STAT_ALL].current, 1024 * MiB);
    ck_assert_int_eq(s.allocated_bytes[MS_STAT_ALL].current, 1024);
    uint64_t b = fx_m(&f, 600 * MiB); /* the same block, split after a */
    ck_assert_uint_eq(b, a + 1024);
    ck_assert_int_eq(fx_counts(&f)->malloc_calls, 1);
    /* 1.5 GiB: a new block of 2 GiB (1 GiB doubled). */
    fx_m(&f, 1536 * MiB);
    s = fx_stats(&f);
    ck_assert_int_eq(s.reserved_bytes[MS_STAT_ALL].current, 3072 * MiB);
    fx_f(&f, b);
    /* 1.2 GiB fits nowhere cached and the device has 1 GiB left: the cache
     * is not emptied (the free 1 GiB - 1 KiB stays reserved); an OOM. */
    uint64_t addr = 0;
    ck_assert_int_eq(ms_alloc_malloc(f.a, 1229 * MiB, f.s0, 0, &addr, &f.d), MS_ENOMEM);
    ck_assert_msg(strstr(f.d.msg, "memory isn't enough and alloc failed, alloc size: ") != NULL,
                  "%s", f.d.msg);
    s = fx_stats(&f);
    ck_assert_int_eq(s.reserved_bytes[MS_STAT_ALL].current, 3072 * MiB);
    fx_f(&f, a);
    fx_close(&f);
}
END_TEST

/* MindSpeed's memory-fragmentation allocator (seeds 001/004): outside the
 * forward a cached default block of 1.8e9 bytes or more is not split for a
 * request that would leave 20 MiB or more (myMaxSplitSize); inside the
 * forward it is. */
START_TEST(test_mindspeed_protects_large_blocks)
{
    fx f;
    fx_open(&f, MS_ALLOC_MINDSPEED, "", 8192 * MiB);
    ck_assert_int_eq(ms_alloc_set_forward(f.a, true), MS_OK);
    ck_assert_int_eq(ms_alloc_set_forward(f.a, false), MS_OK); /* past the first forward */
    uint64_t big = fx_m(&f, 1900 * MiB);
    fx_f(&f, big);
    uint64_t small = fx_m(&f, 100 * MiB); /* backward: a new segment */
    ck_assert_int_eq(fx_counts(&f)->malloc_calls, 2);
    ck_assert_uint_ne(small, big);
    fx_f(&f, small);
    ck_assert_int_eq(ms_alloc_set_forward(f.a, true), MS_OK);
    /* Forward: 150 MiB fits only the large block, which it now splits. */
    uint64_t in_fwd = fx_m(&f, 150 * MiB);
    ck_assert_uint_eq(in_fwd, big);
    ck_assert_int_eq(fx_counts(&f)->malloc_calls, 2);
    fx_f(&f, in_fwd);
    fx_close(&f);
}
END_TEST

static Suite *alloc_suite(void)
{
    Suite *s = suite_create("allocator");
    TCase *tc = tcase_create("rules");
    tcase_add_test(tc, test_pools_and_segment_sizes);
    tcase_add_test(tc, test_event_totals_after_the_event);
    tcase_add_test(tc, test_best_fit_size);
    tcase_add_test(tc, test_best_fit_address_and_stream);
    tcase_add_test(tc, test_split_small);
    tcase_add_test(tc, test_split_large);
    tcase_add_test(tc, test_merge_on_free);
    tcase_add_test(tc, test_max_split_size);
    tcase_add_test(tc, test_oversize_limit_flavours);
    tcase_add_test(tc, test_release_available_one);
    tcase_add_test(tc, test_release_available_largest_first);
    tcase_add_test(tc, test_record_stream_cuda);
    tcase_add_test(tc, test_record_stream_npu_own_stream);
    tcase_add_test(tc, test_empty_cache_waits_for_events);
    tcase_add_test(tc, test_release_cached_retry);
    tcase_add_test(tc, test_oom_cuda_message);
    tcase_add_test(tc, test_oom_npu_message);
    tcase_add_test(tc, test_memory_fraction);
    tcase_add_test(tc, test_gc_threshold);
    tcase_add_test(tc, test_gc_needs_fraction);
    tcase_add_test(tc, test_stats_sequence);
    tcase_add_test(tc, test_exact_segments_pool);
    tcase_add_test(tc, test_borrowing);
    tcase_add_test(tc, test_import_and_visit);
    tcase_add_test(tc, test_invalid_arguments);
    tcase_add_test(tc, test_mindspore_pool);
    tcase_add_test(tc, test_mindspeed_protects_large_blocks);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(alloc_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
