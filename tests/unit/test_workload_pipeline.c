/* Tests of the full training-step workload: Megatron's pipeline schedules
 * (1F1B and interleaved) on every stage, the p2p between stages, the
 * micro-batches in flight and the bubble, context parallelism (ring
 * attention), mixture-of-experts layers, Megatron-LM's theoretical memory
 * formulas against the programs, and the errors bad sizes get. */
#include <check.h>
#include <math.h>
#include <regex.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "memsim/workload.h"

/* ---- configurations ----------------------------------------------------- */

typedef struct cfg {
    int L, h, a, s, b, t, p, vpp, dp, m, cp;
    bool distopt, sp;
} cfg;

/* A Megatron GPT (LayerNorm, GeLU 4h MLP, dropout 0.1, tied embeddings,
 * biases, learned absolute positions) with flash attention. */
static ms_scenario gpt(cfg c)
{
    ms_scenario sc;
    memset(&sc, 0, sizeof sc);
    snprintf(sc.name, sizeof sc.name, "test-gpt");
    sc.model = (ms_model_config){.arch = MS_ARCH_GPT, .num_layers = c.L, .hidden_size = c.h,
                                 .ffn_hidden_size = 4 * c.h, .num_attention_heads = c.a,
                                 .num_query_groups = c.a, .seq_length = c.s,
                                 .padded_vocab_size = 51200, .normalization = MS_NORM_LAYERNORM,
                                 .use_flash_attn = true, .hidden_dropout = 0.1,
                                 .attention_dropout = 0.1, .dtype = MS_DTYPE_BF16,
                                 .add_bias_linear = true,
                                 .position_embedding_type = MS_POS_LEARNED_ABSOLUTE};
    int cp = c.cp > 0 ? c.cp : 1;
    sc.parallel = (ms_parallel_config){
        .tensor_model_parallel_size = c.t, .pipeline_model_parallel_size = c.p,
        .num_layers_per_virtual_pipeline_stage = c.vpp, .context_parallel_size = cp,
        .world_size = c.t * c.p * c.dp * cp, .data_parallel_size = c.dp,
        .sequence_parallel = c.sp, .use_distributed_optimizer = c.distopt,
        .overlap_grad_reduce = true, .micro_batch_size = c.b, .global_batch_size = c.b * c.m * c.dp,
        .num_micro_batches = c.m, .expert_model_parallel_size = 1};
    sc.device.devices_per_node = 8;
    sc.steps = 1;
    return sc;
}

/* Mixtral 8x7B (Mistral AI, "Mixtral of Experts", arXiv:2401.04088, and the
 * released config.json): 32 layers, hidden 4096, 32 heads in 8 KV groups,
 * 8 SwiGLU experts of 14336, top-2, vocabulary 32000, untied, RMSNorm. */
static ms_model_config mixtral(void)
{
    return (ms_model_config){.arch = MS_ARCH_LLAMA, .num_layers = 32, .hidden_size = 4096,
                             .ffn_hidden_size = 14336, .num_attention_heads = 32,
                             .num_query_groups = 8, .seq_length = 4096,
                             .padded_vocab_size = 32000, .normalization = MS_NORM_RMSNORM,
                             .swiglu = true, .untie_embeddings = true, .use_flash_attn = true,
                             .dtype = MS_DTYPE_BF16, .position_embedding_type = MS_POS_ROPE,
                             .num_experts = 8, .moe_router_topk = 2,
                             .moe_ffn_hidden_size = 14336};
}

static ms_program *build(const ms_scenario *sc, int stage, ms_program_view *v)
{
    ms_program *p = NULL;
    ms_diag d = {0};
    ms_status st = ms_program_build(sc, stage, &p, &d);
    ck_assert_msg(st == MS_OK, "build stage %d: %s", stage, d.msg);
    *v = ms_program_get_view(p);
    return p;
}

/* ---- the order of a stage --------------------------------------------- */

/* The stage's steps as "F<mb>" / "B<mb>" (with chunks "F<mb>.<chunk>"),
 * one per change of (phase, micro-batch, chunk) among its ops. */
static void order(const ms_program_view *v, bool chunks, char *out, size_t cap)
{
    int phase = -1, mb = -1, ch = -1;
    size_t n = 0;
    out[0] = '\0';
    for (uint32_t i = 0; i < v->n_ops; i++) {
        const ms_op *op = &v->ops[i];
        if (op->phase == MS_PHASE_OPTIMIZER)
            continue;
        if ((int)op->phase == phase && op->micro_batch == mb && op->chunk == ch)
            continue;
        phase = (int)op->phase;
        mb = op->micro_batch;
        ch = op->chunk;
        int w = chunks ? snprintf(out + n, cap - n, "%s%c%d.%d", n ? " " : "",
                                  phase == MS_PHASE_FORWARD ? 'F' : 'B', mb, ch)
                       : snprintf(out + n, cap - n, "%s%c%d", n ? " " : "",
                                  phase == MS_PHASE_FORWARD ? 'F' : 'B', mb);
        ck_assert_int_lt(w, (int)(cap - n));
        n += (size_t)w;
    }
}

/* p = 4, m = 8, 1F1B: stage s runs min(p - s - 1, m) warmup forwards, then
 * alternates one forward and one backward, then drains the backwards.
 * Stage 0: 3 warmup (F0 F1 F2), steady F3 B0 F4 B1 F5 B2 F6 B3 F7 B4, then
 * B5 B6 B7.  Stage 3 (last): no warmup, F0 B0 F1 B1 ... F7 B7.  Stage 1: 2
 * warmup.  (Megatron, forward_backward_pipelining_without_interleaving.) */
