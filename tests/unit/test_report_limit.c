/* Reports sized for the step: report.max_bytes as a scenario key, the
 * estimate of the detail before it is written, the run keeping the last
 * step (or none) when every step's would be over the limit, and the
 * progress a run reports as it goes. */
#include <check.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "memsim/report.h"
#include "memsim/run.h"
#include "memsim/scenario.h"
#include "test_paths.h"
#include "test_rows.h"

#define TINY "tests/data/cli/tiny-gpt.lua"

static ms_status load(const char *file, const char *const *sets, size_t n, const ms_scenario **sc,
                      ms_diag *d)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", srcdir(), file);
    return ms_scenario_load(path, sets, n, sc, d);
}

static uint64_t max_bytes_of(const char *set)
{
    const ms_scenario *sc = NULL;
    ms_diag d = {0};
    const char *sets[] = {set};
    ck_assert_msg(load(TINY, sets, set ? 1 : 0, &sc, &d) == MS_OK, "%s: %s", set, d.msg);
    uint64_t v = sc->report_max_bytes;
    ms_scenario_free(sc);
    return v;
}

/* ---- the key ------------------------------------------------------------- */

START_TEST(max_bytes_takes_sizes_with_units)
{
    ck_assert_uint_eq(max_bytes_of(NULL), MS_REPORT_MAX_BYTES_DEFAULT);
    ck_assert_uint_eq(MS_REPORT_MAX_BYTES_DEFAULT, 512ull << 20);
    /* Digits are a number, as in the file; the rest strings. */
    ck_assert_uint_eq(max_bytes_of("report.max_bytes=1000"), 1000);
    ck_assert_uint_eq(max_bytes_of("report.max_bytes=1000B"), 1000);
    ck_assert_uint_eq(max_bytes_of("report.max_bytes=512MiB"), 512ull << 20);
    ck_assert_uint_eq(max_bytes_of("report.max_bytes=2GB"), 2000000000ull);
    ck_assert_uint_eq(max_bytes_of("report.max_bytes=1.5kib"), 1536);
    ck_assert_uint_eq(max_bytes_of("report.max_bytes=3TiB"), 3ull << 40);
    ck_assert_uint_eq(max_bytes_of("report.max_bytes=unlimited"), 0);
    ck_assert_uint_eq(max_bytes_of("report.max_bytes=0"), 0);
}
END_TEST

START_TEST(max_bytes_refuses_what_is_no_size)
{
    static const char *const bad[] = {"lots", "-5",  "2e3", "12 MB",          "",   "1.5.2GB",
                                      "0x10", "5PB", "inf", "99999999999TiB", "MiB"};
    const char *set = NULL;
    char buf[64];
    snprintf(buf, sizeof buf, "report.max_bytes=%s", bad[_i]);
    set = buf;
    const ms_scenario *sc = NULL;
    ms_diag d = {0};
    ck_assert_int_ne(load(TINY, &set, 1, &sc, &d), MS_OK);
    ck_assert_ptr_null(sc);
    ck_assert_msg(strstr(d.msg, "tiny-gpt.lua: field 'report.max_bytes' must be a byte count") !=
                      NULL,
                  "%s: %s", bad[_i], d.msg);
}
END_TEST

/* ---- the record and its estimate ------------------------------------------- */

static void add_op(ms_run_record *r, int step)
{
    ms_op_row row = {.step = step, .tensor = UINT32_MAX};
    ck_assert_int_eq(ms_record_add_op(r, &row), MS_OK);
}

START_TEST(clear_steps_before_keeps_setup_and_later_steps)
{
    ms_run_record *r = NULL;
    ck_assert_int_eq(ms_record_create(&r), MS_OK);
    for (int step = -1; step < 4; step++)
        add_op(r, step);
    ck_assert_int_eq(ms_record_clear_steps_before(r, 2), MS_OK);
    ck_assert_uint_eq(ms_record_n_ops(r), 3);
    ck_assert_int_eq(ms_record_op(r, 0)->step, -1);
    ck_assert_int_eq(ms_record_op(r, 1)->step, 2);
    ck_assert_int_eq(ms_record_op(r, 2)->step, 3);
    ck_assert_int_eq(ms_record_clear_steps_before(NULL, 1), MS_EINVAL);
    ms_record_free(r);
}
END_TEST

/* The estimate grows with every row and the devices' plots, and is 0 for
 * no record. */
START_TEST(estimate_counts_rows_and_devices)
{
    ms_run_record *r = NULL;
    ck_assert_int_eq(ms_record_create(&r), MS_OK);
    ck_assert_uint_eq(ms_report_detail_bytes(NULL, 4), 0);
    uint64_t empty = ms_report_detail_bytes(r, 1);
    ck_assert_uint_gt(ms_report_detail_bytes(r, 2), empty);
    add_op(r, 0);
    uint64_t one = ms_report_detail_bytes(r, 1);
    ck_assert_uint_gt(one, empty);
    ms_mem_row m = {.step = 0, .tensor = UINT32_MAX};
    ck_assert_int_eq(ms_record_add_mem(r, &m), MS_OK);
    ck_assert_uint_gt(ms_report_detail_bytes(r, 1), one);
    ms_record_free(r);
}
END_TEST

