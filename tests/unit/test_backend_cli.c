/* memsim run --backend / --stage on good and bad input: a backend this
 * build lacks, a device the machine lacks, a stage the scenario lacks, all
 * with a clear message and a non-zero exit. */
#include "config.h" /* MS_WITH_CUDA */

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "test_paths.h"

static char tmpdir[] = "/tmp/memsim-backend-cli-XXXXXX";

static char *slurp(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (f == NULL)
        return NULL;
    char *buf = calloc(1, 1 << 20);
    if (buf != NULL && fread(buf, 1, (1 << 20) - 1, f) == 0)
        buf[0] = '\0';
    fclose(f);
    return buf;
}

typedef struct cli_result {
    int rc;
    char *out, *err;
} cli_result;

/* memsim run ARGS with the environment's assignments ENV ("" for none). */
static cli_result memsim_env(const char *env, const char *args)
{
    char cmd[4096];
    snprintf(cmd, sizeof cmd, "cd %s && %s %s/memsim run %s --out %s/out >%s/stdout 2>%s/stderr",
             srcdir(), env, builddir(), args, tmpdir, tmpdir, tmpdir);
    int rc = system(cmd);
    char path[600];
    cli_result r = {.rc = WIFEXITED(rc) ? WEXITSTATUS(rc) : -1};
    snprintf(path, sizeof path, "%s/stdout", tmpdir);
    r.out = slurp(path);
    snprintf(path, sizeof path, "%s/stderr", tmpdir);
    r.err = slurp(path);
    ck_assert(r.out != NULL && r.err != NULL);
    return r;
}

static void done(cli_result *r)
{
    free(r->out);
    free(r->err);
}

static cli_result memsim(const char *args)
{
    return memsim_env("", args);
}

#define TINY "tests/data/cli/tiny-gpt.lua"

/* Without a GPU (CI), a CUDA build says there is no CUDA device, not that
 * CUDA is missing from the build; on a machine with a GPU the run works. */
START_TEST(cuda_without_a_device)
{
    cli_result r = memsim(TINY " --backend cuda");
#ifdef MS_WITH_CUDA
    if (r.rc == 0)
        ck_assert_ptr_nonnull(strstr(r.out, "device memory   "));
    else {
        ck_assert_int_eq(r.rc, 1);
        ck_assert_msg(strstr(r.err, "memsim: run: no CUDA device: ") != NULL, "%s", r.err);
        ck_assert_ptr_nonnull(strstr(r.err, "(backends in this build: mock, cuda"));
        ck_assert_ptr_null(strstr(r.err, "not built in"));
    }
#else
    ck_assert_int_eq(r.rc, 1);
    ck_assert_msg(strstr(r.err, "backend 'cuda' is not built in (configure --with-cuda); this "
                                "build has: mock") != NULL,
                  "%s", r.err);
#endif
    done(&r);
}
END_TEST

/* The CUDA runtime and cuBLAS are loaded on the first --backend cuda, not
 * when memsim starts (backend_npu/cuda.c): a mock run maps neither (the
 * loader's own log, LD_DEBUG=libs, names every library it looks for). */
START_TEST(a_mock_run_loads_no_cuda_library)
{
    cli_result r = memsim_env("LD_DEBUG=libs", TINY " --quiet");
    ck_assert_msg(r.rc == 0, "%s", r.err);
    ck_assert_msg(strstr(r.err, "find library=libc.so") != NULL, "no loader log: %s", r.err);
    ck_assert_msg(strstr(r.err, "libcudart") == NULL, "a mock run loads libcudart:\n%s", r.err);
    ck_assert_msg(strstr(r.err, "libcublas") == NULL, "a mock run loads libcublas:\n%s", r.err);
    done(&r);
}
END_TEST

#ifdef MS_WITH_CUDA
/* A CUDA build run where the toolkit's libraries are missing or wrong
 * (pointed, through MEMSIM_CUDART / MEMSIM_CUBLAS as docs/backends.md
 * says, at a library that does not exist or at one that is not CUDA's):
 * the error names the library and the loader's reason, and the run exits
 * 1. */