START_TEST(schedule_1f1b)
{
    ms_scenario sc = gpt((cfg){.L = 4, .h = 256, .a = 4, .s = 128, .b = 1, .t = 1, .p = 4,
                               .dp = 1, .m = 8, .sp = false});
    static const char *const want[4] = {
        "F0 F1 F2 F3 B0 F4 B1 F5 B2 F6 B3 F7 B4 B5 B6 B7",
        "F0 F1 F2 B0 F3 B1 F4 B2 F5 B3 F6 B4 F7 B5 B6 B7",
        "F0 F1 B0 F2 B1 F3 B2 F4 B3 F5 B4 F6 B5 F7 B6 B7",
        "F0 B0 F1 B1 F2 B2 F3 B3 F4 B4 F5 B5 F6 B6 F7 B7",
    };
    char got[512];
    for (int s = 0; s < 4; s++) {
        ms_program_view v;
        ms_program *p = build(&sc, s, &v);
        order(&v, false, got, sizeof got);
        ck_assert_str_eq(got, want[s]);
        for (uint32_t i = 0; i < v.n_ops; i++) {
            ck_assert_int_eq(v.ops[i].chunk, 0);
            ck_assert(v.ops[i].layer == MS_NONE || v.ops[i].layer == s); /* 1 layer a stage */
        }
        ms_program_free(p);
    }
}
END_TEST

/* p = 2, v = 2, m = 4: Megatron's forward_backward_pipelining_with_
 * interleaving.  Virtual step k runs micro-batch (k / (p v)) p + k % p on
 * chunk (k / p) % v forward, chunk v - 1 - (k / p) % v backward; warmup is
 * (p - s - 1) * 2 + (v - 1) p: 4 on stage 0, 2 on stage 1, of m v = 8.
 * Forward k = 0..7: (0,0) (1,0) (0,1) (1,1) (2,0) (3,0) (2,1) (3,1);
 * backward k = 0..7: (0,1) (1,1) (0,0) (1,0) (2,1) (3,1) (2,0) (3,0).
 * Stage 0: F k=0..3, then (F4, B0) (F5, B1) (F6, B2) (F7, B3), then B4..B7.
 * Stage 1: F k=0,1, then (F2, B0) ... (F7, B5), then B6, B7.  Chunk c of
 * stage s holds layer c p + s (one layer a virtual stage). */
START_TEST(schedule_interleaved)
{
    ms_scenario sc = gpt((cfg){.L = 4, .h = 256, .a = 4, .s = 128, .b = 1, .t = 1, .p = 2,
                               .vpp = 1, .dp = 1, .m = 4});
    static const char *const want[2] = {
        "F0.0 F1.0 F0.1 F1.1 F2.0 B0.1 F3.0 B1.1 F2.1 B0.0 F3.1 B1.0 B2.1 B3.1 B2.0 B3.0",
        "F0.0 F1.0 F0.1 B0.1 F1.1 B1.1 F2.0 B0.0 F3.0 B1.0 F2.1 B2.1 F3.1 B3.1 B2.0 B3.0",
    };
    char got[512];
    for (int s = 0; s < 2; s++) {
        ms_program_view v;
        ms_program *p = build(&sc, s, &v);
        order(&v, true, got, sizeof got);
        ck_assert_str_eq(got, want[s]);
        int emb = 0, head = 0;
        for (uint32_t i = 0; i < v.n_ops; i++) {
            const ms_op *op = &v.ops[i];
            if (op->layer != MS_NONE && op->phase != MS_PHASE_OPTIMIZER)
                ck_assert_int_eq(op->layer, op->chunk * 2 + s);
            if (strcmp(op->name, "embedding.word_embeddings") == 0) {
                emb++;
                ck_assert_int_eq(op->chunk, 0);
            }
            if (strcmp(op->name, "output_layer") == 0) {
                head++;
                ck_assert_int_eq(op->chunk, 1);
            }
        }
        ck_assert_int_eq(emb, s == 0 ? 4 : 0);  /* stage 0, chunk 0 only */
        ck_assert_int_eq(head, s == 1 ? 4 : 0); /* last stage, last chunk only */
        ms_program_free(p);
    }
}
END_TEST

/* ---- p2p ------------------------------------------------------------------ */

typedef struct stage_set {
    int n;
    ms_program *p[8];
    ms_program_view v[8];
} stage_set;

static void build_all(const ms_scenario *sc, stage_set *ss)
{
    ss->n = sc->parallel.pipeline_model_parallel_size;
    for (int s = 0; s < ss->n; s++)
        ss->p[s] = build(sc, s, &ss->v[s]);
}

static void free_all(stage_set *ss)
{
    for (int s = 0; s < ss->n; s++)
        ms_program_free(ss->p[s]);
}

static bool is_p2p(const ms_op *op, ms_comm_kind kind)
{
    return op->kernel.cls == MS_KC_COMM && op->kernel.comm == kind;
}

/* Every SEND of stage s to stage q has exactly one RECV on q from s with
 * the same tag, bytes and link, and every RECV exactly one SEND; the tensor
 * received is as large as the one sent. */
static void check_pairs(const stage_set *ss)
{
    for (int s = 0; s < ss->n; s++)
        for (uint32_t i = 0; i < ss->v[s].n_ops; i++) {
            const ms_op *op = &ss->v[s].ops[i];
            bool send = is_p2p(op, MS_COMM_SEND), recv = is_p2p(op, MS_COMM_RECV);
            if (!send && !recv)
                continue;
            ck_assert_int_eq(op->stream, MS_SR_COMM);
            int q = op->kernel.peer;
            ck_assert(q >= 0 && q < ss->n && q != s);
            int matches = 0;
            for (uint32_t j = 0; j < ss->v[q].n_ops; j++) {
                const ms_op *o = &ss->v[q].ops[j];
                if (!is_p2p(o, send ? MS_COMM_RECV : MS_COMM_SEND) || o->kernel.peer != s ||
                    o->kernel.tag != op->kernel.tag)
                    continue;
                matches++;
                ck_assert_double_eq(o->kernel.comm_bytes, op->kernel.comm_bytes);
                ck_assert_int_eq(o->kernel.link, op->kernel.link);
                uint64_t mine = send ? ss->v[s].tensors[op->inputs[0]].bytes
                                     : ss->v[s].tensors[op->outputs[0]].bytes;
                uint64_t theirs = send ? ss->v[q].tensors[o->outputs[0]].bytes
                                       : ss->v[q].tensors[o->inputs[0]].bytes;
                ck_assert_uint_eq(mine, theirs);
                ck_assert_uint_eq(mine, (uint64_t)op->kernel.comm_bytes);
            }
            ck_assert_msg(matches == 1, "stage %d op %s tag %d: %d matches on stage %d", s,
                          op->name, op->kernel.tag, matches, q);
        }
}

