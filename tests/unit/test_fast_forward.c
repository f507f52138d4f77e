/* Steady-state fast-forward (lib/run/fast_forward.c): the state as bytes,
 * the record's repeated rows, the engine's shift, and whole runs whose
 * results must be the same with and without it. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "memsim/report.h"
#include "memsim/run.h"
#include "memsim/scenario.h"
#include "sim/sim.h"
#include "test_device_spec.h"
#include "test_paths.h"
#include "test_rows.h"

#define TINY "tests/data/cli/tiny-gpt.lua"

/* ---- the state as bytes -------------------------------------------------- */

START_TEST(state_sigs_are_equal_only_byte_for_byte)
{
    ms_state_sig a = {0}, b = {0};
    ck_assert_int_eq(ms_state_sig_u64(&a, 7), MS_OK);
    ck_assert_int_eq(ms_state_sig_u64(&b, 7), MS_OK);
    ck_assert(ms_state_sig_equal(&a, &b));
    ck_assert_int_eq(ms_state_sig_u64(&b, 0), MS_OK);
    ck_assert(!ms_state_sig_equal(&a, &b)); /* a prefix is not equal */
    ck_assert_int_eq(ms_state_sig_reset(&b), MS_OK);
    ck_assert_int_eq(ms_state_sig_u64(&b, 8), MS_OK);
    ck_assert(!ms_state_sig_equal(&a, &b));
    /* A writing that failed proves nothing, not even against itself. */
    a.st = MS_ENOMEM;
    ck_assert(!ms_state_sig_equal(&a, &a));
    ck_assert_int_eq(ms_state_sig_u64(&a, 1), MS_ENOMEM);
    ck_assert_int_eq(ms_state_sig_put(NULL, "x", 1), MS_EINVAL);
    ck_assert_int_eq(ms_state_sig_put(&b, NULL, 1), MS_EINVAL);
    ms_state_sig_free(&a);
    ms_state_sig_free(&b);
}
END_TEST

/* A moment written over the last one is compared with it byte by byte as
 * it goes: the same bytes are the same moment; a byte changed, one more or
 * one fewer, or a failed writing on either side is not. */
START_TEST(state_sigs_rewritten_compare_as_they_go)
{
    ms_state_sig s = {0};
    ck_assert(!ms_state_sig_same_as_before(&s)); /* nothing rewritten yet */
    ms_state_sig_u64(&s, 7);
    ms_state_sig_u64(&s, 9);
    ck_assert_int_eq(ms_state_sig_rewrite(&s), MS_OK);
    ms_state_sig_u64(&s, 7);
    ms_state_sig_u64(&s, 9);
    ck_assert(ms_state_sig_same_as_before(&s));
    ck_assert_uint_eq(s.n, 16);
    ms_state_sig_rewrite(&s);
    ms_state_sig_u64(&s, 7);
    ms_state_sig_u64(&s, 8); /* 9 -> 8 */
    ck_assert(!ms_state_sig_same_as_before(&s));
    ms_state_sig_rewrite(&s); /* against 7, 8 now */
    ms_state_sig_u64(&s, 7);
    ck_assert(!ms_state_sig_same_as_before(&s)); /* one fewer */
    ms_state_sig_rewrite(&s); /* against 7 */
    ms_state_sig_u64(&s, 7);
    ms_state_sig_u64(&s, 8);
    ck_assert(!ms_state_sig_same_as_before(&s)); /* one more */
    ms_state_sig_rewrite(&s); /* against 7, 8 */
    ms_state_sig_u64(&s, 7);
    ms_state_sig_u64(&s, 8);
    ck_assert(ms_state_sig_same_as_before(&s));
    s.st = MS_ENOMEM; /* this writing failed */
    ck_assert(!ms_state_sig_same_as_before(&s));
    ms_state_sig_rewrite(&s); /* against a failed writing */
    ck_assert(!ms_state_sig_same_as_before(&s));
    ck_assert_int_eq(ms_state_sig_rewrite(NULL), MS_EINVAL);
    ck_assert(!ms_state_sig_same_as_before(NULL));
    ms_state_sig_free(&s);
}
END_TEST

