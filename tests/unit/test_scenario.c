/* Tests of the scenario and device file loaders: the shipped files load
 * with the values they state, overrides go through the same checks, and
 * every kind of bad input fails with a status and a message naming the file
 * and what is wrong. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "memsim/scenario.h"

static const char *srcdir(void)
{
    const char *s = getenv("MEMSIM_SRCDIR");
    return s && s[0] ? s : MS_SRCDIR;
}

static const char *src_path(char *buf, size_t size, const char *rel)
{
    snprintf(buf, size, "%s/%s", srcdir(), rel);
    return buf;
}

static const ms_scenario *load_ok(const char *rel, const char *const *ov, size_t n)
{
    char path[4096];
    const ms_scenario *sc = NULL;
    ms_diag d = {0};
    ms_status st = ms_scenario_load(src_path(path, sizeof path, rel), ov, n, &sc, &d);
    ck_assert_msg(st == MS_OK, "%s: %s", rel, d.msg);
    ck_assert_ptr_nonnull(sc);
    return sc;
}

/* Load a fixture expecting failure; returns the status, message in d. */
static ms_status load_bad(const char *rel, const char *const *ov, size_t n, ms_diag *d)
{
    char path[4096];
    const ms_scenario *sc = (const ms_scenario *)1;
    memset(d, 0, sizeof *d);
    ms_status st = ms_scenario_load(src_path(path, sizeof path, rel), ov, n, &sc, d);
    ck_assert_ptr_null(sc);
    ck_assert_int_ne(st, MS_OK);
    ck_assert_int_eq(d->code, st);
    return st;
}

#define ASSERT_MSG_HAS(d, text) \
    ck_assert_msg(strstr((d).msg, (text)) != NULL, "message \"%s\" lacks \"%s\"", (d).msg, (text))

/* scenarios/llama2-7b.lua as seed 001 states it. */
START_TEST(llama2_7b_fields)
{
    const ms_scenario *sc = load_ok("scenarios/llama2-7b.lua", NULL, 0);
    ck_assert_str_eq(sc->name, "llama2-7b");
    ck_assert_int_eq(sc->model.arch, MS_ARCH_LLAMA);
    ck_assert_int_eq(sc->model.num_layers, 32);
    ck_assert_int_eq(sc->model.hidden_size, 4096);
    ck_assert_int_eq(sc->model.ffn_hidden_size, 11008);
    ck_assert_int_eq(sc->model.num_attention_heads, 32);
    ck_assert_int_eq(sc->model.num_query_groups, 32);
    ck_assert_int_eq(sc->model.seq_length, 4096);
    ck_assert_int_eq(sc->model.padded_vocab_size, 32000);
    ck_assert_int_eq(sc->model.normalization, MS_NORM_RMSNORM);
    ck_assert(sc->model.swiglu && sc->model.untie_embeddings && sc->model.use_flash_attn);
    ck_assert(!sc->model.add_bias_linear);
    ck_assert_int_eq(sc->model.position_embedding_type, MS_POS_ROPE);
    ck_assert_double_eq(sc->model.hidden_dropout, 0);
    ck_assert_int_eq(sc->model.dtype, MS_DTYPE_BF16);
    ck_assert_int_eq(sc->parallel.tensor_model_parallel_size, 8);
    ck_assert_int_eq(sc->parallel.pipeline_model_parallel_size, 1);
    ck_assert_int_eq(sc->parallel.world_size, 8);
    ck_assert_int_eq(sc->parallel.data_parallel_size, 1);
    ck_assert(sc->parallel.sequence_parallel);
    ck_assert_int_eq(sc->parallel.micro_batch_size, 4);
    ck_assert_int_eq(sc->parallel.global_batch_size, 16);
    ck_assert_int_eq(sc->parallel.num_micro_batches, 4); /* 16 / (4 x 1) */
    ck_assert_str_eq(sc->allocator_flavour, "npu");
    ck_assert_int_eq(sc->report_detail, MS_DETAIL_ALL);
    ck_assert_str_eq(sc->allocator_conf, "expandable_segments:False");
    ck_assert_str_eq(sc->policy, "none");
    ck_assert_int_eq(sc->steps, 3);
    ck_assert_uint_eq(sc->seed, 1);
    /* The device: 64 GiB, 1.6 TB/s, 313 TFLOP/s bf16, 25.6 GB/s copies. */
    ck_assert_str_eq(sc->device_name, "ascend-910b");
    ck_assert_str_eq(sc->device.name, "ascend-910b");
    ck_assert_uint_eq(sc->device.hbm_bytes, 64ULL << 30);
    ck_assert_double_eq(sc->device.hbm_bw, 1600e9);
    ck_assert_double_eq(sc->device.peak_flops[MS_DTYPE_BF16], 313e12);
    ck_assert_int_eq(sc->device.h2d_bw.n, 5);
    ck_assert_double_eq(sc->device.h2d_bw.y[4], 25.6e9);
    ck_assert_double_eq(sc->device.launch_overhead_ns, 10e3);
    ck_assert_int_eq(sc->device.devices_per_node, 8);
    ck_assert(strstr(sc->path, "scenarios/llama2-7b.lua") != NULL);
    ck_assert_int_eq(ms_scenario_free(sc), MS_OK);
}
END_TEST

