/* Later micro-batches copied from the first (wl_build_repeat) give the same
 * program as the model code emitting every one: every shipped scenario on
 * every stage, and variants that change what a unit holds (interleaving,
 * context parallelism, the overlapped DP reduction on the last micro-batch's
 * backward, MoE, recompute settings), compared field by field. */
#include <check.h>
#include <stdbool.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/workload/workload_model.h"
#include "memsim/scenario.h"
#include "memsim/workload.h"

static const char *srcdir(void)
{
    const char *src = getenv("MEMSIM_SRCDIR");
    return src ? src : ".";
}

static const ms_scenario *load(const char *path, const char *const *ov, size_t n_ov)
{
    const ms_scenario *sc = NULL;
    ms_diag d = {0};
    ms_status st = ms_scenario_load(path, ov, n_ov, &sc, &d);
    ck_assert_msg(st == MS_OK, "load %s: %s", path, d.msg);
    return sc;
}

static ms_program *build(const ms_scenario *sc, int stage, bool repeat)
{
    ms_program *p = NULL;
    ms_diag d = {0};
    ms_status st = wl_program_build(sc, stage, repeat, &p, &d);
    ck_assert_msg(st == MS_OK, "build stage %d: %s", stage, d.msg);
    return p;
}

/* The first difference found, if any: Check's asserts report their place
 * on every call (a write each), too slow for every field of every op, so
 * the walk compares plainly and asserts once per program. */
typedef struct diff {
    char what[256];
} diff;

static bool differs(diff *df, bool unequal, const char *what, uint32_t i)
{
    if (unequal && df->what[0] == '\0')
        snprintf(df->what, sizeof df->what, "%s %u", what, (unsigned)i);
    return unequal;
}