START_TEST(cuda_libraries_missing)
{
    cli_result r = memsim_env("MEMSIM_CUDART=libcudart.so.memsim-missing", TINY " --backend cuda");
    ck_assert_int_eq(r.rc, 1);
    ck_assert_msg(strstr(r.err, "memsim: run: no CUDA runtime: cannot load libcudart.so") != NULL,
                  "%s", r.err);
    ck_assert_msg(strstr(r.err,
                         "(MEMSIM_CUDART=libcudart.so.memsim-missing): "
                         "libcudart.so.memsim-missing: cannot open shared object file") != NULL,
                  "%s", r.err);
    ck_assert_ptr_nonnull(strstr(r.err, "(backends in this build: mock, cuda"));
    done(&r);
    r = memsim_env("MEMSIM_CUBLAS=/nonexistent/libcublas.so.0", TINY " --backend cuda:0");
    ck_assert_int_eq(r.rc, 1);
    ck_assert_msg(strstr(r.err, "memsim: run: no CUDA runtime: cannot load libcublas.so") != NULL,
                  "%s", r.err);
    ck_assert_msg(strstr(r.err, "/nonexistent/libcublas.so.0: cannot open shared object file") !=
                      NULL,
                  "%s", r.err);
    done(&r);
    /* A library that is not the CUDA runtime: the symbol it lacks. */
    r = memsim_env("MEMSIM_CUDART=libm.so.6", TINY " --backend cuda");
    ck_assert_int_eq(r.rc, 1);
    ck_assert_msg(strstr(r.err, "memsim: run: no CUDA runtime: libcudart.so") != NULL, "%s", r.err);
    ck_assert_msg(strstr(r.err, " has no cudaGetDeviceCount: ") != NULL, "%s", r.err);
    ck_assert_msg(strstr(r.err, "undefined symbol: cudaGetDeviceCount") != NULL, "%s", r.err);
    done(&r);
}
END_TEST
#endif

START_TEST(backends_this_build_lacks)
{
#ifndef MS_WITH_ASCEND
    cli_result r = memsim(TINY " --backend npu:1");
    ck_assert_int_eq(r.rc, 1);
    ck_assert_msg(strstr(r.err, "backend 'npu' is not built in (configure --with-ascend); this "
                                "build has: mock") != NULL,
                  "%s", r.err);
    done(&r);
#endif
    cli_result u = memsim(TINY " --backend tpu");
    ck_assert_int_eq(u.rc, 1);
    ck_assert_msg(strstr(u.err, "unknown backend 'tpu' (this build has: mock") != NULL, "%s",
                  u.err);
    done(&u);
}
END_TEST

START_TEST(device_numbers_are_numbers)
{
    cli_result r = memsim(TINY " --backend cuda:first");
    ck_assert_int_eq(r.rc, 1);
    ck_assert_msg(strstr(r.err, "backend 'cuda:first': the device after ':' must be a number") !=
                      NULL,
                  "%s", r.err);
    done(&r);
}
END_TEST

START_TEST(stages_the_scenario_lacks)
{
    cli_result r = memsim(TINY " --stage 1");
    ck_assert_int_eq(r.rc, 1);
    ck_assert_msg(strstr(r.err, "--stage 1: tiny-gpt has 1 pipeline stage (0..0)") != NULL, "%s",
                  r.err);
    done(&r);
    r = memsim(TINY " --stage last");
    ck_assert_int_eq(r.rc, 2);
    ck_assert_ptr_nonnull(strstr(r.err, "--stage 'last': expected a pipeline stage number"));
    done(&r);
}
END_TEST

/* One stage of a pipeline on the mock: the row is stage 1's. */
START_TEST(one_stage_of_a_pipeline_on_the_mock)
{
    cli_result r = memsim(TINY " --set parallel.pipeline_model_parallel_size=2 "
                               "--set parallel.world_size=4 --stage 1 --quiet");
    ck_assert_msg(r.rc == 0, "%s", r.err);
    done(&r);
    char path[600];
    snprintf(path, sizeof path, "%s/out/summary.csv", tmpdir);
    char *csv = slurp(path);
    ck_assert_ptr_nonnull(csv);
    /* The header, then one row: stage 1 of 2, run as one device. */
    char *row = strchr(csv, '\n');
    ck_assert_ptr_nonnull(row);
    row++;
    ck_assert_msg(strncmp(row, "tiny-gpt,none,a100-80gb,1,", 26) == 0, "%s", row);
    ck_assert_ptr_nonnull(strstr(row, ",1,"));
    char *end = strchr(row, '\n');
    ck_assert(end != NULL && end[1] == '\0');
    /* ...,stage,bubble_fraction,overrides: the stage is the third field
     * from the end. */
    *end = '\0';
    for (int k = 0; k < 2; k++)
        *strrchr(row, ',') = '\0';
    ck_assert_str_eq(strrchr(row, ',') + 1, "1");
    free(csv);
}
END_TEST

static Suite *backend_cli_suite(void)
{
    Suite *s = suite_create("memsim run --backend");
    TCase *tc = tcase_create("cli");
    tcase_add_test(tc, cuda_without_a_device);
    tcase_add_test(tc, a_mock_run_loads_no_cuda_library);
#ifdef MS_WITH_CUDA
    tcase_add_test(tc, cuda_libraries_missing);
#endif
    tcase_add_test(tc, backends_this_build_lacks);
    tcase_add_test(tc, device_numbers_are_numbers);
    tcase_add_test(tc, stages_the_scenario_lacks);
    tcase_add_test(tc, one_stage_of_a_pipeline_on_the_mock);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    if (mkdtemp(tmpdir) == NULL)
        return 1;
    SRunner *sr = srunner_create(backend_cli_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf %s", tmpdir);
    if (system(cmd) != 0)
        return 1;
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
