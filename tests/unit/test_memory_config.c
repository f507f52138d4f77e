/* Tests of the recompute and swap vocabulary: Megatron's recompute
 * arguments, MindFormers' recompute_config and swap_config in every form,
 * normalised (lib/scenario) and printed as MindFormers logs them (seed 003's
 * examples, exactly), the decisions they declare for a program
 * (lib/policy/declared.c), and bad inputs. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "lib/policy/declared.h"
#include "lib/scenario/memory_config.h"

static const char *srcdir(void)
{
    const char *s = getenv("MEMSIM_SRCDIR");
    return s && s[0] ? s : MS_SRCDIR;
}

#define ASSERT_MSG_HAS(d, text) \
    ck_assert_msg(strstr((d).msg, (text)) != NULL, "message \"%s\" lacks \"%s\"", (d).msg, (text))

static ms_status load_rel(const char *rel, const char *const *ov, size_t n, const ms_scenario **sc,
                          ms_diag *d)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", srcdir(), rel);
    memset(d, 0, sizeof *d);
    return ms_scenario_load(path, ov, n, sc, d);
}

static const ms_scenario *load_ok(const char *rel, const char *const *ov, size_t n)
{
    const ms_scenario *sc = NULL;
    ms_diag d;
    ms_status st = load_rel(rel, ov, n, &sc, &d);
    ck_assert_msg(st == MS_OK, "%s: %s", rel, d.msg);
    return sc;
}

/* A scenario from text: a small llama (hidden 256, 4 heads, seq 256, flash
 * attention, TP 2 with SP, micro-batch 1, 2 micro-batches) with `layers`
 * layers on `pp` stages, plus extra parallel keys and top-level keys. */
static ms_status load_small(int layers, int pp, const char *parallel, const char *top,
                            const ms_scenario **sc, ms_diag *d)
{
    char path[] = "/tmp/memsim-mc-XXXXXX";
    int fd = mkstemp(path);
    ck_assert_int_ge(fd, 0);
    FILE *f = fdopen(fd, "w");
    ck_assert_ptr_nonnull(f);
    fprintf(f, "return {\n  device = \"ascend-910b\",\n"
               "  model = { arch = \"llama\", num_layers = %d, hidden_size = 256,\n"
               "    ffn_hidden_size = 512, num_attention_heads = 4, seq_length = 256,\n"
               "    padded_vocab_size = 1024, use_flash_attn = true },\n"
               "  parallel = { world_size = %d, tensor_model_parallel_size = 2,\n"
               "    sequence_parallel = true, pipeline_model_parallel_size = %d,\n"
               "    micro_batch_size = 1, global_batch_size = 2, %s },\n  %s\n}\n",
            layers, 2 * pp, pp, parallel ? parallel : "", top ? top : "");
    fclose(f);
    memset(d, 0, sizeof *d);
    ms_status st = ms_scenario_load(path, NULL, 0, sc, d);
    unlink(path);
    return st;
}

static const ms_scenario *small_ok(int layers, int pp, const char *parallel, const char *top)
{
    const ms_scenario *sc = NULL;
    ms_diag d;
    ms_status st = load_small(layers, pp, parallel, top, &sc, &d);
    ck_assert_msg(st == MS_OK, "%s", d.msg);
    return sc;
}

/* Loading must fail; the message in d. */
static ms_status small_bad(int layers, int pp, const char *parallel, const char *top, ms_diag *d)
{
    const ms_scenario *sc = (const ms_scenario *)1;
    ms_status st = load_small(layers, pp, parallel, top, &sc, d);
    ck_assert_ptr_null(sc);
    ck_assert_int_ne(st, MS_OK);
    return st;
}

/* Every stage's program, as a run builds them. */
typedef struct stages {
    int n;
    ms_program *prog[8];
    ms_program_view v[8];
} stages;

static void stages_build(const ms_scenario *sc, stages *s)
{
    ms_diag d = {0};
    s->n = sc->parallel.pipeline_model_parallel_size;
    ck_assert_int_le(s->n, 8);
    for (int i = 0; i < s->n; i++) {
        ck_assert_msg(ms_program_build(sc, i, &s->prog[i], &d) == MS_OK, "%s", d.msg);
        s->v[i] = ms_program_get_view(s->prog[i]);
    }
}

static void stages_free(stages *s)
{
    for (int i = 0; i < s->n; i++)
        ms_program_free(s->prog[i]);
}

/* The declared decisions of every stage, as a run makes them before it
 * prints anything: the first error. */
static ms_status check_stages(const ms_scenario *sc, const stages *s, ms_diag *d)
{
    ms_status st = MS_OK;
    for (int i = 0; st == MS_OK && i < s->n; i++) {
        ms_plan plan;
        ms_plan_init(&plan);
        st = pol_declared_plan(sc, &s->v[i], &plan, d);
        ms_plan_free(&plan);
    }
    return st;
}

static ms_status check_all(const ms_scenario *sc, ms_diag *d)
{
    stages s;
    stages_build(sc, &s);
    ms_status st = check_stages(sc, &s, d);
    stages_free(&s);
    return st;
}

/* What pol_declared_print writes from the stage programs (caller frees). */
static char *printed(const ms_scenario *sc)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    ck_assert_ptr_nonnull(f);
    ms_diag d = {0};
    stages s;
    stages_build(sc, &s);
    ms_status st = check_stages(sc, &s, &d);
    ck_assert_msg(st == MS_OK, "%s", d.msg);
    st = pol_declared_print(sc, s.v, s.n, f, &d);
    fclose(f);
    stages_free(&s);
    ck_assert_msg(st == MS_OK, "%s", d.msg);
    return buf;
}

/* The printed lines that start with prefix, joined by '\n'. */
static char *lines_with(const char *text, const char *prefix)
{
    char *out = calloc(strlen(text) + 1, 1);
    ck_assert_ptr_nonnull(out);
    for (const char *p = text; *p;) {
        const char *nl = strchr(p, '\n');
        size_t len = nl ? (size_t)(nl - p) : strlen(p);
        if (strncmp(p, prefix, strlen(prefix)) == 0) {
            strncat(out, p, len);
            strcat(out, "\n");
        }
        p += len + (nl != NULL);
    }
    return out;
}

static void assert_lines(const ms_scenario *sc, const char *prefix, const char *expect)
{
    char *all = printed(sc);
    char *got = lines_with(all, prefix);
    ck_assert_msg(strcmp(got, expect) == 0, "printed:\n%s\nexpected:\n%s", got, expect);
    free(got);
    free(all);
}

