/* The Lua policy host (lib/policy/) and the shipped policies.
 *
 * A hand-built program of one micro-batch through two layers stands in for
 * the workload builder:
 *
 *   op  name                          phase      layer seg  reads        writes
 *    0  embedding                     forward    -     -    0            1
 *    1  layers.0.attention.qkv        forward    0     0    1 2          3
 *    2  layers.0.attention.core       forward    0     1    3            4
 *    3  layers.0.mlp                  forward    0     0    4 5          6
 *    4  layers.1.mlp                  forward    1     2    6 7          8
 *    5  loss                          forward    -     -    8            9
 *    6  layers.1.mlp.bwd              backward   1     -    9 6 7        10 11
 *    7  layers.0.mlp.bwd              backward   0     -    11 4 5       12 13
 *    8  layers.0.attention.core.bwd   backward   0     -    13 3         14
 *    9  layers.0.attention.qkv.bwd    backward   0     -    14 1 2       15
 *   10  optimizer                     optimizer  -     -    0 2 5 7 10 12 15 16
 *
 * Tensor i has (i + 1) KiB.  Segments: 0 = layers.0 (ops 1..3), 1 =
 * layers.0.attention.core (op 2, inside 0), 2 = layers.1 (op 4).  Saved for
 * backward: tensors 1, 3, 4, 6. */
#include <check.h>
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "memsim/policy.h"

#define KIB 1024u

static const uint32_t op_in[][8] = {
    {0}, {1, 2}, {3}, {4, 5}, {6, 7}, {8}, {9, 6, 7}, {11, 4, 5}, {13, 3}, {14, 1, 2},
    {0, 2, 5, 7, 10, 12, 15, 16},
};
static const uint32_t op_n_in[] = {1, 2, 1, 2, 2, 1, 3, 3, 2, 3, 8};
static const uint32_t op_out[][2] = {
    {1}, {3}, {4}, {6}, {8}, {9}, {10, 11}, {12, 13}, {14}, {15}, {0},
};
static const uint32_t op_n_out[] = {1, 1, 1, 1, 1, 1, 2, 2, 1, 1, 0};
static const char *const op_names[] = {
    "embedding", "layers.0.attention.qkv", "layers.0.attention.core", "layers.0.mlp",
    "layers.1.mlp", "loss", "layers.1.mlp.bwd", "layers.0.mlp.bwd",
    "layers.0.attention.core.bwd", "layers.0.attention.qkv.bwd", "optimizer",
};
static const ms_phase op_phase[] = {
    MS_PHASE_FORWARD, MS_PHASE_FORWARD, MS_PHASE_FORWARD, MS_PHASE_FORWARD,
    MS_PHASE_FORWARD, MS_PHASE_FORWARD, MS_PHASE_BACKWARD, MS_PHASE_BACKWARD,
    MS_PHASE_BACKWARD, MS_PHASE_BACKWARD, MS_PHASE_OPTIMIZER,
};
static const int32_t op_layer[] = {MS_NONE, 0, 0, 0, 1, MS_NONE, 1, 0, 0, 0, MS_NONE};
static const int32_t op_segment[] = {MS_NONE, 0, 1, 0, 2, MS_NONE, MS_NONE, MS_NONE,
                                     MS_NONE, MS_NONE, MS_NONE};

static const uint32_t t_uses[][3] = {
    {0, 10}, {1, 9}, {1, 9, 10}, {2, 8}, {3, 7}, {3, 7, 10}, {4, 6}, {4, 6, 10}, {5}, {6},
    {10}, {7}, {10}, {8}, {9}, {10}, {10},
};
static const uint32_t t_n_uses[] = {2, 2, 3, 2, 2, 3, 2, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1};
static const char *const t_names[] = {
    "embedding.weight", "embedding.out", "layers.0.attention.qkv.weight",
    "layers.0.attention.qkv.out", "layers.0.attention.core.out", "layers.0.mlp.weight",
    "layers.0.mlp.out", "layers.1.mlp.weight", "layers.1.mlp.out", "loss",
    "layers.1.mlp.weight.grad", "layers.1.mlp.dgrad", "layers.0.mlp.weight.grad",
    "layers.0.mlp.dgrad", "layers.0.attention.core.dgrad",
    "layers.0.attention.qkv.weight.grad", "adam.state",
};
static const ms_tensor_kind t_kind[] = {
    MS_TK_WEIGHT, MS_TK_ACTIVATION, MS_TK_WEIGHT, MS_TK_ACTIVATION, MS_TK_ACTIVATION,
    MS_TK_WEIGHT, MS_TK_ACTIVATION, MS_TK_WEIGHT, MS_TK_ACTIVATION, MS_TK_TEMP, MS_TK_GRAD,
    MS_TK_TEMP, MS_TK_GRAD, MS_TK_TEMP, MS_TK_TEMP, MS_TK_GRAD, MS_TK_OPTIMIZER_STATE,
};
static const int32_t t_producer[] = {MS_NONE, 0, MS_NONE, 1, 2, MS_NONE, 3, MS_NONE, 4, 5,
                                     6, 6, 7, 7, 8, 9, MS_NONE};
static const int32_t t_layer[] = {MS_NONE, MS_NONE, 0, 0, 0, 0, 0, 1, 1, MS_NONE,
                                  1, 1, 0, 0, 0, 0, MS_NONE};

static const uint32_t seg_in[][3] = {{1, 2, 5}, {3}, {6, 7}};
static const uint32_t seg_n_in[] = {3, 1, 2};

#define N_OPS 11
#define N_TENSORS 17
#define N_SEGMENTS 3

typedef struct fixture {
    ms_op ops[N_OPS];
    ms_tensor tensors[N_TENSORS];
    ms_segment segments[N_SEGMENTS];
    ms_device_spec device;
    ms_profile prof;
} fixture;

static fixture fx;
static char srcdir[2048];
static char lib_dir[2100];

static void build_ops(void)
{
    for (uint32_t i = 0; i < N_OPS; i++) {
        fx.ops[i] = (ms_op){
            .id = i, .name = op_names[i], .phase = op_phase[i], .layer = op_layer[i],
            .micro_batch = op_phase[i] == MS_PHASE_OPTIMIZER ? MS_NONE : 0,
            .stream = MS_SR_COMPUTE, .inputs = op_in[i], .n_inputs = op_n_in[i],
            .outputs = op_out[i], .n_outputs = op_n_out[i], .segment = op_segment[i],
            .model_flops = 1e6 * i,
        };
        fx.ops[i].kernel = (ms_kernel){.name = i == 2 ? "flash_attention_fwd" : "matmul",
                                       .cls = i == 2 ? MS_KC_ATTENTION : MS_KC_MATMUL,
                                       .dtype = MS_DTYPE_BF16, .flops = 1e6, .bytes = 4096};
    }
}

static void build_tensors(void)
{
    for (uint32_t i = 0; i < N_TENSORS; i++) {
        ms_tensor_kind k = t_kind[i];
        bool state = k == MS_TK_WEIGHT || k == MS_TK_GRAD || k == MS_TK_OPTIMIZER_STATE;
        fx.tensors[i] = (ms_tensor){
            .id = i, .name = t_names[i], .bytes = (i + 1) * KIB, .dtype = MS_DTYPE_BF16,
            .kind = k, .producer = t_producer[i], .persistent = state,
            .saved_for_backward = i == 1 || i == 3 || i == 4 || i == 6, .layer = t_layer[i],
            .micro_batch = state ? MS_NONE : 0, .uses = t_uses[i], .n_uses = t_n_uses[i],
        };
    }
}

static void build_segments(void)
{
    static const char *const names[] = {"layers.0", "layers.0.attention.core", "layers.1"};
    static const uint32_t first[] = {1, 2, 4}, last[] = {3, 2, 4}, bwd[] = {7, 8, 6};
    static const int32_t parent[] = {MS_NONE, 0, MS_NONE}, layer[] = {0, 0, 1};
    for (uint32_t i = 0; i < N_SEGMENTS; i++)
        fx.segments[i] = (ms_segment){
            .id = i, .name = names[i], .layer = layer[i], .micro_batch = 0, .parent = parent[i],
            .first_op = first[i], .last_op = last[i], .inputs = seg_in[i],
            .n_inputs = seg_n_in[i], .first_backward_op = bwd[i],
        };
}

static void build_device(void)
{
    ms_device_spec *d = &fx.device;
    memset(d, 0, sizeof *d);
    snprintf(d->name, sizeof d->name, "test-npu");
    d->hbm_bytes = 64ull << 30;
    d->hbm_bw = 1.6e12;
    d->peak_flops[MS_DTYPE_BF16] = 3.2e14;
    /* h2d: a knot at 64 MiB, so the probe reads 25e9 exactly (Steffen passes
     * through its points).  d2h: two points, linear: at 64 MiB
     * 10e9 + 10e9 * (64 - 32) / (128 - 32) = 13333333333.3. */
    d->h2d_bw = (ms_curve){.n = 3, .x = {1 << 20, 64 << 20, 1 << 30}, .y = {10e9, 25e9, 26e9}};
    d->d2h_bw = (ms_curve){.n = 2, .x = {32 << 20, 128 << 20}, .y = {10e9, 20e9}};
}