/* A check compares without keeping: the same bytes are the same moment and
 * leave the last one in place; the first byte that differs ends the writing
 * (every later put answers MS_EMISMATCH) and proves nothing. */
START_TEST(state_sig_checked_stops_at_first_difference)
{
    ms_state_sig s = {0};
    ms_state_sig_u64(&s, 7);
    ms_state_sig_u64(&s, 9);
    ck_assert_int_eq(ms_state_sig_check(&s), MS_OK);
    ck_assert_int_eq(ms_state_sig_u64(&s, 7), MS_OK);
    ck_assert_int_eq(ms_state_sig_u64(&s, 9), MS_OK);
    ck_assert(ms_state_sig_same_as_before(&s));
    ck_assert_int_eq(ms_state_sig_check(&s), MS_OK); /* against 7, 9 still */
    ck_assert_int_eq(ms_state_sig_u64(&s, 8), MS_EMISMATCH);
    ck_assert_int_eq(ms_state_sig_u64(&s, 9), MS_EMISMATCH);
    ck_assert(!ms_state_sig_same_as_before(&s));
    uint64_t first;
    memcpy(&first, s.bytes, sizeof first);
    ck_assert_uint_eq(first, 7); /* the 8 was never written */
    ck_assert_int_eq(ms_state_sig_check(&s), MS_OK);
    ms_state_sig_u64(&s, 7);
    ck_assert_int_eq(ms_state_sig_u64(&s, 9), MS_OK);
    ck_assert_int_eq(ms_state_sig_u64(&s, 1), MS_EMISMATCH); /* one more */
    ck_assert(!ms_state_sig_same_as_before(&s));
    ck_assert_int_eq(ms_state_sig_check(NULL), MS_EINVAL);
    ms_state_sig_free(&s);
}
END_TEST

/* ---- the record ------------------------------------------------------------ */

START_TEST(record_repeats_the_rows_of_one_step)
{
    ms_run_record *r = NULL;
    ck_assert_int_eq(ms_record_create(&r), MS_OK);
    for (int step = 0; step < 2; step++)
        for (int i = 0; i < 3; i++) {
            ms_op_row op = {.step = step, .op = (uint32_t)i, .start_ns = 10 * i};
            ms_mem_row mem = {.step = step, .addr = 4096u * (uint64_t)i};
            ck_assert_int_eq(ms_record_add_op(r, &op), MS_OK);
            ck_assert_int_eq(ms_record_add_mem(r, &mem), MS_OK);
        }
    ms_tensor_row t = {.step = 1, .tensor = 5, .decision = "swap"};
    ck_assert_int_eq(ms_record_add_tensor(r, &t), MS_OK);
    ck_assert_int_eq(ms_record_repeat_step(r, 1, 2), MS_OK);
    /* 3 rows a step: steps 0 and 1, then step 1's again as step 2. */
    ck_assert_uint_eq(ms_record_n_ops(r), 9);
    ck_assert_uint_eq(ms_record_n_mem(r), 9);
    ck_assert_uint_eq(ms_record_n_tensors(r), 2);
    for (size_t i = 6; i < 9; i++) {
        ck_assert_int_eq(ms_record_op(r, i)->step, 2);
        ck_assert_uint_eq(ms_record_op(r, i)->op, i - 6);
        ck_assert_int_eq(ms_record_op(r, i)->start_ns, 10 * (int64_t)(i - 6));
        ck_assert_uint_eq(ms_record_mem(r, i)->addr, 4096 * (i - 6));
    }
    ck_assert_int_eq(ms_record_tensor(r, 1)->step, 2);
    ck_assert_str_eq(ms_record_tensor(r, 1)->decision, "swap");
    ck_assert_int_eq(ms_record_repeat_step(r, 2, 2), MS_EINVAL);
    ck_assert_int_eq(ms_record_repeat_step(NULL, 1, 2), MS_EINVAL);
    ms_record_free(r);
}
END_TEST