/* ---- programs and plans ------------------------------------------------------- */

typedef struct built {
    const ms_scenario *sc;
    ms_program *prog;
    ms_program_view v;
    ms_plan plan;
} built;

/* Load, build stage `stage`'s program and plan it. */
static void plan_pp(built *b, int layers, int pp, const char *parallel, const char *top,
                    int stage)
{
    ms_diag d = {0};
    b->sc = small_ok(layers, pp, parallel, top);
    ck_assert_int_eq(ms_program_build(b->sc, stage, &b->prog, &d), MS_OK);
    b->v = ms_program_get_view(b->prog);
    ck_assert_int_eq(ms_plan_init(&b->plan), MS_OK);
    ms_status st = pol_declared_plan(b->sc, &b->v, &b->plan, &d);
    ck_assert_msg(st == MS_OK, "%s", d.msg);
}

static void built_free(built *b)
{
    ms_plan_free(&b->plan);
    ms_program_free(b->prog);
    ms_scenario_free(b->sc);
}

/* How many decisions of a kind; with suffix, only those whose segment or
 * tensor name ends with it. */
static uint32_t count_dec(const built *b, ms_decision_kind kind, const char *suffix)
{
    uint32_t n = 0;
    for (uint32_t i = 0; i < b->plan.n; i++) {
        const ms_decision *dec = &b->plan.items[i];
        if (dec->kind != kind)
            continue;
        const char *name = kind == MS_DEC_RECOMPUTE ? b->v.segments[dec->segment].name
                                                    : b->v.tensors[dec->tensor].name;
        size_t ln = strlen(name), ls = suffix ? strlen(suffix) : 0;
        n += suffix == NULL || (ln >= ls && strcmp(name + ln - ls, suffix) == 0);
    }
    return n;
}

static void plan_small(built *b, int layers, int pp, const char *top, int stage)
{
    plan_pp(b, layers, pp, NULL, top, stage);
}

/* ---- MindFormers' normalisation --------------------------------------------- */

/* Seed 003: 48 layers, pp_interleave_num 2, pipeline_stage 5, offset
 * [[0,1,1,1,1],[1,1,1,1,0]].  48 // (5 x 2) = 4 layers per chunk plus the
 * offset: [[4,5,5,5,5],[5,5,5,5,4]].  True -> those; [[1,0,0,0,0],[2,1,..]]
 * capped at them -> itself; [2,1,0,0,0] per stage, spread chunk 0 first ->
 * stage 0: 1 + 1, stage 1: 1 + 0 -> [[1,1,0,0,0],[1,0,0,0,0]]. */
START_TEST(formative_48_layers)
{
    const ms_scenario *sc = load_ok("tests/data/scenarios/mc_formative48.lua", NULL, 0);
    assert_lines(sc, "Formative ",
                 "Formative layer_recompute: [[2, 1, 0, 0, 0], [1, 0, 0, 0, 0]]\n"
                 "Formative select_recompute: {'feed_forward\\.w1\\.activation\\.silu': "
                 "[[4, 5, 5, 5, 5], [5, 5, 5, 5, 4]], 'feed_forward\\.mul': [[4, 5, 5, 5, 5], "
                 "[5, 5, 5, 5, 4]], 'feed_forward\\.w1\\.matmul': [[1, 0, 0, 0, 0], "
                 "[2, 1, 0, 0, 0]], 'feed_forward\\.w3\\.matmul': [[1, 1, 0, 0, 0], "
                 "[1, 0, 0, 0, 0]]}\n"
                 "Formative select_comm_recompute: {'ffn_norm\\.norm': [[4, 5, 5, 5, 5], "
                 "[5, 5, 5, 5, 4]], 'attention_norm\\.norm': [[4, 5, 5, 5, 5], "
                 "[5, 5, 5, 5, 4]]}\n");
    /* The layout: chunk 0 of stage 1 holds layers 4..8 (after stage 0's 4),
     * chunk 1 of stage 0 starts after chunk 0's 4 + 5 x 4 = 24 layers. */
    int first, count, chunks;
    chunks = ms_scenario_chunks(sc);
    ck_assert_int_eq(chunks, 2);
    ck_assert_int_eq(ms_scenario_chunk_layers(sc, 1, 0, &first, &count), MS_OK);
    ck_assert_int_eq(first, 4);
    ck_assert_int_eq(count, 5);
    ck_assert_int_eq(ms_scenario_chunk_layers(sc, 0, 1, &first, &count), MS_OK);
    ck_assert_int_eq(first, 24);
    ck_assert_int_eq(count, 5);
    ck_assert_int_eq(ms_scenario_chunk_layers(sc, 4, 1, &first, &count), MS_OK);
    ck_assert_int_eq(first, 44);
    ck_assert_int_eq(count, 4);
    /* recompute [[2,1,0,0,0],[1,0,0,0,0]]: layers 0-1 (chunk 0 of stage 0),
     * 4 (stage 1), 24 (chunk 1 of stage 0); the rest select recompute. */
    ms_diag d;
    for (int l = 0; l < 48; l++) {
        scn_layer_memory lm;
        ck_assert_int_eq(scn_layer_settings(sc, l, &lm, &d), MS_OK);
        bool full = l == 0 || l == 1 || l == 4 || l == 24;
        ck_assert_msg(lm.full_recompute == full, "layer %d", l);
    }
    /* Layer 5: the two all-layer patterns and 'w1\.matmul' ([[1,0,..]]: no,
     * stage 1 chunk 0 has 0), 'w3\.matmul' (stage 1 chunk 0: 1 -> layer 4
     * only, which is fully recomputed): 2 select patterns, 2 comm. */
    scn_layer_memory lm;
    ck_assert_int_eq(scn_layer_settings(sc, 5, &lm, &d), MS_OK);
    ck_assert_uint_eq(lm.n_select, 2);
    ck_assert_uint_eq(lm.n_comm, 2);
    ck_assert_int_eq(lm.stage, 1);
    ck_assert_int_eq(lm.chunk, 0);
    /* Layer 2 (stage 0, chunk 0, third layer): w1 ([1..]: no), w3 (1: no). */
    ck_assert_int_eq(scn_layer_settings(sc, 2, &lm, &d), MS_OK);
    ck_assert_uint_eq(lm.n_select, 2);
    /* Layer 25: chunk 1 of stage 0, second layer: w1 matmul has 2 there. */
    ck_assert_int_eq(scn_layer_settings(sc, 25, &lm, &d), MS_OK);
    ck_assert_uint_eq(lm.n_select, 3);
    ms_scenario_free(sc);
}
END_TEST