/* gpt-22b leaves most of the model to gpt's (Megatron's) defaults. */
START_TEST(gpt_22b_defaults)
{
    const ms_scenario *sc = load_ok("scenarios/gpt-22b.lua", NULL, 0);
    ck_assert_int_eq(sc->model.arch, MS_ARCH_GPT);
    ck_assert_int_eq(sc->model.num_query_groups, 64);
    ck_assert(!sc->model.swiglu && !sc->model.untie_embeddings && sc->model.add_bias_linear);
    ck_assert_int_eq(sc->model.position_embedding_type, MS_POS_LEARNED_ABSOLUTE);
    ck_assert_double_eq(sc->model.attention_dropout, 0.1);
    ck_assert_int_eq(sc->parallel.context_parallel_size, 1);
    ck_assert_int_eq(sc->parallel.num_micro_batches, 4);
    ck_assert_uint_eq(sc->device.hbm_bytes, 80ULL << 30);
    ck_assert_double_eq(sc->device.peak_flops[MS_DTYPE_BF16], 312e12);
    ck_assert_double_eq(sc->device.intra_node_bw, 300e9);
    ck_assert(sc->parallel.overlap_grad_reduce); /* memsim's default: overlapped */
    ck_assert(!sc->parallel.batch_p2p_sync);     /* memsim's default: overlapped */
    ck_assert(!sc->parallel.scatter_gather_tensors_in_pipeline); /* gone from Megatron-core */
    ck_assert_int_eq(sc->model.fp8, MS_FP8_NONE);
    ck_assert(!sc->parallel.grads_in_model_dtype); /* Megatron-LM's bf16 default: fp32 grads */
    ck_assert(!sc->parallel.tp_comm_overlap && !sc->parallel.overlap_param_gather);
    ms_scenario_free(sc);
}
END_TEST

START_TEST(overrides_apply)
{
    static const char *const ov[] = {"model.seq_length=8192", "steps=4",
                                     "parallel.sequence_parallel=false",
                                     "allocator.conf=expandable_segments:True",
                                     "model.hidden_dropout=0.25", "parallel.global_batch_size=32",
                                     "report.detail=last", "parallel.overlap_grad_reduce=false",
                                     "parallel.batch_p2p_sync=true",
                                     "parallel.scatter_gather_tensors_in_pipeline=true",
                                     "model.fp8=hybrid", "parallel.grad_reduce_in_fp32=false",
                                     "parallel.tp_comm_overlap=true",
                                     "parallel.overlap_param_gather=true"};
    const ms_scenario *sc = load_ok("scenarios/llama2-7b.lua", ov, 14);
    ck_assert(sc->parallel.tp_comm_overlap && sc->parallel.overlap_param_gather);
    ck_assert_int_eq(sc->model.fp8, MS_FP8_HYBRID);
    ck_assert(sc->parallel.grads_in_model_dtype);
    ck_assert(!sc->parallel.overlap_grad_reduce);
    ck_assert(sc->parallel.batch_p2p_sync);
    ck_assert(sc->parallel.scatter_gather_tensors_in_pipeline);
    ck_assert_int_eq(sc->report_detail, MS_DETAIL_LAST);
    ck_assert_int_eq(sc->model.seq_length, 8192);
    ck_assert_int_eq(sc->steps, 4);
    ck_assert(!sc->parallel.sequence_parallel);
    ck_assert_str_eq(sc->allocator_conf, "expandable_segments:True");
    ck_assert_double_eq(sc->model.hidden_dropout, 0.25);
    ck_assert_int_eq(sc->parallel.num_micro_batches, 8);
    ms_scenario_free(sc);
}
END_TEST

