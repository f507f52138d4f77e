/* backend_npu's CUDA runtime layer (cuda.c, cuda_fp8.c) against the test
 * double of libcudart, cuBLAS and cuBLASLt (tests/cuda_double/: host
 * memory, one thread per stream, the toolkit's own signatures), which
 * cuda.c loads with dlopen in place of the real libraries: what every
 * build with the CUDA toolkit compiles, run without a GPU.  The checks
 * every runtime must pass run on it, and the double's accounting proves
 * that every path leaves the device as it found it. */
#include "config.h" /* MS_WITH_CUDA: runtime.h's npu_runtime_cuda */

#include <dlfcn.h>

#include "cuda_double.h"
#include "test_npu_checks.h"

/* CUDA_DOUBLE_SO: the built double (tests/local.mk). */

/* The double's function `name`.  main holds the double open from the
 * start, so the lookup finds the one instance cuda.c loads (or will). */
static void *double_fn(const char *name)
{
    void *h = dlopen(CUDA_DOUBLE_SO, RTLD_NOW | RTLD_NOLOAD);
    ck_assert_msg(h != NULL, "the CUDA double is not loaded: %s", dlerror());
    void *f = dlsym(h, name);
    ck_assert_msg(f != NULL, "the CUDA double has no %s", name);
    dlclose(h);
    return f;
}

/* The double's controls, through dlsym (POSIX lets a dlsym result convert
 * to a function pointer; memcpy says so without a cast ISO C leaves
 * undefined, as cuda.c does). */
#define DOUBLE_FN(type, fn, name)                                                                  \
    type *fn;                                                                                      \
    do {                                                                                           \
        void *p_ = double_fn(name);                                                                \
        memcpy(&fn, &p_, sizeof fn);                                                               \
    } while (0)

static void configure(int n_devices, uint64_t hbm_bytes, int cc_major, int cc_minor)
{
    DOUBLE_FN(cuda_double_configure_fn, f, "cuda_double_configure");
    f(n_devices, hbm_bytes, cc_major, cc_minor);
}

static cuda_double_stats stats(void)
{
    DOUBLE_FN(cuda_double_get_stats_fn, f, "cuda_double_get_stats");
    return f();
}

static void set_copy_delay(cuda_double_copy kind, unsigned us)
{
    DOUBLE_FN(cuda_double_set_copy_delay_fn, f, "cuda_double_set_copy_delay");
    f(kind, us);
}

static void fail_next(const char *symbol)
{
    DOUBLE_FN(cuda_double_fail_next_fn, f, "cuda_double_fail_next");
    f(symbol);
}

/* Nothing live, and nothing refused since the double was configured. */
static void assert_device_released(void)
{
    cuda_double_stats s = stats();
    ck_assert_msg(s.rejected == 0, "%llu calls refused; the last: %s",
                  (unsigned long long)s.rejected, s.why);
    ck_assert_uint_eq(s.device_bytes, 0);
    ck_assert_uint_eq(s.device_allocs, 0);
    ck_assert_uint_eq(s.host_bytes, 0);
    ck_assert_uint_eq(s.host_allocs, 0);
    ck_assert_uint_eq(s.streams, 0);
    ck_assert_uint_eq(s.events, 0);
    ck_assert_uint_eq(s.blas_handles, 0);
    ck_assert_uint_eq(s.lt_handles, 0);
    ck_assert_uint_eq(s.lt_descs, 0);
    ck_assert_uint_eq(s.lt_layouts, 0);
    ck_assert_uint_eq(s.lt_prefs, 0);
}

static void setup_two_gib(void)
{
    configure(1, 2ull << 30, 9, 0);
}

static ms_kernel fp8_matmul(int64_t m, int64_t n, int64_t k)
{
    ms_kernel x = npu_matmul(m, n, k, 1);
    x.dtype = MS_DTYPE_FP8;
    return x;
}

/* Launch the kernels on a stream of b's and wait for them: the first
 * failure, or MS_OK. */
static ms_status launch_all(ms_backend *b, const ms_kernel *ks, int n)
{
    ms_stream *s = NULL;
    ms_status st = b->ops->stream_create(b->inst, 0, &s);
    for (int i = 0; st == MS_OK && i < n; i++)
        st = b->ops->launch(b->inst, &ks[i], s, (uint64_t)i);
    ms_status sync = b->ops->device_synchronize(b->inst);
    if (s != NULL)
        NPU_OK(b->ops->stream_destroy(b->inst, s));
    return st != MS_OK ? st : sync;
}