/* ---- a run against the limit ------------------------------------------------ */

typedef struct seen {
    ms_run_progress p[32];
    int n;
} seen;

static void remember(void *user, const ms_run_progress *p)
{
    seen *s = user;
    if (s->n < 32)
        s->p[s->n++] = *p;
}

typedef struct tiny_run {
    const ms_scenario *sc;
    ms_run *run;
    seen progress;
} tiny_run;

static void run_tiny(const char *const *sets, size_t n, tiny_run *t)
{
    ms_diag d = {0};
    memset(t, 0, sizeof *t);
    ck_assert_msg(load(TINY, sets, n, &t->sc, &d) == MS_OK, "%s", d.msg);
    ms_run_options opt = {.record = true, .progress = remember, .progress_user = &t->progress};
    ck_assert_msg(ms_run_execute(t->sc, &opt, &t->run, &d) == MS_OK, "%s", d.msg);
}

static void free_tiny(tiny_run *t)
{
    ms_run_free(t->run);
    ms_scenario_free(t->sc);
}

static const ms_run_detail *detail_of(const tiny_run *t)
{
    return &ms_run_notes_get(t->run)->detail;
}

/* Every row of the record is of setup or of `step`. */
static void assert_rows_of_step(const ms_run_record *rec, int step)
{
    size_t n = ms_record_n_ops(rec);
    ck_assert_uint_gt(n, 10);
    for (size_t i = 0; i < n; i++) {
        int s = ms_record_op(rec, i)->step;
        ck_assert_msg(s < 0 || s == step, "op row %zu is of step %d", i, s);
    }
    for (size_t i = 0; i < ms_record_n_mem(rec); i++) {
        int s = ms_record_mem(rec, i)->step;
        ck_assert_msg(s < 0 || s == step, "memory row %zu is of step %d", i, s);
    }
}

/* Unlimited: every step, and the estimate is what the record holds. */
START_TEST(unlimited_keeps_every_step)
{
    const char *sets[] = {"report.max_bytes=unlimited"};
    tiny_run t;
    run_tiny(sets, 1, &t);
    const ms_run_detail *dt = detail_of(&t);
    ck_assert_int_eq(dt->requested, MS_DETAIL_ALL);
    ck_assert_int_eq(dt->kept, MS_DETAIL_ALL);
    ck_assert(!dt->limited);
    ck_assert_int_eq(dt->last_step, 2);
    const ms_run_record *rec = ms_run_record_get(t.run);
    ck_assert_uint_eq(dt->requested_bytes, ms_report_detail_bytes(rec, 1));
    ck_assert_int_eq(ms_record_op(rec, ms_record_n_ops(rec) - 1)->step, 2);
    bool step0 = false;
    for (size_t i = 0; i < ms_record_n_ops(rec); i++)
        step0 |= ms_record_op(rec, i)->step == 0;
    ck_assert(step0);
    free_tiny(&t);
}
END_TEST

/* Between the last step's estimate and every step's: the last step, as
 * report.detail = "last" keeps it. */
START_TEST(over_the_limit_all_keeps_the_last_step)
{
    tiny_run all, last;
    const char *unlimited[] = {"report.max_bytes=0"};
    run_tiny(unlimited, 1, &all);
    uint64_t every = detail_of(&all)->requested_bytes;
    const char *last_sets[] = {"report.detail=last"};
    run_tiny(last_sets, 1, &last);
    uint64_t one = detail_of(&last)->last_bytes;
    ck_assert_uint_lt(one, every);
    char set[64];
    snprintf(set, sizeof set, "report.max_bytes=%llu", (unsigned long long)(one + every) / 2);
    const char *sets[] = {set};
    tiny_run t;
    run_tiny(sets, 1, &t);
    const ms_run_detail *dt = detail_of(&t);
    ck_assert_int_eq(dt->kept, MS_DETAIL_LAST);
    ck_assert(dt->limited);
    ck_assert_uint_eq(dt->requested_bytes, every);
    ck_assert_uint_eq(dt->last_bytes, one);
    ck_assert_uint_gt(dt->requested_bytes, dt->max_bytes);
    ck_assert_int_eq(dt->last_step, 2);
    const ms_run_record *rec = ms_run_record_get(t.run), *lrec = ms_run_record_get(last.run);
    assert_rows_of_step(rec, 2);
    ck_assert_uint_eq(ms_record_n_ops(rec), ms_record_n_ops(lrec));
    ck_assert_uint_eq(ms_record_n_mem(rec), ms_record_n_mem(lrec));
    for (size_t i = 0; i < ms_record_n_mem(rec); i++)
        ck_assert_msg(same_mem_row(ms_record_mem(rec, i), ms_record_mem(lrec, i)),
                      "memory row %zu differs from report.detail=last's", i);
    free_tiny(&t);
    free_tiny(&all);
    free_tiny(&last);
}
END_TEST