START_TEST(p2p_pairs)
{
    cfg cases[] = {
        {.L = 4, .h = 256, .a = 4, .s = 128, .b = 1, .t = 1, .p = 4, .dp = 1, .m = 8},
        {.L = 4, .h = 256, .a = 4, .s = 128, .b = 1, .t = 1, .p = 2, .vpp = 1, .dp = 1, .m = 4},
        {.L = 8, .h = 256, .a = 4, .s = 128, .b = 2, .t = 2, .p = 4, .vpp = 1, .dp = 2, .m = 8,
         .sp = true},
        {.L = 8, .h = 256, .a = 4, .s = 128, .b = 1, .t = 2, .p = 2, .vpp = 2, .dp = 1, .m = 6,
         .cp = 2, .sp = true},
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        ms_scenario sc = gpt(cases[k]);
        stage_set ss;
        build_all(&sc, &ss);
        check_pairs(&ss);
        /* Activations cross as [s b h / (cp, tp with SP)] in bf16. */
        cfg c = cases[k];
        uint64_t want = (uint64_t)c.s * c.b * c.h * 2 / (c.cp ? c.cp : 1) / (c.sp ? c.t : 1);
        for (uint32_t i = 0; i < ss.v[0].n_ops; i++)
            if (is_p2p(&ss.v[0].ops[i], MS_COMM_SEND))
                ck_assert_double_eq(ss.v[0].ops[i].kernel.comm_bytes, (double)want);
        free_all(&ss);
    }
}
END_TEST

/* Megatron 2021-2022's scatter/gather of pipeline tensors, TP 2 without SP:
 * s b h bf16 = 128 x 1 x 256 x 2 = 65536 bytes a boundary; each rank sends
 * its half (32768, a view of the whole activation, so the send still reads
 * the 65536-byte tensor), receives a 32768-byte slice, and all-gathers it
 * over TP into the 65536-byte activation the next op reads.  With SP the
 * tensor is already a 1/t shard (32768 on the wire, no gather); off, the
 * whole 65536 crosses and nothing is gathered. */
static int count_pipeline_gathers(const ms_program_view *v, uint64_t wire, uint64_t whole)
{
    int gathers = 0;
    for (uint32_t i = 0; i < v->n_ops; i++) {
        const ms_op *op = &v->ops[i];
        if (is_p2p(op, MS_COMM_SEND)) {
            ck_assert_double_eq(op->kernel.comm_bytes, (double)wire);
            ck_assert_uint_eq(v->tensors[op->inputs[0]].bytes, whole);
        }
        if (!is_p2p(op, MS_COMM_RECV))
            continue;
        ck_assert_double_eq(op->kernel.comm_bytes, (double)wire);
        ck_assert_uint_eq(v->tensors[op->outputs[0]].bytes, wire);
        const ms_op *g = &v->ops[i + 1];
        if (!is_p2p(g, MS_COMM_ALLGATHER) || strncmp(g->name, "pipeline.recv_", 14) != 0)
            continue;
        gathers++;
        ck_assert_uint_eq(g->inputs[0], op->outputs[0]);
        ck_assert_double_eq(g->kernel.comm_bytes, (double)whole);
        ck_assert_int_eq(g->kernel.group_size, 2);
        ck_assert_uint_eq(v->tensors[g->outputs[0]].bytes, whole);
    }
    return gathers;
}

START_TEST(p2p_scatter_gather)
{
    cfg c = {.L = 4, .h = 256, .a = 4, .s = 128, .b = 1, .t = 2, .p = 2, .dp = 1, .m = 4};
    struct {
        bool sp, split;
        uint64_t wire, whole;
        int gathers; /* stage 0 receives 4 backward grads, stage 1 4 activations */
    } cases[] = {{false, true, 32768, 65536, 4}, {true, true, 32768, 32768, 0},
                 {false, false, 65536, 65536, 0}};
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        c.sp = cases[k].sp;
        ms_scenario sc = gpt(c);
        sc.parallel.scatter_gather_tensors_in_pipeline = cases[k].split;
        stage_set ss;
        build_all(&sc, &ss);
        for (int s = 0; s < 2; s++)
            ck_assert_int_eq(count_pipeline_gathers(&ss.v[s], cases[k].wire, cases[k].whole),
                             cases[k].gathers);
        free_all(&ss);
    }
}
END_TEST

/* Stages share a node when all their ranks do (Megatron's order tp-cp-dp-pp:
 * stage s holds ranks s T .. s T + T - 1, T = tp cp dp).  8 devices a node:
 * TP 2 DP 2 (T = 4): stages 0-1 in node 0, 2-3 in node 1; the 1 -> 2
 * transfer crosses nodes, 0 -> 1 does not. */
START_TEST(p2p_links)
{
    ms_scenario sc = gpt((cfg){.L = 4, .h = 256, .a = 4, .s = 128, .b = 1, .t = 2, .p = 4,
                               .dp = 2, .m = 4, .sp = true});
    stage_set ss;
    build_all(&sc, &ss);
    for (int s = 0; s < 4; s++)
        for (uint32_t i = 0; i < ss.v[s].n_ops; i++) {
            const ms_op *op = &ss.v[s].ops[i];
            if (!is_p2p(op, MS_COMM_SEND) && !is_p2p(op, MS_COMM_RECV))
                continue;
            int lo = op->kernel.peer < s ? op->kernel.peer : s;
            ck_assert_int_eq(op->kernel.link, lo == 1 ? MS_LINK_INTER_NODE : MS_LINK_INTRA_NODE);
        }
    free_all(&ss);
}
END_TEST

/* ---- the schedule run with uniform compute -------------------------------
 *
 * Each stage runs its steps in program order; a step that receives waits
 * for the matching send's step on the peer stage (p2p itself free); a
 * forward of one chunk takes 1/v, a backward 2/v.  Every stage finishing
 * shows the order cannot deadlock; the bubble of every stage is then
 * (p - 1) / (m + p - 1) for 1F1B (Narayanan et al. 2021, sec. 2.2) and
 * (p - 1) / (v m + p - 1) interleaved. */

typedef struct step {
    int recv_peer, recv_tag, send_peer, send_tag;
    double dur, end;
} step;