/* 16 layers, 2 stages, 2 chunks: 4 layers a chunk, [[4, 4], [4, 4]]. */
static void formative_case(const char *rc, const char *expect_line)
{
    char top[1024];
    snprintf(top, sizeof top, "recompute_config = { %s },", rc);
    const ms_scenario *sc = small_ok(16, 2, "pp_interleave_num = 2,", top);
    char *all = printed(sc);
    ck_assert_msg(strstr(all, expect_line) != NULL, "for %s printed:\n%s\nexpected line:\n%s",
                  rc, all, expect_line);
    free(all);
    ms_scenario_free(sc);
}

START_TEST(formative_forms)
{
    /* Per stage {5, 2}: stage 0 gives chunk 0, 1, 0, 1, 0 a layer each ->
     * 3 and 2; stage 1 -> 1 and 1. */
    formative_case("recompute = {5, 2}", "Formative layer_recompute: [[3, 1], [2, 1]]\n");
    /* true in a list: all (capped at the 8 layers of the stage). */
    formative_case("recompute = {true, 0}", "Formative layer_recompute: [[4, 0], [4, 0]]\n");
    /* 2-D: 9 capped at 4, true -> 4, a false row -> zeros. */
    formative_case("recompute = {{9, true}, false}",
                   "Formative layer_recompute: [[4, 4], [0, 0]]\n");
    formative_case("recompute = true", "Formative layer_recompute: [[4, 4], [4, 4]]\n");
    formative_case("recompute = false", "Formative layer_recompute: [[0, 0], [0, 0]]\n");
    /* A list of patterns: each on every layer. */
    formative_case("select_recompute = {'feed_forward\\\\.mul'}",
                   "Formative select_recompute: {'feed_forward\\.mul': [[4, 4], [4, 4]]}\n");
    /* A dict: sorted by pattern ('m' < 'w'), a value each. */
    formative_case("select_recompute = { ['feed_forward\\\\.w1\\\\.activation\\\\.silu'] = {1, 0},"
                   " ['feed_forward\\\\.mul'] = true }",
                   "Formative select_recompute: {'feed_forward\\.mul': [[4, 4], [4, 4]], "
                   "'feed_forward\\.w1\\.activation\\.silu': [[1, 0], [0, 0]]}\n");
    /* The ordered form keeps the order written. */
    formative_case("select_recompute = { {['feed_forward\\\\.w1\\\\.activation\\\\.silu'] = {1, 0}},"
                   " {['feed_forward\\\\.mul'] = true} }",
                   "Formative select_recompute: {'feed_forward\\.w1\\.activation\\.silu': "
                   "[[1, 0], [0, 0]], 'feed_forward\\.mul': [[4, 4], [4, 4]]}\n");
    /* A bool or counts apply to MindFormers' default patterns. */
    formative_case("select_recompute = true",
                   "Formative select_recompute: {'feed_forward\\.mul': [[4, 4], [4, 4]], "
                   "'feed_forward\\.w1\\.activation\\.silu': [[4, 4], [4, 4]]}\n");
    formative_case("select_comm_recompute = {1, 1}",
                   "Formative select_comm_recompute: {'.*\\.norm': [[1, 1], [0, 0]]}\n");
    formative_case("recompute = false",
                   "Formative select_comm_recompute: {'.*\\.norm': [[0, 0], [0, 0]]}\n");
}
END_TEST

/* Which layers recompute = {5, 2} covers: chunk-major numbering puts chunk 0
 * of stage 0 at layers 0-3, of stage 1 at 4-7, chunk 1 at 8-11 and 12-15;
 * [[3, 1], [2, 1]] -> 0, 1, 2, 4, 8, 9, 12.  Full wins over select. */
START_TEST(full_layers_and_lines)
{
    const ms_scenario *sc = small_ok(16, 2, "pp_interleave_num = 2,",
                                     "recompute_config = { recompute = {5, 2}, "
                                     "select_recompute = true, select_comm_recompute = {1, 0} },");
    ms_diag d;
    for (int l = 0; l < 16; l++) {
        scn_layer_memory lm;
        ck_assert_int_eq(scn_layer_settings(sc, l, &lm, &d), MS_OK);
        bool full = l <= 2 || l == 4 || l == 8 || l == 9 || l == 12;
        ck_assert_msg(lm.full_recompute == full, "layer %d", l);
        ck_assert_uint_eq(lm.n_select, full ? 0 : 2);
    }
    /* comm {1, 0}: stage 0 gets 1 layer, in chunk 0: layer 0 (full). */
    assert_lines(sc, "Set ",
                 "Set full recompute at layer 0\n"
                 "Set full recompute at layer 1\n"
                 "Set full recompute at layer 2\n"
                 "Set select recompute at layer 3: feed_forward.mul, "
                 "feed_forward.w1.activation.silu\n"
                 "Set full recompute at layer 4\n"
                 "Set select recompute at layer 5: feed_forward.mul, "
                 "feed_forward.w1.activation.silu\n"
                 "Set select recompute at layer 6: feed_forward.mul, "
                 "feed_forward.w1.activation.silu\n"
                 "Set select recompute at layer 7: feed_forward.mul, "
                 "feed_forward.w1.activation.silu\n"
                 "Set full recompute at layer 8\n"
                 "Set full recompute at layer 9\n"
                 "Set select recompute at layer 10: feed_forward.mul, "
                 "feed_forward.w1.activation.silu\n"
                 "Set select recompute at layer 11: feed_forward.mul, "
                 "feed_forward.w1.activation.silu\n"
                 "Set full recompute at layer 12\n"
                 "Set select recompute at layer 13: feed_forward.mul, "
                 "feed_forward.w1.activation.silu\n"
                 "Set select recompute at layer 14: feed_forward.mul, "
                 "feed_forward.w1.activation.silu\n"
                 "Set select recompute at layer 15: feed_forward.mul, "
                 "feed_forward.w1.activation.silu\n");
    ms_scenario_free(sc);
    /* The interleaved program of stage 0 holds chunks 0 (layers 0-3) and 1
     * (8-11): full recompute of 0, 1, 2, 8, 9 and the MLP activation of 3,
     * 10, 11, each x 2 micro-batches. */
    built b;
    plan_pp(&b, 16, 2, "pp_interleave_num = 2,",
            "recompute_config = { recompute = {5, 2}, select_recompute = true },", 0);
    uint32_t layer_segs = 0, act_segs = 0;
    for (uint32_t i = 0; i < b.plan.n; i++) {
        const ms_segment *seg = &b.v.segments[b.plan.items[i].segment];
        bool full = seg->parent == MS_NONE;
        layer_segs += full;
        act_segs += !full;
        ck_assert(full ? (seg->layer <= 2 || seg->layer == 8 || seg->layer == 9)
                       : (seg->layer == 3 || seg->layer == 10 || seg->layer == 11));
    }
    ck_assert_uint_eq(layer_segs, 10);
    ck_assert_uint_eq(act_segs, 6);
    built_free(&b);
    /* select_comm_recompute's default '.*\.norm' names both norms. */
    sc = small_ok(2, 1, NULL, "recompute_config = { select_comm_recompute = true },");
    assert_lines(sc, "Set select comm",
                 "Set select comm recompute at layer 0: attention_norm.norm, ffn_norm.norm\n"
                 "Set select comm recompute at layer 1: attention_norm.norm, ffn_norm.norm\n");
    ms_scenario_free(sc);
}
END_TEST

