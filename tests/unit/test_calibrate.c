/* Tests of memsim calibrate and memsim validate (lib/calibrate): the
 * calibration round trip on the mock gives back the device file the mock
 * runs (issue 11: within 1%; FP8 GEMMs included where the device has them), a written device file loads back as written,
 * a backend that is not built in is refused by the registry, validation
 * tables with bad input fail naming the row and the column, a row's
 * prediction is the run's own figure, and a fit on train rows recovers a
 * known scale, of a scalar or of a table's level. */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "lib/calibrate/validation.h"
#include "memsim/backend.h"
#include "memsim/calibrate.h"
#include "memsim/scenario.h"

static const char *srcdir(void)
{
    const char *s = getenv("MEMSIM_SRCDIR");
    return s && s[0] ? s : MS_SRCDIR;
}

static char tmpdir[256];

static void make_tmpdir(void)
{
    snprintf(tmpdir, sizeof tmpdir, "/tmp/memsim-cal-XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(tmpdir));
}

static void remove_tmpdir(void)
{
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
    ck_assert_int_eq(system(cmd), 0);
}

static void load_device(const char *rel, ms_device_spec *s)
{
    char path[4096];
    ms_diag d = {0};
    snprintf(path, sizeof path, "%s/%s", srcdir(), rel);
    ck_assert_msg(ms_device_load(path, s, &d) == MS_OK, "%s: %s", rel, d.msg);
}

#define ASSERT_WITHIN(got, want, rel, what)                                                        \
    ck_assert_msg(fabs((got) - (want)) <= (rel)*fabs(want), "%s: got %.9g, want %.9g (%.3g%%)",    \
                  (what), (double)(got), (double)(want), 100 * fabs((got) - (want)) / fabs(want))

/* Every point of the base curve is a point of the calibrated table (the
 * sizes are powers of two) with the same y within rel. */
static void assert_curve_recovered(const ms_curve *base, const ms_curve *got, double rel,
                                   const char *what)
{
    ck_assert_msg(base->n > 0 && got->n > 0, "%s: empty curve", what);
    for (int i = 0; i < base->n; i++) {
        int j = 0;
        while (j < got->n && got->x[j] != base->x[i])
            j++;
        ck_assert_msg(j < got->n, "%s: no calibrated point at %g", what, base->x[i]);
        char label[128];
        snprintf(label, sizeof label, "%s at %g", what, base->x[i]);
        ASSERT_WITHIN(got->y[j], base->y[i], rel, label);
    }
}

static double or_one(double v)
{
    return v > 0 ? v : 1.0;
}

/* Calibrate the mock running base; its log lines in *log (to free). */
static void calibrate_mock(const ms_device_spec *base, ms_device_spec *out, ms_fit_residuals *res,
                           char **log)
{
    size_t n = 0;
    FILE *f = open_memstream(log, &n);
    ck_assert_ptr_nonnull(f);
    ms_diag d = {0};
    ms_calibrate_options opt = {.backend = "mock", .base = base, .log = f};
    ms_status st = ms_calibrate(&opt, out, res, &d);
    fclose(f);
    ck_assert_msg(st == MS_OK, "%s", d.msg);
}

/* The calibration of the mock measures the mock's own model: every fitted
 * parameter must come back within 1% of the device file the mock ran. */
static void round_trip_spec(const ms_device_spec *b)
{
    ms_device_spec base = *b, out;
    ms_fit_residuals res;
    char *log = NULL;
    calibrate_mock(&base, &out, &res, &log);
    free(log);
    const double tol = 0.01;
    for (int dt = 0; dt < MS_DTYPE_COUNT; dt++)
        if (base.gemm.max[dt] > 0)
            ASSERT_WITHIN(out.gemm.max[dt], base.gemm.max[dt], tol, ms_dtype_name((ms_dtype)dt));
    /* Both devices' files state the shape models (the round trip needs a
     * model to give back). */
    ck_assert(base.gemm.max[MS_DTYPE_BF16] > 0 && base.flash.max > 0);
    ASSERT_WITHIN(out.gemm.m_half, base.gemm.m_half, tol, "gemm.m_half");
    ASSERT_WITHIN(out.gemm.n_half, base.gemm.n_half, tol, "gemm.n_half");
    ASSERT_WITHIN(out.gemm.k_half, base.gemm.k_half, tol, "gemm.k_half");
    ASSERT_WITHIN(out.flash.max, base.flash.max, tol, "flash_attention.max");
    ASSERT_WITHIN(out.flash.seq_half, base.flash.seq_half, tol, "flash_attention.seq_half");
    ASSERT_WITHIN(out.flash.head_dim_half, base.flash.head_dim_half, tol,
                  "flash_attention.head_dim_half");
    ASSERT_WITHIN(out.launch_overhead_ns, base.launch_overhead_ns, tol, "launch_overhead");
    ASSERT_WITHIN(out.kernel_overhead_ns, base.kernel_overhead_ns, tol, "kernel_overhead");
    ASSERT_WITHIN(out.host_link_latency_ns, base.host_link_latency_ns, tol, "host_link_latency");
    ASSERT_WITHIN(out.intra_node_latency_ns, base.intra_node_latency_ns, tol, "intra_node_latency");
    ASSERT_WITHIN(out.inter_node_latency_ns, base.inter_node_latency_ns, tol, "inter_node_latency");
    ASSERT_WITHIN(out.overlap_compute_slowdown, base.overlap_compute_slowdown, tol,
                  "overlap.compute_slowdown");
    ASSERT_WITHIN(out.overlap_copy_slowdown, base.overlap_copy_slowdown, tol,
                  "overlap.copy_slowdown");
    for (int k = MS_COMM_ALLGATHER; k < MS_COMM_COUNT; k++)
        if (k != MS_COMM_RECV && k != MS_COMM_ALLREDUCE)
            ASSERT_WITHIN(or_one(out.collective_eff[k]), or_one(base.collective_eff[k]), tol,
                          "collective_efficiency");
    assert_curve_recovered(&base.hbm_eff, &out.hbm_eff, tol, "hbm_efficiency");
    assert_curve_recovered(&base.h2d_bw, &out.h2d_bw, tol, "h2d_bandwidth");
    assert_curve_recovered(&base.d2h_bw, &out.d2h_bw, tol, "d2h_bandwidth");
    if (base.intra_node_eff.n > 0)
        assert_curve_recovered(&base.intra_node_eff, &out.intra_node_eff, tol,
                               "intra_node_efficiency");
    if (base.inter_node_eff.n > 0)
        assert_curve_recovered(&base.inter_node_eff, &out.inter_node_eff, tol,
                               "inter_node_efficiency");
    /* The fits describe their own measurements closely. */
    ck_assert_msg(res.gemm >= 0 && res.gemm < tol, "gemm residual %g", res.gemm);
    ck_assert_msg(res.flash_attention >= 0 && res.flash_attention < tol, "flash residual %g",
                  res.flash_attention);
}

static void round_trip(const char *device_file, double copy_slowdown)
{
    ms_device_spec base;
    load_device(device_file, &base);
    if (copy_slowdown >= 0)
        base.overlap_copy_slowdown = copy_slowdown;
    round_trip_spec(&base);
}

/* The H100 file's only fitted GEMM figure is its FP8 ceiling, and its other
 * dtypes keep the FLOP-count curve.  The round trip needs a shape model for
 * every dtype it times, so bf16, fp16, fp32 and the fused attention take
 * the A100 file's (for the test only). */
static void h100_with_shape_models(ms_device_spec *base)
{
    ms_device_spec a100;
    load_device("scenarios/devices/h100-80gb.lua", base);
    load_device("scenarios/devices/a100-80gb.lua", &a100);
    ck_assert(base->gemm.max[MS_DTYPE_FP8] > 0 && base->peak_flops[MS_DTYPE_FP8] > 0);
    for (int dt = MS_DTYPE_FP32; dt <= MS_DTYPE_BF16; dt++)
        base->gemm.max[dt] = a100.gemm.max[dt];
    base->flash = a100.flash;
}

/* "GEMM: N compute-bound shapes" of a calibration's log. */
static size_t gemm_shapes_timed(const char *log)
{
    const char *line = strstr(log, "GEMM: ");
    size_t n = 0;
    ck_assert_msg(line != NULL && sscanf(line, "GEMM: %zu compute-bound", &n) == 1, "%s", log);
    return n;
}

START_TEST(calibrate_mock_round_trip_h100_fp8)
{
    ms_device_spec base, out;
    ms_fit_residuals res;
    h100_with_shape_models(&base);
    round_trip_spec(&base); /* gemm.fp8 back within 1%, with the rest */
    /* ... because FP8 GEMMs were timed: without an FP8 peak the grid has
     * fewer compute-bound shapes, and the ceiling is the base file's. */
    char *with = NULL, *without = NULL;
    calibrate_mock(&base, &out, &res, &with);
    base.peak_flops[MS_DTYPE_FP8] = 0;
    calibrate_mock(&base, &out, &res, &without);
    size_t n_with = gemm_shapes_timed(with), n_without = gemm_shapes_timed(without);
    ck_assert_msg(n_with > n_without, "FP8 GEMMs not timed: %zu shapes with an FP8 peak, %zu without",
                  n_with, n_without);
    ck_assert_double_eq(out.gemm.max[MS_DTYPE_FP8], base.gemm.max[MS_DTYPE_FP8]);
    free(with);
    free(without);
}
END_TEST

START_TEST(calibrate_mock_round_trip_a100)
{
    round_trip("scenarios/devices/a100-80gb.lua", -1);
}
END_TEST

/* No shipped file states a copy slowdown (none was measured on hardware):
 * the round trip sets one, a value for the test only, and must get it back
 * from a copy beside a GEMM on the mock. */
START_TEST(calibrate_mock_round_trip_copy_slowdown)
{
    round_trip("scenarios/devices/a100-80gb.lua", 0.3);
}
END_TEST

START_TEST(calibrate_mock_round_trip_910b)
{
    round_trip("scenarios/devices/ascend-910b.lua", -1);
}
END_TEST

/* What ms_device_write writes, ms_device_load reads back unchanged. */
START_TEST(device_file_write_load)
{
    ms_device_spec base, out;
    ms_fit_residuals res;
    ms_diag d = {0};
    load_device("scenarios/devices/a100-80gb.lua", &base);
    base.overlap_copy_slowdown = 0.3; /* so that the file states one */
    ms_calibrate_options opt = {.backend = "mock", .base = &base, .quick = true};
    ck_assert_msg(ms_calibrate(&opt, &out, &res, &d) == MS_OK, "%s", d.msg);
    ck_assert_double_gt(out.overlap_copy_slowdown, 0.29);
    make_tmpdir();
    char path[512];
    snprintf(path, sizeof path, "%s/dev.lua", tmpdir);
    ms_device_provenance prov = {.source = "test",
                                 .date = "2026-01-01T00:00:00Z",
                                 .device = "mock",
                                 .driver = "none",
                                 .command = "test"};
    ck_assert_msg(ms_device_write(path, &out, &prov, &res, &d) == MS_OK, "%s", d.msg);
    ms_device_spec back;
    ck_assert_msg(ms_device_load(path, &back, &d) == MS_OK, "%s", d.msg);
    ck_assert_str_eq(back.name, out.name);
    ck_assert(back.hbm_bytes == out.hbm_bytes);
    ASSERT_WITHIN(back.gemm.max[MS_DTYPE_BF16], out.gemm.max[MS_DTYPE_BF16], 1e-12, "gemm");
    ASSERT_WITHIN(back.flash.seq_half, out.flash.seq_half, 1e-12, "flash seq_half");
    ASSERT_WITHIN(back.overlap_compute_slowdown, out.overlap_compute_slowdown, 1e-12, "overlap");
    ASSERT_WITHIN(back.overlap_copy_slowdown, out.overlap_copy_slowdown, 1e-12, "copy overlap");
    ASSERT_WITHIN(back.launch_overhead_ns, out.launch_overhead_ns, 1e-9, "launch");
    ck_assert_int_eq(back.hbm_eff.n, out.hbm_eff.n);
    for (int i = 0; i < out.hbm_eff.n; i++)
        ASSERT_WITHIN(back.hbm_eff.y[i], out.hbm_eff.y[i], 1e-12, "hbm_eff");
    ck_assert_int_eq(back.intra_node_eff.n, out.intra_node_eff.n);
    ck_assert(back.intra_node_mesh == out.intra_node_mesh);
    /* The provenance is in the file for the reader. */
    FILE *f = fopen(path, "r");
    ck_assert_ptr_nonnull(f);
    char buf[65536];
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    buf[n] = 0;
    fclose(f);
    ck_assert_ptr_nonnull(strstr(buf, "provenance"));
    ck_assert_ptr_nonnull(strstr(buf, "residuals"));
    ck_assert_ptr_nonnull(strstr(buf, "2026-01-01T00:00:00Z"));
    /* A negative copy slowdown is refused, naming the field. */
    char *at = strstr(buf, "copy_slowdown = ");
    ck_assert_ptr_nonnull(at);
    at += strlen("copy_slowdown = ");
    size_t digits = strspn(at, "0123456789.e+-");
    char bad[65600];
    snprintf(bad, sizeof bad, "%.*s-0.5%s", (int)(at - buf), buf, at + digits);
    f = fopen(path, "w");
    ck_assert_ptr_nonnull(f);
    fputs(bad, f);
    fclose(f);
    ck_assert_int_eq(ms_device_load(path, &back, &d), MS_ERANGE);
    ck_assert_msg(strstr(d.msg, "overlap.copy_slowdown must be in [0, 10] (got -0.5)") != NULL,
                  "%s", d.msg);
    remove_tmpdir();
}
END_TEST

/* A backend this build lacks: the registry's error, naming it. */
START_TEST(calibrate_unknown_backend)
{
    ms_device_spec base, out;
    ms_fit_residuals res;
    ms_diag d = {0};
    load_device("scenarios/devices/h100-80gb.lua", &base);
    ms_calibrate_options opt = {.backend = "no-such-backend", .base = &base};
    ck_assert_int_ne(ms_calibrate(&opt, &out, &res, &d), MS_OK);
    ck_assert_msg(strstr(d.msg, "no-such-backend") != NULL, "%s", d.msg);
}
END_TEST

/* ---- validate ---------------------------------------------------------- */

static void write_file(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    ck_assert_ptr_nonnull(f);
    fputs(text, f);
    ck_assert_int_eq(fclose(f), 0);
}

/* A table in tmpdir whose rows use tests/data/cli/tiny-gpt.lua. */
static const char *tiny_table(const char *name, const char *header, const char *rows)
{
    static char path[512];
    char text[8192];
    snprintf(path, sizeof path, "%s/%s", tmpdir, name);
    snprintf(text, sizeof text, "%s\n%s", header, rows);
    /* Scenario paths are relative to the table: put the scenario beside it. */
    char cmd[8192];
    snprintf(cmd, sizeof cmd, "cp '%s/tests/data/cli/tiny-gpt.lua' '%s/tiny-gpt.lua'", srcdir(),
             tmpdir);
    ck_assert_int_eq(system(cmd), 0);
    write_file(path, text);
    return path;
}

static void expect_load_error(const char *header, const char *rows, const char *row_text,
                              const char *column)
{
    make_tmpdir();
    const char *path = tiny_table("t.csv", header, rows);
    ms_validation *v = (ms_validation *)1;
    ms_diag d = {0};
    ms_status st = ms_validation_load(&path, 1, &v, &d);
    ck_assert_int_ne(st, MS_OK);
    ck_assert_ptr_null(v);
    ck_assert_msg(strstr(d.msg, "t.csv") != NULL, "no table in \"%s\"", d.msg);
    ck_assert_msg(strstr(d.msg, row_text) != NULL, "\"%s\" lacks \"%s\"", d.msg, row_text);
    ck_assert_msg(strstr(d.msg, column) != NULL, "\"%s\" lacks \"%s\"", d.msg, column);
    remove_tmpdir();
}

START_TEST(validate_missing_column)
{
    expect_load_error("id,source,split,scenario,model.num_layers", "r1,src,test,tiny-gpt.lua,2\n",
                      "row 0", "measured_step_time_s");
    expect_load_error("id,source,split,model.num_layers,measured_step_time_s",
                      "r1,src,test,2,1.5\n", "row 0", "scenario");
}
END_TEST

START_TEST(validate_unknown_field)
{
    expect_load_error("id,source,split,scenario,model.no_such_field,measured_step_time_s",
                      "r1,src,test,tiny-gpt.lua,2,1.5\n", "row 1", "model.no_such_field");
}
END_TEST

START_TEST(validate_measured_not_positive)
{
    expect_load_error("id,source,split,scenario,measured_step_time_s",
                      "r1,src,test,tiny-gpt.lua,1.5\nr2,src,test,tiny-gpt.lua,0\n", "row 2",
                      "measured_step_time_s");
    expect_load_error("id,source,split,scenario,flops_formula,measured_tflops_per_device",
                      "r1,src,test,tiny-gpt.lua,model,-3\n", "row 1", "measured_tflops_per_device");
}
END_TEST

/* The memsim program exits non-zero on a bad table (and zero on a good one). */
START_TEST(validate_cli_exit_status)
{
    make_tmpdir();
    tiny_table("bad.csv", "id,source,split,scenario,measured_step_time_s",
               "r1,src,test,tiny-gpt.lua,-1\n");
    const char *b = getenv("MEMSIM_BUILDDIR");
    char cmd[2048];
    snprintf(cmd, sizeof cmd, "'%s/memsim' validate '%s/bad.csv' --quiet >/dev/null 2>&1",
             b && b[0] ? b : ".", tmpdir);
    int rc = system(cmd);
    ck_assert_msg(rc != -1 && WIFEXITED(rc) && WEXITSTATUS(rc) != 0, "exit %d", rc);
    remove_tmpdir();
}
END_TEST

/* The shipped tables load: every column a known field, every row a source
 * and a positive measurement, the scenarios found. */
START_TEST(shipped_tables_load)
{
    static const char *const names[] = {"validation/megatron-ptdp-a100.csv",
                                        "validation/korthikanti-a100.csv",
                                        "validation/mindspeed-910b.csv",
                                        "validation/nemo-h100-fp8.csv"};
    char paths[4][4096];
    const char *tables[4];
    for (int i = 0; i < 4; i++) {
        snprintf(paths[i], sizeof paths[i], "%s/%s", srcdir(), names[i]);
        tables[i] = paths[i];
    }
    ms_validation *v = NULL;
    ms_diag d = {0};
    ck_assert_msg(ms_validation_load(tables, 4, &v, &d) == MS_OK, "%s", d.msg);
    ck_assert_int_eq((int)v->n_rows, 10 + 8 + 6 + 9);
    size_t train = 0;
    for (size_t i = 0; i < v->n_rows; i++) {
        ck_assert_msg(strlen(v->rows[i].source) > 20, "row %s names no source", v->rows[i].id);
        train += v->rows[i].train;
    }
    ck_assert_int_eq((int)train, 5 + 4 + 3 + 4);
    ms_validation_free(v);
}
END_TEST

/* Run a table and hand back the validation (rows' predictions in it). */
static ms_validation *run_table(const char *path)
{
    ms_validation *v = NULL;
    ms_diag d = {0};
    ck_assert_msg(ms_validation_load(&path, 1, &v, &d) == MS_OK, "%s", d.msg);
    ck_assert_msg(ms_validation_run(v, NULL, &d) == MS_OK, "%s", d.msg);
    return v;
}

/* Three rows of tiny-gpt at hidden sizes h (two train, one test), each
 * with its measured step time. */
static const char *sizes_table(const int h[3], const double measured[3])
{
    char rows[1024];
    snprintf(rows, sizeof rows,
             "a,src,train,tiny-gpt.lua,%d,%.9g\nb,src,train,tiny-gpt.lua,%d,%.9g\n"
             "c,src,test,tiny-gpt.lua,%d,%.9g\n",
             h[0], measured[0], h[1], measured[1], h[2], measured[2]);
    return tiny_table("t.csv", "id,source,split,scenario,model.hidden_size,measured_step_time_s",
                      rows);
}

/* Fit params on the train rows, then run every row with them. */
static void fit_and_run(ms_validation *v, const char *const *params, size_t n)
{
    ms_diag d = {0};
    ck_assert_msg(ms_validation_fit(v, params, n, NULL, &d) == MS_OK, "%s", d.msg);
    ck_assert_msg(ms_validation_run(v, NULL, &d) == MS_OK, "%s", d.msg);
}

/* A row's error is its prediction against its measurement, and the
 * prediction moves with the row's own fields. */
START_TEST(validate_rows_predict)
{
    make_tmpdir();
    const char *path =
        tiny_table("t.csv", "id,source,split,scenario,model.num_layers,measured_step_time_s",
                   "two,src,test,tiny-gpt.lua,2,0.01\nfour,src,test,tiny-gpt.lua,4,"
                   "0.01\n");
    ms_validation *v = run_table(path);
    ck_assert_int_eq((int)v->n_rows, 2);
    for (size_t i = 0; i < v->n_rows; i++) {
        double e = 0;
        ck_assert_msg(val_row_error(&v->rows[i], &e), "%s", v->rows[i].error);
        ck_assert(v->rows[i].pred_time_s > 0);
        ASSERT_WITHIN(e, v->rows[i].pred_time_s / 0.01 - 1, 1e-9, "error");
    }
    /* Twice the layers: more time, less than three times as much. */
    double r = v->rows[1].pred_time_s / v->rows[0].pred_time_s;
    ck_assert_msg(r > 1.3 && r < 3, "4 layers / 2 layers = %g", r);
    ms_validation_free(v);
    remove_tmpdir();
}
END_TEST

/* Measurements made 25% slower than the model: fitting the GEMM efficiency
 * on the train rows slows the model down and the train rows come within
 * 2%; a held-out row moves closer too. */
START_TEST(validate_fit_recovers_scale)
{
    make_tmpdir();
    const int h[3] = {2048, 3072, 4096};
    const double unit[3] = {1, 1, 1};
    ms_validation *v = run_table(sizes_table(h, unit));
    double slow[3];
    for (int i = 0; i < 3; i++)
        slow[i] = v->rows[i].pred_time_s * 1.25;
    ms_validation_free(v);
    const char *path = sizes_table(h, slow);
    ms_diag d = {0};
    v = NULL;
    ck_assert_msg(ms_validation_load(&path, 1, &v, &d) == MS_OK, "%s", d.msg);
    const char *params[] = {"gemm.bf16"};
    fit_and_run(v, params, 1);
    ck_assert_int_eq((int)v->n_fit, 1);
    ms_device_spec a100;
    load_device("scenarios/devices/a100-80gb.lua", &a100);
    ck_assert_msg(v->fit[0].value < a100.gemm.max[MS_DTYPE_BF16], "fitted %g", v->fit[0].value);
    for (size_t i = 0; i < 3; i++) {
        double e = 0;
        ck_assert(val_row_error(&v->rows[i], &e));
        ck_assert_msg(fabs(e) < (i < 2 ? 0.02 : 0.05), "row %zu error %g", i, e);
    }
    ms_validation_free(v);
    remove_tmpdir();
}
END_TEST

/* A table's level is its largest value, and setting it scales every point:
 * the A100 file's hbm_efficiency runs 0.0570 ... 0.6265, so level 0.31325
 * halves each point and keeps the sizes. */
START_TEST(device_param_level_scales_the_table)
{
    ms_device_spec a100;
    load_device("scenarios/devices/a100-80gb.lua", &a100);
    const cal_param *p = cal_param_find("hbm_efficiency.level");
    ck_assert_ptr_nonnull(p);
    ASSERT_WITHIN(cal_param_get(p, &a100), 0.6265, 1e-12, "level from the file");
    ms_device_spec half = a100;
    cal_param_set(p, &half, 0.31325);
    ck_assert_int_eq(half.hbm_eff.n, 4);
    const double want[] = {0.0285, 0.1424, 0.2776, 0.31325};
    for (int i = 0; i < half.hbm_eff.n; i++) {
        ASSERT_WITHIN(half.hbm_eff.y[i], want[i], 1e-12, "scaled point");
        ck_assert(half.hbm_eff.x[i] == a100.hbm_eff.x[i]);
    }
    ASSERT_WITHIN(cal_param_get(p, &half), 0.31325, 1e-12, "level after");
    /* Other tables and scalars are left alone. */
    ck_assert(half.matmul_eff.y[0] == a100.matmul_eff.y[0]);
    ck_assert(half.hbm_bw == a100.hbm_bw);
}
END_TEST

/* Measurements made with the A100 memory-bound level at 0.44, where the
 * file says 0.6265: a fit of hbm_efficiency.level from the file's value
 * finds 0.44 within 1%, and the device file it writes holds the table
 * scaled by 0.44 / 0.6265. */
START_TEST(validate_fit_recovers_hbm_level)
{
    make_tmpdir();
    const int h[3] = {1024, 2048, 4096};
    const double unit[3] = {1, 1, 1};
    const char *path = sizes_table(h, unit);
    ms_validation *v = NULL;
    ms_diag d = {0};
    ck_assert_msg(ms_validation_load(&path, 1, &v, &d) == MS_OK, "%s", d.msg);
    const char *params[] = {"hbm_efficiency.level"};
    v->fit = calloc(1, sizeof *v->fit);
    ck_assert_ptr_nonnull(v->fit);
    v->fit[0] = (val_fit_param){.p = cal_param_find(params[0]), .value = 0.44};
    v->n_fit = 1;
    ck_assert_msg(ms_validation_run(v, NULL, &d) == MS_OK, "%s", d.msg);
    double slow[3];
    for (int i = 0; i < 3; i++)
        slow[i] = v->rows[i].pred_time_s;
    ms_validation_free(v);
    v = run_table(sizes_table(h, slow));
    /* At the file's level the rows are too fast: memory-bound kernels count. */
    for (int i = 0; i < 3; i++)
        ck_assert_msg(v->rows[i].pred_time_s < 0.97 * slow[i], "row %d: %g against %g", i,
                      v->rows[i].pred_time_s, slow[i]);
    fit_and_run(v, params, 1);
    ASSERT_WITHIN(v->fit[0].value, 0.44, 0.01, "fitted level");
    ck_assert_msg(ms_validation_write_devices(v, tmpdir, "test", &d) == MS_OK, "%s", d.msg);
    char dev[512];
    snprintf(dev, sizeof dev, "%s/a100-80gb.lua", tmpdir);
    ms_device_spec back;
    ck_assert_msg(ms_device_load(dev, &back, &d) == MS_OK, "%s", d.msg);
    ASSERT_WITHIN(back.hbm_eff.y[back.hbm_eff.n - 1], 0.44, 0.01, "written table's top");
    ASSERT_WITHIN(back.hbm_eff.y[0], 0.0570 * 0.44 / 0.6265, 0.01, "written table's first point");
    ms_validation_free(v);
    remove_tmpdir();
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("calibrate");
    TCase *tc = tcase_create("calibrate");
    tcase_add_test(tc, calibrate_mock_round_trip_a100);
    tcase_add_test(tc, calibrate_mock_round_trip_910b);
    tcase_add_test(tc, calibrate_mock_round_trip_copy_slowdown);
    tcase_add_test(tc, calibrate_mock_round_trip_h100_fp8);
    tcase_add_test(tc, device_file_write_load);
    tcase_add_test(tc, calibrate_unknown_backend);
    suite_add_tcase(s, tc);
    tc = tcase_create("validate");
    tcase_set_timeout(tc, 600);
    tcase_add_test(tc, validate_missing_column);
    tcase_add_test(tc, validate_unknown_field);
    tcase_add_test(tc, validate_measured_not_positive);
    tcase_add_test(tc, validate_cli_exit_status);
    tcase_add_test(tc, shipped_tables_load);
    tcase_add_test(tc, validate_rows_predict);
    tcase_add_test(tc, validate_fit_recovers_scale);
    tcase_add_test(tc, device_param_level_scales_the_table);
    tcase_add_test(tc, validate_fit_recovers_hbm_level);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
