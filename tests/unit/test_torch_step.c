/* include/memsim/torch.h: a PyTorch step recorded as a memsim program, the
 * policy's plan on it and the per-tensor decisions (the C side of
 * memsim_torch; tests/python/test_memsim_torch.py runs it in PyTorch). */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "memsim/torch.h"

#define KiB (1ULL << 10)
#define MiB (1ULL << 20)

static char policies[4096], lib_dir[4096];

static const char *policy(const char *name)
{
    static char path[8192];
    snprintf(path, sizeof path, "%s/%s", policies, name);
    return path;
}

/* Two MLP ops and an attention op in forward, their backward ops in
 * reverse, a weight read by the first, layers.1 a recompute segment:
 * t0 1 MiB (fc1), t1 8 KiB (fc2), t2 1 MiB (layers.1.attn), t3 weight. */
typedef struct prog {
    ms_torch_step *s;
    uint32_t f[3], b[3], t[4], seg;
} prog;

static const char *const mlp_names[3] = {"layers.0.mlp.fc1", "layers.0.mlp.fc2",
                                         "layers.1.attn"};

static void fill(prog *p, const char *const names[3])
{
    const uint64_t bytes[3] = {MiB, 8 * KiB, MiB};
    for (int i = 0; i < 3; i++) {
        ck_assert_int_eq(ms_torch_op_add(p->s, names[i], MS_PHASE_FORWARD, &p->f[i]), MS_OK);
        /* fc2 is the slowest op. */
        ck_assert_int_eq(ms_torch_op_measure(p->s, p->f[i], 100 * i, 100 * i + (i == 1 ? 90 : 40),
                                             (i + 1) * MiB, 20 * MiB),
                         MS_OK);
        char n[64];
        snprintf(n, sizeof n, "%s.saved0", names[i]);
        ck_assert_int_eq(
            ms_torch_tensor_add(p->s, n, bytes[i], MS_TK_ACTIVATION, (int32_t)p->f[i], &p->t[i]),
            MS_OK);
        ck_assert_int_eq(ms_torch_tensor_use(p->s, p->t[i], p->f[i]), MS_OK);
    }
    ck_assert_int_eq(
        ms_torch_tensor_add(p->s, "layers.0.mlp.fc1.weight", MiB, MS_TK_WEIGHT, MS_NONE, &p->t[3]),
        MS_OK);
    ck_assert_int_eq(ms_torch_tensor_use(p->s, p->t[3], p->f[0]), MS_OK);
    ck_assert_int_eq(ms_torch_segment_add(p->s, "layers.1", p->f[2], p->f[2], &p->seg), MS_OK);
    for (int i = 2; i >= 0; i--) {
        ck_assert_int_eq(ms_torch_op_add(p->s, names[i], MS_PHASE_BACKWARD, &p->b[i]), MS_OK);
        ck_assert_int_eq(ms_torch_op_measure(p->s, p->b[i], 400 + 100 * (2 - i),
                                             480 + 100 * (2 - i), MiB, 20 * MiB),
                         MS_OK);
        ck_assert_int_eq(ms_torch_tensor_use(p->s, p->t[i], p->b[i]), MS_OK);
    }
    ck_assert_int_eq(ms_torch_tensor_use(p->s, p->t[3], p->b[0]), MS_OK);
}

static void build(prog *p, const char *file)
{
    ms_diag d = {0};
    ck_assert_msg(ms_torch_step_create(file, lib_dir, &p->s, &d) == MS_OK, "%s", d.msg);
    fill(p, mlp_names);
}

static ms_torch_action decision(const prog *p, int i)
{
    ms_torch_action a;
    ck_assert_int_eq(ms_torch_decision(p->s, p->t[i], &a), MS_OK);
    return a;
}

static const ms_torch_measure measured = {.step = 0,
                                          .peak_allocated = 3 * MiB,
                                          .peak_reserved = 20 * MiB,
                                          .capacity = 80ULL << 30,
                                          .step_time_ns = 700};