/* ---- seed 003's swap examples, line for line ----------------------------------- */

START_TEST(swap_example_default)
{
    const ms_scenario *sc = load_ok("scenarios/llama2-7b-swap-default.lua", NULL, 0);
    assert_lines(sc, "Set ",
                 "Set op_swap at layer 0: attention.flash_attention, value=10\n"
                 "Set op_swap at layer 1: attention.flash_attention, value=10\n"
                 "Set op_swap at layer 2: attention.flash_attention, value=10\n"
                 "Set op_swap at layer 3: attention.flash_attention, value=10\n");
    assert_lines(sc, "Formative op swap",
                 "Formative op swap: {'.*\\.flash_attention': [{'backward_prefetch': 10, "
                 "'layers': True}]}\n");
    ms_scenario_free(sc);
}
END_TEST

START_TEST(swap_example_layers)
{
    const ms_scenario *sc = load_ok("scenarios/llama2-7b-layer-swap.lua", NULL, 0);
    assert_lines(sc, "Set ",
                 "Set layer swap at layer 0 and value is: 20\n"
                 "Set layer swap at layer 3 and value is: 20\n");
    assert_lines(sc, "Formative layer swap",
                 "Formative layer swap: [{'backward_prefetch': 20, 'layers': [0, 3]}]\n");
    /* With swap on, recompute options are layer indices: false -> []. */
    assert_lines(sc, "Formative layer_recompute", "Formative layer_recompute: []\n");
    ms_scenario_free(sc);
}
END_TEST

static const char *const op_swap_lines =
    "Set op_swap at layer 0: .attention, value=20\n"
    "Set op_swap at layer 1: .attention, value=20, .feed_forward, value=15\n"
    "Set op_swap at layer 2: .attention, value=20, .feed_forward, value=15\n"
    "Set op_swap at layer 3: .attention, value=10\n";

START_TEST(swap_example_ops)
{
    const ms_scenario *sc = load_ok("scenarios/llama2-7b-op-swap.lua", NULL, 0);
    assert_lines(sc, "Set ", op_swap_lines);
    assert_lines(sc, "Formative op swap",
                 "Formative op swap: {'attention': [{'backward_prefetch': 20, 'layers': "
                 "[0, 1, 2]}, {'backward_prefetch': 10, 'layers': [3]}], 'feed_forward': "
                 "[{'backward_prefetch': 15, 'layers': [1, 2]}]}\n");
    ms_scenario_free(sc);
}
END_TEST

START_TEST(swap_example_mixed)
{
    const ms_scenario *sc = load_ok("scenarios/llama2-7b-swap-recompute.lua", NULL, 0);
    assert_lines(sc, "Set ",
                 "Set select recompute at layer 0: feed_forward\n"
                 "Set op_swap at layer 0: .attention, value=20\n"
                 "Set op_swap at layer 1: .attention, value=20, .feed_forward, value=15\n"
                 "Set op_swap at layer 2: .attention, value=20, .feed_forward, value=15\n"
                 "Set select recompute at layer 3: feed_forward\n"
                 "Set op_swap at layer 3: .attention, value=10\n");
    assert_lines(sc, "Formative select_recompute",
                 "Formative select_recompute: {'feed_forward': [0, 3]}\n");
    ms_scenario_free(sc);
}
END_TEST

/* ---- decisions ------------------------------------------------------------------ */

/* 4 layers x 2 micro-batches = 8 (layer, micro-batch) pairs on one stage.
 * The default select patterns (feed_forward.mul + w1.activation.silu)
 * cover the MLP activation segment exactly. */
START_TEST(plan_select_recompute)
{
    built b;
    plan_small(&b, 4, 1, "recompute_config = { select_recompute = true },", 0);
    ck_assert_uint_eq(b.plan.n, 8);
    ck_assert_uint_eq(count_dec(&b, MS_DEC_RECOMPUTE, ".feed_forward.activation"), 8);
    built_free(&b);
    /* '.*\.norm': the two norm segments of every pair. */
    plan_small(&b, 4, 1, "recompute_config = { select_comm_recompute = true },", 0);
    ck_assert_uint_eq(b.plan.n, 16);
    ck_assert_uint_eq(count_dec(&b, MS_DEC_RECOMPUTE, "_norm"), 16);
    built_free(&b);
    /* Only mul: the activation segment also holds silu, so mul's own
     * op-level segment is recomputed (its inputs, silu's output and w3's,
     * are kept for backward; its output, read by w2's weight grad, is
     * dropped and made again). */
    plan_small(&b, 4, 1, "recompute_config = { select_recompute = {'feed_forward\\\\.mul'} },",
               0);
    ck_assert_uint_eq(b.plan.n, 8);
    ck_assert_uint_eq(count_dec(&b, MS_DEC_RECOMPUTE, ".feed_forward.mul"), 8);
    for (uint32_t i = 0; i < b.plan.n; i++)
        ck_assert(b.v.segments[b.plan.items[i].segment].op_level);
    built_free(&b);
    /* Every op of the layer matched: the layer itself. */
    plan_small(&b, 4, 1, "recompute_config = { select_recompute = {'.*'} },", 0);
    ck_assert_uint_eq(b.plan.n, 8);
    ck_assert_uint_eq(count_dec(&b, MS_DEC_RECOMPUTE, NULL), 8);
    for (uint32_t i = 0; i < b.plan.n; i++)
        ck_assert_int_eq(b.v.segments[b.plan.items[i].segment].parent, MS_NONE);
    built_free(&b);
}
END_TEST

