/* bridge_torch: libmemsim_alloc's allocation logic on a host-memory double
 * of the runtime layer (test_bridge_fake.c), through the same exported
 * functions PyTorch calls.  What the plugin recorded must replay in
 * `memsim replay` with 100% agreement: the replay runs the same allocator
 * rules over the recording, so any event the trace lost, reordered or
 * mis-sized shows up as a divergence. */
#include "config.h"

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <unistd.h>

#include "bridge_torch/memsim_alloc.h"
#include "memsim/trace.h"
#include "tests/unit/test_bridge_fake.h"

#define MiB (1ULL << 20)
#define GiB (1ULL << 30)

static char tmpdir[256];

static const char *tmp_path(const char *name)
{
    static char path[512];
    snprintf(path, sizeof path, "%s/%s", tmpdir, name);
    return path;
}

static void setup(void)
{
    snprintf(tmpdir, sizeof tmpdir, "/tmp/memsim-bridge-XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(tmpdir));
    unsetenv("MEMSIM_ALLOC_POLICY");
    unsetenv("MEMSIM_ALLOC_CONF");
    unsetenv("MEMSIM_ALLOC_FLAVOUR");
}

static void teardown(void)
{
    char cmd[512];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
    ck_assert_int_eq(system(cmd), 0);
}

static uint64_t rand64(uint64_t *state)
{
    uint64_t z = (*state += UINT64_C(0x9E3779B97F4A7C15));
    z = (z ^ (z >> 30)) * UINT64_C(0xBF58476D1CE4E5B9);
    z = (z ^ (z >> 27)) * UINT64_C(0x94D049BB133111EB);
    return z ^ (z >> 31);
}

typedef struct live {
    unsigned char *p;
    size_t size;
    unsigned char tag;
} live;

/* A training-like request stream on two streams: small and large tensors,
 * frees in random order, an empty_cache now and then.  Each block is
 * stamped at both ends and checked at its free, so two live blocks that
 * overlapped would show. */
static void drive(int n_ops, uint64_t seed)
{
    live blocks[256] = {{0}};
    int n = 0;
    uint64_t st = seed;
    void *streams[2] = {NULL, (void *)(uintptr_t)0x5000};
    for (int i = 0; i < n_ops; i++) {
        uint64_t r = rand64(&st);
        if (n < 256 && (n == 0 || r % 3 != 0)) {
            size_t size = r % 4 == 0 ? (size_t)(1 + rand64(&st) % (48 * MiB))
                                     : (size_t)(1 + rand64(&st) % (900 * 1024));
            void *s = streams[(r >> 8) & 1];
            unsigned char *p = memsim_alloc((ssize_t)size, 0, s);
            ck_assert_msg(p != NULL, "request %d of %zu bytes failed", i, size);
            unsigned char tag = (unsigned char)(i & 0xff);
            p[0] = tag;
            p[size - 1] = tag;
            blocks[n++] = (live){p, size, tag};
        } else {
            int k = (int)(r % (uint64_t)n);
            ck_assert_int_eq(blocks[k].p[0], blocks[k].tag);
            ck_assert_int_eq(blocks[k].p[blocks[k].size - 1], blocks[k].tag);
            memsim_free(blocks[k].p, (ssize_t)blocks[k].size, 0, NULL);
            blocks[k] = blocks[--n];
        }
        if (i % 700 == 699)
            ck_assert_int_eq(memsim_alloc_empty_cache(), 0);
    }
    while (n > 0) {
        n--;
        memsim_free(blocks[n].p, (ssize_t)blocks[n].size, 0, NULL);
    }
}

static ms_replay_device_result replay(const char *trace)
{
    ms_snapshot *snap = NULL;
    ms_diag d = {0};
    ck_assert_msg(ms_snapshot_load(trace, &snap, &d) == MS_OK, "%s", d.msg);
    ms_replay_options opt;
    ms_replay_options_default(&opt);
    ms_replay_result res = {0};
    ck_assert_msg(ms_replay_run(snap, &opt, &res, &d) == MS_OK, "%s", d.msg);
    ck_assert_uint_eq(res.n_devices, 1);
    ms_replay_device_result r = res.dev[0];
    ms_replay_result_free(&res);
    ms_snapshot_free(snap);
    return r;
}

START_TEST(trace_replays_fully)
{
    bridge_fake_reset(8 * GiB);
    ck_assert_int_eq(memsim_alloc_set_runtime(bridge_fake_runtime()), 0);
    setenv("MEMSIM_ALLOC_TRACE", tmp_path("trace.csv"), 1);
    drive(3000, 42);
    unsigned long long s[5];
    ck_assert_int_eq(memsim_alloc_stats(0, s), 0);
    ck_assert_uint_eq(s[0], 0); /* everything was freed */
    ck_assert_uint_gt(s[3], 0); /* something was reserved */
    ck_assert_int_eq(memsim_alloc_shutdown(), 0);
    /* Every segment went back to the runtime. */
    ck_assert_int_eq(bridge_fake()->live_allocs, 0);
    ck_assert_uint_eq(bridge_fake()->used, 0);
    ck_assert_int_eq(bridge_fake()->opens, bridge_fake()->closes);

    ms_replay_device_result r = replay(tmp_path("trace.csv"));
    uint64_t seg = r.seg[0].recorded + r.seg[1].recorded;
    ck_assert_uint_gt(r.seg[0].recorded, 10);
    ck_assert_uint_gt(r.seg[1].recorded, 5); /* the empty_cache releases */
    ck_assert_uint_eq(r.seg[0].matched + r.seg[1].matched, seg);
    ck_assert_uint_eq(r.seg[0].predicted + r.seg[1].predicted, seg);
    ck_assert_msg(r.agreement_pct == 100.0, "agreement %.2f%%: %s", r.agreement_pct, r.first.what);
    ck_assert_uint_eq(r.allocs_same_addr, r.allocs);
    ck_assert_uint_eq(r.peak_reserved_recorded, r.peak_reserved_predicted);
    ck_assert_uint_eq(r.peak_reserved_predicted, s[3]);
    ck_assert(!r.first.found);
}
END_TEST

/* The memsim command says the same. */
START_TEST(cli_replay_agrees)
{
    bridge_fake_reset(8 * GiB);
    memsim_alloc_set_runtime(bridge_fake_runtime());
    setenv("MEMSIM_ALLOC_TRACE", tmp_path("trace.csv"), 1);
    drive(800, 7);
    ck_assert_int_eq(memsim_alloc_shutdown(), 0);
    const char *build = getenv("MEMSIM_BUILDDIR");
    char cmd[2048];
    snprintf(cmd, sizeof cmd, "%s/memsim replay %s", build ? build : ".", tmp_path("trace.csv"));
    FILE *p = popen(cmd, "r");
    ck_assert_ptr_nonnull(p);
    char out[16384];
    size_t n = fread(out, 1, sizeof out - 1, p);
    out[n] = '\0';
    ck_assert_int_eq(pclose(p), 0);
    ck_assert_msg(strstr(out, "agreement: 100.00%") != NULL, "%s", out);
    ck_assert_msg(strstr(out, "first divergence: none") != NULL, "%s", out);
}
END_TEST

/* Out of memory: NULL, PyTorch's message word for word, an oom row that
 * the replay reproduces at the same request. */
START_TEST(oom_gives_null_and_cuda_message)
{
    bridge_fake_reset(64 * MiB);
    memsim_alloc_set_runtime(bridge_fake_runtime());
    setenv("MEMSIM_ALLOC_TRACE", tmp_path("oom.csv"), 1);
    void *a = memsim_alloc(40 * MiB, 0, NULL);
    ck_assert_ptr_nonnull(a);
    void *b = memsim_alloc(40 * MiB, 0, NULL);
    ck_assert_ptr_null(b);
    char msg[2 * MS_DIAG_MAX];
    memsim_alloc_last_error(msg, sizeof msg);
    ck_assert_msg(strstr(msg, "CUDA out of memory. Tried to allocate 40.00 MiB. GPU 0 has a "
                              "total capacity of 64.00 MiB") != NULL,
                  "%s", msg);
    unsigned long long s[5];
    ck_assert_int_eq(memsim_alloc_stats(0, s), 0);
    ck_assert_uint_eq(s[4], 1); /* num_ooms */
    memsim_free(a, 40 * MiB, 0, NULL);
    ck_assert_int_eq(memsim_alloc_shutdown(), 0);
    ck_assert_int_eq(bridge_fake()->live_allocs, 0);
    ms_replay_device_result r = replay(tmp_path("oom.csv"));
    ck_assert(r.oom_recorded);
    ck_assert(r.oom_same_event);
    ck_assert(r.agreement_pct == 100.0);
}
END_TEST

/* lifetime_pools.lua routes what the caller declares long-lived to its
 * `long` pool (exact segments, never split), the rest to the default pool. */
START_TEST(lifetime_pools_route_by_kind)
{
    bridge_fake_reset(8 * GiB);
    memsim_alloc_set_runtime(bridge_fake_runtime());
    setenv("MEMSIM_ALLOC_POLICY", "lifetime_pools", 1);
    setenv("MEMSIM_ALLOC_TRACE", tmp_path("pools.csv"), 1);
    unsigned long long s[5];
    /* Declared before the device's first request, as around a model's
     * construction. */
    ck_assert_int_eq(memsim_alloc_set_context("weight", 1, 0), 0);
    void *w = memsim_alloc(3 * MiB, 0, NULL);
    ck_assert_ptr_nonnull(w);
    /* The long pool's segment is exactly 3 MiB rounded to 2 MiB pages. */
    ck_assert_int_eq(memsim_alloc_stats(0, s), 0);
    ck_assert_uint_eq(s[1], 4 * MiB);
    ck_assert_int_eq(memsim_alloc_set_context("activation", 0, 1), 0);
    void *x = memsim_alloc(3 * MiB, 0, NULL);
    ck_assert_ptr_nonnull(x);
    /* A large default-pool request opens a 20 MiB segment of its own. */
    ck_assert_int_eq(memsim_alloc_stats(0, s), 0);
    ck_assert_uint_eq(s[1], 24 * MiB);
    void *y = memsim_alloc(3 * MiB, 0, NULL);
    ck_assert_ptr_nonnull(y);
    ck_assert_int_eq(memsim_alloc_stats(0, s), 0);
    ck_assert_uint_eq(s[1], 24 * MiB); /* in the default segment's free 17 MiB */
    /* Weights again: a second exact segment, though the default one has room. */
    ck_assert_int_eq(memsim_alloc_set_context("weight", 1, 0), 0);
    void *v = memsim_alloc(1 * MiB, 0, NULL);
    ck_assert_ptr_nonnull(v);
    ck_assert_int_eq(memsim_alloc_stats(0, s), 0);
    ck_assert_uint_eq(s[1], 26 * MiB);
    memsim_free(v, 1 * MiB, 0, NULL);
    memsim_free(x, 3 * MiB, 0, NULL);
    memsim_free(w, 3 * MiB, 0, NULL);
    memsim_free(y, 3 * MiB, 0, NULL);
    ck_assert_int_eq(memsim_alloc_shutdown(), 0);
    ck_assert_int_eq(bridge_fake()->live_allocs, 0);
}
END_TEST

/* A pool hook that fails stops the request with the policy's file:line. */
START_TEST(policy_error_names_line)
{
    bridge_fake_reset(1 * GiB);
    memsim_alloc_set_runtime(bridge_fake_runtime());
    FILE *f = fopen(tmp_path("bad.lua"), "w");
    ck_assert_ptr_nonnull(f);
    fputs("return {\n  pool = function(t)\n    return 'nowhere'\n  end,\n}\n", f);
    fclose(f);
    setenv("MEMSIM_ALLOC_POLICY", tmp_path("bad.lua"), 1);
    unsetenv("MEMSIM_ALLOC_TRACE");
    ck_assert_ptr_null(memsim_alloc(1000, 0, NULL));
    char msg[2 * MS_DIAG_MAX];
    memsim_alloc_last_error(msg, sizeof msg);
    ck_assert_msg(strstr(msg, "bad.lua:2:") != NULL && strstr(msg, "'nowhere'") != NULL, "%s", msg);
    ck_assert_int_eq(memsim_alloc_shutdown(), 0);
    ck_assert_int_eq(bridge_fake()->live_allocs, 0);
}
END_TEST

START_TEST(bad_calls_are_errors)
{
    bridge_fake_reset(1 * GiB);
    memsim_alloc_set_runtime(bridge_fake_runtime());
    unsetenv("MEMSIM_ALLOC_TRACE");
    char msg[2 * MS_DIAG_MAX];
    ck_assert_ptr_null(memsim_alloc(-1, 0, NULL));
    ck_assert_ptr_null(memsim_alloc(100, 99, NULL));
    memsim_alloc_last_error(msg, sizeof msg);
    ck_assert_msg(strstr(msg, "device 99 is out of range") != NULL, "%s", msg);
    void *p = memsim_alloc(100, 0, NULL);
    ck_assert_ptr_nonnull(p);
    memsim_free((char *)p + 8, 100, 0, NULL);
    memsim_alloc_last_error(msg, sizeof msg);
    ck_assert_msg(strstr(msg, "not an address this allocator gave out") != NULL, "%s", msg);
    ck_assert_int_eq(memsim_alloc_set_context("weights", 0, 1), -1);
    ck_assert_int_eq(memsim_alloc_set_context("weight", 1, 0), 0);
    /* A runtime cannot change under open devices. */
    ck_assert_int_eq(memsim_alloc_set_runtime(NULL), -1);
    setenv("MEMSIM_ALLOC_TRACE", "/nonexistent-dir/t.csv", 1);
    memsim_free(p, 100, 0, NULL);
    ck_assert_int_eq(memsim_alloc_shutdown(), 0);
    /* An unwritable trace is an error when the device opens. */
    ck_assert_ptr_null(memsim_alloc(100, 0, NULL));
    memsim_alloc_last_error(msg, sizeof msg);
    ck_assert_msg(strstr(msg, "/nonexistent-dir/t.csv: cannot write") != NULL, "%s", msg);
    ck_assert_int_eq(bridge_fake()->live_allocs, 0);
}
END_TEST

#if !defined(MS_WITH_CUDA) && !defined(MS_WITH_ASCEND)
START_TEST(no_runtime_built)
{
    unsetenv("MEMSIM_ALLOC_TRACE");
    ck_assert_ptr_null(memsim_alloc(100, 0, NULL));
    char msg[2 * MS_DIAG_MAX];
    memsim_alloc_last_error(msg, sizeof msg);
    ck_assert_msg(strstr(msg, "built without a device runtime") != NULL, "%s", msg);
}
END_TEST
#endif

int main(void)
{
    Suite *s = suite_create("bridge_alloc");
    TCase *tc = tcase_create("plugin");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, trace_replays_fully);
    tcase_add_test(tc, cli_replay_agrees);
    tcase_add_test(tc, oom_gives_null_and_cuda_message);
    tcase_add_test(tc, lifetime_pools_route_by_kind);
    tcase_add_test(tc, policy_error_names_line);
    tcase_add_test(tc, bad_calls_are_errors);
#if !defined(MS_WITH_CUDA) && !defined(MS_WITH_ASCEND)
    tcase_add_test(tc, no_runtime_built);
#endif
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