/* ---- the engine ------------------------------------------------------------ */

static ms_status write_engine(ms_sim *sim, ms_state_sig *sig)
{
    ms_state_sig_reset(sig);
    return sim_state_write(sim, sig);
}

/* Work in flight is no quiet moment; once done, the shift moves the clock
 * and every time held with it, so the state relative to the clock is the
 * same bytes. */
START_TEST(engine_state_is_quiet_only_without_work_and_shifts_whole)
{
    ms_device_spec spec = spec_base();
    ms_sim *sim = NULL;
    ms_simdev *dev = NULL;
    ms_simstream *s = NULL;
    ck_assert_int_eq(sim_create(&sim), MS_OK);
    ck_assert_int_eq(sim_dev_create(sim, &spec, 0, &dev), MS_OK);
    ck_assert_int_eq(sim_stream_create(dev, 0, &s), MS_OK);
    ms_kernel k = {.name = "k", .cls = MS_KC_MATMUL, .flops = 1e12, .dtype = MS_DTYPE_BF16};
    ck_assert_int_eq(sim_stream_launch_timed(s, &k, 5000, 0, 1), MS_OK);
    ms_state_sig before = {0}, after = {0};
    ck_assert_int_eq(write_engine(sim, &before), MS_EAGAIN);
    ck_assert_int_eq(sim_run(sim), MS_OK);
    ck_assert_int_eq(write_engine(sim, &before), MS_OK);
    int64_t t0 = 0, t1 = 0;
    sim_now(sim, &t0);
    ck_assert_int_eq(sim_state_shift(sim, 1000000), MS_OK);
    sim_now(sim, &t1);
    ck_assert_int_eq(t1 - t0, 1000000);
    ck_assert_int_eq(write_engine(sim, &after), MS_OK);
    ck_assert(ms_state_sig_equal(&before, &after));
    ck_assert_int_eq(sim_state_shift(sim, -1), MS_EINVAL);
    ms_state_sig_free(&before);
    ms_state_sig_free(&after);
    sim_stream_destroy(s);
    sim_dev_destroy(dev);
    sim_destroy(sim);
}
END_TEST

/* ---- whole runs ---------------------------------------------------------- */

typedef struct ran {
    const ms_scenario *sc;
    ms_run *run;
} ran;

static ran run_tiny(const char *policy, bool ff, const char *const *sets, size_t n_sets)
{
    char path[4096], pol[4096];
    snprintf(path, sizeof path, "%s/%s", srcdir(), TINY);
    ran out = {0};
    ms_diag d = {0};
    ck_assert_msg(ms_scenario_load(path, sets, n_sets, &out.sc, &d) == MS_OK, "%s", d.msg);
    if (policy != NULL && strchr(policy, '/') != NULL) {
        snprintf(pol, sizeof pol, "%s/%s", srcdir(), policy);
        policy = pol;
    }
    ms_run_options opt = {
        .policy = policy, .record = true, .no_fast_forward = !ff, .quiet_policy = true};
    ck_assert_msg(ms_run_execute(out.sc, &opt, &out.run, &d) == MS_OK, "%s", d.msg);
    return out;
}

static void ran_free(ran *r)
{
    ms_run_free(r->run);
    ms_scenario_free(r->sc);
}