/* Full recompute per stage: {1, 2} on 2 stages of 2 layers: stage 0
 * recomputes layer 0, stage 1 both its layers (2, 3); x 2 micro-batches. */
START_TEST(plan_full_recompute)
{
    built b;
    plan_small(&b, 4, 2, "recompute_config = { recompute = {1, 2}, select_recompute = true },",
               0);
    /* Stage 0: layer 0 full (2), layer 1 select (2 activation segments). */
    ck_assert_uint_eq(count_dec(&b, MS_DEC_RECOMPUTE, "layers.0"), 2);
    ck_assert_uint_eq(count_dec(&b, MS_DEC_RECOMPUTE, "layers.1.feed_forward.activation"), 2);
    ck_assert_uint_eq(b.plan.n, 4);
    built_free(&b);
    plan_small(&b, 4, 2, "recompute_config = { recompute = {1, 2}, select_recompute = true },",
               1);
    ck_assert_uint_eq(count_dec(&b, MS_DEC_RECOMPUTE, "layers.2"), 2);
    ck_assert_uint_eq(count_dec(&b, MS_DEC_RECOMPUTE, "layers.3"), 2);
    ck_assert_uint_eq(b.plan.n, 4);
    built_free(&b);
}
END_TEST

/* swap on alone: flash attention's saved outputs (its output and the fp32
 * logsumexp) in every layer, 2 x 4 layers x 2 micro-batches. */
START_TEST(plan_swap_default)
{
    built b;
    plan_small(&b, 4, 1, "swap_config = { swap = true, default_prefetch = 3 },", 0);
    ck_assert_uint_eq(b.plan.n, 16);
    ck_assert_uint_eq(count_dec(&b, MS_DEC_SWAP, "flash_attention.out"), 8);
    ck_assert_uint_eq(count_dec(&b, MS_DEC_SWAP, "flash_attention.softmax_lse"), 8);
    for (uint32_t i = 0; i < b.plan.n; i++) {
        const ms_decision *dec = &b.plan.items[i];
        ck_assert_int_eq(dec->out_after, MS_NONE);
        ck_assert_int_eq(dec->in_before, MS_NONE);
        ck_assert_int_eq(dec->prefetch, 3);
        ck_assert(b.v.tensors[dec->tensor].saved_for_backward);
    }
    built_free(&b);
}
END_TEST

/* Layer swap: every saved activation a layer's forward produces.  A llama
 * layer with SP and flash attention saves (per micro-batch) the two norm
 * outputs (2), V and the rotated Q and K (3: Q and K before the rotation are
 * not needed, the rotation's backward reads nothing), flash attention's
 * output and logsumexp (2), the attention residual sum that ffn_norm's
 * backward reads (1), w1 and w3 outputs (2), silu and mul outputs (2), and
 * the layer's output (1: the next layer's norm reads it) = 13. */
START_TEST(plan_layer_swap)
{
    built b;
    plan_small(&b, 4, 1, "swap_config = { swap = true, layer_swap = "
                         "{ {backward_prefetch = 2, layers = {1}} } },", 0);
    ck_assert_uint_eq(count_dec(&b, MS_DEC_SWAP, NULL), 2 * 13);
    for (uint32_t i = 0; i < b.plan.n; i++) {
        ck_assert_int_eq(b.v.tensors[b.plan.items[i].tensor].layer, 1);
        ck_assert_int_eq(b.plan.items[i].prefetch, 2);
    }
    built_free(&b);
}
END_TEST

/* Seed 003's mixing rules.  op_swap of feed_forward in layers 0 and 1 swaps
 * its saved outputs (w1, w3, silu, mul: 4 per pair); select recompute of
 * feed_forward on layer 1 recomputes its activation segment: silu and mul
 * outputs are dropped (recompute wins on the same op) and w1, w3 outputs
 * feed the recomputed ops (a swap whose consumer is recomputed has no
 * effect).  Layer 0 keeps its 4 x 2 swaps. */
START_TEST(plan_recompute_wins)
{
    built b;
    plan_small(&b, 4, 1, "recompute_config = { select_recompute = { feed_forward = {1} } },"
                         "swap_config = { swap = true, op_swap = { {op_name = 'feed_forward',"
                         " backward_prefetch = 5, layers = {0, 1}} } },", 0);
    ck_assert_uint_eq(count_dec(&b, MS_DEC_RECOMPUTE, "layers.1.feed_forward.activation"), 2);
    ck_assert_uint_eq(count_dec(&b, MS_DEC_RECOMPUTE, NULL), 2);
    ck_assert_uint_eq(count_dec(&b, MS_DEC_SWAP, NULL), 8);
    for (uint32_t i = 0; i < b.plan.n; i++)
        if (b.plan.items[i].kind == MS_DEC_SWAP)
            ck_assert_int_eq(b.v.tensors[b.plan.items[i].tensor].layer, 0);
    built_free(&b);
    /* Without the recompute, layer 1 swaps its 4 x 2 too. */
    plan_small(&b, 4, 1, "swap_config = { swap = true, op_swap = { {op_name = 'feed_forward',"
                         " backward_prefetch = 5, layers = {0, 1}} } },", 0);
    ck_assert_uint_eq(count_dec(&b, MS_DEC_SWAP, NULL), 16);
    built_free(&b);
    /* Full recompute of layer 1 drops its layer swap entirely. */
    plan_small(&b, 4, 1, "recompute_config = { recompute = {1} }, swap_config = { swap = true,"
                         " layer_swap = { {backward_prefetch = 1, layers = {1}} } },", 0);
    ck_assert_uint_eq(count_dec(&b, MS_DEC_RECOMPUTE, "layers.1"), 2);
    ck_assert_uint_eq(count_dec(&b, MS_DEC_SWAP, NULL), 0);
    built_free(&b);
}
END_TEST

/* No settings: nothing printed, nothing planned. */
START_TEST(plan_none)
{
    built b;
    plan_small(&b, 2, 1, NULL, 0);
    ck_assert_uint_eq(b.plan.n, 0);
    ck_assert(!scn_settings_active(b.sc));
    char *all = printed(b.sc);
    ck_assert_str_eq(all, "");
    free(all);
    built_free(&b);
}
END_TEST

/* ---- Megatron's words ------------------------------------------------------------- */

