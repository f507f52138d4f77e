/* The data check (memsim run --verify) on the mock's functional mode: the
 * shipped swap and recompute schedules carry every byte back, a
 * deliberately broken schedule is caught with the tensor and the op named,
 * and a check on a backend that carries no data is refused. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "memsim/run.h"
#include "memsim/scenario.h"

#include "test_paths.h"

typedef struct verified_run {
    ms_status st;
    ms_diag d;
    ms_run_summary summary; /* stage 0's */
    size_t stages;
    ms_run_notes notes;
} verified_run;

static verified_run run_checked(const char *scenario, const char *policy, const char *const *sets,
                                size_t n_sets, ms_exec_fault fault)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", srcdir(), scenario);
    verified_run out = {0};
    const ms_scenario *sc = NULL;
    ms_status st = ms_scenario_load(path, sets, n_sets, &sc, &out.d);
    ck_assert_msg(st == MS_OK, "%s", out.d.msg);
    ms_run_options opt = {.policy = policy, .verify = true, .fault = fault};
    ms_run *run = NULL;
    out.st = ms_run_execute(sc, &opt, &run, &out.d);
    if (out.st == MS_OK) {
        out.summary = ms_run_summaries(run, &out.stages)[0];
        out.notes = *ms_run_notes_get(run);
        ms_run_free(run);
    }
    ms_scenario_free(sc);
    return out;
}

/* Every byte swapped out in the last step came back as written. */
static void assert_swaps_checked(const verified_run *r)
{
    ck_assert_msg(r->st == MS_OK, "%s", r->d.msg);
    ck_assert(!r->summary.oom);
    ck_assert_uint_gt(r->summary.swapped_bytes, 0);
    ck_assert_uint_ge(r->notes.verified_bytes, r->summary.swapped_bytes);
    ck_assert_uint_gt(r->notes.verified_tensors, 0);
}

/* MindFormers' default swap (seed 003): flash attention's saved outputs of
 * every layer, prefetched 10 ops ahead; the scenario's own settings. */
START_TEST(mindformers_default_swap_verifies)
{
    static const char *const sets[] = {"steps=2", "model.seq_length=2048"};
    verified_run r =
        run_checked("scenarios/llama2-7b-swap-default.lua", NULL, sets, 2, MS_FAULT_NONE);
    assert_swaps_checked(&r);
    /* The declared swaps are flash attention's outputs only: the check
     * covers exactly them (one check per swapped tensor). */
    ck_assert_uint_eq(r.notes.verified_bytes, r.summary.swapped_bytes);
}
END_TEST

START_TEST(smart_swap_verifies)
{
    static const char *const sets[] = {"steps=3", "model.seq_length=512"};
    verified_run r =
        run_checked("scenarios/llama2-7b-swap-default.lua", "smart_swap", sets, 2, MS_FAULT_NONE);
    assert_swaps_checked(&r);
}
END_TEST

/* adaptive_memory profiles with every layer recomputed: step 0's checks are
 * recomputed tensors, the later steps' the declared swaps. */
START_TEST(adaptive_memory_verifies_recompute_and_swap)
{
    static const char *const sets[] = {"steps=1", "model.seq_length=1024"};
    verified_run r = run_checked("scenarios/llama2-7b-swap-default.lua", "adaptive_memory", sets, 2,
                                 MS_FAULT_NONE);
    ck_assert_msg(r.st == MS_OK, "%s", r.d.msg);
    ck_assert_uint_gt(r.summary.recomputed_ops, 0);
    ck_assert_uint_gt(r.notes.verified_tensors, 0);
    static const char *const later[] = {"steps=3", "model.seq_length=1024"};
    r = run_checked("scenarios/llama2-7b-swap-default.lua", "adaptive_memory", later, 2,
                    MS_FAULT_NONE);
    assert_swaps_checked(&r);
}
END_TEST

/* Pipeline stages on one engine (the cooperative host threads) each check
 * their own recomputed tensors. */
START_TEST(pipeline_stages_verify)
{
    static const char *const sets[] = {"parallel.pipeline_model_parallel_size=2",
                                       "parallel.world_size=4", "model.num_layers=4", "steps=2"};
    verified_run r =
        run_checked("tests/data/cli/tiny-gpt.lua", "full_recompute", sets, 4, MS_FAULT_NONE);
    ck_assert_msg(r.st == MS_OK, "%s", r.d.msg);
    ck_assert_uint_eq(r.stages, 2);
    ck_assert_uint_gt(r.notes.verified_tensors, 0);
}
END_TEST

/* A swap-out that does not wait for its tensor's producer copies the block
 * before the pattern lands: the executor's state checks see nothing wrong,
 * the data check names the tensor and the op that read it. */