static void setup(void)
{
    memset(&fx, 0, sizeof fx);
    build_ops();
    build_tensors();
    build_segments();
    build_device();
    fx.prof = (ms_profile){
        .step = 0, .measured = false,
        .program = {.ops = fx.ops, .n_ops = N_OPS, .tensors = fx.tensors,
                    .n_tensors = N_TENSORS, .segments = fx.segments,
                    .n_segments = N_SEGMENTS, .stage = 0, .model_flops = 55e6},
        .capacity = 64ull << 30, .oom_op = MS_NONE, .device = &fx.device,
    };
    const char *env = getenv("MEMSIM_SRCDIR");
    snprintf(srcdir, sizeof srcdir, "%s", env ? env : MS_SRCDIR);
    snprintf(lib_dir, sizeof lib_dir, "%s/policies_lua", srcdir);
}

static void teardown(void)
{
}

static ms_policy *load_fixture(const char *name, const ms_policy_limits *lim)
{
    char path[2300];
    snprintf(path, sizeof path, "%s/tests/data/policies/%s.lua", srcdir, name);
    ms_policy *p = NULL;
    ms_diag d = {0};
    ms_status st = ms_policy_load(path, lib_dir, lim, &p, &d);
    ck_assert_msg(st == MS_OK, "%s: %s", name, d.msg);
    return p;
}

/* A fixture whose print() goes to a fresh temporary file, *log. */
static ms_policy *load_logged(const char *name, FILE **log)
{
    *log = tmpfile();
    ck_assert_ptr_nonnull(*log);
    ms_policy *p = load_fixture(name, NULL);
    ms_policy_set_log(p, *log);
    return p;
}

static ms_status load_status(const char *name, ms_diag *d)
{
    char path[2300];
    snprintf(path, sizeof path, "%s/tests/data/policies/%s.lua", srcdir, name);
    ms_policy *p = NULL;
    ms_status st = ms_policy_load(path, lib_dir, NULL, &p, d);
    ck_assert(st != MS_OK && p == NULL);
    return st;
}

/* The 1-based line in a fixture holding `needle`: error positions are
 * asserted against the fixture's own text. */
static int line_of(const char *fixture_name, const char *needle)
{
    char path[2300], buf[512];
    snprintf(path, sizeof path, "%s/tests/data/policies/%s.lua", srcdir, fixture_name);
    FILE *f = fopen(path, "r");
    ck_assert_ptr_nonnull(f);
    int line = 0, found = -1;
    while (found < 0 && fgets(buf, sizeof buf, f) != NULL) {
        line++;
        if (strstr(buf, needle) != NULL)
            found = line;
    }
    fclose(f);
    ck_assert_msg(found > 0, "'%s' not in %s", needle, fixture_name);
    return found;
}

static void assert_at(const ms_diag *d, const char *fixture_name, int line)
{
    char where[64];
    snprintf(where, sizeof where, "%s.lua:%d:", fixture_name, line);
    ck_assert_msg(strstr(d->msg, where) != NULL, "expected '%s' in: %s", where, d->msg);
}

static void assert_has(const char *text, const char *needle)
{
    ck_assert_msg(strstr(text, needle) != NULL, "expected '%s' in:\n%s", needle, text);
}

/* A script error the fixture logged, at the line holding `anchor`.  Lua
 * shortens long chunk names ("...policies/inspect.lua") and the log shows the
 * path it was given, so the message is matched from the file name on. */
static void assert_logged_error(const char *text, const char *fixture_name, const char *anchor,
                                const char *msg)
{
    char needle[1024];
    snprintf(needle, sizeof needle, "%s.lua:%d: %s", fixture_name, line_of(fixture_name, anchor),
             msg);
    assert_has(text, needle);
}

/* Everything written to a log stream so far (caller frees). */
static char *slurp(FILE *f)
{
    fflush(f);
    long n = ftell(f);
    ck_assert(n >= 0);
    char *buf = malloc((size_t)n + 1);
    ck_assert_ptr_nonnull(buf);
    rewind(f);
    size_t got = fread(buf, 1, (size_t)n, f);
    buf[got] = '\0';
    return buf;
}

/* Plans are the same when their decisions are, in order; NULL is the
 * empty plan and ctx:stable() does not count (the executor's schedule and
 * fast-forward both ask). */
START_TEST(test_plan_same_decisions)
{
    ms_plan a, b;
    ms_plan_init(&a);
    ms_plan_init(&b);
    ck_assert(ms_plan_same_decisions(&a, &b));
    ck_assert(ms_plan_same_decisions(NULL, &b));
    ms_decision swap = {.kind = MS_DEC_SWAP, .tensor = 3, .out_after = MS_NONE,
                        .in_before = MS_NONE, .prefetch = 1};
    ms_decision keep = {.kind = MS_DEC_KEEP, .tensor = 4};
    ms_plan_add(&a, &swap);
    ck_assert(!ms_plan_same_decisions(&a, &b));
    ck_assert(!ms_plan_same_decisions(&a, NULL));
    ms_plan_add(&b, &swap);
    b.stable = true;
    ck_assert(ms_plan_same_decisions(&a, &b));
    ms_plan_add(&a, &keep);
    swap.prefetch = 2;
    ms_plan_add(&b, &swap);
    ck_assert(!ms_plan_same_decisions(&a, &b)); /* one field of the second differs */
    ms_plan_free(&a);
    ms_plan_free(&b);
}
END_TEST

/* ---- shipped policies ---- */

START_TEST(test_none)
{
    ms_policy *p = NULL;
    ms_diag d = {0};
    /* A bare name resolves to lib_dir/none.lua. */
    ck_assert_int_eq(ms_policy_load("none", lib_dir, NULL, &p, &d), MS_OK);
    const char *name;
    name = ms_policy_name(p);
    ck_assert_str_eq(name, "none");
    ms_plan plan;
    ms_plan_init(&plan);
    ms_decision junk = {.kind = MS_DEC_KEEP, .tensor = 1};
    ms_plan_add(&plan, &junk); /* plan() starts from a cleared plan */
    ck_assert_int_eq(ms_policy_plan(p, &fx.prof, NULL, NULL, &plan, &d), MS_OK);
    ck_assert_uint_eq(plan.n, 0);
    ck_assert(plan.stable);
    char pool[64];
    ck_assert_int_eq(ms_policy_pool(p, &fx.tensors[3], pool, sizeof pool, &d), MS_OK);
    ck_assert_str_eq(pool, "default"); /* no pool hook */
    uint32_t n = 9;
    ck_assert_ptr_null(ms_policy_pools(p, &n));
    ck_assert_uint_eq(n, 0);
    ms_plan_free(&plan);
    ms_policy_free(p);
}
END_TEST

START_TEST(test_full_recompute)
{
    ms_policy *p = NULL;
    ms_diag d = {0};
    ck_assert_int_eq(ms_policy_load("full_recompute", lib_dir, NULL, &p, &d), MS_OK);
    ms_plan plan;
    ms_plan_init(&plan);
    ck_assert_int_eq(ms_policy_plan(p, &fx.prof, NULL, NULL, &plan, &d), MS_OK);
    /* Layer segments 0 (layers.0) and 2 (layers.1); segment 1, the attention
     * core inside layers.0, has a parent and is covered by it. */
    ck_assert_uint_eq(plan.n, 2);
    ck_assert_int_eq(plan.items[0].kind, MS_DEC_RECOMPUTE);
    ck_assert_uint_eq(plan.items[0].segment, 0);
    ck_assert_int_eq(plan.items[1].kind, MS_DEC_RECOMPUTE);
    ck_assert_uint_eq(plan.items[1].segment, 2);
    ck_assert(plan.stable);
    ms_plan_free(&plan);
    ms_policy_free(p);
}
END_TEST

START_TEST(test_lifetime_pools)
{
    ms_policy *p = NULL;
    ms_diag d = {0};
    ck_assert_int_eq(ms_policy_load("lifetime_pools", lib_dir, NULL, &p, &d), MS_OK);
    const ms_pool_decl *decls;
    uint32_t n;
    decls = ms_policy_pools(p, &n);
    ck_assert_uint_eq(n, 1);
    ck_assert_str_eq(decls[0].name, "long");
    ck_assert(decls[0].exact_segments && decls[0].lendable);
    /* MindSpeed's allocator replaces torch_npu's (MEMORY_FRAGMENTATION=1). */
    ck_assert_str_eq(ms_policy_allocator_get(p)->flavour, "mindspeed");
    /* Weights (0), grads (10), optimizer state (16) and activations saved
     * inside a transformer layer (3) live long; the embedding's saved output
     * (1) does not (MindSpeed's recorder wraps the transformer layers'
     * forward only); an activation not saved (8), temps (9, 13): default. */
    static const struct {
        uint32_t t;
        const char *pool;
    } want[] = {
        {0, "long"},    {10, "long"},   {16, "long"},   {3, "long"},
        {1, "default"}, {8, "default"}, {9, "default"}, {13, "default"},
    };
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        char pool[64];
        ck_assert_int_eq(ms_policy_pool(p, &fx.tensors[want[i].t], pool, sizeof pool, &d),
                         MS_OK);
        ck_assert_msg(strcmp(pool, want[i].pool) == 0, "tensor %u: %s, expected %s",
                      want[i].t, pool, want[i].pool);
    }
    ms_policy_free(p);
}
END_TEST