/* launch_all, which must succeed: else what cuda.c and the double said. */
static void launch_ok(ms_backend *b, const ms_kernel *ks, int n)
{
    ms_status st = launch_all(b, ks, n);
    ck_assert_msg(st == MS_OK, "launch: status %d: %s (the double's last refusal: %s)", (int)st,
                  b->ops->last_error(b->inst), stats().why);
}

START_TEST(no_device_says_so)
{
    configure(0, 1ull << 30, 9, 0);
    npu_check_no_device("cuda",
                        "no CUDA device: no CUDA-capable device is detected (cudaErrorNoDevice)");
    assert_device_released();
}
END_TEST

/* Another device than the first is the one cuda.c sets and allocates on. */
START_TEST(devices_by_ordinal)
{
    configure(2, 1ull << 30, 9, 0);
    npu_check_no_such_ordinal(
        "cuda:2", 2, "cuda:2 does not exist: this machine has 2 CUDA devices (cuda:0 .. cuda:1)");
    ms_diag d = {0};
    ms_device_group *g = npu_open("cuda:1", 1, &d);
    ck_assert_msg(g != NULL, "%s", d.msg);
    ms_backend *b = ms_group_device(g, 0);
    uint64_t free_bytes = 0, total = 0;
    NPU_OK(b->ops->mem_get_info(b->inst, &free_bytes, &total));
    ck_assert_uint_eq(total, 1ull << 30);
    ck_assert_uint_eq(free_bytes, total - NPU_PROXY_WORKSPACE_BYTES);
    NPU_OK(ms_group_close(g));
    assert_device_released();
}
END_TEST

/* CUDA's current device belongs to the thread, not to a context: with two
 * devices open in one thread, each device's calls must still reach its own
 * device.  The double puts a stream, an allocation or an event on the
 * thread's current device and refuses a cuBLAS call whose stream or
 * operands are on another device than its handle's, so a device that set
 * itself current only when it opened would run its work on the other. */
START_TEST(two_devices_in_one_thread_keep_apart)
{
    configure(2, 1ull << 30, 9, 0);
    ms_diag d = {0};
    ms_device_group *g0 = npu_open("cuda", 0, &d);
    ck_assert_msg(g0 != NULL, "%s", d.msg);
    ms_device_group *g1 = npu_open("cuda", 1, &d);
    ck_assert_msg(g1 != NULL, "%s", d.msg);
    ms_backend *b[2] = {ms_group_device(g0, 0), ms_group_device(g1, 0)};
    ms_kernel k = npu_matmul(256, 256, 256, 1);
    uint64_t addr[2], free_bytes[2], total = 0;
    for (int round = 0; round < 2; round++) /* each device after the other opened or ran */
        for (int i = 0; i < 2; i++)
            launch_ok(b[i], &k, 1);
    for (int i = 0; i < 2; i++)
        NPU_OK(b[i]->ops->malloc_device(b[i]->inst, 64 * MiB, &addr[i]));
    for (int i = 0; i < 2; i++)
        NPU_OK(b[i]->ops->mem_get_info(b[i]->inst, &free_bytes[i], &total));
    /* Each device holds its proxies' workspace and its own 64 MiB. */
    for (int i = 0; i < 2; i++)
        ck_assert_uint_eq(free_bytes[i], total - NPU_PROXY_WORKSPACE_BYTES - 64 * MiB);
    for (int i = 0; i < 2; i++)
        NPU_OK(b[i]->ops->free_device(b[i]->inst, addr[i]));
    NPU_OK(ms_group_close(g0));
    NPU_OK(ms_group_close(g1));
    assert_device_released();
}
END_TEST

/* The runtime table itself: the device's name, and no error before one. */
START_TEST(the_device_names_itself)
{
    char why[256] = "", name[64] = "";
    NPU_OK(npu_runtime_cuda.load(why, sizeof why));
    void *ctx = NULL;
    ms_diag d = {0};
    NPU_OK(npu_runtime_cuda.open(0, &ctx, &d));
    ck_assert_str_eq(npu_runtime_cuda.last_error(ctx), "no error recorded");
    NPU_OK(npu_runtime_cuda.device_name(ctx, name, sizeof name));
    ck_assert_str_eq(name, "memsim CUDA double");
    npu_runtime_cuda.close(ctx);
    assert_device_released();
}
END_TEST