START_TEST(plan_decides_per_tensor)
{
    prog p;
    build(&p, policy("torch_swap.lua"));
    /* Before a plan everything stays. */
    for (int i = 0; i < 4; i++)
        ck_assert_int_eq(decision(&p, i), MS_TORCH_KEEP);
    ms_diag d = {0};
    ck_assert_msg(ms_torch_plan(p.s, &measured, &d) == MS_OK, "%s", d.msg);
    ck_assert_int_eq(decision(&p, 0), MS_TORCH_OFFLOAD); /* an MLP activation >= 64 KiB */
    ck_assert_int_eq(decision(&p, 1), MS_TORCH_KEEP);    /* 8 KiB */
    ck_assert_int_eq(decision(&p, 2), MS_TORCH_RECOMPUTE);
    ck_assert_int_eq(decision(&p, 3), MS_TORCH_KEEP); /* a weight */
    bool rec = false;
    ck_assert_int_eq(ms_torch_segment_recomputed(p.s, p.seg, &rec), MS_OK);
    ck_assert(rec);
    ck_assert(!ms_torch_plan_stable(p.s)); /* torch_swap.lua never calls ctx:stable() */
    ck_assert(!ms_torch_plan_stable(NULL));
    /* Planning again gives the same decisions. */
    ck_assert_int_eq(ms_torch_plan(p.s, &measured, &d), MS_OK);
    ck_assert_int_eq(decision(&p, 0), MS_TORCH_OFFLOAD);
    ck_assert_int_eq(ms_torch_step_free(p.s), MS_OK);
}
END_TEST

static void plan_ok(const prog *p)
{
    ms_diag d = {0};
    ck_assert_msg(ms_torch_plan(p->s, &measured, &d) == MS_OK, "%s", d.msg);
}

/* The step reset, recorded again with these names, and planned. */
static void replan_recorded(prog *p, const char *const names[3])
{
    ck_assert_int_eq(ms_torch_step_reset(p->s), MS_OK);
    fill(p, names);
    plan_ok(p);
}

/* A step reset and recorded again with the same counts is another
 * program: the policy sees the new one, not a view kept from the old
 * (the step refills the same arrays, so their addresses prove nothing). */
START_TEST(plan_after_reset_sees_the_new_program)
{
    prog p;
    build(&p, policy("torch_swap.lua"));
    plan_ok(&p);
    ck_assert_int_eq(decision(&p, 0), MS_TORCH_OFFLOAD); /* layers.0.mlp.fc1's, 1 MiB */
    /* The first op is now an attention op: no MLP activation of 64 KiB. */
    static const char *const attn_first[3] = {"layers.0.attn", "layers.0.mlp.fc2",
                                              "layers.1.attn"};
    replan_recorded(&p, attn_first);
    ck_assert_int_eq(decision(&p, 0), MS_TORCH_KEEP);
    ck_assert_int_eq(decision(&p, 2), MS_TORCH_RECOMPUTE); /* layers.1 still */
    /* And back: the first program's decisions again. */
    replan_recorded(&p, mlp_names);
    ck_assert_int_eq(decision(&p, 0), MS_TORCH_OFFLOAD);
    ck_assert_int_eq(ms_torch_step_free(p.s), MS_OK);
}
END_TEST

/* The same recording planned again is the same program (profile.program_id
 * 1); recorded again after a reset, even unchanged, it is a new one (2). */
START_TEST(program_id_follows_the_recording)
{
    prog p;
    build(&p, policy("torch_program_id.lua"));
    for (int i = 0; i < 2; i++) {
        plan_ok(&p);
        ck_assert_int_eq(decision(&p, 0), MS_TORCH_OFFLOAD);
    }
    replan_recorded(&p, mlp_names);
    ck_assert_int_eq(decision(&p, 0), MS_TORCH_KEEP);
    ck_assert_int_eq(ms_torch_step_free(p.s), MS_OK);
}
END_TEST

/* plan() sees the measured times: the slowest forward op's tensor goes. */
START_TEST(plan_sees_measured_times)
{
    prog p;
    build(&p, policy("torch_measured.lua"));
    ms_diag d = {0};
    ck_assert_msg(ms_torch_plan(p.s, &measured, &d) == MS_OK, "%s", d.msg);
    ck_assert_int_eq(decision(&p, 0), MS_TORCH_KEEP);
    ck_assert_int_eq(decision(&p, 1), MS_TORCH_OFFLOAD);
    ck_assert_int_eq(decision(&p, 2), MS_TORCH_KEEP);
    ck_assert(ms_torch_plan_stable(p.s)); /* it calls ctx:stable() */
    /* Unmeasured step time: the policy's assert, at its line. */
    ms_torch_measure m = measured;
    m.step_time_ns = 0;
    ck_assert_int_eq(ms_torch_plan(p.s, &m, &d), MS_ESCRIPT);
    ck_assert_msg(strstr(d.msg, "torch_measured.lua:8: no step time") != NULL, "%s", d.msg);
    ms_torch_step_free(p.s);
}
END_TEST

/* The test program planned with torch_swap.lua, written to a new file in
 * path (a mkstemp template). */