START_TEST(overrides_checked)
{
    ms_diag d;
    static const char *const unknown[] = {"model.hiden_size=1024"};
    ck_assert_int_eq(load_bad("scenarios/llama2-7b.lua", unknown, 1, &d), MS_EINVAL);
    ASSERT_MSG_HAS(d, "override 'model.hiden_size=1024': unknown key 'model.hiden_size'");
    static const char *const not_int[] = {"steps=three"};
    load_bad("scenarios/llama2-7b.lua", not_int, 1, &d);
    ASSERT_MSG_HAS(d, "override 'steps=three': the value must be an integer");
    static const char *const not_bool[] = {"parallel.sequence_parallel=yes"};
    load_bad("scenarios/llama2-7b.lua", not_bool, 1, &d);
    ASSERT_MSG_HAS(d, "a boolean");
    static const char *const overlap_not_bool[] = {"parallel.overlap_grad_reduce=1"};
    load_bad("scenarios/llama2-7b.lua", overlap_not_bool, 1, &d);
    ASSERT_MSG_HAS(d, "parallel.overlap_grad_reduce");
    ASSERT_MSG_HAS(d, "a boolean");
    static const char *const no_eq[] = {"steps"};
    load_bad("scenarios/llama2-7b.lua", no_eq, 1, &d);
    ASSERT_MSG_HAS(d, "expected KEY=VALUE");
    /* The same range checks as a value in the file. */
    static const char *const negative[] = {"model.num_layers=-1"};
    ck_assert_int_eq(load_bad("scenarios/llama2-7b.lua", negative, 1, &d), MS_ERANGE);
    ASSERT_MSG_HAS(d, "llama2-7b.lua: field 'model.num_layers' must be > 0 (got -1)");
    static const char *const detail[] = {"report.detail=every"};
    load_bad("scenarios/llama2-7b.lua", detail, 1, &d);
    ASSERT_MSG_HAS(d, "llama2-7b.lua: field 'report.detail' must be one of \"all\", \"last\", "
                      "\"none\" (got \"every\")");
    static const char *const fp4[] = {"model.fp8=fp4"};
    load_bad("scenarios/llama2-7b.lua", fp4, 1, &d);
    ASSERT_MSG_HAS(d, "llama2-7b.lua: field 'model.fp8' must be one of \"none\", \"e4m3\", "
                      "\"hybrid\" (got \"fp4\")");
    static const char *const tp3[] = {"parallel.tensor_model_parallel_size=3",
                                      "parallel.world_size=3"};
    load_bad("scenarios/llama2-7b.lua", tp3, 2, &d);
    ASSERT_MSG_HAS(d, "model.num_attention_heads (32) must be divisible by "
                      "parallel.tensor_model_parallel_size (3)");
}
END_TEST

START_TEST(syntax_error_names_line)
{
    ms_diag d;
    ck_assert_int_eq(load_bad("tests/data/scenarios/syntax_error.lua", NULL, 0, &d), MS_EPARSE);
    ASSERT_MSG_HAS(d, "syntax_error.lua:4:");
}
END_TEST

START_TEST(unknown_key_named)
{
    ms_diag d;
    ck_assert_int_eq(load_bad("tests/data/scenarios/unknown_key.lua", NULL, 0, &d), MS_EINVAL);
    ASSERT_MSG_HAS(d, "unknown_key.lua: unknown key 'model.hiden_size'");
    ASSERT_MSG_HAS(d, "did you mean 'hidden_size'");
}
END_TEST

START_TEST(negative_size_named)
{
    ms_diag d;
    ck_assert_int_eq(load_bad("tests/data/scenarios/negative_size.lua", NULL, 0, &d), MS_ERANGE);
    ASSERT_MSG_HAS(d, "negative_size.lua: field 'model.num_layers' must be > 0 (got -4)");
}
END_TEST

START_TEST(missing_file)
{
    ms_diag d;
    ck_assert_int_eq(load_bad("tests/data/scenarios/no_such_scenario.lua", NULL, 0, &d),
                     MS_ENOENT);
    ASSERT_MSG_HAS(d, "no_such_scenario.lua");
}
END_TEST