START_TEST(megatron_recompute)
{
    built b;
    /* uniform: every layer (each its own unit, whatever N). */
    plan_small(&b, 4, 1, "recompute = { recompute_granularity = 'full', recompute_method = "
                         "'uniform', recompute_num_layers = 2 },", 0);
    ck_assert_uint_eq(b.plan.n, 8);
    for (uint32_t i = 0; i < b.plan.n; i++)
        ck_assert_int_eq(b.v.segments[b.plan.items[i].segment].parent, MS_NONE);
    built_free(&b);
    /* block 1 on 2 stages of 2: the first layer of each stage (0, 2). */
    for (int stage = 0; stage < 2; stage++) {
        plan_small(&b, 4, 2, "recompute = { recompute_granularity = 'full',"
                             " recompute_method = 'block', recompute_num_layers = 1 },", stage);
        ck_assert_uint_eq(count_dec(&b, MS_DEC_RECOMPUTE, stage ? "layers.2" : "layers.0"), 2);
        ck_assert_uint_eq(b.plan.n, 2);
        built_free(&b);
    }
    /* selective: the attention core of every pair. */
    plan_small(&b, 4, 1, "recompute = { recompute_granularity = 'selective' },", 0);
    ck_assert_uint_eq(count_dec(&b, MS_DEC_RECOMPUTE, ".attention.core"), 8);
    ck_assert_uint_eq(b.plan.n, 8);
    char *all = printed(b.sc);
    ck_assert(strstr(all, "Megatron recompute: recompute_granularity=selective") != NULL);
    free(all);
    built_free(&b);
}
END_TEST

START_TEST(megatron_errors)
{
    ms_diag d;
    small_bad(4, 1, NULL, "recompute = { recompute_granularity = 'full' },", &d);
    ASSERT_MSG_HAS(d, "recompute_granularity \"full\" needs recompute_method");
    small_bad(4, 2, NULL, "recompute = { recompute_granularity = 'full', recompute_method = "
                          "'block', recompute_num_layers = 3 },", &d);
    ASSERT_MSG_HAS(d, "recompute_num_layers between 1 and the layers per pipeline stage (2)");
    small_bad(4, 1, NULL, "recompute = { recompute_granularity = 'selective', "
                          "recompute_method = 'uniform' },", &d);
    ASSERT_MSG_HAS(d, "\"selective\" takes no recompute_method");
    small_bad(4, 1, NULL, "recompute = { recompute_granularity = 'partial' },", &d);
    ASSERT_MSG_HAS(d, "field 'recompute_granularity' must be one of \"full\", \"selective\"");
    small_bad(4, 1, NULL, "recompute = { recompute_granularity = 'selective' }, "
                          "recompute_config = { recompute = true },", &d);
    ASSERT_MSG_HAS(d, "recompute is set twice");
}
END_TEST

/* ---- bad input ------------------------------------------------------------------ */

START_TEST(bad_list_length)
{
    ms_diag d;
    /* Two stages: a per-stage list needs 2 counts. */
    ck_assert_int_eq(small_bad(4, 2, NULL, "recompute_config = { recompute = {1, 1, 1} },", &d),
                     MS_EINVAL);
    ASSERT_MSG_HAS(d, "field 'recompute_config.recompute' lists 3 per-stage layer counts; it "
                      "needs 2, one per pipeline stage");
    /* Two chunks of two stages: [2][2]. */
    small_bad(8, 2, "pp_interleave_num = 2,",
              "recompute_config = { select_recompute = { ['feed_forward'] = "
              "{{1, 1}, {1, 1}, {1, 1}} } },", &d);
    ASSERT_MSG_HAS(d, "field 'recompute_config.select_recompute['feed_forward']' is a 2-D list "
                      "of 3 rows; it needs [2][2]");
    small_bad(8, 2, "pp_interleave_num = 2,",
              "recompute_config = { select_comm_recompute = {{1}, {1, 1}} },", &d);
    ASSERT_MSG_HAS(d, "field 'recompute_config.select_comm_recompute[1]' must list 2 layer "
                      "counts, one per pipeline stage");
    /* The offset: one per stage. */
    small_bad(8, 2, "offset = {1, -1, 0},", NULL, &d);
    ASSERT_MSG_HAS(d, "field 'parallel.offset' must list 2 offsets, one per pipeline stage");
    small_bad(8, 2, "offset = {1, 1},", NULL, &d);
    ASSERT_MSG_HAS(d, "parallel.offset sums to 2; it must sum to model.num_layers % (stages x "
                      "chunks) = 8 % 2 = 0");
}
END_TEST

static void check_fails(const ms_scenario *sc, const char *text)
{
    ms_diag d = {0};
    ck_assert_int_eq(check_all(sc, &d), MS_EINVAL);
    ASSERT_MSG_HAS(d, text);
    ms_program *prog;
    ms_program_view v;
    ms_plan plan;
    ck_assert_int_eq(ms_program_build(sc, 0, &prog, &d), MS_OK);
    v = ms_program_get_view(prog);
    ms_plan_init(&plan);
    ck_assert_int_eq(pol_declared_plan(sc, &v, &plan, &d), MS_EINVAL);
    ASSERT_MSG_HAS(d, text);
    ms_plan_free(&plan);
    ms_program_free(prog);
}

START_TEST(bad_regex_target)
{
    const ms_scenario *sc = small_ok(2, 1, NULL,
                                     "recompute_config = { select_recompute = "
                                     "{'feed_forward\\\\.w9'} },");
    check_fails(sc, "recompute_config.select_recompute: unknown regex target "
                    "'feed_forward\\.w9'");
    ms_scenario_free(sc);
    sc = small_ok(2, 1, NULL, "swap_config = { swap = true, op_swap = { {op_name = 'attn', "
                              "backward_prefetch = 1, layers = true} } },");
    check_fails(sc, "swap_config.op_swap: unknown regex target 'attn'");
    ms_scenario_free(sc);
    /* A dot that is not "\." is a regex dot inside one module level. */
    sc = small_ok(2, 1, NULL, "recompute_config = { select_comm_recompute = "
                              "{'attention_norm.norm'} },");
    check_fails(sc, "unknown regex target 'attention_norm.norm'");
    ms_scenario_free(sc);
    /* The file says which file. */
    ms_diag d0;
    ck_assert_int_eq(load_rel("tests/data/scenarios/mc_unknown_regex.lua", NULL, 0, &sc, &d0),
                     MS_OK);
    ck_assert_int_eq(check_all(sc, &d0), MS_EINVAL);
    ASSERT_MSG_HAS(d0, "mc_unknown_regex.lua: recompute_config.select_recompute: unknown regex "
                       "target 'feed_forward\\.w9'");
    ms_scenario_free(sc);
    /* Not a regex at all: named at load. */
    ms_diag d;
    small_bad(2, 1, NULL, "recompute_config = { select_recompute = {'feed_forward\\\\.('} },",
              &d);
    ASSERT_MSG_HAS(d, "recompute_config.select_recompute: pattern 'feed_forward\\.(' is not a "
                      "valid regular expression");
}
END_TEST