START_TEST(swap_out_before_its_producer_is_caught)
{
    static const char *const sets[] = {"steps=1", "model.seq_length=2048"};
    verified_run r = run_checked("scenarios/llama2-7b-swap-default.lua", NULL, sets, 2,
                                 MS_FAULT_SWAP_OUT_UNORDERED);
    ck_assert_int_eq(r.st, MS_EHAZARD);
    ck_assert_msg(strstr(r.d.msg, "verify: tensor ") != NULL, "%s", r.d.msg);
    ck_assert_ptr_nonnull(strstr(r.d.msg, "flash_attention"));
    ck_assert_ptr_nonnull(strstr(r.d.msg, "after its swap-in does not hold what was written"));
    ck_assert_ptr_nonnull(strstr(r.d.msg, "read by op "));
}
END_TEST

/* A recompute that re-allocates its tensors but runs none of the segment's
 * ops leaves blocks that never got the re-made bytes. */
START_TEST(skipped_recompute_is_caught)
{
    static const char *const sets[] = {"steps=1", "model.num_layers=2"};
    verified_run r = run_checked("tests/data/cli/tiny-gpt.lua", "full_recompute", sets, 2,
                                 MS_FAULT_RECOMPUTE_SKIPPED);
    ck_assert_int_eq(r.st, MS_EHAZARD);
    ck_assert_ptr_nonnull(strstr(r.d.msg, "after its recompute does not hold what was written"));
    /* The same run without the fault passes: the fault, not the check, is
     * what fails. */
    r = run_checked("tests/data/cli/tiny-gpt.lua", "full_recompute", sets, 2, MS_FAULT_NONE);
    ck_assert_msg(r.st == MS_OK, "%s", r.d.msg);
    ck_assert_uint_gt(r.summary.recomputed_ops, 0);
    ck_assert_uint_gt(r.notes.verified_tensors, 0);
}
END_TEST

/* The check adds copies but no decisions: the same swaps and recomputes as
 * a run without it. */
START_TEST(verify_keeps_the_decisions)
{
    static const char *const sets[] = {"steps=2", "model.seq_length=1024"};
    char path[1024];
    snprintf(path, sizeof path, "%s/scenarios/llama2-7b-swap-default.lua", srcdir());
    const ms_scenario *sc = NULL;
    ms_diag d = {0};
    ck_assert_msg(ms_scenario_load(path, sets, 2, &sc, &d) == MS_OK, "%s", d.msg);
    ms_run_options plain = {.policy = NULL};
    ms_run *run = NULL;
    ck_assert_msg(ms_run_execute(sc, &plain, &run, &d) == MS_OK, "%s", d.msg);
    ms_run_summary s = *ms_run_summary_get(run);
    ck_assert_uint_eq(ms_run_notes_get(run)->verified_tensors, 0);
    ms_run_free(run);
    ms_scenario_free(sc);
    verified_run r =
        run_checked("scenarios/llama2-7b-swap-default.lua", NULL, sets, 2, MS_FAULT_NONE);
    ck_assert_msg(r.st == MS_OK, "%s", r.d.msg);
    ck_assert_uint_eq(r.summary.swapped_bytes, s.swapped_bytes);
    ck_assert_uint_eq(r.summary.recomputed_ops, s.recomputed_ops);
    ck_assert_uint_eq(r.summary.weights_bytes, s.weights_bytes);
}
END_TEST

/* memsim run --verify: exit 0 and the verified line. */
START_TEST(cli_verify_prints_what_it_checked)
{
    char cmd[4096];
    snprintf(cmd, sizeof cmd,
             "cd %s && %s/memsim run scenarios/llama2-7b-swap-default.lua --verify "
             "--set steps=1 --set model.seq_length=1024 --out /tmp/memsim-verify-cli.$$ "
             "| grep -q '^verified        64 tensors'; rc=$?; rm -rf /tmp/memsim-verify-cli.$$; "
             "exit $rc",
             srcdir(), builddir());
    int rc = system(cmd);
    ck_assert(WIFEXITED(rc) && WEXITSTATUS(rc) == 0);
}
END_TEST

static Suite *verify_suite(void)
{
    Suite *s = suite_create("verify");
    TCase *tc = tcase_create("functional mock");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, mindformers_default_swap_verifies);
    tcase_add_test(tc, smart_swap_verifies);
    tcase_add_test(tc, adaptive_memory_verifies_recompute_and_swap);
    tcase_add_test(tc, pipeline_stages_verify);
    tcase_add_test(tc, swap_out_before_its_producer_is_caught);
    tcase_add_test(tc, skipped_recompute_is_caught);
    tcase_add_test(tc, verify_keeps_the_decisions);
    tcase_add_test(tc, cli_verify_prints_what_it_checked);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(verify_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