/* ---- the profile as Lua sees it ---- */

static char *run_inspect(ms_policy *p, FILE *log)
{
    ms_plan plan;
    ms_plan_init(&plan);
    ms_diag d = {0};
    ck_assert_int_eq(ftruncate(fileno(log), 0), 0);
    rewind(log);
    ms_status st = ms_policy_plan(p, &fx.prof, NULL, NULL, &plan, &d);
    ck_assert_msg(st == MS_OK, "%s", d.msg);
    ck_assert_uint_eq(plan.n, 0);
    ms_plan_free(&plan);
    return slurp(log);
}

START_TEST(test_profile_view)
{
    FILE *log;
    ms_policy *p = load_logged("inspect", &log);
    char *out = run_inspect(p, log);
    assert_has(out, "[policy inspect] counts ops=11 tensors=17 segments=3 step=0 "
                    "measured=false stage=0 capacity=68719476736\n");
    assert_has(out, "run peak_allocated=nil step_time=nil oom=false oom_op=nil\n");
    /* Tensor 3: made by op 1, read by ops 2 (forward) and 8 (backward); 4 KiB. */
    assert_has(out, "t3 id=3 name=layers.0.attention.qkv.out bytes=4096 dtype=bf16 "
                    "kind=activation producer=1 saved=true uses=2,8 first=2 last=8 lfu=2 "
                    "fbu=8 layer=0 mb=0\n");
    /* MS_NONE shows as nil; optimizer state has neither forward nor backward use. */
    assert_has(out, "t16 kind=optimizer_state persistent=true producer=nil lfu=nil fbu=nil "
                    "mb=nil last=10\n");
    /* saved: layers.0 makes saved tensors 3, 4, 6 = 4+5+7 KiB = 16384; the
     * attention core makes 4 = 5120; layers.1 makes only 8 (not saved).
     * input: 1+2+5 -> 2+3+6 KiB = 11264; 3 -> 4096; 6+7 -> 7+8 KiB = 15360. */
    assert_has(out, "seg 0 layers.0 parent=nil layer=0 ops=1..3 bwd=7 saved=16384 input=11264 "
                    "inputs=1,2,5\n");
    assert_has(out, "seg 1 layers.0.attention.core parent=0 layer=0 ops=2..2 bwd=8 saved=5120 "
                    "input=4096 inputs=3\n");
    assert_has(out, "seg 2 layers.1 parent=nil layer=1 ops=4..4 bwd=6 saved=0 input=15360 "
                    "inputs=6,7\n");
    assert_has(out, "op2 layers.0.attention.core phase=forward layer=0 mb=0 segment=1 "
                    "stream=compute in=3 out=4 kernel=flash_attention_fwd class=attention "
                    "flops=1000000 start=nil finish=nil allocated=nil\n");
    assert_has(out, "op10 phase=optimizer layer=nil mb=nil segment=nil\n");
    assert_has(out, "device test-npu hbm=68719476736 h2d=25000000000 d2h=13333333333 "
                    "bf16=320000000000000 fp8=nil\n");
    /* pairs() over the small sealed tables is sorted too. */
    assert_has(out, "devkeys d2h_bw,h2d_bw,hbm_bw,hbm_bytes,host_link_latency,host_pinned_bytes,"
                    "name,peak_flops\n");
    /* Saved activations 1, 3, 4, 6: 2+4+5+7 KiB = 18432.  layers.0.* of at
     * least 5000 bytes: tensors 4, 5, 6, 12, 13, 14, 15 = 7.  Grads 10, 12,
     * 15: 11+13+16 KiB = 40960. */
    assert_has(out, "lib saved=1,3,4,6 saved_bytes=18432 big=7 grads=40960 fmt=3.00 GiB\n");
    /* profile.tensors:select: temps 13 and 14 are layer 0's (9 has no layer,
     * 11 is layer 1's); weights and grads of at least 8 KiB (tensor i is
     * i + 1 KiB): 7, 10, 12, 15; the one activation not saved: 8; a kind
     * set false is not taken; no filter: all 17; layer -1 is no layer; the
     * entries are the array's own. */
    assert_has(out, "select temp0=13,14 big=7,10,12,15 unsaved=8 set=1,3,4,6,8 all=17 none=0 "
                    "same=true\n");
    const char *sel = "local ok, err = pcall(function() return profile.tensors:select";
    assert_logged_error(out, "inspect", sel, "select: unknown filter field 'kinds' (expected kind, "
                                             "saved, min_bytes, layer, micro_batch)\n");
    assert_logged_error(out, "inspect", sel, "select: kind: expected a tensor kind (weight, grad, "
                                             "optimizer_state, activation, temp, comm_buffer), got "
                                             "activations\n");
    assert_logged_error(out, "inspect", sel, "select: saved: expected a boolean, got 1\n");
    assert_logged_error(out, "inspect", sel, "select: layer: expected an integer, got 1.5\n");
    assert_logged_error(out, "inspect", "local ok_ops, err_ops = pcall(",
                        "select: call it as profile.tensors:select(...) method=nil\n");
    /* Segments 0 and 2 are whole layers, 1 (the attention core) is inside
     * layer 0's; all are micro-batch 0. */
    assert_has(out, "segments top=0,2 inner=1 layer0=0,1 mb1=0 lib=0,2 same=true bad=false ");
    assert_logged_error(out, "inspect", "local ok_seg, err_seg = pcall(",
                        "select: unknown filter field 'parent' (expected top, layer, "
                        "micro_batch)\n");
    /* Ops: backward of layer 0 are 7, 8, 9; segment 0 (layers.0) spans ops
     * 1 and 3 (2 is the core's own); every op is on the compute stream;
     * the forward ops 0-5 are micro-batch 0. */
    assert_has(out, "ops bwd0=7,8,9 seg0=1,3 comm=0 fwd=0,1,2,3,4,5 bad=false ");
    assert_logged_error(out, "inspect", "local ok_op, err_op = pcall(",
                        "select: phase: expected forward, backward or optimizer, got fwd\n");
    /* Forward: op 0 (the embedding, no layer) is micro-batch 0's first, 1 is
     * layer 0's, 4 layer 1's; ops hold layers 0 and 1. */
    assert_has(out, "forward_starts l0=1 l1=4 mb0=0 range=0..1\n");
    /* Backward ops 6 (layer 1) then 7, 8, 9 (layer 0), all micro-batch 0. */
    assert_has(out, "backward_starts l0=7 l1=6 mb0=6 mb1=nil\n");
    /* pairs() over a record: sorted keys, absent (nil) fields skipped. */
    assert_has(out, "keys first_backward_op,first_op,id,input_bytes,inputs,last_op,layer,"
                    "micro_batch,name,parent,saved_bytes\n");
    /* An entry is the same object each time (usable as a table key). */
    assert_has(out, "identity same=true key=hit tostring=tensor 3 (layers.0.attention.qkv.out) "
                    "arr=profile.ops (11) type=userdata\n");
    assert_has(out, "names op=op 2 (layers.0.attention.core) seg0=segment 0 (layers.0) "
                    "seg1=segment 1 (layers.0.attention.core) seg2=segment 2 (layers.1) "
                    "kernel=flash_attention_fwd\n");
    /* Unmeasured: no start/finish/allocated/reserved/active. */
    assert_has(out, "opkeys class,flops,hbm_bytes,id,inputs,kernel,layer,micro_batch,"
                    "model_flops,name,outputs,phase,segment,stream\n");
    /* pairs over an array gives 1..n in order: 1*1 + 2*2 + 3*3 = 14. */
    assert_has(out, "array pairs 14 missing=nil\n");
    assert_has(out, "write ok=false err=");
    assert_logged_error(out, "inspect", "profile.ops[1].name = \"x\"",
                        "profile tables are read-only (assignment to field 'name')");
    free(out);
    ms_policy_free(p);
    fclose(log);
}
END_TEST

/* profile.program_id counts the programs met: the same number when a
 * program comes back after another replaced the cached view (another
 * stage's plan in between), a new one for a new program. */
START_TEST(test_profile_program_id)
{
    FILE *log;
    ms_policy *p = load_logged("program_id", &log);
    ms_plan plan;
    ms_plan_init(&plan);
    ms_diag d = {0};
    /* The same segments in other memory: another program to the host. */
    ms_segment copy[N_SEGMENTS];
    memcpy(copy, fx.segments, sizeof copy);
    ms_segment *const segments[] = {fx.segments, fx.segments, copy, fx.segments, copy};
    for (int i = 0; i < 5; i++) {
        fx.prof.program.segments = segments[i];
        ck_assert_msg(ms_policy_plan(p, &fx.prof, NULL, NULL, &plan, &d) == MS_OK, "%s", d.msg);
    }
    fx.prof.program.segments = fx.segments;
    char *out = slurp(log);
    assert_has(out, "[policy program_id] program 1 segments 3\n[policy program_id] program 1 "
                    "segments 3\n[policy program_id] program 2 segments 3\n[policy program_id] "
                    "program 1 segments 3\n[policy program_id] program 2 segments 3\n");
    free(out);
    ms_plan_free(&plan);
    ms_policy_free(p);
    fclose(log);
}
END_TEST