static int steps_of(const ms_program_view *v, int chunks, step *out, int cap)
{
    int n = 0, phase = -1, mb = -1, ch = -1;
    for (uint32_t i = 0; i < v->n_ops; i++) {
        const ms_op *op = &v->ops[i];
        if (op->phase == MS_PHASE_OPTIMIZER)
            continue;
        if ((int)op->phase != phase || op->micro_batch != mb || op->chunk != ch) {
            ck_assert_int_lt(n, cap);
            phase = (int)op->phase;
            mb = op->micro_batch;
            ch = op->chunk;
            out[n++] = (step){.recv_peer = -1, .send_peer = -1, .end = -1,
                              .dur = (phase == MS_PHASE_FORWARD ? 1.0 : 2.0) / chunks};
        }
        if (is_p2p(op, MS_COMM_RECV)) {
            out[n - 1].recv_peer = op->kernel.peer;
            out[n - 1].recv_tag = op->kernel.tag;
        }
        if (is_p2p(op, MS_COMM_SEND)) {
            out[n - 1].send_peer = op->kernel.peer;
            out[n - 1].send_tag = op->kernel.tag;
        }
    }
    return n;
}

/* Runs the stages; returns the makespan, each stage's busy time in busy[]. */
static double run_schedule(const stage_set *ss, int chunks, double *busy)
{
    enum { CAP = 512 };
    static step st[8][CAP];
    int n[8], pos[8] = {0};
    double clock[8] = {0};
    for (int s = 0; s < ss->n; s++) {
        n[s] = steps_of(&ss->v[s], chunks, st[s], CAP);
        busy[s] = 0;
    }
    for (bool progress = true; progress;) {
        progress = false;
        for (int s = 0; s < ss->n; s++)
            while (pos[s] < n[s]) {
                step *u = &st[s][pos[s]];
                double ready = clock[s];
                if (u->recv_peer >= 0) {
                    const step *from = NULL;
                    for (int j = 0; j < n[u->recv_peer]; j++)
                        if (st[u->recv_peer][j].send_peer == s &&
                            st[u->recv_peer][j].send_tag == u->recv_tag)
                            from = &st[u->recv_peer][j];
                    ck_assert_ptr_nonnull(from);
                    if (from->end < 0)
                        break; /* not sent yet */
                    ready = fmax(ready, from->end);
                }
                u->end = ready + u->dur;
                clock[s] = u->end;
                busy[s] += u->dur;
                pos[s]++;
                progress = true;
            }
    }
    double makespan = 0;
    for (int s = 0; s < ss->n; s++) {
        ck_assert_msg(pos[s] == n[s], "stage %d stuck at step %d of %d: deadlock", s, pos[s],
                      n[s]);
        makespan = fmax(makespan, clock[s]);
    }
    return makespan;
}

START_TEST(bubble_fraction)
{
    static const int cases[][3] = {{4, 8, 0}, {4, 3, 0}, {2, 5, 0}, {8, 16, 0},
                                   {2, 4, 2}, {4, 8, 2}, {4, 12, 3}};
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        int p = cases[k][0], m = cases[k][1], v = cases[k][2] ? cases[k][2] : 1;
        ms_scenario sc = gpt((cfg){.L = p * v, .h = 128, .a = 2, .s = 64, .b = 1, .t = 1,
                                   .p = p, .vpp = cases[k][2] ? 1 : 0, .dp = 1, .m = m});
        stage_set ss;
        build_all(&sc, &ss);
        double busy[8], makespan = run_schedule(&ss, v, busy);
        double want = (double)(p - 1) / (v * m + p - 1);
        for (int s = 0; s < p; s++) {
            ck_assert_double_eq_tol(busy[s], 3.0 * m, 1e-9);
            ck_assert_msg(fabs((1 - busy[s] / makespan) - want) < 1e-9,
                          "p %d m %d v %d stage %d: bubble %g, want %g", p, m, v, s,
                          1 - busy[s] / makespan, want);
        }
        free_all(&ss);
    }
}
END_TEST

/* ---- micro-batches in flight ------------------------------------------------ */

/* 1F1B: stage s holds p - s micro-batches at its peak (m >= p), m if fewer;
 * interleaved: (p - s - 1) * 2 + (v - 1) p + 1 chunks, i.e. the first stage
 * p (1 + (p - 1)/(p v)) micro-batches' worth: p 4 v 2: 11 chunks = 5.5 =
 * 4 x 1.375; p 2 v 2: 5 = 2 x 2.5 / 2.  Uniform units: the peak of saved
 * bytes is the count times one unit's. */
START_TEST(in_flight)
{
    static const int cases[][4] = {
        /* p, m, vpp (layers a chunk, 0: none), layers */
        {4, 8, 0, 8}, {4, 3, 0, 4}, {4, 8, 1, 8}, {2, 4, 1, 4}, {4, 8, 2, 16},
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        int p = cases[k][0], m = cases[k][1], vpp = cases[k][2], L = cases[k][3];
        int v = vpp ? L / p / vpp : 1;
        ms_scenario sc = gpt((cfg){.L = L, .h = 256, .a = 4, .s = 128, .b = 1, .t = 2, .p = p,
                                   .vpp = vpp, .dp = 1, .m = m, .sp = true});
        for (int s = 0; s < p; s++) {
            ms_program_view v_;
            ms_program *pr = build(&sc, s, &v_);
            ms_program_memory mem;
            ck_assert_int_eq(ms_program_memory_summary(&v_, &mem), MS_OK);
            ck_assert_uint_eq(mem.chunks, (uint32_t)v);
            ck_assert_uint_eq(mem.micro_batches, (uint32_t)m);
            int want = v == 1 ? (p - s < m ? p - s : m)
                              : ((p - s - 1) * 2 + (v - 1) * p + 1 < m * v
                                     ? (p - s - 1) * 2 + (v - 1) * p + 1 : m * v);
            ck_assert_msg(mem.max_in_flight == (uint32_t)want, "p %d m %d v %d stage %d: %u",
                          p, m, v, s, mem.max_in_flight);
            if (s > 0 && s < p - 1) /* no embedding or head: every unit alike */
                ck_assert_uint_eq(mem.peak_saved_bytes,
                                  mem.saved_bytes_mb0 / (uint64_t)v * mem.max_in_flight);
            if (s == 0 && v > 1)
                ck_assert_double_eq_tol(mem.max_in_flight / (double)v,
                                        p * (1 + (p - 1.0) / (p * v)), 1e-12);
            if (s == 0 && v == 1 && m >= p)
                ck_assert_uint_eq(mem.max_in_flight, (uint32_t)p);
            ms_program_free(pr);
        }
    }
    ck_assert_int_eq(ms_program_memory_summary(NULL, NULL), MS_EINVAL);
}
END_TEST