START_TEST(device_too_small_for_the_workspace)
{
    configure(1, 64 * MiB, 9, 0);
    npu_check_too_small("cuda", "cudaMalloc(&p, bytes): out of memory (cudaErrorMemoryAllocation)");
    assert_device_released();
}
END_TEST

START_TEST(copies_and_times)
{
    npu_check_copies_and_times("cuda");
    cuda_double_stats s = stats();
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

/* What the proxies asked cuBLAS for: their FLOPs as GEMMs of their dtype,
 * each on the proxy workspace's scratch; their bytes as device copies. */
START_TEST(launches_run_their_shapes)
{
    npu_launched l = npu_check_launches("cuda");
    cuda_double_stats s = stats();
    ck_assert_uint_eq(s.gemms[CUDA_DOUBLE_BF16], 1);
    ck_assert_double_eq_tol(s.flops[CUDA_DOUBLE_BF16], l.matmul_flops, 1.0);
    ck_assert_uint_eq(s.gemms[CUDA_DOUBLE_FP16], 2);
    ck_assert_double_eq_tol(s.flops[CUDA_DOUBLE_FP16], l.attention_flops, 1.0);
    ck_assert_uint_eq(s.gemms[CUDA_DOUBLE_FP32] + s.gemms[CUDA_DOUBLE_FP8], 0);
    ck_assert_uint_eq(s.blas_own_workspace, 0);
    /* add: 3 MiB moved = 1.5 MiB copied; send: its 1 MiB buffer copied. */
    ck_assert_uint_eq(s.bytes_d2d, 3 * MiB / 2 + MiB);
    assert_device_released();
}
END_TEST

/* What an FP8 matmul runs as on a device of compute capability major.minor:
 * FP8 through cuBLASLt from 8.9 (one FP8 matmul, no cuBLAS GEMM), else
 * fp16; a shape off the FP8 kernels' 16-element alignment runs as fp16
 * everywhere. */
static void check_fp8_on(int major, int minor, bool has_fp8)
{
    configure(1, 2ull << 30, major, minor);
    ms_backend *b = NULL;
    ms_device_group *g = npu_open_ok("cuda", &b);
    ms_kernel ks[2] = {fp8_matmul(512, 512, 512), fp8_matmul(500, 512, 512)};
    ck_assert_int_eq(npu_runs_as(b, ks[0], MS_DTYPE_FP8), has_fp8 ? MS_DTYPE_FP8 : MS_DTYPE_FP16);
    ck_assert_int_eq(npu_runs_as(b, ks[1], MS_DTYPE_FP8), MS_DTYPE_FP16);
    ck_assert_int_eq(npu_runs_as(b, ks[0], MS_DTYPE_BF16), MS_DTYPE_BF16);
    launch_ok(b, ks, 2);
    cuda_double_stats s = stats();
    ck_assert_msg(s.rejected == 0, "%s", s.why);
    ck_assert_uint_eq(s.lt_handles, has_fp8);
    ck_assert_uint_eq(s.gemms[CUDA_DOUBLE_FP8], has_fp8);
    ck_assert_double_eq_tol(s.flops[CUDA_DOUBLE_FP8], has_fp8 ? ks[0].flops : 0, 1.0);
    ck_assert_uint_eq(s.gemms[CUDA_DOUBLE_FP16], has_fp8 ? 1 : 2);
    ck_assert_uint_eq(s.gemms[CUDA_DOUBLE_BF16] + s.gemms[CUDA_DOUBLE_FP32], 0);
    NPU_OK(ms_group_close(g));
    assert_device_released();
}

START_TEST(fp8_matmuls_run_in_fp8_where_the_gpu_has_it)
{
    check_fp8_on(9, 0, true);
    check_fp8_on(8, 9, true);
    check_fp8_on(10, 0, true);
    check_fp8_on(8, 6, false);
    check_fp8_on(8, 0, false);
}
END_TEST

/* cuda_fp8.c keeps the layouts and algorithm of its last four shapes: a
 * shape seen again asks the heuristic nothing, a fifth replaces the
 * oldest, and closing frees them all. */
START_TEST(fp8_plans_are_reused_and_replaced)
{
    ms_backend *b = NULL;
    ms_device_group *g = npu_open_ok("cuda", &b);
    ms_kernel ks[7] = {fp8_matmul(512, 512, 512),  fp8_matmul(256, 512, 512),
                       fp8_matmul(512, 256, 512),  fp8_matmul(512, 512, 256),
                       fp8_matmul(1024, 512, 512), fp8_matmul(512, 512, 512),
                       fp8_matmul(1024, 512, 512)};
    launch_ok(b, ks, 2);
    launch_ok(b, ks, 2);
    ck_assert_uint_eq(stats().lt_heuristics, 2);
    launch_ok(b, ks, 7);
    cuda_double_stats s = stats();
    /* The first two kept; the next three new (the fifth shape replaces the
     * first), the first again new (it replaces the second), the fifth kept. */
    ck_assert_uint_eq(s.lt_heuristics, 6);
    ck_assert_uint_eq(s.gemms[CUDA_DOUBLE_FP8], 11);
    ck_assert_uint_eq(s.lt_layouts, 4 * 3);
    ck_assert_uint_eq(s.gemms[CUDA_DOUBLE_FP16], 0);
    NPU_OK(ms_group_close(g));
    assert_device_released();
}
END_TEST

/* Each entry point cuda.c and cuda_fp8.c call, failing once: the error
 * names the call, the failed open or launch releases what it made, and a
 * launch after it works. */
static const struct {
    const char *symbol, *says;
} faults[] = {
    {"cudaSetDevice", "cudaSetDevice(c->ordinal)"},
    {"cudaDeviceGetStreamPriorityRange", "cudaDeviceGetStreamPriorityRange("},
    {"cublasCreate_v2", "cublasCreate: "},
    {"cudaGetDeviceProperties", "cudaGetDeviceProperties("},
    {"cublasLtCreate", "cublasLtCreate("},
    {"cublasLtMatmulDescCreate", "cublasLtMatmulDescCreate("},
    {"cublasLtMatmulDescSetAttribute", "cublasLtMatmulDescSetAttribute("},
    {"cublasLtMatmulPreferenceCreate", "cublasLtMatmulPreferenceCreate("},
    {"cublasLtMatmulPreferenceSetAttribute", "cublasLtMatmulPreferenceSetAttribute("},
    {"cudaMalloc", "cudaMalloc("},
    {"cudaMemset", "cudaMemset("},
    {"cudaStreamCreateWithPriority", "cudaStreamCreateWithPriority("},
    {"cudaEventCreate", "cudaEventCreate("},
    {"cudaEventRecord", "cudaEventRecord("},
    {"cudaEventSynchronize", "cudaEventSynchronize("},
    {"cublasLtMatrixLayoutCreate", "cublasLtMatrixLayoutCreate("},
    {"cublasLtMatrixLayoutSetAttribute", "cublasLtMatrixLayoutSetAttribute("},
    {"cublasLtMatmulAlgoGetHeuristic", "cublasLtMatmulAlgoGetHeuristic("},
    {"cublasLtMatmul", "cublasLtMatmul("},
    {"cublasSetStream_v2", "cublasSetStream: "},
    {"cublasSetWorkspace_v2", "cublasSetWorkspace: "},
    {"cublasGemmStridedBatchedEx", "cublasGemmStridedBatchedEx: "},
    {"cudaMemcpyAsync", "cudaMemcpyAsync("},
};

static void check_fault(const char *symbol, const char *says)
{
    setup_two_gib();
    fail_next(symbol);
    ms_kernel ks[3] = {fp8_matmul(512, 512, 512),
                       npu_matmul(512, 512, 512, 1),
                       {.name = "add", .cls = MS_KC_ELEMENTWISE, .bytes = 2 * MiB}};
    ms_diag d = {0};
    ms_device_group *g = npu_open("cuda", 0, &d);
    if (g == NULL) {
        ck_assert_msg(strstr(d.msg, says) != NULL, "%s failed: %s", symbol, d.msg);
        ck_assert_msg(strstr(d.msg, "out of memory") != NULL ||
                          strstr(d.msg, "the resource allocation failed") != NULL,
                      "%s", d.msg);
    } else {
        ms_backend *b = ms_group_device(g, 0);
        ck_assert_int_eq(launch_all(b, ks, 3), MS_ENOMEM);
        const char *why = b->ops->last_error(b->inst);
        ck_assert_msg(strstr(why, says) != NULL, "%s failed: %s", symbol, why);
        launch_ok(b, ks, 3);
        NPU_OK(ms_group_close(g));
    }
    ck_assert_msg(stats().faults_fired == 1, "%s was never called", symbol);
    assert_device_released();
}

START_TEST(a_failed_call_says_which_and_releases)
{
    for (size_t i = 0; i < sizeof faults / sizeof faults[0]; i++)
        check_fault(faults[i].symbol, faults[i].says);
}
END_TEST

/* An event behind a slow copy is not complete yet, and has no elapsed
 * time until it is. */
START_TEST(an_event_not_reached_is_not_ready)
{
    set_copy_delay(CUDA_DOUBLE_H2D, 200000);
    ms_backend *b = NULL;
    ms_device_group *g = npu_open_ok("cuda", &b);
    const ms_backend_ops *o = b->ops;
    uint64_t h = 0, dev = 0;
    NPU_OK(o->malloc_host(b->inst, MiB, &h));
    NPU_OK(o->malloc_device(b->inst, MiB, &dev));
    ms_stream *s = NULL;
    ms_event *e0 = NULL, *e1 = NULL;
    NPU_OK(o->stream_create(b->inst, 1, &s));
    NPU_OK(o->event_create(b->inst, &e0));
    NPU_OK(o->event_create(b->inst, &e1));
    NPU_OK(o->event_record(b->inst, e0, s));
    NPU_OK(o->memcpy_async(b->inst, dev, h, MiB, MS_COPY_H2D, s, 1));
    NPU_OK(o->event_record(b->inst, e1, s));
    bool done = true;
    int64_t ns = 0;
    NPU_OK(o->event_query(b->inst, e1, &done));
    ck_assert(!done);
    ck_assert_int_eq(o->event_elapsed_ns(b->inst, e0, e1, &ns), MS_EAGAIN);
    NPU_OK(o->event_synchronize(b->inst, e1));
    NPU_OK(o->event_query(b->inst, e1, &done));
    ck_assert(done);
    NPU_OK(o->event_elapsed_ns(b->inst, e0, e1, &ns));
    ck_assert_int_ge(ns, 190000000);
    NPU_OK(o->event_destroy(b->inst, e0));
    NPU_OK(o->event_destroy(b->inst, e1));
    NPU_OK(o->stream_destroy(b->inst, s));
    NPU_OK(o->free_device(b->inst, dev));
    NPU_OK(o->free_host(b->inst, h));
    NPU_OK(ms_group_close(g));
    assert_device_released();
}
END_TEST

/* One cudaHostAlloc for two requests of one size class. */
START_TEST(pinned_memory_is_reused)
{
    npu_check_pinned_reuse("cuda");
    ck_assert_uint_eq(stats().host_allocs_made, 1);
    assert_device_released();
}
END_TEST

START_TEST(the_runtime_says_why_a_call_failed)
{
    npu_check_failure_says("cuda",
                           "cudaMalloc(&p, bytes): out of memory (cudaErrorMemoryAllocation)");
    assert_device_released();
}
END_TEST

/* A whole run: the default swap with every swap checked, the allocator's
 * reserve against cudaMemGetInfo (exactly: the double's memory is the
 * allocator's segments and nothing else), and cuBLAS on the workspace
 * cuda.c gives it. */
START_TEST(a_run_verifies_its_swaps)
{
    ck_assert_uint_eq(npu_check_swaps("cuda", true).device_total, 2ull << 30);
    cuda_double_stats st = stats();
    ck_assert_uint_gt(st.bytes_d2h, 0);
    ck_assert_uint_gt(st.bytes_h2d, 0);
    ck_assert_uint_eq(st.blas_own_workspace, 0);
    assert_device_released();
}
END_TEST

/* Copies out that lag (a busy D2H engine) must not let a swap-in read the
 * host buffer first: the data check catches a wrong byte. */
START_TEST(swaps_stay_ordered_when_copies_out_lag)
{
    set_copy_delay(CUDA_DOUBLE_D2H, 20000);
    npu_check_swaps("cuda", true);
    assert_device_released();
}
END_TEST

/* cuda.c loads its libraries once per process: these run only where each
 * test has a process of its own (Check's fork mode). */
START_TEST(a_library_that_cannot_load_says_which)
{
    setenv("MEMSIM_CUBLASLT", "/nonexistent/libcublasLt.so", 1);
    ms_diag d = {0};
    ck_assert_ptr_null(npu_open("cuda", 0, &d));
    ck_assert_int_eq(d.code, MS_ENOENT);
    ck_assert_msg(strstr(d.msg, "no CUDA runtime: cannot load ") != NULL &&
                      strstr(d.msg, "(MEMSIM_CUBLASLT=/nonexistent/libcublasLt.so)") != NULL,
                  "%s", d.msg);
    assert_device_released();
}
END_TEST

START_TEST(a_library_without_a_call_says_which)
{
    setenv("MEMSIM_CUBLAS", "libm.so.6", 1);
    ms_diag d = {0};
    ck_assert_ptr_null(npu_open("cuda", 0, &d));
    ck_assert_int_eq(d.code, MS_ENOENT);
    ck_assert_msg(strstr(d.msg, "has no cublasCreate_v2") != NULL, "%s", d.msg);
    assert_device_released();
}
END_TEST

static Suite *npu_cuda_double_suite(bool forks)
{
    Suite *s = suite_create("npu (CUDA layer on the test double)");
    TCase *tc = tcase_create("device");
    tcase_add_checked_fixture(tc, setup_two_gib, NULL);
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, no_device_says_so);
    tcase_add_test(tc, devices_by_ordinal);
    tcase_add_test(tc, two_devices_in_one_thread_keep_apart);
    tcase_add_test(tc, the_device_names_itself);
    tcase_add_test(tc, device_too_small_for_the_workspace);
    tcase_add_test(tc, copies_and_times);
    tcase_add_test(tc, proxy_plans);
    tcase_add_test(tc, launches_run_their_shapes);
    tcase_add_test(tc, fp8_matmuls_run_in_fp8_where_the_gpu_has_it);
    tcase_add_test(tc, fp8_plans_are_reused_and_replaced);
    tcase_add_test(tc, a_failed_call_says_which_and_releases);
    tcase_add_test(tc, an_event_not_reached_is_not_ready);
    tcase_add_test(tc, pinned_memory_is_reused);
    tcase_add_test(tc, the_runtime_says_why_a_call_failed);
    suite_add_tcase(s, tc);
    tc = tcase_create("run");
    tcase_add_checked_fixture(tc, setup_two_gib, NULL);
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, a_run_verifies_its_swaps);
    tcase_add_test(tc, swaps_stay_ordered_when_copies_out_lag);
    suite_add_tcase(s, tc);
    if (forks) {
        tc = tcase_create("loading");
        tcase_add_checked_fixture(tc, setup_two_gib, NULL);
        tcase_add_test(tc, a_library_that_cannot_load_says_which);
        tcase_add_test(tc, a_library_without_a_call_says_which);
        suite_add_tcase(s, tc);
    }
    return s;
}

int main(void)
{
    /* Held open to the end, so that the double's state lives as long as the
     * process whether or not cuda.c has loaded it yet. */
    void *dbl = dlopen(CUDA_DOUBLE_SO, RTLD_NOW | RTLD_LOCAL);
    if (dbl == NULL) {
        printf("SKIP: no CUDA double to load (a static-only build?): %s\n", dlerror());
        return 77;
    }
    setenv("MEMSIM_CUDART", CUDA_DOUBLE_SO, 1);
    setenv("MEMSIM_CUBLAS", CUDA_DOUBLE_SO, 1);
    setenv("MEMSIM_CUBLASLT", CUDA_DOUBLE_SO, 1);
    const char *fork_env = getenv("CK_FORK");
    bool forks = fork_env == NULL || strcmp(fork_env, "no") != 0;
    SRunner *sr = srunner_create(npu_cuda_double_suite(forks));
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    dlclose(dbl);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