/* Each program keeps its own view, made on the first read of an array: the
 * same object when the program comes back after another's plan (other
 * arrays), still readable after its program retired if it was read before,
 * an error at the script's line if it never was (a program whose owner
 * refills its arrays: revision 1, then 2, in the fixture's own arrays). */
START_TEST(test_profile_view_per_program)
{
    FILE *log;
    ms_policy *p = load_logged("view_kept", &log);
    ms_plan plan;
    ms_plan_init(&plan);
    ms_diag d = {0};
    static ms_op ops[N_OPS];
    static ms_tensor tensors[N_TENSORS];
    static ms_segment segments[N_SEGMENTS];
    memcpy(ops, fx.ops, sizeof ops);
    memcpy(tensors, fx.tensors, sizeof tensors);
    memcpy(segments, fx.segments, sizeof segments);
    ms_program_view a = fx.prof.program, b = a;
    b.ops = ops;
    b.tensors = tensors;
    b.segments = segments;
    ops[0].name = "copied.embedding"; /* what the view of b shows */
    ms_program_view c = a, e = a;
    c.revision = 1;
    e.revision = 2;
    const ms_program_view *const order[] = {&a, &b, &a, &c, &e};
    for (int i = 0; i < 5; i++) {
        fx.prof.program = *order[i];
        ck_assert_msg(ms_policy_plan(p, &fx.prof, NULL, NULL, &plan, &d) == MS_OK, "%s", d.msg);
    }
    fx.prof.program = a;
    char *out = slurp(log);
    assert_has(out, "[policy view_kept] call 2 program 2 first copied.embedding\n");
    assert_has(out, "[policy view_kept] call 3 program 1 same true ops 11\n");
    assert_has(out, "[policy view_kept] call 4 program 3 kept 1 ops 11\n");
    assert_has(out, "[policy view_kept] call 5 program 4 kept 2 copied.embedding kept 3 false: ");
    assert_logged_error(out, "view_kept", "local ok, err = pcall(",
                        "profile.ops: the program this profile described was replaced since "
                        "(its step recorded again); read the profile of the current call\n");
    free(out);
    ms_plan_free(&plan);
    ms_policy_free(p);
    fclose(log);
}
END_TEST

/* A job under the PyTorch bridge records a new program every step (a new
 * revision of the same arrays): each gets a new program_id, and the policy
 * forgets the retired ones, so its memory does not grow with the steps
 * (each kept entry took ~150 bytes: 300 kB over the 2000 steps measured). */
START_TEST(test_programs_forgotten_when_retired)
{
    FILE *log;
    ms_policy *p = load_logged("program_id", &log);
    ms_plan plan;
    ms_plan_init(&plan);
    ms_diag d = {0};
    ms_program_view first = fx.prof.program;
    size_t in_use[2] = {0};
    ms_status st = MS_OK;
    for (uint64_t step = 1; step <= 4000 && st == MS_OK; step++) {
        fx.prof.program.revision = step;
        st = ms_policy_plan(p, &fx.prof, NULL, NULL, &plan, &d);
        if (step % 2000 == 0)
            in_use[step / 2000 - 1] = mallinfo2().uordblks;
    }
    fx.prof.program = first;
    ck_assert_msg(st == MS_OK, "%s", d.msg);
    char *out = slurp(log);
    assert_has(out, "[policy program_id] program 4000 segments 3\n");
    free(out);
    ck_assert_msg(in_use[1] < in_use[0] + 100000, "in use after 2000 steps %zu, after 4000 %zu",
                  in_use[0], in_use[1]);
    ms_plan_free(&plan);
    ms_policy_free(p);
    fclose(log);
}
END_TEST

START_TEST(test_profile_measured_and_cache)
{
    FILE *log;
    ms_policy *p = load_logged("inspect", &log);
    free(run_inspect(p, log));
    /* The cached op tables take the figures of the next measured step... */
    ms_op_profile ops[N_OPS] = {0};
    ops[2] = (ms_op_profile){.start_ns = 200, .end_ns = 300, .allocated = 5 << 20,
                             .reserved = 8 << 20, .active = 5 << 20};
    fx.prof.step = 1;
    fx.prof.measured = true;
    fx.prof.ops = ops;
    fx.prof.peak_allocated = 7 << 20;
    fx.prof.peak_reserved = 9 << 20;
    fx.prof.step_time_ns = 12345;
    fx.prof.oom = true;
    fx.prof.oom_op = 4;
    ms_decision cur[2] = {
        {.kind = MS_DEC_SWAP, .tensor = 3, .out_after = MS_NONE, .in_before = 8, .prefetch = 2},
        {.kind = MS_DEC_RECOMPUTE, .segment = 1, .out_after = MS_NONE, .in_before = MS_NONE},
    };
    ms_plan current = {.items = cur, .n = 2, .cap = 2, .stable = true};
    fx.prof.current = &current;
    char *out = run_inspect(p, log);
    assert_has(out, "measured=true");
    assert_has(out, "run peak_allocated=7340032 step_time=12345 oom=true oom_op=4\n");
    assert_has(out, "start=200 finish=300 allocated=5242880\n");
    assert_has(out, "opkeys active,allocated,class,finish,flops,hbm_bytes,id,inputs,kernel,"
                    "layer,micro_batch,model_flops,name,outputs,phase,reserved,segment,start,"
                    "stream\n");
    assert_has(out, "current 1 swap tensor=3 segment=nil in_before=8 prefetch=2\n");
    assert_has(out, "current 2 recompute tensor=nil segment=1 in_before=nil prefetch=nil\n");
    assert_has(out, "current stable=true n=2\n");
    free(out);
    /* ...and lose them again when a profile has none. */
    fx.prof.measured = false;
    fx.prof.ops = NULL;
    out = run_inspect(p, log);
    assert_has(out, "start=nil finish=nil allocated=nil\n");
    free(out);
    /* Another program (other arrays) is shown afresh, not from the cache. */
    static ms_tensor other[N_TENSORS];
    memcpy(other, fx.tensors, sizeof other);
    other[3].name = "renamed.qkv";
    fx.prof.program.tensors = other;
    out = run_inspect(p, log);
    assert_has(out, "t3 id=3 name=renamed.qkv ");
    free(out);
    ms_policy_free(p);
    fclose(log);
}
END_TEST

/* The view copies names when it is built and makes Lua strings of them
 * when they are read: a missing name reads nil (and "?" in tostring), one
 * past Lua's 40-byte short strings reads whole, and a change to the C
 * string afterwards does not reach the cached view of the same program. */
START_TEST(test_profile_names)
{
    static char qkv[] = "layers.0.attention.qkv.out";
    static const char long_name[] = "layers.1.a-segment-name-well-past-forty-bytes-long";
    fx.tensors[3].name = qkv;
    fx.segments[1].name = NULL;
    fx.segments[2].name = long_name;
    fx.ops[2].kernel.name = NULL;
    FILE *log;
    ms_policy *p = load_logged("inspect", &log);
    char *out = run_inspect(p, log);
    assert_has(out, "t3 id=3 name=layers.0.attention.qkv.out bytes=4096 ");
    assert_has(out, "seg 1 nil parent=0 ");
    assert_has(out, "seg 2 layers.1.a-segment-name-well-past-forty-bytes-long parent=nil ");
    assert_has(out, "op2 layers.0.attention.core phase=forward ");
    assert_has(out, " kernel=nil class=attention ");
    assert_has(out, "names op=op 2 (layers.0.attention.core) seg0=segment 0 (layers.0) "
                    "seg1=segment 1 (?) seg2=segment 2 "
                    "(layers.1.a-segment-name-well-past-forty-bytes-long) kernel=nil\n");
    free(out);
    qkv[0] = 'X';
    out = run_inspect(p, log);
    assert_has(out, "t3 id=3 name=layers.0.attention.qkv.out bytes=4096 ");
    assert_has(out, "identity same=true key=hit tostring=tensor 3 (layers.0.attention.qkv.out) ");
    qkv[0] = 'l';
    free(out);
    ms_policy_free(p);
    fclose(log);
}
END_TEST

START_TEST(test_bad_program)
{
    ms_policy *p = NULL;
    ms_diag d = {0};
    ck_assert_int_eq(ms_policy_load("none", lib_dir, NULL, &p, &d), MS_OK);
    static const uint32_t bad_uses[] = {8, 2};
    fx.tensors[3].uses = bad_uses;
    ms_plan plan;
    ms_plan_init(&plan);
    ck_assert_int_eq(ms_policy_plan(p, &fx.prof, NULL, NULL, &plan, &d), MS_EINVAL);
    assert_has(d.msg, "tensor 3: uses are not ascending");
    fx.tensors[3].uses = t_uses[3];
    fx.segments[2].last_op = 11;
    ck_assert_int_eq(ms_policy_plan(p, &fx.prof, NULL, NULL, &plan, &d), MS_EINVAL);
    assert_has(d.msg, "segment 2");
    ms_plan_free(&plan);
    ms_policy_free(p);
}
END_TEST

/* ---- ctx ---- */

/* Run case `step` of cases.lua on a fresh plan. */
static ms_status run_case(ms_policy *p, int step, ms_plan *plan, ms_diag *d)
{
    fx.prof.step = step;
    ms_diag_clear(d);
    return ms_policy_plan(p, &fx.prof, NULL, NULL, plan, d);
}