/* ---- Megatron-LM's theoretical memory --------------------------------------
 *
 * weights + grads + optimizer of stage 0 = its persistent bytes (18 bytes a
 * parameter, 6 + 12/DP with the distributed optimizer); activations = the
 * saved-for-backward bytes of micro-batch 0 (all chunks) x the micro-batches
 * in flight on stage 0 (units / v), and the peak of the in-flight saved
 * bytes: both within 1% of compute_weight_and_optimizer_memory and
 * compute_activation_memory.  The configurations are what that formula
 * covers: gpt (GeLU 4h MLP, dropout) with sequence parallelism and flash
 * attention (or no TP), learned absolute positions small next to the stage's
 * weights (Megatron's count leaves the position embedding out: s h
 * parameters, whole on every TP rank).  docs/memory-formulas.md has the
 * table and the exceptions. */
static const cfg megatron_cases[] = {
    /* GPT-3 175B (Brown et al. 2020: 96 layers, h 12288, 96 heads, s 2048):
     * TP 4 PP 8, 1F1B with m = 16 >= p; and interleaved, 3 layers a chunk */
    {.L = 96, .h = 12288, .a = 96, .s = 2048, .b = 1, .t = 4, .p = 8, .dp = 1, .m = 16,
     .sp = true},
    {.L = 96, .h = 12288, .a = 96, .s = 2048, .b = 1, .t = 4, .p = 8, .vpp = 3, .dp = 1, .m = 16,
     .sp = true},
    /* GPT 22B (Korthikanti et al. Table 3): TP 2 PP 4 with the distributed
     * optimizer over DP 4; interleaved (6 layers a chunk) over DP 2 */
    {.L = 48, .h = 6144, .a = 64, .s = 2048, .b = 2, .t = 2, .p = 4, .dp = 4, .m = 8,
     .distopt = true, .sp = true},
    {.L = 48, .h = 6144, .a = 64, .s = 2048, .b = 1, .t = 2, .p = 4, .vpp = 6, .dp = 2, .m = 8,
     .distopt = true, .sp = true},
    /* GPT 22B on one device group without a pipeline (the output layer and
     * loss terms count) */
    {.L = 48, .h = 6144, .a = 64, .s = 2048, .b = 4, .t = 8, .p = 1, .dp = 1, .m = 2, .sp = true},
    /* A 13B GPT, TP 2 PP 4 with fewer micro-batches than stages (m = 2) */
    {.L = 40, .h = 5120, .a = 40, .s = 2048, .b = 2, .t = 2, .p = 4, .dp = 1, .m = 2, .sp = true},
    /* A 1.3B-class GPT, no TP, no pipeline, distributed optimizer over DP 8 */
    {.L = 24, .h = 2048, .a = 16, .s = 2048, .b = 4, .t = 1, .p = 1, .dp = 8, .m = 2,
     .distopt = true, .sp = false},
};

static double rel(double a, double b)
{
    return fabs(a - b) / b;
}

START_TEST(megatron_formula_agreement)
{
    const cfg *c = &megatron_cases[_i];
    ms_scenario sc = gpt(*c);
    ms_megatron_memory mg;
    ck_assert_int_eq(ms_megatron_theoretical_memory(&sc, &mg), MS_OK);
    ms_program_view v;
    ms_program *p = build(&sc, 0, &v);
    ms_program_memory mem;
    ck_assert_int_eq(ms_program_memory_summary(&v, &mem), MS_OK);
    double act = (double)mem.saved_bytes_mb0 * mem.max_in_flight / mem.chunks;
    ck_assert_msg(rel((double)mem.persistent_bytes, mg.weight_and_optimizer) < 0.01,
                  "case %d weights: memsim %llu, Megatron %.0f", _i,
                  (unsigned long long)mem.persistent_bytes, mg.weight_and_optimizer);
    ck_assert_msg(rel(act, mg.activation) < 0.01, "case %d activations: memsim %.0f, Megatron %.0f",
                  _i, act, mg.activation);
    ck_assert_msg(rel((double)mem.peak_saved_bytes, mg.activation) < 0.01,
                  "case %d peak: memsim %llu, Megatron %.0f", _i,
                  (unsigned long long)mem.peak_saved_bytes, mg.activation);
    ck_assert_double_eq_tol(mem.max_in_flight / (double)mem.chunks, mg.in_flight, 1e-9);
    ms_program_free(p);
}
END_TEST

/* The formula itself, by hand, for seed 000's trimmed GPT-175B on TP 8
 * (8 layers, h 12288, V 51200, s 8192, b 10, no pipeline): params on a
 * rank = (8 (2h (4h + 2) + 4h^2) + 2h + hV) / 8 = (8 x 1,811,988,480 +
 * 24,576 + 629,145,600) / 8 = 1,890,634,752; x 18 bytes.  Activations:
 * (s b h (18 + 16) x 8 + 8 s b + s b h + 4 s b h (1 + V/h)) / 8.  With
 * PP 4 VPP 2: the activations x (1 + 3/8), 5.5 micro-batches in flight. */