START_TEST(heads_not_divisible_by_tp)
{
    ms_diag d;
    ck_assert_int_eq(load_bad("tests/data/scenarios/heads_tp.lua", NULL, 0, &d), MS_EINVAL);
    ASSERT_MSG_HAS(d, "heads_tp.lua: model.num_attention_heads (30) must be divisible by "
                      "parallel.tensor_model_parallel_size (4)");
}
END_TEST

START_TEST(missing_device)
{
    ms_diag d;
    ck_assert_int_eq(load_bad("tests/data/scenarios/missing_device.lua", NULL, 0, &d),
                     MS_ENOENT);
    ASSERT_MSG_HAS(d, "missing_device.lua: device 'tpu-v9': no file tpu-v9.lua in");
    ASSERT_MSG_HAS(d, "tests/data/scenarios/devices");
}
END_TEST

/* A bad device file is named, not the scenario that uses it. */
START_TEST(bad_device_file)
{
    ms_diag d;
    ck_assert_int_eq(load_bad("tests/data/scenarios/bad_device.lua", NULL, 0, &d), MS_EINVAL);
    ASSERT_MSG_HAS(d, "devices/bad-device.lua: unknown key 'hbm_gb'");
}
END_TEST

START_TEST(other_bad_inputs)
{
    ms_diag d;
    ck_assert_int_eq(load_bad("tests/data/scenarios/runaway.lua", NULL, 0, &d), MS_ELIMIT);
    ASSERT_MSG_HAS(d, "runaway.lua:");
    ck_assert_int_eq(load_bad("tests/data/scenarios/not_a_table.lua", NULL, 0, &d), MS_EINVAL);
    ASSERT_MSG_HAS(d, "not_a_table.lua: a scenario file must return a table (got number)");
    ck_assert_int_eq(load_bad("tests/data/scenarios/wrong_type.lua", NULL, 0, &d), MS_EINVAL);
    ASSERT_MSG_HAS(d, "wrong_type.lua: field 'model.num_layers' must be an integer "
                      "(got the string \"32\")");
    /* Raw reads: the __index table is not seen, the erroring metamethods
     * never run; what is missing is reported. */
    ck_assert_int_eq(load_bad("tests/data/scenarios/metatable.lua", NULL, 0, &d), MS_EINVAL);
    ASSERT_MSG_HAS(d, "metatable.lua: field 'device' is required");
    ck_assert_int_eq(load_bad("tests/data/scenarios/sandbox_escape.lua", NULL, 0, &d),
                     MS_ESCRIPT);
    ASSERT_MSG_HAS(d, "sandbox_escape.lua:2:");
    const ms_scenario *sc = NULL;
    ck_assert_int_eq(ms_scenario_load(NULL, NULL, 0, &sc, &d), MS_EINVAL);
    ck_assert_int_eq(ms_scenario_free(NULL), MS_EINVAL);
}
END_TEST

/* device_memory replaces the device file's memory for a what-if run; 0 and
 * "unlimited" give the whole 8 TiB window (a device that never runs out).
 * Past the window, in a scenario or a device file, is an error naming the
 * field. */
START_TEST(device_memory_override)
{
    static const char *const gib96[] = {"device_memory=96GiB"};
    const ms_scenario *sc = load_ok("scenarios/llama2-7b.lua", gib96, 1);
    ck_assert_uint_eq(sc->device.hbm_bytes, 96ULL << 30);
    ck_assert_uint_eq(sc->device_memory, 96ULL << 30);
    ck_assert_double_eq(sc->device.hbm_bw, 1600e9); /* the rest is the file's */
    ms_scenario_free(sc);
    static const char *const whole[][1] = {{"device_memory=unlimited"}, {"device_memory=0"}};
    for (int i = 0; i < 2; i++) {
        sc = load_ok("scenarios/llama2-7b.lua", whole[i], 1);
        ck_assert_uint_eq(sc->device.hbm_bytes, 1ULL << 43);
        ms_scenario_free(sc);
    }
    sc = load_ok("scenarios/llama2-7b.lua", NULL, 0);
    ck_assert_uint_eq(sc->device_memory, 0);
    ck_assert_uint_eq(sc->device.hbm_bytes, 64ULL << 30);
    ms_scenario_free(sc);
    ms_diag d;
    static const char *const past[] = {"device_memory=8193GiB"};
    static const char *const word[] = {"device_memory=lots"};
    ck_assert_int_eq(load_bad("scenarios/llama2-7b.lua", past, 1, &d), MS_ERANGE);
    ASSERT_MSG_HAS(d, "llama2-7b.lua: field 'device_memory' must be at most 8 TiB");
    ASSERT_MSG_HAS(d, "got 8797166764032 bytes");
    ck_assert_int_eq(load_bad("scenarios/llama2-7b.lua", word, 1, &d), MS_EINVAL);
    ASSERT_MSG_HAS(d, "field 'device_memory' must be a byte count");
    ck_assert_int_eq(load_bad("tests/data/scenarios/huge_device.lua", NULL, 0, &d), MS_ERANGE);
    ASSERT_MSG_HAS(d, "devices/huge-device.lua: field 'hbm_gib' must be at most 8192 (8 TiB) "
                      "(got 9000)");
}
END_TEST