static void planned_profile(prog *p, char *path)
{
    build(p, policy("torch_swap.lua"));
    ms_diag d = {0};
    ck_assert_int_eq(ms_torch_plan(p->s, &measured, &d), MS_OK);
    int fd = mkstemp(path);
    ck_assert_int_ge(fd, 0);
    close(fd);
    ck_assert_msg(ms_torch_profile_write(p->s, path, &d) == MS_OK, "%s", d.msg);
}

START_TEST(profile_csv)
{
    prog p;
    char path[] = "/tmp/memsim-torch-XXXXXX";
    planned_profile(&p, path);
    ms_diag d = {0};
    FILE *f = fopen(path, "r");
    char buf[4096];
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    buf[n] = '\0';
    fclose(f);
    remove(path);
    ck_assert_msg(strstr(buf, "step,0,,,0,700,3145728,20971520,85899345920,,,\n") != NULL, "%s",
                  buf);
    ck_assert_msg(strstr(buf, "op,1,layers.0.mlp.fc2,forward,100,190,2097152,20971520,,,,\n") !=
                      NULL,
                  "%s", buf);
    ck_assert_msg(
        strstr(buf, "tensor,0,layers.0.mlp.fc1.saved0,activation,,,,,1048576,0,0 5,offload\n") !=
            NULL,
        "%s", buf);
    ck_assert_msg(strstr(buf, "segment,0,layers.1,,,,,,,,2 2,recompute\n") != NULL, "%s", buf);
    ck_assert_int_eq(ms_torch_profile_write(p.s, "/nonexistent-dir/p.csv", &d), MS_EIO);
    ck_assert_msg(strstr(d.msg, "/nonexistent-dir/p.csv: cannot write") != NULL, "%s", d.msg);
    ms_torch_step_free(p.s);
}
END_TEST

static void write_file(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    ck_assert_ptr_nonnull(f);
    fputs(text, f);
    fclose(f);
}

/* What memsim_torch writes reads back into the same program: a policy
 * planning on the file decides as it did live (memsim profile-torch). */
START_TEST(profile_round_trip)
{
    prog p;
    char path[] = "/tmp/memsim-torch-XXXXXX";
    planned_profile(&p, path);
    ms_diag d = {0};
    ms_torch_step *s = NULL;
    ck_assert_int_eq(ms_torch_step_create(policy("torch_measured.lua"), lib_dir, &s, &d), MS_OK);
    ms_torch_measure m;
    ck_assert_msg(ms_torch_profile_read(s, path, &m, &d) == MS_OK, "%s", d.msg);
    ck_assert_int_eq(m.step_time_ns, measured.step_time_ns);
    ck_assert_uint_eq(m.peak_allocated, measured.peak_allocated);
    ck_assert_uint_eq(m.capacity, measured.capacity);
    ck_assert_msg(ms_torch_plan(s, &m, &d) == MS_OK, "%s", d.msg);
    /* The measured times came back: fc2's saved tensor is the slowest op's. */
    ms_torch_action a;
    ck_assert_int_eq(ms_torch_decision(s, p.t[1], &a), MS_OK);
    ck_assert_int_eq(a, MS_TORCH_OFFLOAD);
    ms_torch_summary sum;
    ck_assert_int_eq(ms_torch_summarize(s, &sum), MS_OK);
    ck_assert_uint_eq(sum.ops, 6);
    ck_assert_uint_eq(sum.tensors, 4);
    ck_assert_uint_eq(sum.segments, 1);
    ck_assert_uint_eq(sum.count[MS_TORCH_OFFLOAD], 1);
    ck_assert_uint_eq(sum.bytes[MS_TORCH_OFFLOAD], 8 * KiB);
    ck_assert_uint_eq(sum.count[MS_TORCH_KEEP], 3);
    /* The segment and the uses came back too: torch_swap.lua on the file
     * decides as it did on the live recording. */
    ms_torch_step *s2 = NULL;
    ck_assert_int_eq(ms_torch_step_create(policy("torch_swap.lua"), lib_dir, &s2, &d), MS_OK);
    ck_assert_int_eq(ms_torch_profile_read(s2, path, &m, &d), MS_OK);
    ck_assert_int_eq(ms_torch_plan(s2, &m, &d), MS_OK);
    for (int i = 0; i < 4; i++) {
        ms_torch_action live, file;
        ck_assert_int_eq(ms_torch_decision(p.s, p.t[i], &live), MS_OK);
        ck_assert_int_eq(ms_torch_decision(s2, p.t[i], &file), MS_OK);
        ck_assert_int_eq(live, file);
    }
    ck_assert_int_eq(ms_torch_summarize(s2, &sum), MS_OK);
    ck_assert_uint_eq(sum.segments_recomputed, 1);
    remove(path);
    ms_torch_step_free(s2);
    ms_torch_step_free(s);
    ms_torch_step_free(p.s);
}
END_TEST