START_TEST(megatron_formula_by_hand)
{
    ms_scenario sc = gpt((cfg){.L = 8, .h = 12288, .a = 96, .s = 8192, .b = 10, .t = 8, .p = 1,
                               .dp = 1, .m = 4, .sp = true});
    ms_megatron_memory mg;
    ck_assert_int_eq(ms_megatron_theoretical_memory(&sc, &mg), MS_OK);
    ck_assert_double_eq(mg.params_on_first_stage, 1890634752.0);
    ck_assert_double_eq(mg.weight_and_optimizer, 1890634752.0 * 18);
    double s = 8192, b = 10, h = 12288, V = 51200;
    double want = (s * b * h * 34 * 8 + 8 * s * b + s * b * h + 4 * s * b * h * (1 + V / h)) / 8;
    ck_assert_double_eq_tol(mg.activation, want, want * 1e-12);
    ck_assert_double_eq(mg.in_flight, 1);
    sc = gpt((cfg){.L = 8, .h = 12288, .a = 96, .s = 8192, .b = 2, .t = 2, .p = 4, .vpp = 1,
                   .dp = 1, .m = 4, .sp = true});
    ck_assert_int_eq(ms_megatron_theoretical_memory(&sc, &mg), MS_OK);
    b = 2;
    want = (s * b * h * 34 * 8 + 8 * s * b * 4 + s * b * h * 4) * 1.375 / 2;
    ck_assert_double_eq_tol(mg.activation, want, want * 1e-12);
    ck_assert_double_eq(mg.in_flight, 5.5);
    ck_assert_int_eq(ms_megatron_theoretical_memory(NULL, &mg), MS_EINVAL);
}
END_TEST

/* compute_activation_memory_without_sp (sbh (10 + 24/t) a layer, x 1.05):
 * memsim without SP holds exactly Korthikanti's no-SP count, so the two
 * differ by Megatron's 5% margin (PP 2, no output-layer term on stage 0). */
START_TEST(megatron_without_sp)
{
    ms_scenario sc = gpt((cfg){.L = 8, .h = 4096, .a = 32, .s = 2048, .b = 2, .t = 4, .p = 2,
                               .dp = 1, .m = 4, .sp = false});
    ms_megatron_memory mg;
    ck_assert_int_eq(ms_megatron_theoretical_memory(&sc, &mg), MS_OK);
    ms_program_view v;
    ms_program *p = build(&sc, 0, &v);
    ms_program_memory mem;
    ck_assert_int_eq(ms_program_memory_summary(&v, &mem), MS_OK);
    ck_assert_double_le(rel((double)mem.peak_saved_bytes * 1.05, mg.activation_without_sp), 0.01);
    ms_program_free(p);
}
END_TEST

/* ---- context parallelism -------------------------------------------------- */

static uint64_t layer_saved(const ms_program_view *v, int layer)
{
    uint64_t sum = 0;
    for (uint32_t i = 0; i < v->n_tensors; i++) {
        const ms_tensor *t = &v->tensors[i];
        if (t->saved_for_backward && t->layer == layer && t->micro_batch == 0)
            sum += t->bytes;
    }
    return sum;
}

/* Each CP rank holds s/c tokens: every saved activation of a layer is /c
 * (34 s b h / (t c) + 4 a s b / (t c) with SP and flash).  The ring passes
 * K/V c - 1 times forward (c - 1 ring exchanges and c - 1 more attention
 * steps per layer) and c - 1 times backward plus the return of dK/dV, each
 * a pairwise exchange of a K+V block of s/c tokens on the CP link. */
START_TEST(context_parallel)
{
    cfg base = {.L = 2, .h = 512, .a = 8, .s = 1024, .b = 2, .t = 2, .p = 1, .dp = 1, .m = 2,
                .sp = true};
    ms_scenario sc1 = gpt(base);
    ms_program_view v1;
    ms_program *p1 = build(&sc1, 0, &v1);
    for (int c = 2; c <= 4; c *= 2) {
        cfg cc = base;
        cc.cp = c;
        ms_scenario sc = gpt(cc);
        ms_program_view v;
        ms_program *p = build(&sc, 0, &v);
        uint64_t s = 1024, b = 2, h = 512, a = 8, t = 2;
        ck_assert_uint_eq(layer_saved(&v, 1), (34 * s * b * h + 4 * a * s * b) / (t * c));
        ck_assert_uint_eq(layer_saved(&v, 1) * (uint64_t)c, layer_saved(&v1, 1));
        int fx = 0, bx = 0, ret = 0, steps = 0;
        for (uint32_t i = 0; i < v.n_ops; i++) {
            const ms_op *op = &v.ops[i];
            if (op->layer != 0 || op->micro_batch != 0)
                continue;
            bool ex = strstr(op->name, "ring_exchange") != NULL;
            fx += ex && op->phase == MS_PHASE_FORWARD;
            bx += ex && op->phase == MS_PHASE_BACKWARD;
            ret += strstr(op->name, "ring_return") != NULL;
            steps += strstr(op->name, "flash_attention.cp_step") != NULL &&
                     op->phase == MS_PHASE_FORWARD;
            if (ex && op->phase == MS_PHASE_FORWARD) {
                /* K+V of s/c tokens and g/t heads: 2 s/c b (h/t) bf16, both ways. */
                double block = 2.0 * (s / c) * b * (h / t) * 2;
                ck_assert_double_eq(op->kernel.comm_bytes, 2 * block);
                ck_assert_int_eq(op->kernel.group_size, 2);
                ck_assert_int_eq(op->stream, MS_SR_COMM);
                ck_assert_int_eq(op->kernel.link, MS_LINK_INTRA_NODE); /* t c <= 8 */
            }
        }
        ck_assert_int_eq(fx, c - 1);
        ck_assert_int_eq(steps, c - 1);
        ck_assert_int_eq(bx, c - 1);
        ck_assert_int_eq(ret, 1);
        /* Model FLOPs: each CP rank does 1/c of the step (x t ranks of TP). */
        double want = 0;
        ck_assert_int_eq(ms_model_step_flops(&sc.model, 4, &want), MS_OK);
        ck_assert_double_le(rel(v.model_flops * t * c, want), 1e-9);
        /* Grads are averaged over DP x CP (here CP only). */
        for (uint32_t i = 0; i < v.n_ops; i++)
            if (strcmp(v.ops[i].name, "layers.0.grads.all_reduce") == 0)
                ck_assert_int_eq(v.ops[i].kernel.group_size, c);
        ms_program_free(p);
    }
    ms_program_free(p1);
}
END_TEST

/* ---- mixture of experts ---------------------------------------------------- */