START_TEST(bad_types)
{
    ms_diag d;
    small_bad(2, 1, NULL, "recompute_config = { recompute = 'yes' },", &d);
    ASSERT_MSG_HAS(d, "field 'recompute_config.recompute' must be true, false, a list of layer "
                      "counts per pipeline stage or a 2-D list per (interleave chunk, stage) "
                      "(got the string \"yes\")");
    small_bad(2, 1, NULL, "recompute_config = { recompute = {'attention'} },", &d);
    ASSERT_MSG_HAS(d, "field 'recompute_config.recompute' must be true, false, a list");
    small_bad(2, 1, NULL, "recompute_config = { select_recompute = 2.5 },", &d);
    ASSERT_MSG_HAS(d, "field 'recompute_config.select_recompute' must be true, false");
    small_bad(2, 1, NULL, "recompute_config = { recompute = {1, x = 2} },", &d);
    ASSERT_MSG_HAS(d, "field 'recompute_config.recompute' must be a list {a, b, ...} or a table "
                      "of named entries");
    small_bad(2, 1, NULL, "recompute_config = { recompute = {-1} },", &d);
    ASSERT_MSG_HAS(d, "field 'recompute_config.recompute[1]' must be a layer count >= 0");
    small_bad(2, 1, NULL, "swap_config = { swap = 1 },", &d);
    ASSERT_MSG_HAS(d, "field 'swap_config.swap' must be a boolean");
    small_bad(2, 1, NULL, "swap_config = { swap = true, layer_swap = { {layers = {0}} } },", &d);
    ASSERT_MSG_HAS(d, "field 'swap_config.layer_swap[1].backward_prefetch' is required");
    small_bad(2, 1, NULL, "swap_config = { swap = true, op_swap = { {op_name = 'attention', "
                          "prefetch = 1, backward_prefetch = 1, layers = true} } },", &d);
    ASSERT_MSG_HAS(d, "unknown key 'swap_config.op_swap[1].prefetch'");
    small_bad(2, 1, NULL, "swap_config = { swap = true, layer_swap = { {backward_prefetch = 1, "
                          "layers = true}, {backward_prefetch = 2, layers = {0}} } },", &d);
    ASSERT_MSG_HAS(d, "layer_swap: an entry has layers = true, so every entry must have the "
                      "same backward_prefetch");
    small_bad(2, 1, NULL, "recompute_config = { unknown = 1 },", &d);
    ASSERT_MSG_HAS(d, "unknown key 'recompute_config.unknown'");
}
END_TEST

/* With swap on, MindFormers reads the options as layer indices. */
START_TEST(bad_swap_mode)
{
    ms_diag d;
    small_bad(4, 1, NULL, "recompute_config = { recompute = {{1}} }, swap_config = "
                          "{ swap = true },", &d);
    ASSERT_MSG_HAS(d, "field 'recompute_config.recompute' must be true, false or a list of layer "
                      "indices when swap_config.swap is on");
    small_bad(4, 1, NULL, "recompute_config = { select_recompute = {'feed_forward'} }, "
                          "swap_config = { swap = true },", &d);
    ASSERT_MSG_HAS(d, "with swap_config.swap on, give each pattern true, false or a list of "
                      "layer indices");
    small_bad(4, 1, NULL, "recompute_config = { recompute = {1, 4} }, swap_config = "
                          "{ swap = true },", &d);
    ASSERT_MSG_HAS(d, "field 'recompute_config.recompute[2]' is layer 4; the model's layers are "
                      "0..3");
    small_bad(4, 1, NULL, "swap_config = { swap = true, op_swap = { {op_name = 'attention', "
                          "backward_prefetch = 1, layers = {7}} } },", &d);
    ASSERT_MSG_HAS(d, "field 'swap_config.op_swap[1].layers[1]' is layer 7");
    /* In swap mode the counts list {1, 3} is a list of layer indices. */
    const ms_scenario *sc = small_ok(4, 1, NULL,
                                     "recompute_config = { recompute = {1, 3} }, "
                                     "swap_config = { swap = true },");
    scn_layer_memory lm;
    for (int l = 0; l < 4; l++) {
        ck_assert_int_eq(scn_layer_settings(sc, l, &lm, &d), MS_OK);
        ck_assert(lm.full_recompute == (l == 1 || l == 3));
        ck_assert_uint_eq(lm.n_op_swap, 1); /* the default flash-attention swap */
    }
    ms_scenario_free(sc);
}
END_TEST

/* Uneven stages: 8 layers, offset {1, -1}: stage 0 holds 5, stage 1 3.  A
 * program built for another layout (here the even one) is refused. */