/* Under even the last step's estimate: no detail is to be written, but the
 * record stays for an OOM report or a snapshot. */
START_TEST(over_the_limit_even_for_one_step_keeps_none)
{
    const char *sets[] = {"report.max_bytes=1KiB"};
    tiny_run t;
    run_tiny(sets, 1, &t);
    const ms_run_detail *dt = detail_of(&t);
    ck_assert_int_eq(dt->kept, MS_DETAIL_NONE);
    ck_assert(dt->limited);
    ck_assert_uint_gt(dt->last_bytes, 1024);
    ck_assert_uint_gt(dt->requested_bytes, dt->last_bytes);
    ck_assert_ptr_nonnull(ms_run_record_get(t.run));
    assert_rows_of_step(ms_run_record_get(t.run), 2);
    free_tiny(&t);

    const char *last_sets[] = {"report.max_bytes=1KiB", "report.detail=last"};
    run_tiny(last_sets, 2, &t);
    dt = detail_of(&t);
    ck_assert_int_eq(dt->requested, MS_DETAIL_LAST);
    ck_assert_int_eq(dt->kept, MS_DETAIL_NONE);
    ck_assert(dt->limited);
    ck_assert_uint_eq(dt->requested_bytes, dt->last_bytes);
    free_tiny(&t);
}
END_TEST

static uint64_t folder_bytes(const char *dir)
{
    DIR *d = opendir(dir);
    ck_assert_ptr_nonnull(d);
    uint64_t sum = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        char path[4400];
        struct stat st;
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        if (strcmp(e->d_name, "summary.csv") != 0 && stat(path, &st) == 0 && S_ISREG(st.st_mode))
            sum += (uint64_t)st.st_size;
    }
    closedir(d);
    return sum;
}

static void remove_folder(const char *dir)
{
    ck_assert_int_eq(ms_report_remove_tree(dir), MS_OK);
}

/* The estimate is of the files written: on this small model (short op
 * names, plots at their smallest) it errs on the large side, never far
 * below. */
START_TEST(estimate_is_near_the_files_written)
{
    const char *sets[] = {"report.max_bytes=0"};
    tiny_run t;
    run_tiny(sets, 1, &t);
    char dir[] = "/tmp/memsim-limit-XXXXXX";
    ck_assert_ptr_nonnull(mkdtemp(dir));
    size_t n = 0, nv = 0;
    const ms_run_summary *s = ms_run_summaries(t.run, &n);
    const ms_program_view *views = ms_run_program_views(t.run, &nv);
    ms_diag d = {0};
    ck_assert_msg(ms_report_write_run(dir, s, n, ms_run_record_get(t.run), views, nv, NULL, &d) ==
                      MS_OK,
                  "%s", d.msg);
    double ratio = (double)detail_of(&t)->requested_bytes / (double)folder_bytes(dir);
    ck_assert_msg(ratio > 0.95 && ratio < 1.6, "estimate / written = %.3f", ratio);
    remove_folder(dir);
    free_tiny(&t);
}
END_TEST

/* The setup, each step planned then simulated, then the end, in order.
 * tiny-gpt's cache settles in its first step, so the third step starts
 * from the state the second did and is replayed (fast-forward). */
START_TEST(progress_follows_the_steps)
{
    tiny_run t;
    run_tiny(NULL, 0, &t);
    ck_assert_int_eq(t.progress.n, 8);
    ck_assert_int_eq(t.progress.p[0].phase, MS_RUN_SETUP);
    for (int i = 0; i < 6; i++) {
        const ms_run_progress *p = &t.progress.p[1 + i];
        ms_run_phase run = i == 5 ? MS_RUN_REPEATING : MS_RUN_SIMULATING;
        ck_assert_int_eq(p->phase, i % 2 ? run : MS_RUN_PLANNING);
        ck_assert_int_eq(p->step, i / 2);
        ck_assert_int_eq(p->steps, 3);
        ck_assert_int_eq(p->repeated, 0);
    }
    ck_assert_int_eq(t.progress.p[7].phase, MS_RUN_DONE);
    ck_assert_int_eq(t.progress.p[7].step, 3);
    ck_assert_int_eq(t.progress.p[7].repeated, 1);
    free_tiny(&t);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("report_limit");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, max_bytes_takes_sizes_with_units);
    tcase_add_loop_test(tc, max_bytes_refuses_what_is_no_size, 0, 11);
    tcase_add_test(tc, clear_steps_before_keeps_setup_and_later_steps);
    tcase_add_test(tc, estimate_counts_rows_and_devices);
    tcase_add_test(tc, unlimited_keeps_every_step);
    tcase_add_test(tc, over_the_limit_all_keeps_the_last_step);
    tcase_add_test(tc, over_the_limit_even_for_one_step_keeps_none);
    tcase_add_test(tc, estimate_is_near_the_files_written);
    tcase_add_test(tc, progress_follows_the_steps);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