/* Bad files: the file, line and field, and what was expected. */
START_TEST(profile_read_errors)
{
    static const struct {
        const char *text, *want;
    } cases[] = {
        {"row,id\n", "line 1: 2 fields, expected 12"},
        {"op,0,f,forward,0,10,0,0,,,,\nop,2,g,forward,0,10,0,0,,,,\n",
         "line 2: field id: op 2 out of order"},
        {"op,0,f,sideways,0,10,0,0,,,,\n", "line 1: field phase_or_kind: 'sideways' is neither"},
        {"op,0,f,forward,0,x,0,0,,,,\n", "line 1: field end_ns: 'x' is not an integer"},
        {"op,0,f,forward,20,10,0,0,,,,\n", "line 1: op 'f': invalid"},
        {"op,0,f,forward,0,10,0,0,,,,\ntensor,0,t,activation,,,,,4,0,0 7,keep\n",
         "line 2: field uses: '7' is not an op of the file"},
        {"op,0,f,forward,0,10,0,0,,,,\ntensor,0,t,blob,,,,,4,0,0,keep\n",
         "line 2: field phase_or_kind: unknown tensor kind 'blob'"},
        {"op,0,f,forward,0,10,0,0,,,,\ntensor,0,t,activation,,,,,4,5,,keep\n",
         "line 2: field producer: '5' is not an op"},
        {"op,0,f,backward,0,10,0,0,,,,\nsegment,0,s,,,,,,,,0 0,keep\n",
         "line 2: segment 's': its ops must all be forward ops"},
        {"thing,0,f,forward,0,10,0,0,,,,\n", "line 1: field row: 'thing' is none of"},
        {"op,0,\"f,forward,0,10,0,0,,,,\n", "line 1: error parsing data"},
        {"row,id,name,phase_or_kind,start_ns,end_ns,allocated,reserved,bytes,producer,uses,"
         "decision\n",
         "no op rows"},
    };
    char path[] = "/tmp/memsim-torch-XXXXXX";
    int fd = mkstemp(path);
    ck_assert_int_ge(fd, 0);
    close(fd);
    ms_torch_step *s = NULL;
    ms_diag d = {0};
    ms_torch_measure m;
    ck_assert_int_eq(ms_torch_step_create(policy("torch_swap.lua"), lib_dir, &s, &d), MS_OK);
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        write_file(path, cases[i].text);
        ck_assert_int_eq(ms_torch_profile_read(s, path, &m, &d), MS_EPARSE);
        ck_assert_msg(strstr(d.msg, cases[i].want) != NULL && strstr(d.msg, path) != NULL,
                      "case %zu: %s", i, d.msg);
    }
    remove(path);
    ck_assert_int_eq(ms_torch_profile_read(s, "/nonexistent-dir/p.csv", &m, &d), MS_EIO);
    ck_assert_int_eq(ms_torch_profile_read(s, NULL, &m, &d), MS_EINVAL);
    ck_assert_int_eq(ms_torch_summarize(NULL, NULL), MS_EINVAL);
    ms_torch_step_free(s);
}
END_TEST