START_TEST(uneven_layout)
{
    const ms_scenario *sc =
        small_ok(8, 2, "offset = {1, -1},", "recompute_config = { recompute = true },");
    int first, count;
    ck_assert_int_eq(ms_scenario_chunk_layers(sc, 0, 0, &first, &count), MS_OK);
    ck_assert_int_eq(first, 0);
    ck_assert_int_eq(count, 5);
    ck_assert_int_eq(ms_scenario_chunk_layers(sc, 1, 0, &first, &count), MS_OK);
    ck_assert_int_eq(first, 5);
    ck_assert_int_eq(count, 3);
    ck_assert_int_eq(ms_scenario_chunk_layers(sc, 2, 0, &first, &count), MS_ERANGE);
    const ms_scenario *even = small_ok(8, 2, NULL, NULL);
    ms_diag d = {0};
    ms_program *prog;
    ms_program_view v;
    ms_plan plan;
    ck_assert_int_eq(ms_program_build(even, 1, &prog, &d), MS_OK); /* layers 4..7 */
    v = ms_program_get_view(prog);
    ms_plan_init(&plan);
    ck_assert_int_eq(pol_declared_plan(sc, &v, &plan, &d), MS_EUNSUPPORTED);
    ASSERT_MSG_HAS(d, "the program of stage 1 holds layer 4, which the scenario's pipeline "
                      "layout (parallel.offset, pp_interleave_num) puts on stage 0");
    ms_plan_free(&plan);
    ms_program_free(prog);
    ms_scenario_free(even);
    /* The builder follows the layout: stage 1 holds layers 5..7, all
     * recomputed, x 2 micro-batches. */
    ck_assert_int_eq(ms_program_build(sc, 1, &prog, &d), MS_OK);
    v = ms_program_get_view(prog);
    ms_plan_init(&plan);
    ck_assert_int_eq(pol_declared_plan(sc, &v, &plan, &d), MS_OK);
    ck_assert_uint_eq(plan.n, 6);
    for (uint32_t i = 0; i < plan.n; i++)
        ck_assert_int_ge(v.segments[plan.items[i].segment].layer, 5);
    ms_plan_free(&plan);
    ms_program_free(prog);
    ms_scenario_free(sc);
    /* pp_interleave_num stated evenly is Megatron's virtual pipeline. */
    sc = small_ok(8, 2, "pp_interleave_num = 2,", NULL);
    ck_assert_int_eq(sc->parallel.num_layers_per_virtual_pipeline_stage, 2);
    ms_scenario_free(sc);
    small_bad(8, 2, "pp_interleave_num = 3,", NULL, &d);
    ASSERT_MSG_HAS(d, "model.num_layers (8) must be divisible by "
                      "parallel.pipeline_model_parallel_size x parallel.pp_interleave_num (6)");
    small_bad(8, 2, "pp_interleave_num = 4, num_layers_per_virtual_pipeline_stage = 2,", NULL, &d);
    ASSERT_MSG_HAS(d, "parallel.pp_interleave_num (4) disagrees with "
                      "num_layers_per_virtual_pipeline_stage (2)");
}
END_TEST

/* Overrides reach the tree fields: the seq16k pair's other side. */
START_TEST(override_recompute)
{
    ms_diag d;
    const ms_scenario *sc = load_ok("scenarios/llama2-smartswap-seq16k.lua", NULL, 0);
    scn_layer_memory lm;
    ck_assert_int_eq(scn_layer_settings(sc, 39, &lm, &d), MS_OK);
    ck_assert(lm.full_recompute);
    ms_scenario_free(sc);
    static const char *const off[] = {"recompute_config.recompute=false"};
    sc = load_ok("scenarios/llama2-smartswap-seq16k.lua", off, 1);
    ck_assert_int_eq(scn_layer_settings(sc, 39, &lm, &d), MS_OK);
    ck_assert(!lm.full_recompute);
    ms_scenario_free(sc);
    static const char *const meg[] = {"model.recompute_granularity=selective"};
    sc = load_ok("scenarios/llama2-7b.lua", meg, 1);
    ck_assert_int_eq(scn_layer_settings(sc, 0, &lm, &d), MS_OK);
    ck_assert(lm.attention_recompute && scn_settings_active(sc));
    ms_scenario_free(sc);
    static const char *const bad[] = {"recompute_config.recompute=maybe"};
    sc = (const ms_scenario *)1;
    ck_assert_int_eq(load_rel("scenarios/llama2-7b.lua", bad, 1, &sc, &d), MS_EINVAL);
    ASSERT_MSG_HAS(d, "the value must be true, false or an integer");
}
END_TEST

/* Every shipped scenario of this vocabulary loads and checks. */
START_TEST(shipped_scenarios)
{
    static const char *const files[] = {
        "llama2-7b-seq6144", "llama2-13b-seq8192", "llama2-13b-16dev-seq4096",
        "llama2-13b-16dev-seq6144", "llama2-13b-16dev-seq8192", "llama2-smartswap-tp8",
        "llama2-smartswap-tp1", "llama2-smartswap-seq16k", "llama2-7b-swap-default",
        "llama2-7b-layer-swap", "llama2-7b-op-swap", "llama2-7b-swap-recompute", "llama3-8b",
    };
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
        char rel[128];
        ms_diag d = {0};
        snprintf(rel, sizeof rel, "scenarios/%s.lua", files[i]);
        const ms_scenario *sc = load_ok(rel, NULL, 0);
        ck_assert_str_eq(sc->name, files[i]);
        ck_assert_msg(check_all(sc, &d) == MS_OK, "%s: %s", files[i], d.msg);
        ms_scenario_free(sc);
    }
    /* seed 001's 16-NPU rows: 16 / (TP 8) = DP 2, 16 / (2 x 2) = 4 micro-batches. */
    const ms_scenario *sc = load_ok("scenarios/llama2-13b-16dev-seq8192.lua", NULL, 0);
    ck_assert_int_eq(sc->parallel.data_parallel_size, 2);
    ck_assert_int_eq(sc->parallel.num_micro_batches, 4);
    ms_scenario_free(sc);
    /* llama3-8b: GQA 32 heads in 8 groups; 128 / (1 x DP 4) = 32 micro-batches. */
    sc = load_ok("scenarios/llama3-8b.lua", NULL, 0);
    ck_assert_int_eq(sc->model.num_query_groups, 8);
    ck_assert_int_eq(sc->parallel.num_micro_batches, 32);
    ms_scenario_free(sc);
}
END_TEST

static Suite *memory_config_suite(void)
{
    Suite *s = suite_create("memory_config");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, formative_48_layers);
    tcase_add_test(tc, formative_forms);
    tcase_add_test(tc, full_layers_and_lines);
    tcase_add_test(tc, swap_example_default);
    tcase_add_test(tc, swap_example_layers);
    tcase_add_test(tc, swap_example_ops);
    tcase_add_test(tc, swap_example_mixed);
    tcase_add_test(tc, plan_select_recompute);
    tcase_add_test(tc, plan_full_recompute);
    tcase_add_test(tc, plan_swap_default);
    tcase_add_test(tc, plan_layer_swap);
    tcase_add_test(tc, plan_recompute_wins);
    tcase_add_test(tc, plan_none);
    tcase_add_test(tc, megatron_recompute);
    tcase_add_test(tc, megatron_errors);
    tcase_add_test(tc, bad_list_length);
    tcase_add_test(tc, bad_regex_target);
    tcase_add_test(tc, bad_types);
    tcase_add_test(tc, bad_swap_mode);
    tcase_add_test(tc, uneven_layout);
    tcase_add_test(tc, override_recompute);
    tcase_add_test(tc, shipped_scenarios);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(memory_config_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