static void assert_case_error(ms_policy *p, int step, const char *needle)
{
    ms_plan plan;
    ms_plan_init(&plan);
    ms_diag d = {0};
    char tag[32];
    snprintf(tag, sizeof tag, "cases[%d] =", step);
    ck_assert_int_eq(run_case(p, step, &plan, &d), MS_ESCRIPT);
    assert_at(&d, "cases", line_of("cases", tag));
    assert_has(d.msg, needle);
    assert_has(d.msg, "policy 'cases' plan(): ");
    ck_assert_uint_eq(plan.n, 0); /* a failed hook leaves no half-made plan */
    ms_plan_free(&plan);
}

START_TEST(test_ctx_swap)
{
    ms_policy *p = load_fixture("cases", NULL);
    ms_plan plan;
    ms_plan_init(&plan);
    ms_diag d = {0};
    /* Defaults stay MS_NONE (the executor resolves them), prefetch 1. */
    ck_assert_int_eq(run_case(p, 0, &plan, &d), MS_OK);
    ck_assert_uint_eq(plan.n, 1);
    ck_assert_int_eq(plan.items[0].kind, MS_DEC_SWAP);
    ck_assert_uint_eq(plan.items[0].tensor, 3);
    ck_assert_int_eq(plan.items[0].out_after, MS_NONE);
    ck_assert_int_eq(plan.items[0].in_before, MS_NONE);
    ck_assert_int_eq(plan.items[0].prefetch, 1);
    ck_assert(!plan.stable);
    ck_assert_int_eq(run_case(p, 1, &plan, &d), MS_OK);
    ck_assert_uint_eq(plan.n, 1);
    ck_assert_uint_eq(plan.items[0].tensor, 6);
    ck_assert_int_eq(plan.items[0].out_after, 4);
    ck_assert_int_eq(plan.items[0].in_before, 6);
    ck_assert_int_eq(plan.items[0].prefetch, 0);
    /* Optimizer state with explicit ops; then keep and recompute. */
    ck_assert_int_eq(run_case(p, 2, &plan, &d), MS_OK);
    ck_assert_uint_eq(plan.n, 3);
    ck_assert_uint_eq(plan.items[0].tensor, 16);
    ck_assert_int_eq(plan.items[0].out_after, 0);
    ck_assert_int_eq(plan.items[0].in_before, 10);
    ck_assert_int_eq(plan.items[0].prefetch, 2);
    ck_assert_int_eq(plan.items[1].kind, MS_DEC_KEEP);
    ck_assert_uint_eq(plan.items[1].tensor, 4);
    ck_assert_int_eq(plan.items[2].kind, MS_DEC_RECOMPUTE);
    ck_assert_uint_eq(plan.items[2].segment, 1);
    ms_plan_free(&plan);
    ms_policy_free(p);
}
END_TEST

START_TEST(test_ctx_validation)
{
    ms_policy *p = load_fixture("cases", NULL);
    assert_case_error(p, 3, "ctx:swap: tensor 17 does not exist (the program has 17 tensors");
    /* Tensor 3 is produced by op 1. */
    assert_case_error(p, 4, "out_after = op 0 comes before op 1, which produces tensor 3");
    assert_case_error(p, 5, "in_before = op 4 must come after out_after = op 5");
    assert_case_error(p, 6, "tensor 16 ('adam.state') has no forward use");
    /* Main grads are views into the executor's contiguous grad buffer. */
    assert_case_error(p, 29, "tensor 10 ('");
    assert_case_error(p, 29, "') is a main grad, a view into the contiguous grad buffer");
    assert_case_error(p, 7, "ctx:swap: unknown field 'prefech' (expected out_after, in_before, "
                            "prefetch)");
    assert_case_error(p, 8, "prefetch = -1 is out of range");
    assert_case_error(p, 9, "in_before = 11 is not an op (the program has 11 ops");
    assert_case_error(p, 10, "ctx:recompute: segment 3 does not exist");
    assert_case_error(p, 11, "bad argument #1 to 'keep' (number expected, got string)");
    assert_case_error(p, 12, "number has no integer representation");
    assert_case_error(p, 20, "ctx:log: bad argument #2 to 'string.format' (number expected");
    /* 4 * (17 tensors + 3 segments) + 1024 = 1104 decisions at most. */
    assert_case_error(p, 21, "ctx:keep: too many decisions (limit 1104");
    ms_policy_free(p);
}
END_TEST

START_TEST(test_ctx_expires)
{
    ms_policy *p = load_fixture("cases", NULL);
    ms_plan plan;
    ms_plan_init(&plan);
    ms_diag d = {0};
    ck_assert_int_eq(run_case(p, 13, &plan, &d), MS_OK); /* keeps its ctx */
    ck_assert_uint_eq(plan.n, 1);
    assert_case_error(p, 14, "this ctx is no longer valid");
    /* The pool hook tries the kept ctx too. */
    char pool[64];
    ck_assert_int_eq(ms_policy_pool(p, &fx.tensors[1], pool, sizeof pool, &d), MS_ESCRIPT);
    assert_has(d.msg, "this ctx is no longer valid");
    assert_has(d.msg, "policy 'cases' pool(): ");
    ck_assert_str_eq(pool, "");
    ms_plan_free(&plan);
    ms_policy_free(p);
}
END_TEST

START_TEST(test_ctx_stable_readonly_log)
{
    FILE *log;
    ms_policy *p = load_logged("cases", &log);
    ms_plan plan;
    ms_plan_init(&plan);
    ms_diag d = {0};
    ck_assert_int_eq(run_case(p, 17, &plan, &d), MS_OK);
    ck_assert(plan.stable);
    ck_assert_uint_eq(plan.n, 1);
    ck_assert_int_eq(run_case(p, 0, &plan, &d), MS_OK);
    ck_assert(!plan.stable); /* each plan() starts unfrozen */
    assert_case_error(p, 15, "profile tables are read-only (assignment to field 'step')");
    assert_case_error(p, 16, "profile tables are read-only (assignment to field 'bytes')");
    assert_case_error(p, 18, "ctx:simulate: no simulator is available to plan()");
    /* 2000 lines of 99 bytes; 64 KiB a call holds 661 of them (661 * 99 =
     * 65439, one more would be 65538), then one notice. */
    ck_assert_int_eq(run_case(p, 19, &plan, &d), MS_OK);
    char *out = slurp(log);
    int lines = 0;
    for (const char *s = out; (s = strstr(s, "[policy cases] xxx")) != NULL; s++)
        lines++;
    ck_assert_int_eq(lines, 661);
    assert_has(out, "(log limit of 65536 bytes per hook call reached");
    free(out);
    ms_plan_free(&plan);
    ms_policy_free(p);
    fclose(log);
}
END_TEST

/* ---- ctx:simulate ---- */

typedef struct sim_spy {
    int calls;
    ms_plan seen[4];
    int steps[4];
    uint64_t capacity[4];
    ms_policy *policy;
    bool fail;
    ms_status nested_pool, nested_plan;
    char pool[64];
} sim_spy;

static void spy_open(sim_spy *s, ms_policy *p)
{
    *s = (sim_spy){.policy = p};
    for (int i = 0; i < 4; i++)
        ms_plan_init(&s->seen[i]);
}

static void spy_close(sim_spy *s)
{
    for (int i = 0; i < 4; i++)
        ms_plan_free(&s->seen[i]);
}

/* Figures that depend on the candidate, so the test can tell which one the
 * script got back: peak = 1000 * (n + 1), reserved twice that, time 100 - n,
 * OOM with exactly three decisions. */
static ms_status spy_simulate(void *user, const ms_plan *plan, const ms_sim_options *opt,
                              ms_sim_result *out, ms_diag *d)
{
    sim_spy *s = user;
    s->steps[s->calls < 4 ? s->calls : 3] = opt->steps;
    s->capacity[s->calls < 4 ? s->calls : 3] = opt->capacity;
    if (s->fail)
        return ms_diag_set(d, MS_EHAZARD, "hazard at op 3");
    ck_assert_int_lt(s->calls, 4);
    ck_assert_int_eq(ms_plan_copy(&s->seen[s->calls], plan), MS_OK);
    s->calls++;
    /* The executor may ask the policy for pools while it simulates... */
    s->nested_pool = ms_policy_pool(s->policy, &fx.tensors[3], s->pool, sizeof s->pool, NULL);
    /* ...but not for another plan. */
    ms_plan other;
    ms_plan_init(&other);
    s->nested_plan = ms_policy_plan(s->policy, &fx.prof, NULL, NULL, &other, NULL);
    ms_plan_free(&other);
    out->peak_allocated = 1000 * ((uint64_t)plan->n + 1);
    out->peak_reserved = 2 * out->peak_allocated;
    out->step_time_ns = 100 - (int64_t)plan->n;
    out->oom = plan->n == 3;
    return MS_OK;
}