/* memsim profile-torch: exit 2 on usage errors, 1 on a bad file. */
static int run_cli(const char *args, char *out, size_t n)
{
    const char *build = getenv("MEMSIM_BUILDDIR");
    char cmd[24576];
    snprintf(cmd, sizeof cmd, "%s/memsim profile-torch %s 2>&1", build ? build : ".", args);
    FILE *p = popen(cmd, "r");
    ck_assert_ptr_nonnull(p);
    size_t k = fread(out, 1, n - 1, p);
    out[k] = '\0';
    int st = pclose(p);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

START_TEST(cli_errors)
{
    char out[8192], args[16500];
    ck_assert_int_eq(run_cli("", out, sizeof out), 2);
    ck_assert_msg(strstr(out, "--policy is required") != NULL, "%s", out);
    snprintf(args, sizeof args, "/nonexistent-dir/p.csv --policy %s", policy("torch_swap.lua"));
    ck_assert_int_eq(run_cli(args, out, sizeof out), 1);
    ck_assert_msg(strstr(out, "/nonexistent-dir/p.csv: cannot read") != NULL, "%s", out);
    snprintf(args, sizeof args, "%s --policy %s", policy("torch_swap.lua"),
             policy("torch_swap.lua"));
    ck_assert_int_eq(run_cli(args, out, sizeof out), 1); /* a Lua file is no profile */
    ck_assert_msg(strstr(out, "torch_swap.lua: line 1:") != NULL, "%s", out);
}
END_TEST

START_TEST(bad_arguments)
{
    ms_torch_step *s = NULL;
    ms_diag d = {0};
    uint32_t id;
    ms_torch_action a;
    bool b;
    ck_assert_int_eq(ms_torch_step_create(NULL, lib_dir, &s, &d), MS_EINVAL);
    ck_assert_int_ne(ms_torch_step_create(policy("no_such.lua"), lib_dir, &s, &d), MS_OK);
    ck_assert_ptr_null(s);
    ck_assert_msg(strstr(d.msg, "no_such.lua") != NULL, "%s", d.msg);
    ck_assert_int_eq(ms_torch_step_create(policy("torch_swap.lua"), lib_dir, &s, &d), MS_OK);
    ck_assert_int_eq(ms_torch_op_add(s, "x", MS_PHASE_OPTIMIZER, &id), MS_EINVAL);
    ck_assert_int_eq(ms_torch_op_add(s, NULL, MS_PHASE_FORWARD, &id), MS_EINVAL);
    ck_assert_int_eq(ms_torch_op_add(s, "f", MS_PHASE_FORWARD, &id), MS_OK);
    ck_assert_int_eq(ms_torch_op_measure(s, id, 10, 5, 0, 0), MS_EINVAL);
    ck_assert_int_eq(ms_torch_op_measure(s, 7, 0, 5, 0, 0), MS_EINVAL);
    ck_assert_int_eq(ms_torch_tensor_add(s, "t", 4, MS_TK_ACTIVATION, 3, &id), MS_EINVAL);
    ck_assert_int_eq(ms_torch_tensor_add(s, "t", 4, MS_TK_COUNT, 0, &id), MS_EINVAL);
    ck_assert_int_eq(ms_torch_tensor_add(s, "t", 4, MS_TK_ACTIVATION, 0, &id), MS_OK);
    ck_assert_int_eq(ms_torch_tensor_use(s, id, 5), MS_EINVAL);
    ck_assert_int_eq(ms_torch_tensor_use(s, 9, 0), MS_EINVAL);
    ck_assert_int_eq(ms_torch_op_add(s, "f", MS_PHASE_BACKWARD, &id), MS_OK);
    ck_assert_int_eq(ms_torch_segment_add(s, "seg", 0, 1, &id), MS_EINVAL); /* a backward op */
    ck_assert_int_eq(ms_torch_segment_add(s, "seg", 1, 0, &id), MS_EINVAL);
    ck_assert_int_eq(ms_torch_decision(s, 3, &a), MS_EINVAL);
    ck_assert_int_eq(ms_torch_segment_recomputed(s, 0, &b), MS_EINVAL);
    ck_assert_int_eq(ms_torch_plan(s, NULL, &d), MS_EINVAL);
    ck_assert_int_eq(ms_torch_profile_write(s, NULL, &d), MS_EINVAL);
    ck_assert_int_eq(ms_torch_step_reset(s), MS_OK);
    ck_assert_int_eq(ms_torch_decision(s, 0, &a), MS_EINVAL); /* forgotten */
    ck_assert_int_eq(ms_torch_step_reset(NULL), MS_EINVAL);
    ck_assert_int_eq(ms_torch_step_free(s), MS_OK);
    ck_assert_int_eq(ms_torch_step_free(NULL), MS_OK);
}
END_TEST

int main(void)
{
    const char *src = getenv("MEMSIM_SRCDIR");
    snprintf(policies, sizeof policies, "%s/tests/data/policies", src ? src : ".");
    snprintf(lib_dir, sizeof lib_dir, "%s/policies_lua", src ? src : ".");
    Suite *s = suite_create("torch_step");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, plan_decides_per_tensor);
    tcase_add_test(tc, plan_after_reset_sees_the_new_program);
    tcase_add_test(tc, program_id_follows_the_recording);
    tcase_add_test(tc, plan_sees_measured_times);
    tcase_add_test(tc, profile_csv);
    tcase_add_test(tc, profile_round_trip);
    tcase_add_test(tc, profile_read_errors);
    tcase_add_test(tc, cli_errors);
    tcase_add_test(tc, bad_arguments);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
