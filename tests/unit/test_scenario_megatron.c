/* Megatron-LM's argument names in a scenario (lib/scenario/
 * scenario_megatron.c): each loads with Megatron's meaning (the vocabulary
 * padded as Megatron pads it, --group-query-attention deciding what
 * --num-query-groups means, --bf16/--fp16 the dtype, the position table
 * --max-position-embeddings rows long), and a setting given under both its
 * names must agree.  Every key here was an unknown key before. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "memsim/scenario.h"
#include "memsim/workload.h"

#define FIXTURE "tests/data/scenarios/megatron_keys.lua"

static const char *fixture(char *buf, size_t size)
{
    const char *s = getenv("MEMSIM_SRCDIR");
    snprintf(buf, size, "%s/%s", s && s[0] ? s : MS_SRCDIR, FIXTURE);
    return buf;
}

/* The fixture (gpt, h 1024, 16 heads, seq 2048, vocab_size 50257, TP 8)
 * with the overrides given. */
static const ms_scenario *load(const char *const *ov, size_t n, ms_diag *d)
{
    char path[4096];
    const ms_scenario *sc = NULL;
    memset(d, 0, sizeof *d);
    ms_status st = ms_scenario_load(fixture(path, sizeof path), ov, n, &sc, d);
    ck_assert_int_eq(st == MS_OK, sc != NULL);
    return sc;
}

static const ms_scenario *load_ok(const char *const *ov, size_t n)
{
    ms_diag d;
    const ms_scenario *sc = load(ov, n, &d);
    ck_assert_msg(sc != NULL, "%s", d.msg);
    return sc;
}

static void load_bad(const char *const *ov, size_t n, const char *text)
{
    ms_diag d;
    ck_assert_ptr_null(load(ov, n, &d));
    ck_assert_msg(strstr(d.msg, text) != NULL, "message \"%s\" lacks \"%s\"", d.msg, text);
}

/* The overrides as an array literal and its length. */
#define OVERRIDES(...)                                                                             \
    (const char *const[]){"steps=1", __VA_ARGS__},                                                 \
        sizeof((const char *const[]){"steps=1", __VA_ARGS__}) / sizeof(const char *)
#define LOAD_OK(...) load_ok(OVERRIDES(__VA_ARGS__))
#define LOAD_BAD(text, ...) load_bad(OVERRIDES(__VA_ARGS__), text)

static uint64_t params(const ms_scenario *sc)
{
    uint64_t p = 0;
    ck_assert_int_eq(ms_model_param_count(&sc->model, &p), MS_OK);
    return p;
}

/* --vocab-size 50257 with the default --make-vocab-size-divisible-by 128
 * and TP 8 pads to a multiple of 1024: 51200 (Megatron's
 * _vocab_size_with_padding); divisible by 1 pads to a multiple of 8 only. */
START_TEST(vocab_padded_as_megatron)
{
    const ms_scenario *sc = LOAD_OK("steps=1");
    ck_assert_int_eq(sc->model.padded_vocab_size, 51200);
    ms_scenario_free(sc);
    sc = LOAD_OK("model.make_vocab_size_divisible_by=1");
    ck_assert_int_eq(sc->model.padded_vocab_size, 50264);
    ms_scenario_free(sc);
    sc = LOAD_OK("parallel.tensor_model_parallel_size=1");
    ck_assert_int_eq(sc->model.padded_vocab_size, 50304);
    ms_scenario_free(sc);
    LOAD_BAD("give one of model.vocab_size", "model.padded_vocab_size=51200");
    LOAD_BAD("'model.make_vocab_size_divisible_by' must be in 1..",
             "model.make_vocab_size_divisible_by=0");
}
END_TEST

/* The output layer is a weight of its own: V x h more parameters. */
START_TEST(untied_output_layer)
{
    const ms_scenario *tied = LOAD_OK("steps=1");
    const ms_scenario *untied = LOAD_OK("model.untie_embeddings_and_output_weights=true");
    ck_assert(!tied->model.untie_embeddings && untied->model.untie_embeddings);
    ck_assert_uint_eq(params(untied) - params(tied), 51200ull * 1024);
    ms_scenario_free(tied);
    ms_scenario_free(untied);
    LOAD_BAD("model.untie_embeddings and model.untie_embeddings_and_output_weights disagree",
             "model.untie_embeddings_and_output_weights=true", "model.untie_embeddings=false");
}
END_TEST

/* --disable-bias-linear: gpt's biases go (4h + 4h + 4 x 4h per layer with
 * the 4h MLP: QKV 3h, proj h, fc1 4h, fc2 h = 9h). */