/* Mixtral 8x7B per layer: attention 2 h^2 + 2 h (g d) = 41,943,040, norms
 * 8,192, router 8 h = 32,768, an expert 3 h f = 176,160,768 (x 8 =
 * 1,409,286,144): 1,451,270,144; x 32 + 2 x 32000 x 4096 + 4096 =
 * 46,702,792,704 (published 46.7B).  Active: 2 experts: 394,305,536 a
 * layer; x 32 + 262,148,096 = 12,879,925,248 (published 12.9B). */
START_TEST(mixtral_params)
{
    ms_model_config m = mixtral();
    uint64_t total = 0, active = 0;
    ck_assert_int_eq(ms_model_param_count(&m, &total), MS_OK);
    ck_assert_int_eq(ms_model_active_param_count(&m, &active), MS_OK);
    ck_assert_uint_eq(total, 46702792704ULL);
    ck_assert_uint_eq(active, 12879925248ULL);
    ck_assert_double_le(rel((double)total, 46.7e9), 0.005);
    ck_assert_double_le(rel((double)active, 12.9e9), 0.005);
    m.moe_router_topk = 9; /* more than there are experts */
    ck_assert_int_eq(ms_model_param_count(&m, &total), MS_EINVAL);
}
END_TEST

static ms_scenario moe_scenario(int t, int ep, int dp, double cf)
{
    ms_scenario sc = gpt((cfg){.L = 2, .h = 512, .a = 8, .s = 256, .b = 2, .t = t, .p = 1,
                               .dp = dp, .m = 2, .sp = t > 1});
    sc.model = mixtral();
    sc.model.num_layers = 2;
    sc.model.hidden_size = 512;
    sc.model.num_attention_heads = 8;
    sc.model.num_query_groups = 4;
    sc.model.ffn_hidden_size = 1024;
    sc.model.moe_ffn_hidden_size = 1024;
    sc.model.seq_length = 256;
    sc.model.moe_capacity_factor = cf;
    sc.parallel.expert_model_parallel_size = ep;
    return sc;
}

/* Expert ops carry MindFormers-style names (regexes such as
 * 'feed_forward\.experts' select them); each rank holds E / EP experts split
 * over TP, the router whole; expert grads reduce over DP / EP ranks. */
START_TEST(moe_program)
{
    ms_scenario sc = moe_scenario(2, 2, 4, 0);
    ms_program_view v;
    ms_program *p = build(&sc, 0, &v);
    regex_t re;
    ck_assert_int_eq(regcomp(&re, "feed_forward\\.experts", REG_EXTENDED | REG_NOSUB), 0);
    int hits = 0, a2a = 0, router = 0;
    for (uint32_t i = 0; i < v.n_ops; i++) {
        const ms_op *op = &v.ops[i];
        if (op->layer == 0 && op->micro_batch == 0 && op->phase == MS_PHASE_FORWARD &&
            regexec(&re, op->name, 0, NULL, 0) == 0)
            hits++;
        if (op->kernel.comm == MS_COMM_ALLTOALL && op->layer == 0 && op->micro_batch == 0) {
            a2a++;
            ck_assert_int_eq(op->kernel.group_size, 2);
        }
        router += strcmp(op->name, "layers.0.feed_forward.router.matmul") == 0;
        if (strcmp(op->name, "layers.0.feed_forward.experts.0.grads.all_reduce") == 0)
            ck_assert_int_eq(op->kernel.group_size, 2); /* DP 4 / EP 2 */
        if (strcmp(op->name, "layers.0.grads.all_reduce") == 0)
            ck_assert_int_eq(op->kernel.group_size, 4);
    }
    regfree(&re);
    /* 4 local experts x (w1, w3, silu, mul, w2) forward. */
    ck_assert_int_eq(hits, 4 * 5);
    ck_assert_int_eq(a2a, 4); /* dispatch, combine, and their backwards */
    ck_assert_int_eq(router, 2);
    /* Persistent weights of a layer's experts on this rank: E/EP = 4 experts
     * of 3 h f / t = 3 x 512 x 1024 / 2 parameters, 2 bytes each. */
    uint64_t ew = 0, rw = 0;
    for (uint32_t i = 0; i < v.n_tensors; i++) {
        const ms_tensor *t = &v.tensors[i];
        if (t->kind == MS_TK_WEIGHT && t->layer == 0 && strstr(t->name, ".experts."))
            ew += t->bytes;
        if (t->kind == MS_TK_WEIGHT && strcmp(t->name, "layers.0.feed_forward.router.weight") == 0)
            rw = t->bytes;
    }
    ck_assert_uint_eq(ew, 4ULL * 3 * 512 * 1024 / 2 * 2);
    ck_assert_uint_eq(rw, 8ULL * 512 * 2);
    ms_program_free(p);
}
END_TEST

static uint64_t tensor_bytes(const ms_program_view *v, const char *name)
{
    for (uint32_t i = 0; i < v->n_tensors; i++)
        if (strcmp(v->tensors[i].name, name) == 0)
            return v->tensors[i].bytes;
    ck_abort_msg("no tensor %s", name);
    return 0;
}

/* Rows the local experts read: T = s b / t tokens route k = 2 rows each to
 * the EP group and the TP all-gather brings t shards: k T t = 2 x 256 =
 * 512 rows... with a capacity factor cf, E x ceil(cf k T / E) per rank:
 * cf 1.25, T = 256: ceil(1.25 x 512 / 8) = 80 x 8 = 640, x t 2 = 1280 rows.
 * Model FLOPs stay k per token, so the step sums to the analytic figure. */
START_TEST(moe_capacity_and_flops)
{
    for (int with_cf = 0; with_cf <= 1; with_cf++) {
        ms_scenario sc = moe_scenario(2, 2, 2, with_cf ? 1.25 : 0);
        ms_program_view v;
        ms_program *p = build(&sc, 0, &v);
        uint64_t T = 256 * 2 / 2, rows = with_cf ? 640 * 2 : 2 * T * 2;
        ck_assert_uint_eq(
            tensor_bytes(&v, "layers.0.feed_forward.token_dispatcher.dispatch.all_gather.out"),
            rows * 512 * 2);
        double want = 0;
        ck_assert_int_eq(ms_model_step_flops(&sc.model, 4, &want), MS_OK);
        ck_assert_double_le(rel(v.model_flops * 2, want), 1e-9);
        ms_program_free(p);
    }
}
END_TEST