static void assert_same_records(const ms_run_record *a, const ms_run_record *b)
{
    ck_assert_uint_eq(ms_record_n_ops(a), ms_record_n_ops(b));
    ck_assert_uint_eq(ms_record_n_mem(a), ms_record_n_mem(b));
    ck_assert_uint_eq(ms_record_n_tensors(a), ms_record_n_tensors(b));
    ck_assert_uint_eq(ms_record_n_segments(a), ms_record_n_segments(b));
    for (size_t i = 0; i < ms_record_n_ops(a); i++)
        ck_assert_msg(same_op_row(ms_record_op(a, i), ms_record_op(b, i)), "op row %zu", i);
    for (size_t i = 0; i < ms_record_n_mem(a); i++)
        ck_assert_msg(same_mem_row(ms_record_mem(a, i), ms_record_mem(b, i)), "memory row %zu",
                      i);
    for (size_t i = 0; i < ms_record_n_segments(a); i++)
        ck_assert_msg(same_segment_row(ms_record_segment(a, i), ms_record_segment(b, i)),
                      "segment row %zu", i);
}

static void assert_same_summaries(const ms_run *a, const ms_run *b)
{
    size_t na = 0, nb = 0;
    const ms_run_summary *sa = ms_run_summaries(a, &na), *sb = ms_run_summaries(b, &nb);
    ck_assert_uint_eq(na, nb);
    for (size_t i = 0; i < na; i++)
        ck_assert_msg(memcmp(&sa[i], &sb[i], sizeof *sa) == 0, "summary of stage %zu", i);
}

/* The tiny model's cache settles after step 1 (step 0 fills it, step 1 may
 * still reshape it); from then on every step repeats, and 8 steps need 3 or
 * 4 simulated.  Whatever was skipped, every figure and row is the same. */
static void check_same_with_and_without(const char *policy, const char *const *sets, size_t n,
                                        int min_skipped, int max_skipped)
{
    ran on = run_tiny(policy, true, sets, n), off = run_tiny(policy, false, sets, n);
    int skipped = ms_run_notes_get(on.run)->fast_forwarded_steps;
    ck_assert_int_ge(skipped, min_skipped);
    ck_assert_int_le(skipped, max_skipped);
    ck_assert_int_eq(ms_run_notes_get(off.run)->fast_forwarded_steps, 0);
    assert_same_summaries(on.run, off.run);
    assert_same_records(ms_run_record_get(on.run), ms_run_record_get(off.run));
    ran_free(&on);
    ran_free(&off);
}

START_TEST(steady_steps_are_repeated_not_simulated)
{
    static const char *const sets[] = {"steps=8"};
    check_same_with_and_without(NULL, sets, 1, 4, 6);
    check_same_with_and_without("full_recompute", sets, 1, 4, 6);
}
END_TEST

START_TEST(pipeline_steps_are_repeated_not_simulated)
{
    static const char *const sets[] = {"steps=8", "parallel.world_size=4",
                                       "parallel.pipeline_model_parallel_size=2",
                                       "parallel.global_batch_size=8", "model.num_layers=4"};
    check_same_with_and_without(NULL, sets, 5, 4, 6);
}
END_TEST

/* A plan that changes every step is simulated every step. */
START_TEST(changing_plans_are_simulated)
{
    static const char *const sets[] = {"steps=6"};
    check_same_with_and_without("tests/data/policies/alternate.lua", sets, 1, 0, 0);
}
END_TEST

/* "last" keeps the last step's rows: a repeated last step's are the same. */
START_TEST(last_step_detail_is_the_same_when_repeated)
{
    static const char *const sets[] = {"steps=7", "report.detail=last"};
    check_same_with_and_without(NULL, sets, 2, 3, 5);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("fast_forward");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, state_sigs_are_equal_only_byte_for_byte);
    tcase_add_test(tc, state_sigs_rewritten_compare_as_they_go);
    tcase_add_test(tc, state_sig_checked_stops_at_first_difference);
    tcase_add_test(tc, record_repeats_the_rows_of_one_step);
    tcase_add_test(tc, engine_state_is_quiet_only_without_work_and_shifts_whole);
    tcase_add_test(tc, steady_steps_are_repeated_not_simulated);
    tcase_add_test(tc, pipeline_steps_are_repeated_not_simulated);
    tcase_add_test(tc, changing_plans_are_simulated);
    tcase_add_test(tc, last_step_detail_is_the_same_when_repeated);
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
