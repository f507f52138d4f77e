/* End to end: scenario -> run -> CSV reports, and the memsim command's
 * behaviour on good and bad input. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "memsim/exec.h"
#include "memsim/report.h"
#include "memsim/scenario.h"

static const char *srcdir(void)
{
    const char *s = getenv("MEMSIM_SRCDIR");
    return s ? s : ".";
}

static const char *builddir(void)
{
    const char *s = getenv("MEMSIM_BUILDDIR");
    return s ? s : ".";
}

static char tmpdir[] = "/tmp/memsim-run-XXXXXX";

static char *read_file(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (f == NULL)
        return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *buf = malloc((size_t)n + 1);
    if (buf && fread(buf, 1, (size_t)n, f) != (size_t)n) {
        free(buf);
        buf = NULL;
    }
    fclose(f);
    if (buf) {
        buf[n] = '\0';
        *len = (size_t)n;
    }
    return buf;
}

/* Run the memsim program; returns its exit status, stderr in err. */
static int run_memsim(const char *args, char *err, size_t errlen)
{
    char cmd[4096], errpath[600];
    snprintf(errpath, sizeof errpath, "%s/stderr.txt", tmpdir);
    snprintf(cmd, sizeof cmd, "cd %s && %s/memsim %s >%s/stdout.txt 2>%s", srcdir(), builddir(),
             args, tmpdir, errpath);
    int rc = system(cmd);
    size_t n = 0;
    char *e = read_file(errpath, &n);
    snprintf(err, errlen, "%s", e ? e : "");
    free(e);
    return WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
}

static void run_into(const char *scenario, const char *policy, const char *dir)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", srcdir(), scenario);
    ms_diag d = {0};
    ms_scenario *sc = NULL;
    ck_assert_msg(ms_scenario_load(path, NULL, 0, &sc, &d) == MS_OK, "%s", d.msg);
    ms_run_options opt = {.policy = policy, .record = true};
    ms_run *run = NULL;
    ck_assert_msg(ms_run_execute(sc, &opt, &run, &d) == MS_OK, "%s", d.msg);
    const ms_run_summary *s;
    const ms_run_record *rec;
    ms_program_view view;
    ms_run_summary_get(run, &s);
    ms_run_record_get(run, &rec);
    ms_run_program_view(run, &view);
    ck_assert_msg(ms_report_write_csv(dir, s, 1, rec, &view, &d) == MS_OK, "%s", d.msg);
    ms_run_free(run);
    ms_scenario_free(sc);
}

static void assert_same_file(const char *a, const char *b)
{
    size_t la = 0, lb = 0;
    char *x = read_file(a, &la), *y = read_file(b, &lb);
    ck_assert_ptr_nonnull(x);
    ck_assert_ptr_nonnull(y);
    ck_assert_msg(la == lb && memcmp(x, y, la) == 0, "%s and %s differ", a, b);
    ck_assert_msg(la > 100, "%s is suspiciously small (%zu bytes)", a, la);
    free(x);
    free(y);
}

START_TEST(llama2_7b_runs_are_byte_identical)
{
    static const char *const files[] = {"summary.csv", "ops.csv", "memory.csv", "tensors.csv"};
    char a[700], b[700];
    snprintf(a, sizeof a, "%s/a", tmpdir);
    snprintf(b, sizeof b, "%s/b", tmpdir);
    run_into("scenarios/llama2-7b.lua", "full_recompute", a);
    run_into("scenarios/llama2-7b.lua", "full_recompute", b);
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
        char fa[800], fb[800];
        snprintf(fa, sizeof fa, "%s/%s", a, files[i]);
        snprintf(fb, sizeof fb, "%s/%s", b, files[i]);
        assert_same_file(fa, fb);
    }
}
END_TEST

START_TEST(cli_default_run_writes_reports)
{
    char err[4096];
    char args[1024];
    snprintf(args, sizeof args, "run scenarios/llama2-7b.lua --out %s/cli", tmpdir);
    ck_assert_msg(run_memsim(args, err, sizeof err) == 0, "%s", err);
    char path[800];
    size_t n = 0;
    snprintf(path, sizeof path, "%s/cli/summary.csv", tmpdir);
    char *s = read_file(path, &n);
    ck_assert_ptr_nonnull(s);
    ck_assert_ptr_nonnull(strstr(s, "scenario,policy,device,"));
    ck_assert_ptr_nonnull(strstr(s, "llama2-7b,none,"));
    free(s);
    snprintf(path, sizeof path, "%s/stdout.txt", tmpdir);
    s = read_file(path, &n);
    ck_assert_ptr_nonnull(strstr(s, "peak allocated"));
    ck_assert_ptr_nonnull(strstr(s, "MFU"));
    free(s);
}
END_TEST

START_TEST(cli_bad_scenarios)
{
    char err[4096], args[1024];
    snprintf(args, sizeof args, "run %s/does-not-exist.lua --out %s/x", tmpdir, tmpdir);
    ck_assert_int_ne(run_memsim(args, err, sizeof err), 0);
    ck_assert_ptr_nonnull(strstr(err, "does-not-exist.lua"));
    snprintf(args, sizeof args, "run scenarios/llama2-7b.lua --set model.hiden_size=3 --out %s/x",
             tmpdir);
    ck_assert_int_ne(run_memsim(args, err, sizeof err), 0);
    ck_assert_ptr_nonnull(strstr(err, "hiden_size"));
    snprintf(args, sizeof args, "run scenarios/llama2-7b.lua --set model.num_layers=-2 --out %s/x",
             tmpdir);
    ck_assert_int_ne(run_memsim(args, err, sizeof err), 0);
    ck_assert_ptr_nonnull(strstr(err, "num_layers"));
    ck_assert_int_eq(run_memsim("frobnicate", err, sizeof err), 2);
    ck_assert_int_eq(run_memsim("run", err, sizeof err), 2);
}
END_TEST

START_TEST(cli_policy_error_has_position)
{
    char err[4096], args[1024];
    snprintf(args, sizeof args,
             "run tests/data/cli/tiny-gpt.lua --policy tests/data/cli/plan_error.lua --out %s/pe",
             tmpdir);
    ck_assert_int_eq(run_memsim(args, err, sizeof err), 1);
    ck_assert_msg(strstr(err, "plan_error.lua:5:") != NULL, "stderr: %s", err);
    ck_assert_ptr_nonnull(strstr(err, "broken on purpose"));
    /* Nothing that looks like a finished report is left behind. */
    char path[800];
    snprintf(path, sizeof path, "%s/pe/summary.csv", tmpdir);
    ck_assert_int_ne(access(path, F_OK), 0);
}
END_TEST

static Suite *run_suite(void)
{
    Suite *s = suite_create("run");
    TCase *tc = tcase_create("end-to-end");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, llama2_7b_runs_are_byte_identical);
    tcase_add_test(tc, cli_default_run_writes_reports);
    tcase_add_test(tc, cli_bad_scenarios);
    tcase_add_test(tc, cli_policy_error_has_position);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    if (mkdtemp(tmpdir) == NULL)
        return 1;
    SRunner *sr = srunner_create(run_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf %s", tmpdir);
    if (system(cmd) != 0)
        return 1;
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