/* Every shipped device file loads and passes ms_device_spec_validate. */
START_TEST(shipped_devices)
{
    static const struct {
        const char *file;
        uint64_t hbm;
        double bf16, bw;
    } devs[] = {
        {"ascend-910b", 64ULL << 30, 313e12, 1600e9},
        {"a100-80gb", 80ULL << 30, 312e12, 2039e9},
        {"h100-80gb", 81559ULL << 20, 989e12, 3350e9},
        {"h200", 143771ULL << 20, 989e12, 4800e9},
    };
    for (size_t i = 0; i < sizeof devs / sizeof devs[0]; i++) {
        char rel[128], path[4096];
        snprintf(rel, sizeof rel, "scenarios/devices/%s.lua", devs[i].file);
        ms_device_spec s;
        ms_diag d = {0};
        ck_assert_msg(ms_device_load(src_path(path, sizeof path, rel), &s, &d) == MS_OK, "%s",
                      d.msg);
        ck_assert_str_eq(s.name, devs[i].file);
        ck_assert_uint_eq(s.hbm_bytes, devs[i].hbm);
        ck_assert_double_eq(s.peak_flops[MS_DTYPE_BF16], devs[i].bf16);
        ck_assert_double_eq(s.hbm_bw, devs[i].bw);
        ck_assert_int_eq(ms_device_spec_validate(&s, &d), MS_OK);
        /* Efficiencies rise with kernel size. */
        for (int k = 1; k < s.matmul_eff.n; k++)
            ck_assert_double_gt(s.matmul_eff.y[k], s.matmul_eff.y[k - 1]);
    }
    ms_device_spec s;
    ms_diag d;
    ck_assert_int_eq(ms_device_load(NULL, &s, &d), MS_EINVAL);
}
END_TEST

/* Megatron's MoE arguments: defaults and checks. */
START_TEST(moe_keys)
{
    const ms_scenario *sc = load_ok("tests/data/scenarios/moe_small.lua", NULL, 0);
    ck_assert_int_eq(sc->model.num_experts, 8);
    ck_assert_int_eq(sc->model.moe_router_topk, 2);           /* Megatron's default */
    ck_assert_int_eq(sc->model.moe_ffn_hidden_size, 768);     /* = ffn_hidden_size: 2/3 x 4 x 256 -> 768 */
    ck_assert_double_eq(sc->model.moe_capacity_factor, 0);    /* no token dropping */
    ck_assert_int_eq(sc->parallel.expert_model_parallel_size, 2);
    ck_assert_int_eq(sc->parallel.data_parallel_size, 4);
    ms_scenario_free(sc);
    static const char *const cap[] = {"model.moe_capacity_factor=1.25", "model.moe_router_topk=1"};
    sc = load_ok("tests/data/scenarios/moe_small.lua", cap, 2);
    ck_assert_double_eq(sc->model.moe_capacity_factor, 1.25);
    ck_assert_int_eq(sc->model.moe_router_topk, 1);
    ms_scenario_free(sc);
    /* A dense model has none of it. */
    sc = load_ok("scenarios/llama2-7b.lua", NULL, 0);
    ck_assert_int_eq(sc->model.num_experts, 0);
    ck_assert_int_eq(sc->model.moe_router_topk, 0);
    ck_assert_int_eq(sc->parallel.expert_model_parallel_size, 1);
    ms_scenario_free(sc);
}
END_TEST