START_TEST(test_ctx_simulate)
{
    FILE *log;
    ms_policy *p = load_logged("simulate", &log);
    sim_spy spy;
    spy_open(&spy, p);
    ms_plan plan;
    ms_plan_init(&plan);
    ms_diag d = {0};
    ck_assert_int_eq(ms_policy_plan(p, &fx.prof, spy_simulate, &spy, &plan, &d), MS_OK);
    ck_assert_int_eq(spy.calls, 2);
    ck_assert_int_eq(spy.steps[0], 1); /* no options: one step */
    ck_assert_int_eq(spy.steps[1], 1);
    /* First candidate: the decisions so far (recompute 0). */
    ck_assert_uint_eq(spy.seen[0].n, 1);
    ck_assert_int_eq(spy.seen[0].items[0].kind, MS_DEC_RECOMPUTE);
    ck_assert_uint_eq(spy.seen[0].items[0].segment, 0);
    /* Second: the explicit table. */
    ck_assert_uint_eq(spy.seen[1].n, 3);
    ck_assert_int_eq(spy.seen[1].items[0].kind, MS_DEC_SWAP);
    ck_assert_uint_eq(spy.seen[1].items[0].tensor, 3);
    ck_assert_int_eq(spy.seen[1].items[0].out_after, MS_NONE);
    ck_assert_int_eq(spy.seen[1].items[0].in_before, 8);
    ck_assert_int_eq(spy.seen[1].items[0].prefetch, 2);
    ck_assert_int_eq(spy.seen[1].items[1].kind, MS_DEC_KEEP);
    ck_assert_uint_eq(spy.seen[1].items[1].tensor, 4);
    ck_assert_int_eq(spy.seen[1].items[2].kind, MS_DEC_RECOMPUTE);
    ck_assert_uint_eq(spy.seen[1].items[2].segment, 2);
    /* The figures came back: 1 decision -> 2000/4000/99; 3 -> 4000/8000/97,
     * OOM; 97 < 99, so the script swapped tensor 3. */
    char *out = slurp(log);
    assert_has(out, "a peak_allocated=2000 peak_reserved=4000 step_time=99 oom=false\n");
    assert_has(out, "b peak_allocated=4000 peak_reserved=8000 step_time=97 oom=true\n");
    free(out);
    ck_assert_uint_eq(plan.n, 2);
    ck_assert_int_eq(plan.items[1].kind, MS_DEC_SWAP);
    ck_assert_uint_eq(plan.items[1].tensor, 3);
    ck_assert_int_eq(spy.nested_pool, MS_OK);
    ck_assert_str_eq(spy.pool, "long"); /* tensor 3 is saved */
    ck_assert_int_eq(spy.nested_plan, MS_EINVAL);
    /* A simulator failure is the script's error, at its line. */
    spy.fail = true;
    ck_assert_int_eq(ms_policy_plan(p, &fx.prof, spy_simulate, &spy, &plan, &d), MS_ESCRIPT);
    assert_at(&d, "simulate", line_of("simulate", "local a = ctx:simulate()"));
    assert_has(d.msg, "ctx:simulate: hazard at op 3");
    spy_close(&spy);
    ms_plan_free(&plan);
    ms_policy_free(p);
    fclose(log);
}
END_TEST

/* Swapping a tensor twice is an error naming both calls (file:line). */
START_TEST(test_ctx_swap_twice)
{
    ms_policy *p = load_fixture("cases", NULL);
    ms_plan plan;
    ms_plan_init(&plan);
    ms_diag d = {0};
    ck_assert_int_eq(run_case(p, 22, &plan, &d), MS_ESCRIPT);
    int first = line_of("cases", "cases[22] =") + 1;
    char where[128];
    snprintf(where, sizeof where, "tensor 3 ('%s') swapped twice: first at ", fx.tensors[3].name);
    assert_has(d.msg, where);
    snprintf(where, sizeof where, "cases.lua:%d, again at ", first);
    assert_has(d.msg, where);
    snprintf(where, sizeof where,
             "cases.lua:%d (a tensor is swapped at most once per plan() "
             "call)",
             first + 1);
    assert_has(d.msg, where);
    ck_assert_uint_eq(plan.n, 0);
    /* The next call starts afresh: one swap of tensor 3 is fine. */
    ck_assert_int_eq(run_case(p, 0, &plan, &d), MS_OK);
    /* A ctx:simulate candidate is checked the same way, by entry. */
    sim_spy spy;
    spy_open(&spy, p);
    fx.prof.step = 23;
    ck_assert_int_eq(ms_policy_plan(p, &fx.prof, spy_simulate, &spy, &plan, &d), MS_ESCRIPT);
    assert_has(d.msg, "ctx:simulate: decisions 1 and 3 both swap tensor 3");
    ck_assert_int_eq(spy.calls, 0);
    spy_close(&spy);
    ms_plan_free(&plan);
    ms_policy_free(p);
}
END_TEST

/* Case `step` of cases.lua is a bad ctx:simulate call: the script's error
 * `why`, at the case's own line, and nothing simulated. */
static void assert_simulate_refused(ms_policy *p, sim_spy *spy, ms_plan *plan, int step,
                                    const char *why)
{
    ms_diag d = {0};
    char anchor[32], where[64];
    spy->calls = 0;
    fx.prof.step = step;
    ck_assert_int_eq(ms_policy_plan(p, &fx.prof, spy_simulate, spy, plan, &d), MS_ESCRIPT);
    assert_has(d.msg, why);
    snprintf(anchor, sizeof anchor, "cases[%d] =", step);
    snprintf(where, sizeof where, "cases.lua:%d:", line_of("cases", anchor));
    assert_has(d.msg, where);
    ck_assert_int_eq(spy->calls, 0);
}

/* ctx:simulate(candidate, {steps = n}) asks for n steps in a row (1 when
 * absent); anything but an integer from 1 to 8 is the script's error, at
 * its line, and nothing is simulated. */
START_TEST(test_ctx_simulate_steps)
{
    ms_policy *p = load_fixture("cases", NULL);
    ms_plan plan;
    ms_plan_init(&plan);
    ms_diag d = {0};
    sim_spy spy;
    spy_open(&spy, p);
    fx.prof.step = 24;
    ck_assert_int_eq(ms_policy_plan(p, &fx.prof, spy_simulate, &spy, &plan, &d), MS_OK);
    ck_assert_int_eq(spy.calls, 2);
    ck_assert_int_eq(spy.steps[0], 2);
    ck_assert_uint_eq(spy.seen[0].n, 1); /* nil: the decisions so far */
    ck_assert_int_eq(spy.steps[1], 1);
    ck_assert_uint_eq(spy.seen[1].n, 0);
    for (int step = 25; step <= 27; step++)
        assert_simulate_refused(p, &spy, &plan, step,
                                "ctx:simulate: options.steps must be an integer from 1 to 8");
    fx.prof.step = 28;
    ck_assert_int_eq(ms_policy_plan(p, &fx.prof, spy_simulate, &spy, &plan, &d), MS_ESCRIPT);
    assert_has(d.msg, "table expected, got number");
    ck_assert_int_eq(spy.calls, 0);
    spy_close(&spy);
    ms_plan_free(&plan);
    ms_policy_free(p);
}
END_TEST

/* ctx:simulate(candidate, {capacity = bytes}) simulates on a device with
 * that memory (0 to the simulator: the scenario's own); a capacity that is
 * not an integer from 1 to 2^43, or an option the simulator does not know,
 * is the script's error at its line, and nothing is simulated. */
static void assert_same_decision(const ms_decision *a, const ms_decision *b)
{
    ck_assert_int_eq(a->kind, b->kind);
    ck_assert_uint_eq(a->kind == MS_DEC_RECOMPUTE ? a->segment : a->tensor,
                      b->kind == MS_DEC_RECOMPUTE ? b->segment : b->tensor);
    ck_assert_int_eq(a->out_after, b->out_after);
    ck_assert_int_eq(a->in_before, b->in_before);
    ck_assert_int_eq(a->prefetch, b->prefetch);
}

START_TEST(test_ctx_pack_apply)
{
    FILE *log;
    ms_policy *p = load_logged("cases", &log);
    ms_plan plan;
    ms_plan_init(&plan);
    ms_diag d = {0};
    sim_spy spy;
    spy_open(&spy, p);
    fx.prof.step = 36;
    ck_assert_int_eq(ms_policy_plan(p, &fx.prof, spy_simulate, &spy, &plan, &d), MS_OK);
    char *out = slurp(log);
    assert_has(out, "packed n=3 str=memsim plan (3 decisions)\n");
    free(out);
    /* The list and its packed plan simulate the same decisions... */
    ck_assert_int_eq(spy.calls, 2);
    ck_assert_uint_eq(spy.seen[0].n, 3);
    ck_assert_uint_eq(spy.seen[1].n, 3);
    for (uint32_t i = 0; i < 3; i++)
        assert_same_decision(&spy.seen[0].items[i], &spy.seen[1].items[i]);
    /* ...and ctx:apply adds them in order, then the list's one. */
    const ms_decision want[] = {
        {.kind = MS_DEC_SWAP, .tensor = 3, .out_after = MS_NONE, .in_before = MS_NONE,
         .prefetch = 2},
        {.kind = MS_DEC_RECOMPUTE, .segment = 2, .out_after = MS_NONE, .in_before = MS_NONE},
        {.kind = MS_DEC_KEEP, .tensor = 4, .out_after = MS_NONE, .in_before = MS_NONE},
        {.kind = MS_DEC_KEEP, .tensor = 5, .out_after = MS_NONE, .in_before = MS_NONE},
    };
    ck_assert_uint_eq(plan.n, 4);
    for (uint32_t i = 0; i < 4; i++)
        assert_same_decision(&plan.items[i], &want[i]);
    spy_close(&spy);
    /* Applying a packed swap twice is the swap-twice error, at both lines. */
    ck_assert_int_eq(run_case(p, 37, &plan, &d), MS_ESCRIPT);
    int first = line_of("cases", "cases[37] =") + 2;
    char where[200];
    snprintf(where, sizeof where, "ctx:apply: tensor 3 ('%s') swapped twice: first at ",
             fx.tensors[3].name);
    assert_has(d.msg, where);
    snprintf(where, sizeof where, "cases.lua:%d, again at ", first);
    assert_has(d.msg, where);
    snprintf(where, sizeof where, "cases.lua:%d (a tensor is swapped", first + 1);
    assert_has(d.msg, where);
    ck_assert_uint_eq(plan.n, 0);
    assert_case_error(p, 38, "ctx:pack: decision 2: segment 9 does not exist (the program has 3 "
                             "segments, ids from 0)");
    assert_case_error(p, 39, "ctx:apply: expected a list of decisions or a packed plan "
                             "(ctx:pack), got number");
    ms_plan_free(&plan);
    ms_policy_free(p);
    fclose(log);
}
END_TEST