#define SAME(df, what, i, a, b) differs(df, (a) != (b), what ": " #a, i)
#define SAME_STR(df, what, i, a, b) differs(df, strcmp((a), (b)) != 0, what ": " #a, i)
#define SAME_IDS(df, what, i, a, b, n) \
    differs(df, (n) > 0 && memcmp((a), (b), (n) * sizeof *(a)) != 0, what ": " #a, i)

static void same_kernel(diff *df, uint32_t i, const ms_kernel *a, const ms_kernel *b)
{
    SAME_STR(df, "op", i, a->name, b->name);
    SAME(df, "op", i, a->cls, b->cls);
    SAME(df, "op", i, a->dtype, b->dtype);
    SAME(df, "op", i, a->flops, b->flops);
    SAME(df, "op", i, a->bytes, b->bytes);
    differs(df, memcmp(a->shape, b->shape, sizeof a->shape) != 0, "op: shape", i);
    SAME(df, "op", i, a->comm, b->comm);
    SAME(df, "op", i, a->group_size, b->group_size);
    SAME(df, "op", i, a->link, b->link);
    SAME(df, "op", i, a->comm_bytes, b->comm_bytes);
    SAME(df, "op", i, a->peer, b->peer);
    SAME(df, "op", i, a->tag, b->tag);
    SAME(df, "op", i, a->ranks_per_node, b->ranks_per_node);
}

static void same_op(diff *df, uint32_t i, const ms_op *a, const ms_op *b)
{
    SAME(df, "op", i, a->id, b->id);
    SAME_STR(df, "op", i, a->name, b->name);
    same_kernel(df, i, &a->kernel, &b->kernel);
    SAME(df, "op", i, a->phase, b->phase);
    SAME(df, "op", i, a->micro_batch, b->micro_batch);
    SAME(df, "op", i, a->layer, b->layer);
    SAME(df, "op", i, a->stream, b->stream);
    if (!SAME(df, "op", i, a->n_inputs, b->n_inputs))
        SAME_IDS(df, "op", i, a->inputs, b->inputs, a->n_inputs);
    if (!SAME(df, "op", i, a->n_outputs, b->n_outputs))
        SAME_IDS(df, "op", i, a->outputs, b->outputs, a->n_outputs);
    SAME(df, "op", i, a->segment, b->segment);
    SAME(df, "op", i, a->model_flops, b->model_flops);
    SAME(df, "op", i, a->chunk, b->chunk);
}

static void same_tensor(diff *df, uint32_t i, const ms_tensor *a, const ms_tensor *b)
{
    SAME(df, "tensor", i, a->id, b->id);
    SAME_STR(df, "tensor", i, a->name, b->name);
    SAME(df, "tensor", i, a->bytes, b->bytes);
    SAME(df, "tensor", i, a->dtype, b->dtype);
    SAME(df, "tensor", i, a->kind, b->kind);
    SAME(df, "tensor", i, a->producer, b->producer);
    SAME(df, "tensor", i, a->persistent, b->persistent);
    SAME(df, "tensor", i, a->saved_for_backward, b->saved_for_backward);
    SAME(df, "tensor", i, a->layer, b->layer);
    SAME(df, "tensor", i, a->micro_batch, b->micro_batch);
    if (!SAME(df, "tensor", i, a->n_uses, b->n_uses))
        SAME_IDS(df, "tensor", i, a->uses, b->uses, a->n_uses);
}

static void same_segment(diff *df, uint32_t i, const ms_segment *a, const ms_segment *b)
{
    SAME(df, "segment", i, a->id, b->id);
    SAME_STR(df, "segment", i, a->name, b->name);
    SAME(df, "segment", i, a->layer, b->layer);
    SAME(df, "segment", i, a->micro_batch, b->micro_batch);
    SAME(df, "segment", i, a->parent, b->parent);
    SAME(df, "segment", i, a->first_op, b->first_op);
    SAME(df, "segment", i, a->last_op, b->last_op);
    if (!SAME(df, "segment", i, a->n_inputs, b->n_inputs))
        SAME_IDS(df, "segment", i, a->inputs, b->inputs, a->n_inputs);
    SAME(df, "segment", i, a->first_backward_op, b->first_backward_op);
    SAME(df, "segment", i, a->op_level, b->op_level);
}

static void same_facts(diff *df, const ms_program_view *a, const ms_program_view *b)
{
    const ms_program_facts *x = a->facts, *y = b->facts;
    SAME_IDS(df, "facts", 0, x->last_forward_use, y->last_forward_use, a->n_tensors);
    SAME_IDS(df, "facts", 0, x->first_backward_use, y->first_backward_use, a->n_tensors);
    SAME_IDS(df, "facts", 0, x->saved_bytes, y->saved_bytes, a->n_segments);
    SAME_IDS(df, "facts", 0, x->input_bytes, y->input_bytes, a->n_segments);
}

static void same_program(const char *where, const ms_program_view *a, const ms_program_view *b)
{
    diff df = {{0}};
    bool counts = !SAME(&df, "program", 0, a->n_ops, b->n_ops) &&
                  !SAME(&df, "program", 0, a->n_tensors, b->n_tensors) &&
                  !SAME(&df, "program", 0, a->n_segments, b->n_segments);
    SAME(&df, "program", 0, a->stage, b->stage);
    SAME(&df, "program", 0, a->model_flops, b->model_flops);
    for (uint32_t i = 0; counts && i < a->n_ops; i++)
        same_op(&df, i, &a->ops[i], &b->ops[i]);
    for (uint32_t i = 0; counts && i < a->n_tensors; i++)
        same_tensor(&df, i, &a->tensors[i], &b->tensors[i]);
    for (uint32_t i = 0; counts && i < a->n_segments; i++)
        same_segment(&df, i, &a->segments[i], &b->segments[i]);
    if (counts)
        same_facts(&df, a, b);
    ck_assert_msg(df.what[0] == '\0', "%s: %s differs", where, df.what);
}

/* The first op of micro-batch mb's first forward. */
static const ms_op *first_forward(const ms_program_view *v, int32_t mb)
{
    for (uint32_t i = 0; i < v->n_ops; i++)
        if (v->ops[i].micro_batch == mb && v->ops[i].phase == MS_PHASE_FORWARD)
            return &v->ops[i];
    return NULL;
}

/* Every stage of sc built both ways is the same program; returns how many
 * stages had micro-batch t + 1 copied from micro-batch t, the template (its
 * first op's name is the template's, shared, where the model code writes a
 * name of its own). */
static int compare_stages_from(const char *name, const ms_scenario *sc, int t)
{
    int copied = 0;
    for (int s = 0; s < sc->parallel.pipeline_model_parallel_size; s++) {
        char where[256];
        snprintf(where, sizeof where, "%s stage %d", name, s);
        ms_program *plain = build(sc, s, false), *rep = build(sc, s, true);
        ms_program_view a = ms_program_get_view(plain), b = ms_program_get_view(rep);
        same_program(where, &a, &b);
        const ms_op *a0 = first_forward(&a, t), *a1 = first_forward(&a, t + 1);
        const ms_op *b0 = first_forward(&b, t), *b1 = first_forward(&b, t + 1);
        if (a1 != NULL) {
            ck_assert_msg(a0->name != a1->name, "%s: the model code shares a name", where);
            copied += b0->name == b1->name;
        }
        ms_program_free(plain);
        ms_program_free(rep);
    }
    return copied;
}

static int compare_stages(const char *name, const ms_scenario *sc)
{
    return compare_stages_from(name, sc, 0);
}

START_TEST(shipped_scenarios)
{
    char dir[4096];
    snprintf(dir, sizeof dir, "%s/scenarios", srcdir());
    DIR *dp = opendir(dir);
    ck_assert_msg(dp != NULL, "%s", dir);
    int scenarios = 0, copied = 0;
    for (struct dirent *e; (e = readdir(dp)) != NULL;) {
        size_t n = strlen(e->d_name);
        if (n < 5 || strcmp(e->d_name + n - 4, ".lua") != 0)
            continue;
        char path[8192];
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        const ms_scenario *sc = load(path, NULL, 0);
        copied += compare_stages(e->d_name, sc);
        ms_scenario_free(sc);
        scenarios++;
    }
    closedir(dp);
    /* 23 scenarios; every one but the single-micro-batch ones copies. */
    ck_assert_int_eq(scenarios, 23);
    ck_assert_int_ge(copied, 20);
}
END_TEST

typedef struct variant {
    const char *scenario;
    const char *ov[8];
    int template_mb; /* the micro-batch later ones copy */
} variant;

/* What changes a unit: interleaving with an uneven warm-up, context
 * parallelism, the DP reduction in the last backward or after it, MoE with
 * expert parallelism, selective recompute, one micro-batch, FP8 (the
 * casts' copies the row-parallel layers keep), the parameter gathers of an
 * overlapped distributed optimizer (in the first micro-batch only), TP
 * collectives inside the GEMMs. */
static const variant variants[] = {
    {"llama2-7b", {"parallel.world_size=32", "parallel.pipeline_model_parallel_size=4",
                   "parallel.global_batch_size=32",
                   "parallel.num_layers_per_virtual_pipeline_stage=2",
                   "parallel.overlap_grad_reduce=true"}, 0},
    {"llama2-7b", {"parallel.world_size=16", "parallel.pipeline_model_parallel_size=2",
                   "parallel.global_batch_size=20", "parallel.overlap_grad_reduce=false"}, 0},
    {"llama2-7b", {"parallel.world_size=32", "parallel.context_parallel_size=2",
                   "parallel.pipeline_model_parallel_size=2", "parallel.global_batch_size=12"}, 0},
    {"mixtral-8x7b", {"parallel.global_batch_size=8"}, 0},
    {"gpt-22b", {"recompute.recompute_granularity=selective", "parallel.global_batch_size=4"}, 0},
    {"llama2-7b", {"parallel.global_batch_size=4"}, 0},
    {"llama2-7b", {"device=h100-80gb", "model.fp8=hybrid", "parallel.world_size=16",
                   "parallel.pipeline_model_parallel_size=2", "parallel.global_batch_size=8"}, 0},
    {"llama2-7b", {"device=h100-80gb", "model.fp8=hybrid", "parallel.world_size=32",
                   "parallel.pipeline_model_parallel_size=2", "parallel.global_batch_size=24",
                   "parallel.use_distributed_optimizer=true",
                   "parallel.overlap_param_gather=true"},
     1},
    {"llama2-7b", {"parallel.tp_comm_overlap=true", "parallel.global_batch_size=12"}, 0},
};

START_TEST(variants_of_units)
{
    const variant *v = &variants[_i];
    size_t n_ov = 0;
    while (n_ov < 8 && v->ov[n_ov] != NULL)
        n_ov++;
    char path[4096];
    snprintf(path, sizeof path, "%s/scenarios/%s.lua", srcdir(), v->scenario);
    const ms_scenario *sc = load(path, v->ov, n_ov);
    int copied = compare_stages_from(v->scenario, sc, v->template_mb);
    /* One micro-batch has nothing to copy; the others copy on every stage. */
    ck_assert_int_eq(copied, sc->parallel.num_micro_batches > v->template_mb + 1
                                 ? sc->parallel.pipeline_model_parallel_size
                                 : 0);
    ms_scenario_free(sc);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("workload_repeat");
    TCase *tc = tcase_create("repeat");
    tcase_set_timeout(tc, 600);
    tcase_add_test(tc, shipped_scenarios);
    tcase_add_loop_test(tc, variants_of_units, 0, (int)(sizeof variants / sizeof variants[0]));
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