START_TEST(moe_errors)
{
    static const struct {
        const char *ov;
        const char *msg;
    } bad[] = {
        {"model.num_experts=7", "model.num_experts (7) must be divisible by "
                                "parallel.expert_model_parallel_size (2)"},
        {"model.moe_router_topk=9", "model.moe_router_topk (9) must be at most "
                                    "model.num_experts (8)"},
        {"parallel.expert_model_parallel_size=8", "parallel.expert_model_parallel_size (8) must "
                                                  "divide data-parallel x context-parallel size (4)"},
        {"model.moe_ffn_hidden_size=255", "model.moe_ffn_hidden_size (255) must be divisible by "
                                          "parallel.tensor_model_parallel_size (2)"},
        {"model.moe_expert_capacity_factor=-1", "field 'model.moe_expert_capacity_factor' must be "
                                                ">= 0"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        ms_diag d;
        const char *ov[] = {bad[i].ov};
        load_bad("tests/data/scenarios/moe_small.lua", ov, 1, &d);
        ASSERT_MSG_HAS(d, bad[i].msg);
    }
    ms_diag d;
    static const char *const both[] = {"model.moe_capacity_factor=1",
                                       "model.moe_expert_capacity_factor=1"};
    load_bad("tests/data/scenarios/moe_small.lua", both, 2, &d);
    ASSERT_MSG_HAS(d, "give one of model.moe_expert_capacity_factor and model.moe_capacity_factor");
    static const char *const dense[] = {"model.moe_router_topk=2"};
    load_bad("scenarios/llama2-7b.lua", dense, 1, &d);
    ASSERT_MSG_HAS(d, "model.moe_router_topk needs model.num_experts > 0");
}
END_TEST

/* Recompute and swap settings are checked at load, naming the field. */
START_TEST(memory_config_bad_inputs)
{
    ms_diag d;
    ck_assert_int_eq(load_bad("tests/data/scenarios/mc_bad_length.lua", NULL, 0, &d), MS_EINVAL);
    ASSERT_MSG_HAS(d, "mc_bad_length.lua: field 'recompute_config.recompute' lists 1 per-stage "
                      "layer counts; it needs 2, one per pipeline stage");
    ck_assert_int_eq(load_bad("tests/data/scenarios/mc_wrong_type.lua", NULL, 0, &d), MS_EINVAL);
    ASSERT_MSG_HAS(d, "mc_wrong_type.lua: field 'swap_config.layer_swap[1].layers' must be true, "
                      "false or a list of layer indices (got the string \"all\")");
    /* The pattern loads; what it matches needs the op names
     * (ms_memory_config_check, tests/unit/test_memory_config.c). */
    const ms_scenario *sc = load_ok("tests/data/scenarios/mc_unknown_regex.lua", NULL, 0);
    ms_scenario_free(sc);
    /* Layers must still divide over the stages unless an offset says where. */
    static const char *const pp3[] = {"parallel.pipeline_model_parallel_size=3",
                                      "parallel.world_size=24"};
    load_bad("scenarios/llama2-7b.lua", pp3, 2, &d);
    ASSERT_MSG_HAS(d, "model.num_layers (32) must be divisible by "
                      "parallel.pipeline_model_parallel_size (3)");
}
END_TEST

static Suite *scenario_suite(void)
{
    Suite *s = suite_create("scenario");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, llama2_7b_fields);
    tcase_add_test(tc, gpt_22b_defaults);
    tcase_add_test(tc, overrides_apply);
    tcase_add_test(tc, overrides_checked);
    tcase_add_test(tc, syntax_error_names_line);
    tcase_add_test(tc, unknown_key_named);
    tcase_add_test(tc, negative_size_named);
    tcase_add_test(tc, missing_file);
    tcase_add_test(tc, heads_not_divisible_by_tp);
    tcase_add_test(tc, missing_device);
    tcase_add_test(tc, bad_device_file);
    tcase_add_test(tc, other_bad_inputs);
    tcase_add_test(tc, device_memory_override);
    tcase_add_test(tc, shipped_devices);
    tcase_add_test(tc, moe_keys);
    tcase_add_test(tc, moe_errors);
    tcase_add_test(tc, memory_config_bad_inputs);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(scenario_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