START_TEST(no_linear_biases)
{
    const ms_scenario *with = LOAD_OK("steps=1");
    const ms_scenario *without = LOAD_OK("model.disable_bias_linear=true");
    ck_assert(with->model.add_bias_linear && !without->model.add_bias_linear);
    ck_assert_uint_eq(params(with) - params(without), 2ull * 9 * 1024);
    ms_scenario_free(with);
    ms_scenario_free(without);
    LOAD_BAD("model.add_bias_linear and model.disable_bias_linear disagree",
             "model.disable_bias_linear=true", "model.add_bias_linear=true");
}
END_TEST

START_TEST(precision_flags)
{
    const ms_scenario *sc = LOAD_OK("model.fp16=true");
    ck_assert_int_eq(sc->model.dtype, MS_DTYPE_FP16);
    /* Megatron keeps fp16 main grads unless told to accumulate in fp32. */
    ck_assert(sc->parallel.grads_in_model_dtype);
    ms_scenario_free(sc);
    sc = LOAD_OK("model.fp16=true", "parallel.accumulate_allreduce_grads_in_fp32=true");
    ck_assert(!sc->parallel.grads_in_model_dtype);
    ms_scenario_free(sc);
    sc = LOAD_OK("model.bf16=true");
    ck_assert_int_eq(sc->model.dtype, MS_DTYPE_BF16);
    ck_assert(!sc->parallel.grads_in_model_dtype);
    ms_scenario_free(sc);
    sc = LOAD_OK("model.bf16=true", "parallel.grad_reduce_in_bf16=true");
    ck_assert(sc->parallel.grads_in_model_dtype);
    ms_scenario_free(sc);
    sc = LOAD_OK("model.bf16=false");
    ck_assert_int_eq(sc->model.dtype, MS_DTYPE_FP32);
    ms_scenario_free(sc);
    LOAD_BAD("at most one of --bf16 and --fp16", "model.bf16=true", "model.fp16=true");
    LOAD_BAD("model.dtype and model.fp16 disagree", "model.fp16=true", "model.dtype=bf16");
}
END_TEST

/* --num-query-groups counts with --group-query-attention, which defaults
 * to one group; without it every head keeps its own K and V. */
START_TEST(group_query_attention)
{
    const ms_scenario *sc = LOAD_OK("model.group_query_attention=true", "model.num_query_groups=8");
    ck_assert_int_eq(sc->model.num_query_groups, 8);
    ms_scenario_free(sc);
    sc = LOAD_OK("model.group_query_attention=true", "parallel.tensor_model_parallel_size=1");
    ck_assert_int_eq(sc->model.num_query_groups, 1);
    ms_scenario_free(sc);
    sc = LOAD_OK("model.group_query_attention=false");
    ck_assert_int_eq(sc->model.num_query_groups, 16);
    ms_scenario_free(sc);
    LOAD_BAD("needs model.group_query_attention = true", "model.group_query_attention=false",
             "model.num_query_groups=8");
}
END_TEST

/* Learned absolute positions: a table of --max-position-embeddings rows,
 * whatever the sequence; rope has none. */
START_TEST(position_table_rows)
{
    const ms_scenario *a = LOAD_OK("steps=1");
    const ms_scenario *b = LOAD_OK("model.max_position_embeddings=4096");
    ck_assert_int_eq(a->model.max_position_embeddings, 2048);
    ck_assert_int_eq(b->model.max_position_embeddings, 4096);
    ck_assert_uint_eq(params(b) - params(a), 2048ull * 1024);
    ms_scenario_free(a);
    ms_scenario_free(b);
    a = LOAD_OK("model.max_position_embeddings=4096", "model.position_embedding_type=rope");
    b = LOAD_OK("model.position_embedding_type=rope");
    ck_assert_uint_eq(params(a), params(b));
    ms_scenario_free(a);
    ms_scenario_free(b);
    LOAD_BAD("model.max_position_embeddings (1024) must be >= model.seq_length (2048)",
             "model.max_position_embeddings=1024");
}
END_TEST

START_TEST(fp8_format_and_kv_channels)
{
    const ms_scenario *sc =
        LOAD_OK("model.kv_channels=64", "model.fp8_format=hybrid", "device=h100-80gb");
    ck_assert_int_eq(sc->model.fp8, MS_FP8_HYBRID);
    ms_scenario_free(sc);
    LOAD_BAD("model.kv_channels (128) must be model.hidden_size / model.num_attention_heads",
             "model.kv_channels=128");
    LOAD_BAD("model.fp8 and model.fp8_format disagree", "model.fp8_format=hybrid",
             "model.fp8=e4m3");
}
END_TEST

int main(void)
{
    Suite *s = suite_create("scenario_megatron");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, vocab_padded_as_megatron);
    tcase_add_test(tc, untied_output_layer);
    tcase_add_test(tc, no_linear_biases);
    tcase_add_test(tc, precision_flags);
    tcase_add_test(tc, group_query_attention);
    tcase_add_test(tc, position_table_rows);
    tcase_add_test(tc, fp8_format_and_kv_channels);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