START_TEST(test_ctx_simulate_capacity)
{
    ms_policy *p = load_fixture("cases", NULL);
    ms_plan plan;
    ms_plan_init(&plan);
    ms_diag d = {0};
    sim_spy spy;
    spy_open(&spy, p);
    fx.prof.step = 30;
    ck_assert_int_eq(ms_policy_plan(p, &fx.prof, spy_simulate, &spy, &plan, &d), MS_OK);
    ck_assert_int_eq(spy.calls, 1);
    ck_assert_uint_eq(spy.capacity[0], 4096);
    ck_assert_int_eq(spy.steps[0], 2);
    fx.prof.step = 24; /* no capacity: the scenario's */
    spy.calls = 0;
    ck_assert_int_eq(ms_policy_plan(p, &fx.prof, spy_simulate, &spy, &plan, &d), MS_OK);
    ck_assert_uint_eq(spy.capacity[0], 0);
    static const char *const why[] = {
        "options.capacity must be bytes, an integer from 1 to 2^43 (8 TiB)",
        "options.capacity must be bytes, an integer from 1 to 2^43 (8 TiB)",
        "options.capacity must be bytes, an integer from 1 to 2^43 (8 TiB)",
        "unknown option 'step' (expected steps, capacity)",
        "options has a key of type number (expected steps, capacity)"};
    for (int i = 0; i < 5; i++)
        assert_simulate_refused(p, &spy, &plan, 31 + i, why[i]);
    spy_close(&spy);
    ms_plan_free(&plan);
    ms_policy_free(p);
}
END_TEST

/* ---- on_oom ---- */

START_TEST(test_on_oom)
{
    char path[2300];
    snprintf(path, sizeof path, "%s/tests/data/policies/cases.lua", srcdir);
    ms_policy *p = NULL;
    ms_diag d = {0};
    /* cases.lua has no on_oom: not handled, plan untouched. */
    ck_assert_int_eq(ms_policy_load(path, lib_dir, NULL, &p, &d), MS_OK);
    ms_oom_request req = {.bytes = 4096, .tensor = 3, .op = 1, .allocated = 10, .reserved = 20,
                          .capacity = 30};
    ms_plan plan;
    ms_plan_init(&plan);
    bool handled = true;
    ck_assert_int_eq(ms_policy_on_oom(p, &req, &fx.prof, &plan, &handled, &d), MS_OK);
    ck_assert(!handled);
    ms_policy_free(p);
    /* on_oom.lua answers through the same ctx as plan(). */
    snprintf(path, sizeof path, "%s/tests/data/policies/on_oom.lua", srcdir);
    ck_assert_int_eq(ms_policy_load(path, lib_dir, NULL, &p, &d), MS_OK);
    ms_decision prior = {.kind = MS_DEC_RECOMPUTE, .segment = 2, .out_after = MS_NONE,
                         .in_before = MS_NONE};
    ms_plan_add(&plan, &prior);
    ck_assert_int_eq(ms_policy_on_oom(p, &req, &fx.prof, &plan, &handled, &d), MS_OK);
    /* on_oom.lua swaps the requested tensor when bytes + allocated exceed
     * capacity (4096 + 10 > 30), and keeps the decisions already in force. */
    ck_assert(handled);
    ck_assert_uint_eq(plan.n, 2);
    ck_assert_int_eq(plan.items[0].kind, MS_DEC_RECOMPUTE);
    ck_assert_int_eq(plan.items[1].kind, MS_DEC_SWAP);
    ck_assert_uint_eq(plan.items[1].tensor, 3);
    req.bytes = 1;
    ck_assert_int_eq(ms_policy_on_oom(p, &req, &fx.prof, &plan, &handled, &d), MS_OK);
    ck_assert(!handled); /* 1 + 10 <= 30: nothing added */
    ck_assert_uint_eq(plan.n, 2);
    ms_plan_free(&plan);
    ms_policy_free(p);
}
END_TEST

/* ---- load errors ---- */

/* Pool declarations are checked in name order: the same policy gets the same
 * verdict and message in every Lua state, whatever order next() takes. */
START_TEST(test_pools_checked_deterministically)
{
    for (int i = 0; i < 8; i++) {
        ms_diag d = {0};
        ck_assert_int_eq(load_status("bad_pools_many", &d), MS_ESCRIPT);
        assert_has(d.msg, "pools: keys must be pool names (strings); 1 key is not");
        ck_assert_int_eq(load_status("bad_pools_names", &d), MS_ESCRIPT);
        assert_has(d.msg, "pools: 'a a' is not a usable pool name");
    }
}
END_TEST

START_TEST(test_load_errors)
{
    ms_diag d = {0};
    ck_assert_int_eq(load_status("syntax_error", &d), MS_EPARSE);
    assert_at(&d, "syntax_error", 3);
    ck_assert_int_eq(load_status("returns_number", &d), MS_ESCRIPT);
    assert_has(d.msg, "returns_number.lua' returned a number, expected a table of hooks");
    ck_assert_int_eq(load_status("hook_not_function", &d), MS_ESCRIPT);
    assert_has(d.msg, "hook_not_function.lua': hook 'plan' is a string, expected a function");
    ck_assert_int_eq(load_status("no_hooks", &d), MS_ESCRIPT);
    assert_has(d.msg, "no_hooks.lua': defines none of the hooks plan, pool, on_oom");
    ms_policy *p = (ms_policy *)&d;
    ck_assert_int_eq(ms_policy_load("no_such_policy", lib_dir, NULL, &p, &d), MS_ENOENT);
    ck_assert_ptr_null(p);
    assert_has(d.msg, "no_such_policy.lua");
    ck_assert_int_eq(ms_policy_load("bad name!", lib_dir, NULL, &p, &d), MS_EINVAL);
    ck_assert_int_eq(ms_policy_load("none", NULL, NULL, &p, &d), MS_ENOENT);
    ck_assert_int_eq(ms_policy_load(NULL, lib_dir, NULL, &p, &d), MS_EINVAL);
}
END_TEST

START_TEST(test_runtime_error)
{
    ms_policy *p = load_fixture("runtime_error", NULL);
    ms_plan plan;
    ms_plan_init(&plan);
    ms_diag d = {0};
    ck_assert_int_eq(ms_policy_plan(p, &fx.prof, NULL, NULL, &plan, &d), MS_ESCRIPT);
    assert_at(&d, "runtime_error", 5);
    assert_has(d.msg, "attempt to index a nil value (field 'no_such_field')");
    ms_plan_free(&plan);
    ms_policy_free(p);
}
END_TEST

START_TEST(test_unknown_pool)
{
    ms_policy *p = load_fixture("bad_pool", NULL);
    char pool[64];
    ms_diag d = {0};
    ck_assert_int_eq(ms_policy_pool(p, &fx.tensors[9], pool, sizeof pool, &d), MS_OK);
    ck_assert_str_eq(pool, "default");
    /* A saved tensor makes it answer "lng"; the error points at the hook. */
    ck_assert_int_eq(ms_policy_pool(p, &fx.tensors[3], pool, sizeof pool, &d), MS_ESCRIPT);
    assert_at(&d, "bad_pool", line_of("bad_pool", "pool = function"));
    assert_has(d.msg, "pool() returned 'lng' for tensor 3, which is neither \"default\" nor a "
                      "pool declared in `pools` (declared: \"default\", long)");
    ms_policy_free(p);
}
END_TEST

/* ---- the sandbox ---- */

START_TEST(test_escapes)
{
    static const char *const expect[] = {
        "global 'os'", "global 'io'", "require 'os'", "binary chunk", "field 'dump'",
        "global 'dofile'", "global 'loadfile'", "invalid module name '../none'",
        "global 'debug'", "global 'package'",
    };
    ms_policy *p = load_fixture("escape", NULL);
    for (int step = 0; step < 10; step++) {
        ms_plan plan;
        ms_plan_init(&plan);
        ms_diag d = {0};
        fx.prof.step = step;
        ck_assert_int_eq(ms_policy_plan(p, &fx.prof, NULL, NULL, &plan, &d), MS_ESCRIPT);
        char tag[32];
        snprintf(tag, sizeof tag, "cases[%d] =", step);
        assert_at(&d, "escape", line_of("escape", tag));
        assert_has(d.msg, expect[step]);
        ms_plan_free(&plan);
    }
    /* require of the policy library itself works. */
    ms_plan plan;
    ms_plan_init(&plan);
    ms_diag d = {0};
    fx.prof.step = 10;
    ck_assert_int_eq(ms_policy_plan(p, &fx.prof, NULL, NULL, &plan, &d), MS_OK);
    ms_plan_free(&plan);
    ms_policy_free(p);
    FILE *f = fopen("/tmp/memsim-escaped", "r");
    ck_assert_ptr_null(f);
}
END_TEST