/* ---- determinism and bad input --------------------------------------------- */

START_TEST(deterministic)
{
    ms_scenario sc = gpt((cfg){.L = 8, .h = 512, .a = 8, .s = 256, .b = 1, .t = 2, .p = 2,
                               .vpp = 2, .dp = 2, .m = 4, .cp = 2, .distopt = true, .sp = true});
    ms_model_config moe = moe_scenario(2, 2, 2, 1.0).model;
    sc.model = moe;
    sc.model.num_layers = 8;
    sc.parallel.expert_model_parallel_size = 2;
    for (int s = 0; s < 2; s++) {
        ms_program_view a, b;
        ms_program *pa = build(&sc, s, &a), *pb = build(&sc, s, &b);
        ck_assert_uint_eq(a.n_ops, b.n_ops);
        ck_assert_uint_eq(a.n_tensors, b.n_tensors);
        for (uint32_t i = 0; i < a.n_ops; i++) {
            ck_assert_str_eq(a.ops[i].name, b.ops[i].name);
            ck_assert_int_eq(a.ops[i].chunk, b.ops[i].chunk);
            ck_assert_int_eq(a.ops[i].kernel.tag, b.ops[i].kernel.tag);
            ck_assert_mem_eq(a.ops[i].inputs, b.ops[i].inputs,
                             a.ops[i].n_inputs * sizeof(uint32_t));
            ck_assert_double_eq(a.ops[i].kernel.flops, b.ops[i].kernel.flops);
        }
        for (uint32_t i = 0; i < a.n_tensors; i++)
            ck_assert_uint_eq(a.tensors[i].bytes, b.tensors[i].bytes);
        ms_program_free(pa);
        ms_program_free(pb);
    }
}
END_TEST

static void expect_error(const ms_scenario *sc, ms_status st, const char *a, const char *b)
{
    ms_program *p = (ms_program *)sc; /* must be reset to NULL */
    ms_diag d = {0};
    ck_assert_int_eq(ms_program_build(sc, 0, &p, &d), st);
    ck_assert_ptr_null(p);
    ck_assert_msg(strstr(d.msg, a) != NULL, "'%s' not in: %s", a, d.msg);
    ck_assert_msg(b == NULL || strstr(d.msg, b) != NULL, "'%s' not in: %s", b, d.msg);
}

START_TEST(bad_inputs)
{
    cfg ok = {.L = 8, .h = 256, .a = 4, .s = 128, .b = 1, .t = 1, .p = 2, .vpp = 2, .dp = 1,
              .m = 4};
    ms_scenario sc = gpt(ok);
    sc.model.num_layers = 6; /* 6 % (2 x 2) != 0 */
    expect_error(&sc, MS_EINVAL, "model.num_layers (6)",
                 "num_layers_per_virtual_pipeline_stage (2 x 2 = 4)");
    sc = gpt(ok);
    sc.parallel.num_micro_batches = 3; /* interleaving needs m % p == 0 */
    expect_error(&sc, MS_EINVAL, "micro-batches", "pipeline_model_parallel_size (2)");
    sc = gpt(ok);
    sc.parallel.pipeline_model_parallel_size = 1;
    sc.model.num_layers = 4;
    expect_error(&sc, MS_EINVAL, "num_layers_per_virtual_pipeline_stage (2) needs", NULL);
    sc = gpt(ok);
    sc.parallel.num_layers_per_virtual_pipeline_stage = 0;
    sc.model.num_layers = 7;
    expect_error(&sc, MS_EINVAL, "model.num_layers (7)", "pipeline_model_parallel_size (2)");
    /* Experts not divisible by EP, EP beyond DP x CP, top-k beyond E, TP
     * without SP, EP without experts. */
    sc = moe_scenario(1, 3, 3, 0);
    expect_error(&sc, MS_EINVAL, "model.num_experts (8)", "expert_model_parallel_size (3)");
    sc = moe_scenario(1, 4, 2, 0);
    expect_error(&sc, MS_EINVAL, "data_parallel_size x context_parallel_size (2)",
                 "expert_model_parallel_size (4)");
    sc = moe_scenario(1, 2, 2, 0);
    sc.model.moe_router_topk = 9;
    expect_error(&sc, MS_EINVAL, "model.moe_router_topk (9)", "model.num_experts (8)");
    sc = moe_scenario(2, 2, 2, 0);
    sc.parallel.sequence_parallel = false;
    expect_error(&sc, MS_EINVAL, "sequence_parallel", NULL);
    sc = moe_scenario(1, 2, 2, -1);
    expect_error(&sc, MS_ERANGE, "model.moe_capacity_factor", NULL);
    sc = gpt(ok);
    sc.parallel.expert_model_parallel_size = 2;
    expect_error(&sc, MS_EINVAL, "expert_model_parallel_size (2) needs model.num_experts", NULL);
    sc = gpt(ok);
    sc.parallel.context_parallel_size = 3; /* 128 % 3 */
    expect_error(&sc, MS_EINVAL, "model.seq_length (128)", "context_parallel_size (3)");
}
END_TEST

static Suite *pipeline_suite(void)
{
    Suite *s = suite_create("workload_pipeline");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, schedule_1f1b);
    tcase_add_test(tc, schedule_interleaved);
    tcase_add_test(tc, p2p_pairs);
    tcase_add_test(tc, p2p_scatter_gather);
    tcase_add_test(tc, p2p_links);
    tcase_add_test(tc, bubble_fraction);
    tcase_add_test(tc, in_flight);
    tcase_add_loop_test(tc, megatron_formula_agreement, 0,
                        (int)(sizeof megatron_cases / sizeof megatron_cases[0]));
    tcase_add_test(tc, megatron_formula_by_hand);
    tcase_add_test(tc, megatron_without_sp);
    tcase_add_test(tc, context_parallel);
    tcase_add_test(tc, mixtral_params);
    tcase_add_test(tc, moe_program);
    tcase_add_test(tc, moe_capacity_and_flops);
    tcase_add_test(tc, deterministic);
    tcase_add_test(tc, bad_inputs);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(pipeline_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