static ms_status run_budget(ms_policy *p, int step, ms_diag *d)
{
    ms_plan plan;
    ms_plan_init(&plan);
    fx.prof.step = step;
    ms_diag_clear(d);
    ms_status st = ms_policy_plan(p, &fx.prof, NULL, NULL, &plan, d);
    ms_plan_free(&plan);
    return st;
}

START_TEST(test_budgets)
{
    ms_policy_limits lim = {.max_instructions = 1000000, .max_memory = 32u << 20};
    ms_policy *p = load_fixture("budget", &lim);
    ms_diag d = {0};
    ck_assert_int_eq(run_budget(p, 0, &d), MS_ELIMIT);
    assert_at(&d, "budget", line_of("budget", "cases[0] ="));
    assert_has(d.msg, "instruction budget of 1000000 exceeded");
    ck_assert_int_eq(run_budget(p, 1, &d), MS_ELIMIT); /* string.rep of 1 GiB */
    assert_has(d.msg, "memory cap of 32 MiB exceeded");
    ck_assert_int_eq(run_budget(p, 2, &d), MS_ELIMIT); /* endless table */
    assert_has(d.msg, "budget.lua:");
    ms_status st = run_budget(p, 3, &d); /* endless recursion */
    ck_assert_msg(st == MS_ELIMIT || st == MS_ESCRIPT, "%s", d.msg);
    assert_has(d.msg, "budget.lua:");
    ck_assert_int_eq(run_budget(p, 4, &d), MS_ELIMIT); /* s = s .. s */
    assert_has(d.msg, "memory cap of 32 MiB exceeded");
    /* Case 5 runs 200000 iterations of ADD + FORLOOP, 400000 instructions:
     * three calls exceed 1000000 together, but the budget is per call. */
    for (int i = 0; i < 3; i++)
        ck_assert_int_eq(run_budget(p, 5, &d), MS_OK);
    /* The state survives its limit errors: the pool default still answers. */
    char pool[64];
    ck_assert_int_eq(ms_policy_pool(p, &fx.tensors[0], pool, sizeof pool, &d), MS_OK);
    ms_policy_free(p);
}
END_TEST

/* The packed program (48 bytes a tensor: 1.8 MiB for 40000) is memsim's and
 * lives outside the policy's heap cap, so a policy that reads nothing plans
 * under a 1 MiB cap; the entry objects a script reads are its own, and
 * reading all 40000 (~90 bytes each) stops cleanly at the cap. */
START_TEST(test_view_over_memory_cap)
{
    enum { N = 40000 };
    ms_tensor *many = calloc(N, sizeof *many);
    ck_assert_ptr_nonnull(many);
    for (uint32_t i = 0; i < N; i++)
        many[i] = (ms_tensor){.id = i, .name = "t", .bytes = 1, .kind = MS_TK_TEMP,
                              .producer = MS_NONE, .layer = MS_NONE, .micro_batch = MS_NONE};
    fx.prof.program = (ms_program_view){.tensors = many, .n_tensors = N};
    ms_policy_limits lim = {.max_memory = 1u << 20};
    ms_policy *p = NULL;
    ms_diag d = {0};
    ck_assert_int_eq(ms_policy_load("none", lib_dir, &lim, &p, &d), MS_OK);
    ms_plan plan;
    ms_plan_init(&plan);
    ck_assert_msg(ms_policy_plan(p, &fx.prof, NULL, NULL, &plan, &d) == MS_OK, "%s", d.msg);
    ms_policy_free(p);
    p = load_fixture("read_all", &lim);
    ck_assert_int_eq(ms_policy_plan(p, &fx.prof, NULL, NULL, &plan, &d), MS_ELIMIT);
    assert_has(d.msg, "memory cap of 1 MiB exceeded");
    ms_plan_free(&plan);
    ms_policy_free(p);
    free(many);
}
END_TEST

START_TEST(test_determinism)
{
    /* Two states, two calls each: the same plan and the same view text
     * (pairs order included, which Lua's hash seed would otherwise vary). */
    ms_plan a, b;
    ms_plan_init(&a);
    ms_plan_init(&b);
    ms_diag d = {0};
    for (int round = 0; round < 2; round++) {
        ms_policy *p = NULL;
        ck_assert_int_eq(ms_policy_load("full_recompute", lib_dir, NULL, &p, &d), MS_OK);
        for (int call = 0; call < 2; call++) {
            ms_plan *dst = round == 0 && call == 0 ? &a : &b;
            ck_assert_int_eq(ms_policy_plan(p, &fx.prof, NULL, NULL, dst, &d), MS_OK);
            ck_assert_uint_eq(dst->n, a.n);
            ck_assert_int_eq(memcmp(dst->items, a.items, a.n * sizeof *a.items), 0);
        }
        ms_policy_free(p);
    }
    char *text[2];
    for (int round = 0; round < 2; round++) {
        FILE *log;
        ms_policy *p = load_logged("inspect", &log);
        text[round] = run_inspect(p, log);
        ms_policy_free(p);
        fclose(log);
    }
    ck_assert_str_eq(text[0], text[1]);
    free(text[0]);
    free(text[1]);
    ms_plan_free(&a);
    ms_plan_free(&b);
}
END_TEST

START_TEST(test_bad_arguments)
{
    ms_policy *p = NULL;
    ms_diag d = {0};
    ck_assert_int_eq(ms_policy_load("none", lib_dir, NULL, &p, &d), MS_OK);
    ms_plan plan;
    ms_plan_init(&plan);
    char pool[8];
    ck_assert_int_eq(ms_policy_plan(NULL, &fx.prof, NULL, NULL, &plan, &d), MS_EINVAL);
    ck_assert_int_eq(ms_policy_plan(p, NULL, NULL, NULL, &plan, &d), MS_EINVAL);
    ck_assert_int_eq(ms_policy_plan(p, &fx.prof, NULL, NULL, NULL, &d), MS_EINVAL);
    ck_assert_int_eq(ms_policy_pool(p, NULL, pool, sizeof pool, &d), MS_EINVAL);
    ck_assert_int_eq(ms_policy_pool(p, &fx.tensors[0], pool, 0, &d), MS_EINVAL);
    ck_assert_int_eq(ms_policy_pool(p, &fx.tensors[0], pool, 4, &d), MS_ERANGE);
    ck_assert_ptr_null(ms_policy_name(NULL));
    ck_assert_int_eq(ms_policy_free(NULL), MS_EINVAL);
    fx.prof.measured = true; /* measured without op figures */
    ck_assert_int_eq(ms_policy_plan(p, &fx.prof, NULL, NULL, &plan, &d), MS_EINVAL);
    ms_plan_free(&plan);
    ms_policy_free(p);
}
END_TEST

static Suite *policy_suite(void)
{
    Suite *s = suite_create("policy");
    TCase *tc = tcase_create("shipped");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, test_plan_same_decisions);
    tcase_add_test(tc, test_none);
    tcase_add_test(tc, test_full_recompute);
    tcase_add_test(tc, test_lifetime_pools);
    suite_add_tcase(s, tc);
    tc = tcase_create("profile");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, test_profile_view);
    tcase_add_test(tc, test_profile_program_id);
    tcase_add_test(tc, test_profile_view_per_program);
    tcase_add_test(tc, test_programs_forgotten_when_retired);
    tcase_add_test(tc, test_profile_measured_and_cache);
    tcase_add_test(tc, test_profile_names);
    tcase_add_test(tc, test_bad_program);
    suite_add_tcase(s, tc);
    tc = tcase_create("ctx");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, test_ctx_swap);
    tcase_add_test(tc, test_ctx_validation);
    tcase_add_test(tc, test_ctx_swap_twice);
    tcase_add_test(tc, test_ctx_simulate_steps);
    tcase_add_test(tc, test_ctx_simulate_capacity);
    tcase_add_test(tc, test_ctx_pack_apply);
    tcase_add_test(tc, test_ctx_expires);
    tcase_add_test(tc, test_ctx_stable_readonly_log);
    tcase_add_test(tc, test_ctx_simulate);
    tcase_add_test(tc, test_on_oom);
    suite_add_tcase(s, tc);
    tc = tcase_create("errors");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, test_load_errors);
    tcase_add_test(tc, test_pools_checked_deterministically);
    tcase_add_test(tc, test_runtime_error);
    tcase_add_test(tc, test_unknown_pool);
    tcase_add_test(tc, test_bad_arguments);
    suite_add_tcase(s, tc);
    tc = tcase_create("sandbox");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_escapes);
    tcase_add_test(tc, test_budgets);
    tcase_add_test(tc, test_view_over_memory_cap);
    tcase_add_test(tc, test_determinism);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(policy_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
