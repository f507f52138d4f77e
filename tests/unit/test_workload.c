/* Tests of the workload builder against the public formulas it must agree
 * with: parameter counts of llama2, Korthikanti et al. 2022's activation
 * bytes per layer (with and without sequence parallelism), flash attention,
 * full recompute keeping only the layer input, Narayanan et al. 2021's
 * model FLOPs, and the program's own invariants. */
#include <check.h>
#include <math.h>
#include <regex.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "memsim/workload.h"

/* A GPT in Megatron's defaults (LayerNorm, GeLU 4h MLP, dropout 0.1, tied
 * embeddings, learned absolute positions, biases), one micro-batch. */
static ms_scenario gpt(int s, int b, int h, int a, int t, bool sp, bool flash, int layers)
{
    ms_scenario sc;
    memset(&sc, 0, sizeof sc);
    snprintf(sc.name, sizeof sc.name, "test-gpt");
    sc.model = (ms_model_config){.arch = MS_ARCH_GPT, .num_layers = layers, .hidden_size = h,
                                 .ffn_hidden_size = 4 * h, .num_attention_heads = a,
                                 .num_query_groups = a, .seq_length = s,
                                 .padded_vocab_size = 51200, .normalization = MS_NORM_LAYERNORM,
                                 .swiglu = false, .untie_embeddings = false,
                                 .use_flash_attn = flash, .hidden_dropout = 0.1,
                                 .attention_dropout = 0.1, .dtype = MS_DTYPE_BF16,
                                 .add_bias_linear = true,
                                 .position_embedding_type = MS_POS_LEARNED_ABSOLUTE};
    sc.parallel = (ms_parallel_config){.tensor_model_parallel_size = t,
                                       .pipeline_model_parallel_size = 1,
                                       .context_parallel_size = 1, .world_size = t,
                                       .data_parallel_size = 1, .sequence_parallel = sp,
                                       .overlap_grad_reduce = true,
                                       .micro_batch_size = b, .global_batch_size = b,
                                       .num_micro_batches = 1};
    sc.device.devices_per_node = 8;
    sc.steps = 1;
    return sc;
}

/* llama2 in MindFormers' defaults: RMSNorm, SwiGLU, RoPE, no bias, no
 * dropout, untied output layer, GQA where the config has it. */
static ms_model_config llama(int layers, int h, int f, int a, int g)
{
    return (ms_model_config){.arch = MS_ARCH_LLAMA, .num_layers = layers, .hidden_size = h,
                             .ffn_hidden_size = f, .num_attention_heads = a,
                             .num_query_groups = g, .seq_length = 4096,
                             .padded_vocab_size = 32000, .normalization = MS_NORM_RMSNORM,
                             .swiglu = true, .untie_embeddings = true, .use_flash_attn = true,
                             .dtype = MS_DTYPE_BF16, .position_embedding_type = MS_POS_ROPE};
}

static ms_program *build(const ms_scenario *sc, int stage, ms_program_view *v)
{
    ms_program *p = NULL;
    ms_diag d = {0};
    ms_status st = ms_program_build(sc, stage, &p, &d);
    ck_assert_msg(st == MS_OK, "build: %s", d.msg);
    *v = ms_program_get_view(p);
    return p;
}

static const ms_op *op_named(const ms_program_view *v, const char *name);

/* Bytes of the tensors layer `layer` makes in micro-batch 0 and keeps for
 * backward. */
static uint64_t saved_bytes(const ms_program_view *v, int layer)
{
    uint64_t sum = 0;
    for (uint32_t i = 0; i < v->n_tensors; i++) {
        const ms_tensor *t = &v->tensors[i];
        if (t->saved_for_backward && !t->persistent && t->layer == layer && t->micro_batch == 0)
            sum += t->bytes;
    }
    return sum;
}

/* ---- parameter counts ------------------------------------------------- */

/* llama2 per layer: 4h^2 (with GQA 2h^2 + 2 h g d) attention + 3 h f MLP +
 * 2h norms; plus 2 V h (untied) + h.  7B: 32 x 202,383,360 + 262,144,000 +
 * 4096 = 6,738,415,616; 13B: 40 x 317,204,480 + 327,680,000 + 5120 =
 * 13,015,864,320; 70B (g = 8, d = 128): 80 x 855,654,400 + 524,288,000 +
 * 8192 = 68,976,648,192.  Published: 6.74B, 13.0B, 69.0B (within 0.5%). */
START_TEST(param_counts_llama2)
{
    static const struct {
        ms_model_config m;
        uint64_t exact;
        double published;
    } cases[] = {
        {.exact = 6738415616ULL, .published = 6.74e9},
        {.exact = 13015864320ULL, .published = 13.0e9},
        {.exact = 68976648192ULL, .published = 69.0e9},
    };
    ms_model_config cfg[3] = {llama(32, 4096, 11008, 32, 32), llama(40, 5120, 13824, 40, 40),
                              llama(80, 8192, 28672, 64, 8)};
    for (int i = 0; i < 3; i++) {
        uint64_t n = 0;
        ck_assert_int_eq(ms_model_param_count(&cfg[i], &n), MS_OK);
        ck_assert_uint_eq(n, cases[i].exact);
        ck_assert_double_le(fabs((double)n - cases[i].published) / cases[i].published, 0.005);
    }
}
END_TEST

/* Megatron's GPT 22B (Korthikanti et al. Table 3: h 6144, a 64, 48 layers,
 * V 51200, s 2048): 12 l h^2 + 13 l h + (V + s) h + 2h = 21,743,271,936 +
 * 3,833,856 + 327,155,712 + 12,288 = 22,074,273,792. */
START_TEST(param_count_gpt22b)
{
    ms_scenario sc = gpt(2048, 4, 6144, 64, 8, true, false, 48);
    uint64_t n = 0;
    ck_assert_int_eq(ms_model_param_count(&sc.model, &n), MS_OK);
    ck_assert_uint_eq(n, 22074273792ULL);
    ck_assert_int_eq(ms_model_param_count(NULL, &n), MS_EINVAL);
}
END_TEST

/* ---- Korthikanti et al. 2022 ------------------------------------------ */

static const int combos[][5] = {
    /* s, b, h, a, t */
    {2048, 1, 4096, 32, 8},
    {1024, 2, 2048, 16, 4},
    {512, 4, 1024, 16, 2},
    {256, 3, 512, 8, 1},
};

/* With SP: s b h (34 + 5 a s / h) / t = (34 s b h + 5 a s^2 b) / t. */
START_TEST(korthikanti_sp)
{
    for (size_t i = 0; i < sizeof combos / sizeof combos[0]; i++) {
        uint64_t s = combos[i][0], b = combos[i][1], h = combos[i][2], a = combos[i][3],
                 t = combos[i][4];
        ms_scenario sc = gpt((int)s, (int)b, (int)h, (int)a, (int)t, true, false, 2);
        ms_program_view v;
        ms_program *p = build(&sc, 0, &v);
        uint64_t want = (34 * s * b * h + 5 * a * s * s * b) / t;
        for (int l = 0; l < 2; l++)
            ck_assert_uint_eq(saved_bytes(&v, l), want);
        ms_program_free(p);
    }
}
END_TEST

/* Without SP: s b h (10 + 24/t + 5 a s / (h t)): the norms, their outputs
 * feeding the gathers, the residuals and the two hidden dropout masks are
 * whole on every rank (10 s b h). */
START_TEST(korthikanti_no_sp)
{
    for (size_t i = 0; i < sizeof combos / sizeof combos[0]; i++) {
        uint64_t s = combos[i][0], b = combos[i][1], h = combos[i][2], a = combos[i][3],
                 t = combos[i][4];
        ms_scenario sc = gpt((int)s, (int)b, (int)h, (int)a, (int)t, false, false, 2);
        ms_program_view v;
        ms_program *p = build(&sc, 0, &v);
        uint64_t want = 10 * s * b * h + (24 * s * b * h + 5 * a * s * s * b) / t;
        ck_assert_uint_eq(saved_bytes(&v, 1), want);
        ms_program_free(p);
    }
}
END_TEST

/* Flash attention keeps its output and the fp32 logsumexp (4 bytes per
 * head and token: 4 a s b / t) instead of the 5 a s^2 b / t of the scores,
 * softmax and dropout: 34 s b h / t + 4 a s b / t. */
START_TEST(flash_removes_score_term)
{
    for (size_t i = 0; i < sizeof combos / sizeof combos[0]; i++) {
        uint64_t s = combos[i][0], b = combos[i][1], h = combos[i][2], a = combos[i][3],
                 t = combos[i][4];
        ms_scenario sc = gpt((int)s, (int)b, (int)h, (int)a, (int)t, true, true, 2);
        ms_program_view v;
        ms_program *p = build(&sc, 0, &v);
        ck_assert_uint_eq(saved_bytes(&v, 0), (34 * s * b * h + 4 * a * s * b) / t);
        ms_program_free(p);
    }
}
END_TEST

/* ms_program_build refuses sc with status st, its message naming what. */
static void expect_build_error(const ms_scenario *sc, ms_status st, const char *what)
{
    ms_program *q = NULL;
    ms_diag d = {0};
    ck_assert_int_eq(ms_program_build(sc, 0, &q, &d), st);
    ck_assert_msg(strstr(d.msg, what) != NULL, "%s", d.msg);
    ck_assert_ptr_null(q);
}

static const ms_op *op_named(const ms_program_view *v, const char *name)
{
    for (uint32_t i = 0; i < v->n_ops; i++)
        if (strcmp(v->ops[i].name, name) == 0)
            return &v->ops[i];
    ck_abort_msg("no op %s", name);
    return NULL;
}

/* FP8 (Transformer Engine's layers in Megatron-core, hybrid format): the
 * norms write the GEMMs' inputs in one byte (TE fuses the cast), the
 * row-parallel layers cast theirs and keep the one-byte copy.  Per layer
 * with SP and flash, from (34 s b h + 4 a s b) / t: the two norm outputs
 * take 1 byte instead of 2 (-2 s b h / t), linear_proj keeps an FP8 copy of
 * the attention output, which flash attention keeps too (+s b h / t), and
 * linear_fc2's 4h-wide input takes 1 byte instead of 2 (-4 s b h / t):
 * (29 s b h + 4 a s b) / t. */
START_TEST(fp8_linear_layers)
{
    uint64_t s = 512, b = 2, h = 1024, a = 16, t = 2;
    ms_scenario sc = gpt((int)s, (int)b, (int)h, (int)a, (int)t, true, true, 2);
    sc.model.fp8 = MS_FP8_HYBRID;
    sc.device.peak_flops[MS_DTYPE_FP8] = 1e15;
    ms_program_view v;
    ms_program *p = build(&sc, 0, &v);
    for (int l = 0; l < 2; l++)
        ck_assert_uint_eq(saved_bytes(&v, l), (29 * s * b * h + 4 * a * s * b) / t);
    /* The weights' FP8 copies with their transposes: 2 bytes for each of
     * the 12 h^2 / t weights of a layer (the biases stay 16-bit). */
    uint64_t w8 = 0;
    for (uint32_t i = 0; i < v.n_tensors; i++)
        if (v.tensors[i].persistent && v.tensors[i].dtype == MS_DTYPE_FP8 &&
            v.tensors[i].layer == 0)
            w8 += v.tensors[i].bytes;
    ck_assert_uint_eq(w8, 24 * h * h / t);
    /* The layers' GEMMs run in FP8, the output layer's in bf16. */
    ck_assert_int_eq(op_named(&v, "layers.0.self_attention.linear_qkv")->kernel.dtype,
                     MS_DTYPE_FP8);
    ck_assert_int_eq(op_named(&v, "layers.1.mlp.linear_fc2")->kernel.dtype, MS_DTYPE_FP8);
    ck_assert_int_eq(op_named(&v, "output_layer")->kernel.dtype, MS_DTYPE_BF16);
    /* A backward GEMM reads its output grad cast to FP8 with its transpose
     * (2 M N bytes); the SP all-gather in front of linear_qkv moves the FP8
     * norm output (s b h bytes, not 2 s b h). */
    const ms_op *pb = op_named(&v, "layers.0.self_attention.linear_proj.backward");
    ck_assert_int_eq(pb->kernel.dtype, MS_DTYPE_FP8);
    const ms_tensor *g8 = &v.tensors[pb->inputs[0]];
    ck_assert_int_eq(g8->dtype, MS_DTYPE_FP8);
    ck_assert_uint_eq(g8->bytes, 2 * s * b * h);
    ck_assert_double_eq(
        op_named(&v, "layers.0.self_attention.linear_qkv.all_gather")->kernel.comm_bytes,
        (double)(s * b * h));
    ms_program_free(p);
    /* A device without an FP8 peak cannot run it: an error naming the field. */
    sc.device.peak_flops[MS_DTYPE_FP8] = 0;
    expect_build_error(&sc, MS_EUNSUPPORTED, "model.fp8");
}
END_TEST

/* Megatron's --overlap-param-gather: the distributed optimizer's all-gather
 * of each layer's weights leaves the optimizer for the first micro-batch's
 * forward, right before the layer (once a step, not per micro-batch), and
 * the FP8 weight cast follows it there.  Without the distributed optimizer
 * it is an error, as in Megatron. */
START_TEST(overlap_param_gather_in_first_forward)
{
    ms_scenario sc = gpt(512, 1, 1024, 16, 1, false, true, 2);
    sc.parallel.use_distributed_optimizer = true;
    sc.parallel.data_parallel_size = 4;
    sc.parallel.world_size = 4;
    sc.parallel.global_batch_size = 12; /* 3 micro-batches a rank */
    sc.parallel.num_micro_batches = 3;
    sc.parallel.overlap_param_gather = true;
    sc.model.fp8 = MS_FP8_HYBRID;
    sc.device.peak_flops[MS_DTYPE_FP8] = 1e15;
    ms_program_view v;
    ms_program *p = build(&sc, 0, &v);
    int gathers = 0, in_optimizer = 0;
    uint32_t gather = 0, cast = 0, first_reader = UINT32_MAX;
    for (uint32_t i = 0; i < v.n_ops; i++) {
        const ms_op *o = &v.ops[i];
        if (strcmp(o->name, "layers.1.all_gather") == 0) {
            gathers++;
            gather = i;
            ck_assert_int_eq(o->phase, MS_PHASE_FORWARD);
            ck_assert_int_eq(o->micro_batch, 0);
        }
        if (strcmp(o->name, "layers.1.fp8_cast_transpose") == 0)
            cast = i;
        in_optimizer += strstr(o->name, "optimizer.") == o->name && strstr(o->name, "all_gather");
        bool qkv = strcmp(o->name, "layers.1.self_attention.linear_qkv") == 0;
        if (qkv && first_reader == UINT32_MAX)
            first_reader = i;
    }
    ck_assert_int_eq(gathers, 1);
    ck_assert_int_eq(in_optimizer, 0);
    ck_assert_uint_lt(gather, cast);
    ck_assert_uint_lt(cast, first_reader);
    ms_program_free(p);
    sc.parallel.use_distributed_optimizer = false;
    expect_build_error(&sc, MS_EINVAL, "parallel.overlap_param_gather");
}
END_TEST

/* Megatron's --tp-comm-overlap (TE userbuffers): SP's all-gathers and
 * reduce-scatters around the layers' linear layers become part of their
 * GEMMs.  Per layer, with B = 2 s b h (one 16-bit [s x h] buffer): the QKV
 * GEMM gathers B, the projection reduce-scatters B, the projection's
 * backward gathers its output grad (B), the QKV backward gathers the saved
 * input again and reduce-scatters the input grad (2 B).  No separate
 * collective is left in a layer, what the forward keeps is unchanged, and
 * TE's ten [s b x h] userbuffers (10 B) are kept for the run. */
START_TEST(tp_comm_overlap_in_gemms)
{
    uint64_t s = 512, b = 2, h = 1024, a = 16, t = 2, B = 2 * s * b * h;
    ms_scenario sc = gpt((int)s, (int)b, (int)h, (int)a, (int)t, true, true, 2);
    sc.parallel.tp_comm_overlap = true;
    ms_program_view v;
    ms_program *p = build(&sc, 0, &v);
    const struct {
        const char *op;
        ms_comm_kind kind;
        double bytes;
    } want[] = {
        {"layers.0.self_attention.linear_qkv", MS_COMM_ALLGATHER, (double)B},
        {"layers.0.self_attention.linear_proj", MS_COMM_REDUCE_SCATTER, (double)B},
        {"layers.0.mlp.linear_fc1", MS_COMM_ALLGATHER, (double)B},
        {"layers.0.mlp.linear_fc2", MS_COMM_REDUCE_SCATTER, (double)B},
        {"layers.0.self_attention.linear_proj.backward", MS_COMM_ALLGATHER, (double)B},
        {"layers.0.self_attention.linear_qkv.backward", MS_COMM_ALLGATHER, 2.0 * (double)B},
    };
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        const ms_kernel *k = &op_named(&v, want[i].op)->kernel;
        ck_assert_msg(k->cls == MS_KC_MATMUL && k->comm == want[i].kind, "%s", want[i].op);
        ck_assert_double_eq(k->comm_bytes, want[i].bytes);
        ck_assert_int_eq(k->group_size, (int)t);
    }
    uint64_t ub = 0;
    for (uint32_t i = 0; i < v.n_ops; i++)
        ck_assert_msg(v.ops[i].layer == MS_NONE || v.ops[i].kernel.cls != MS_KC_COMM,
                      "%s is still a collective", v.ops[i].name);
    for (uint32_t i = 0; i < v.n_tensors; i++)
        if (v.tensors[i].persistent && v.tensors[i].kind == MS_TK_COMM_BUFFER)
            ub += v.tensors[i].bytes;
    ck_assert_uint_eq(ub, 10 * B);
    ck_assert_uint_eq(saved_bytes(&v, 0), (34 * s * b * h + 4 * a * s * b) / t);
    ms_program_free(p);
    sc.parallel.sequence_parallel = false;
    expect_build_error(&sc, MS_EINVAL, "parallel.tp_comm_overlap");
}
END_TEST

/* Non-persistent inputs of the layer segments. */
static uint64_t layer_segment_input_bytes(const ms_program_view *v, uint32_t seg)
{
    const ms_segment *sg = &v->segments[seg];
    uint64_t sum = 0;
    for (uint32_t i = 0; i < sg->n_inputs; i++)
        if (!v->tensors[sg->inputs[i]].persistent)
            sum += v->tensors[sg->inputs[i]].bytes;
    return sum;
}

/* Full recompute keeps only the layer input: 2 s b h / t with SP, 2 s b h
 * without.  Checked on every layer segment of a gpt and a llama program. */
START_TEST(full_recompute_keeps_layer_input)
{
    for (int sp = 0; sp <= 1; sp++) {
        ms_scenario sc = gpt(1024, 2, 2048, 16, 4, sp, false, 3);
        ms_program_view v;
        ms_program *p = build(&sc, 0, &v);
        uint64_t want = 2ULL * 1024 * 2 * 2048 / (sp ? 4 : 1);
        int layers = 0;
        for (uint32_t i = 0; i < v.n_segments; i++) {
            if (v.segments[i].parent != MS_NONE)
                continue;
            layers++;
            ck_assert_uint_eq(layer_segment_input_bytes(&v, i), want);
            /* What a recompute drops: all it saves but its output. */
            ck_assert_uint_lt(v.segments[i].first_backward_op, v.n_ops);
            ck_assert_int_eq(v.ops[v.segments[i].first_backward_op].phase, MS_PHASE_BACKWARD);
            ck_assert_int_eq(v.ops[v.segments[i].first_backward_op].layer, v.segments[i].layer);
        }
        ck_assert_int_eq(layers, 3);
        ms_program_free(p);
    }
    ms_scenario sc = gpt(4096, 4, 4096, 32, 8, true, true, 2);
    sc.model = llama(2, 4096, 11008, 32, 32);
    ms_program_view v;
    ms_program *p = build(&sc, 0, &v);
    for (uint32_t i = 0; i < v.n_segments; i++)
        if (v.segments[i].parent == MS_NONE)
            ck_assert_uint_eq(layer_segment_input_bytes(&v, i), 2ULL * 4096 * 4 * 4096 / 8);
    ms_program_free(p);
}
END_TEST

/* Each (layer, micro-batch) has one layer segment and, inside it, the two
 * norms, the attention core and the MLP activation, contiguous and nested;
 * after them come op-level segments (select_recompute of single ops): one
 * op each, inside a segment of several ops. */
START_TEST(segments_nest)
{
    ms_scenario sc = gpt(512, 1, 1024, 16, 2, true, false, 2);
    sc.parallel.global_batch_size = 3;
    sc.parallel.num_micro_batches = 3;
    ms_program_view v;
    ms_program *p = build(&sc, 0, &v);
    uint32_t model = 0;
    for (uint32_t i = 0; i < v.n_segments; i++) {
        const ms_segment *s = &v.segments[i];
        if (!s->op_level) {
            ck_assert_uint_eq(i, model++); /* the model's segments come first */
        } else {
            ck_assert_uint_eq(s->first_op, s->last_op);
            ck_assert_int_ne(s->parent, MS_NONE);
            ck_assert(!v.segments[s->parent].op_level);
            ck_assert_uint_lt(v.segments[s->parent].first_op, v.segments[s->parent].last_op);
            ck_assert_str_eq(s->name, v.ops[s->first_op].name);
        }
        ck_assert_uint_le(s->first_op, s->last_op);
        for (uint32_t o = s->first_op; o <= s->last_op; o++) {
            ck_assert_int_eq(v.ops[o].phase, MS_PHASE_FORWARD);
            ck_assert_int_eq(v.ops[o].micro_batch, s->micro_batch);
            ck_assert_int_eq(v.ops[o].layer, s->layer);
        }
        if (s->parent != MS_NONE) {
            const ms_segment *par = &v.segments[s->parent];
            ck_assert_int_ge(s->first_op, par->first_op);
            ck_assert_int_le(s->last_op, par->last_op);
            int32_t inner = v.ops[s->first_op].segment;
            ck_assert(inner == (int32_t)i || v.segments[inner].parent == (int32_t)i);
        }
    }
    ck_assert_uint_eq(model, 2 * 3 * 5);
    ck_assert_uint_gt(v.n_segments, model);
    ck_assert_str_eq(v.segments[0].name, "layers.0");
    ck_assert_str_eq(v.segments[2].name, "layers.0.self_attention.core_attention");
    ms_program_free(p);
}
END_TEST

/* ---- FLOPs ------------------------------------------------------------ */

static double narayanan(double B, double s, double l, double h, double V)
{
    return 72 * B * s * l * h * h * (1 + s / (6 * h) + V / (12 * l * h));
}

/* Over all ops of a step, model_flops x t = 72 B s l h^2 (1 + s/(6h) +
 * V/(12 l h)) (B = mbs x micro-batches, dp = 1), with and without flash. */
START_TEST(flops_match_narayanan)
{
    for (int flash = 0; flash <= 1; flash++) {
        ms_scenario sc = gpt(2048, 2, 2048, 16, 4, true, flash, 4);
        sc.parallel.global_batch_size = 6;
        sc.parallel.num_micro_batches = 3;
        ms_program_view v;
        ms_program *p = build(&sc, 0, &v);
        double want = narayanan(6, 2048, 4, 2048, 51200);
        double sum = 0;
        for (uint32_t i = 0; i < v.n_ops; i++)
            sum += v.ops[i].model_flops;
        ck_assert_double_eq_tol(sum, v.model_flops, 1e-6 * want);
        ck_assert_double_le(fabs(sum * 4 - want) / want, 0.01);
        double analytic = 0;
        ck_assert_int_eq(ms_model_step_flops(&sc.model, 6, &analytic), MS_OK);
        ck_assert_double_le(fabs(analytic - want) / want, 1e-12);
        ms_program_free(p);
    }
}
END_TEST

/* Flash attention's backward kernel does 2.5x the forward's work (it
 * re-forms the scores), but model FLOPs count 2x. */
START_TEST(flash_backward_cost)
{
    ms_scenario sc = gpt(1024, 1, 1024, 16, 1, true, true, 1);
    ms_program_view v;
    ms_program *p = build(&sc, 0, &v);
    const ms_op *fwd = NULL, *bwd = NULL;
    for (uint32_t i = 0; i < v.n_ops; i++) {
        if (strcmp(v.ops[i].name, "layers.0.self_attention.core_attention.flash_attention") == 0)
            fwd = &v.ops[i];
        if (strcmp(v.ops[i].name,
                   "layers.0.self_attention.core_attention.flash_attention.backward") == 0)
            bwd = &v.ops[i];
    }
    ck_assert_ptr_nonnull(fwd);
    ck_assert_ptr_nonnull(bwd);
    /* 4 b s^2 h / t = 4 * 1024^2 * 1024. */
    ck_assert_double_eq(fwd->kernel.flops, 4.0 * 1024 * 1024 * 1024);
    ck_assert_double_eq(bwd->kernel.flops, 2.5 * fwd->kernel.flops);
    ck_assert_double_eq(bwd->model_flops, 2 * fwd->model_flops);
    ck_assert_int_eq(fwd->kernel.cls, MS_KC_ATTENTION);
    ms_program_free(p);
}
END_TEST

/* ---- program invariants ------------------------------------------------ */

static void check_well_formed(const ms_program_view *v)
{
    for (uint32_t i = 0; i < v->n_ops; i++) {
        const ms_op *op = &v->ops[i];
        ck_assert_uint_eq(op->id, i);
        for (uint32_t k = 0; k < op->n_inputs; k++) {
            const ms_tensor *t = &v->tensors[op->inputs[k]];
            ck_assert_msg(t->persistent || (t->producer != MS_NONE && (uint32_t)t->producer < i),
                          "op %u (%s) reads %s before it exists", i, op->name, t->name);
            bool listed = false;
            for (uint32_t u = 0; u < t->n_uses; u++)
                listed |= t->uses[u] == i;
            ck_assert_msg(listed, "op %u missing from uses of %s", i, t->name);
        }
        for (uint32_t k = 0; k < op->n_outputs; k++) {
            const ms_tensor *t = &v->tensors[op->outputs[k]];
            if (t->producer != (int32_t)i) { /* an in-place write reads it too */
                bool read = false;
                for (uint32_t j = 0; j < op->n_inputs; j++)
                    read |= op->inputs[j] == t->id;
                ck_assert_msg(read, "op %s writes %s in place without reading it", op->name,
                              t->name);
            }
        }
        if (op->kernel.cls == MS_KC_COMM) {
            ck_assert_int_eq(op->stream, MS_SR_COMM);
            ck_assert_int_ge(op->kernel.group_size, 2);
            ck_assert_double_gt(op->kernel.comm_bytes, 0);
        } else {
            ck_assert_int_eq(op->stream, MS_SR_COMPUTE);
        }
        ck_assert_double_ge(op->kernel.bytes, 0);
    }
    for (uint32_t i = 0; i < v->n_tensors; i++) {
        const ms_tensor *t = &v->tensors[i];
        ck_assert_uint_eq(t->id, i);
        ck_assert_uint_gt(t->bytes, 0);
        for (uint32_t u = 1; u < t->n_uses; u++)
            ck_assert_uint_lt(t->uses[u - 1], t->uses[u]);
        ck_assert(t->persistent == (t->producer == MS_NONE));
        if (t->persistent)
            ck_assert_int_eq(t->micro_batch, MS_NONE);
        /* Saved for backward: made in forward and read in backward. */
        bool fwd = t->producer != MS_NONE && v->ops[t->producer].phase == MS_PHASE_FORWARD;
        bool bwd_read = false;
        for (uint32_t u = 0; u < t->n_uses; u++)
            bwd_read |= v->ops[t->uses[u]].phase == MS_PHASE_BACKWARD;
        ck_assert(t->saved_for_backward == (fwd && bwd_read));
    }
}

START_TEST(programs_are_well_formed)
{
    ms_scenario sc = gpt(1024, 2, 2048, 16, 4, true, false, 2);
    sc.parallel.num_micro_batches = 2;
    sc.parallel.global_batch_size = 4;
    for (int variant = 0; variant < 5; variant++) {
        if (variant == 1)
            sc.parallel.sequence_parallel = false;
        if (variant == 2)
            sc.model = llama(2, 1024, 2816, 16, 4);
        if (variant == 3) { /* DP 2 with the distributed optimizer */
            sc.parallel.data_parallel_size = 2;
            sc.parallel.world_size = 8;
            sc.parallel.use_distributed_optimizer = true;
            sc.parallel.sequence_parallel = true;
        }
        if (variant == 4) { /* gpt with rope and swiglu, flash, TP 1 */
            sc.model = gpt(512, 1, 512, 8, 1, true, true, 2).model;
            sc.model.swiglu = true;
            sc.model.position_embedding_type = MS_POS_ROPE;
            sc.parallel.tensor_model_parallel_size = 1;
        }
        ms_program_view v;
        ms_program *p = build(&sc, 0, &v);
        check_well_formed(&v);
        ms_program_free(p);
    }
    /* Every stage of an interleaved pipeline with context parallelism and a
     * MoE llama with expert parallelism over TP 2 with SP, with a capacity
     * factor; and gpt experts. */
    sc = gpt(512, 1, 512, 8, 2, true, true, 8);
    sc.model.swiglu = true;
    sc.parallel.pipeline_model_parallel_size = 2;
    sc.parallel.num_layers_per_virtual_pipeline_stage = 2;
    sc.parallel.context_parallel_size = 2;
    sc.parallel.data_parallel_size = 2;
    sc.parallel.world_size = 16;
    sc.parallel.use_distributed_optimizer = true;
    sc.parallel.num_micro_batches = 4;
    sc.parallel.global_batch_size = 8;
    for (int variant = 0; variant < 3; variant++) {
        if (variant == 1) {
            sc.model = llama(4, 512, 1024, 8, 4);
            sc.model.seq_length = 512;
            sc.model.num_experts = 4;
            sc.model.moe_router_topk = 2;
            sc.model.moe_ffn_hidden_size = 768;
            sc.model.moe_capacity_factor = 1.5;
            sc.parallel.expert_model_parallel_size = 2;
        }
        if (variant == 2) {
            ms_model_config g = gpt(512, 1, 512, 8, 2, true, true, 4).model;
            g.num_experts = 4;
            g.moe_router_topk = 1;
            sc.model = g;
        }
        for (int stage = 0; stage < 2; stage++) {
            ms_program_view v;
            ms_program *p = build(&sc, stage, &v);
            check_well_formed(&v);
            ms_program_free(p);
        }
    }
}
END_TEST

/* Pipeline stages: embedding only on the first, head and loss only on the
 * last, p2p between them with matching tags. */
START_TEST(pipeline_stages)
{
    ms_scenario sc = gpt(512, 1, 1024, 16, 2, true, false, 4);
    sc.parallel.pipeline_model_parallel_size = 2;
    sc.parallel.world_size = 4;
    sc.parallel.num_micro_batches = 2;
    sc.parallel.global_batch_size = 2;
    ms_program_view v0, v1;
    ms_program *p0 = build(&sc, 0, &v0), *p1 = build(&sc, 1, &v1);
    check_well_formed(&v0);
    check_well_formed(&v1);
    int emb0 = 0, emb1 = 0, head0 = 0, head1 = 0, sends0 = 0, recvs1 = 0;
    for (uint32_t i = 0; i < v0.n_ops; i++) {
        emb0 += strcmp(v0.ops[i].name, "embedding.word_embeddings") == 0;
        head0 += strcmp(v0.ops[i].name, "output_layer") == 0;
        sends0 += v0.ops[i].kernel.comm == MS_COMM_SEND;
        ck_assert(v0.ops[i].layer == MS_NONE || v0.ops[i].layer < 2);
    }
    for (uint32_t i = 0; i < v1.n_ops; i++) {
        emb1 += strcmp(v1.ops[i].name, "embedding.word_embeddings") == 0;
        head1 += strcmp(v1.ops[i].name, "output_layer") == 0;
        recvs1 += v1.ops[i].kernel.comm == MS_COMM_RECV;
        ck_assert(v1.ops[i].layer == MS_NONE || v1.ops[i].layer >= 2);
    }
    ck_assert_int_eq(emb0, 2);
    ck_assert_int_eq(emb1, 0);
    ck_assert_int_eq(head0, 0);
    ck_assert_int_eq(head1, 2);
    ck_assert_int_eq(sends0, 2); /* activations of 2 micro-batches */
    ck_assert_int_eq(recvs1, 2);
    ck_assert_int_eq(v1.stage, 1);
    ms_program_free(p0);
    ms_program_free(p1);
    ms_program *bad = NULL;
    ck_assert_int_eq(ms_program_build(&sc, 2, &bad, NULL), MS_EINVAL);
    ck_assert_ptr_null(bad);
}
END_TEST

/* Persistent bytes: 18 a parameter (2 weight + 4 main grad + 12 Adam), and
 * 6 + 12/DP with the distributed optimizer.  One gpt layer on TP 1, tied:
 * P = V h + s h + 12 h^2 + 13 h + 2h. */
START_TEST(persistent_bytes_per_param)
{
    ms_scenario sc = gpt(256, 1, 512, 8, 1, true, false, 1);
    uint64_t P = 51200ULL * 512 + 256 * 512 + 12ULL * 512 * 512 + 13 * 512 + 2 * 512;
    uint64_t counted = 0;
    ck_assert_int_eq(ms_model_param_count(&sc.model, &counted), MS_OK);
    ck_assert_uint_eq(counted, P);
    for (int dist = 0; dist <= 1; dist++) {
        sc.parallel.use_distributed_optimizer = dist;
        sc.parallel.data_parallel_size = dist ? 4 : 1;
        sc.parallel.world_size = dist ? 4 : 1;
        ms_program_view v;
        ms_program *p = build(&sc, 0, &v);
        uint64_t w = 0, g = 0, o = 0;
        for (uint32_t i = 0; i < v.n_tensors; i++) {
            const ms_tensor *t = &v.tensors[i];
            if (!t->persistent)
                continue;
            w += t->kind == MS_TK_WEIGHT ? t->bytes : 0;
            g += t->kind == MS_TK_GRAD ? t->bytes : 0;
            o += t->kind == MS_TK_OPTIMIZER_STATE ? t->bytes : 0;
        }
        ck_assert_uint_eq(w, 2 * P);
        ck_assert_uint_eq(g, 4 * P);
        /* Without grad_reduce_in_fp32 the grads are bf16, and so is what the
         * DP reduction of layer 0's grads moves (its 12 h^2 + 13 h). */
        sc.parallel.grads_in_model_dtype = true;
        ms_program_view v2;
        ms_program *p2 = build(&sc, 0, &v2);
        uint64_t g2 = 0;
        for (uint32_t i = 0; i < v2.n_tensors; i++)
            if (v2.tensors[i].persistent && v2.tensors[i].kind == MS_TK_GRAD) {
                g2 += v2.tensors[i].bytes;
                ck_assert_int_eq(v2.tensors[i].dtype, MS_DTYPE_BF16);
            }
        ck_assert_uint_eq(g2, 2 * P);
        if (dist)
            ck_assert_double_eq(op_named(&v2, "layers.0.grads.reduce_scatter")->kernel.comm_bytes,
                                2.0 * (12 * 512 * 512 + 13 * 512));
        ms_program_free(p2);
        sc.parallel.grads_in_model_dtype = false;
        /* Each group's shard rounds up: within 3 groups x 12 bytes. */
        ck_assert_uint_ge(o, 12 * P / (dist ? 4 : 1));
        ck_assert_uint_le(o, 12 * P / (dist ? 4 : 1) + 3 * 12);
        ms_program_free(p);
    }
}
END_TEST

/* fp16 trains with a loss scale: one pass unscales every main grad (8 bytes
 * a parameter: each fp32 main grad read and written) before the norm, with
 * its found-inf flag all-reduced over TP; bf16 has no such pass. */
START_TEST(fp16_unscales_main_grads)
{
    for (int fp16 = 0; fp16 <= 1; fp16++) {
        ms_scenario sc = gpt(256, 1, 512, 8, 2, true, false, 1);
        sc.model.dtype = fp16 ? MS_DTYPE_FP16 : MS_DTYPE_BF16;
        ms_program_view v;
        ms_program *p = build(&sc, 0, &v);
        uint64_t grads = 0;
        for (uint32_t i = 0; i < v.n_tensors; i++)
            if (v.tensors[i].persistent && v.tensors[i].kind == MS_TK_GRAD)
                grads += v.tensors[i].bytes;
        int unscale = -1, norm = -1, flag = -1;
        for (uint32_t i = 0; i < v.n_ops; i++) {
            if (strcmp(v.ops[i].name, "optimizer.unscale_grads") == 0)
                unscale = (int)i;
            else if (strcmp(v.ops[i].name, "optimizer.unscale_grads.found_inf.all_reduce") == 0)
                flag = (int)i;
            else if (strcmp(v.ops[i].name, "optimizer.grad_norm") == 0)
                norm = (int)i;
        }
        ck_assert_int_ge(norm, 0);
        if (!fp16) {
            ck_assert_int_eq(unscale, -1);
            ck_assert_int_eq(flag, -1);
        } else {
            ck_assert_int_ge(unscale, 0);
            ck_assert_int_lt(unscale, flag);
            ck_assert_int_lt(flag, norm);
            /* grads are fp32 main grads: 4 bytes a parameter, read and written */
            ck_assert_double_eq_tol(v.ops[unscale].kernel.bytes, 2.0 * (double)grads, 1.0);
            ck_assert_int_eq(v.ops[flag].kernel.group_size, 2);
        }
        ms_program_free(p);
    }
}
END_TEST

/* A collective's ranks on a node follow which group it is, not its size.
 * TP 2 x DP 2 on nodes of 2 devices: the TP pair is one node, the DP pair
 * (ranks r and r + 2) spans two, so the DP grad all-reduce has one rank a
 * node.  Before, a DP group as large as the TP group was taken for it: 2. */
START_TEST(dp_group_of_tp_size_spans_nodes)
{
    ms_scenario sc = gpt(256, 2, 512, 8, 2, false, false, 1);
    sc.parallel.data_parallel_size = 2;
    sc.parallel.world_size = 4;
    sc.device.devices_per_node = 2;
    ms_program_view v;
    ms_program *p = build(&sc, 0, &v);
    int reduces = 0, tp = 0;
    for (uint32_t i = 0; i < v.n_ops; i++) {
        const ms_kernel *k = &v.ops[i].kernel;
        if (strstr(v.ops[i].name, ".grads.all_reduce") != NULL) {
            ck_assert_int_eq(k->group_size, 2);
            ck_assert_int_eq(k->link, MS_LINK_INTER_NODE);
            ck_assert_int_eq(k->ranks_per_node, 1);
            reduces++;
        } else if (k->cls == MS_KC_COMM && strstr(v.ops[i].name, "all_reduce") != NULL &&
                   strstr(v.ops[i].name, "optimizer") == NULL) {
            ck_assert_int_eq(k->link, MS_LINK_INTRA_NODE); /* the TP pair: one node */
            tp++;
        }
    }
    ck_assert_int_gt(reduces, 0);
    ck_assert_int_gt(tp, 0);
    ms_program_free(p);
}
END_TEST

/* Where each DP grad reduction sits: overlapped (Megatron's
 * --overlap-grad-reduce, memsim's default) it follows its group's last
 * backward op, among the backward ops of the last micro-batch; off (LocalDDP,
 * as SC21's pipelined runs used) every one follows the whole backward, at
 * the optimizer's start, and there are as many. */
static void grad_reduce_places(bool overlap, int *n, uint32_t *first, uint32_t *last_bwd)
{
    ms_scenario sc = gpt(256, 1, 512, 8, 2, false, false, 2);
    sc.parallel.data_parallel_size = 2;
    sc.parallel.world_size = 4;
    sc.parallel.num_micro_batches = 2;
    sc.parallel.global_batch_size = 4;
    sc.parallel.overlap_grad_reduce = overlap;
    ms_program_view v;
    ms_program *p = build(&sc, 0, &v);
    *n = 0;
    *first = UINT32_MAX;
    *last_bwd = 0;
    for (uint32_t i = 0; i < v.n_ops; i++) {
        if (v.ops[i].phase == MS_PHASE_BACKWARD)
            *last_bwd = i;
        if (strstr(v.ops[i].name, ".grads.all_reduce") == NULL)
            continue;
        ck_assert_int_eq(v.ops[i].phase, overlap ? MS_PHASE_BACKWARD : MS_PHASE_OPTIMIZER);
        if (overlap)
            ck_assert_int_eq(v.ops[i].micro_batch, 1);
        *first = i < *first ? i : *first;
        (*n)++;
    }
    ms_program_free(p);
}

START_TEST(grad_reduce_overlaps_unless_told_not_to)
{
    int n_on = 0, n_off = 0;
    uint32_t first_on, first_off, last_on, last_off;
    grad_reduce_places(true, &n_on, &first_on, &last_on);
    grad_reduce_places(false, &n_off, &first_off, &last_off);
    /* Two layers, the embedding (tied with the head) and the final norm. */
    ck_assert_int_eq(n_on, 4);
    ck_assert_int_eq(n_off, n_on);
    ck_assert_uint_lt(first_on, last_on);
    ck_assert_uint_gt(first_off, last_off);
}
END_TEST

/* Asserts that every collective over the grads (expert ones or the others,
 * as `experts` says) runs over `size` ranks on `link` with `per_node` ranks a
 * node; returns how many there are. */
static int check_grad_comms(const ms_program_view *v, bool experts, int size, ms_link_kind link,
                            int per_node)
{
    int n = 0;
    for (uint32_t i = 0; i < v->n_ops; i++) {
        const ms_kernel *k = &v->ops[i].kernel;
        if (k->cls != MS_KC_COMM || strstr(v->ops[i].name, ".grads.") == NULL ||
            (strstr(v->ops[i].name, "experts") != NULL) != experts)
            continue;
        ck_assert_int_eq(k->group_size, size);
        ck_assert_int_eq(k->link, link);
        ck_assert_int_eq(k->ranks_per_node, per_node);
        n++;
    }
    return n;
}

/* The grads are reduced over the dp-cp group (mcore's DDP takes the data
 * parallel group with context parallelism), every tp-th rank: TP 2 x CP 2 x
 * DP 2 on nodes of 4 devices puts {r, r+2, r+4, r+6} on two nodes, 2 ranks
 * each.  Before, the group was taken as every (tp x cp)-th rank: 1 a node. */
START_TEST(dp_cp_group_has_every_tp_th_rank)
{
    ms_scenario sc = gpt(512, 1, 512, 8, 2, true, true, 1);
    sc.parallel.context_parallel_size = 2;
    sc.parallel.data_parallel_size = 2;
    sc.parallel.world_size = 8;
    sc.device.devices_per_node = 4;
    ms_program_view v;
    ms_program *p = build(&sc, 0, &v);
    ck_assert_int_gt(check_grad_comms(&v, false, 4, MS_LINK_INTER_NODE, 2), 0);
    ms_program_free(p);
}
END_TEST

/* Expert parallelism takes consecutive DP ranks (every tp-th): TP 2 x EP 4
 * on nodes of 4 devices puts the EP group {r, r+2, r+4, r+6} on two nodes,
 * 2 ranks each, and its all-to-alls say so; the expert grads are reduced over
 * every (tp x ep)-th rank, {r, r+8}: one a node.  The dense DP group (every
 * 2nd rank, 8 of them) has 2 a node too.  Before, every MoE collective was
 * counted one rank a node. */
START_TEST(expert_groups_span_nodes_in_megatron_order)
{
    ms_scenario sc = gpt(512, 1, 512, 8, 2, true, true, 1);
    sc.model.num_experts = 4;
    sc.model.moe_router_topk = 1;
    sc.parallel.expert_model_parallel_size = 4;
    sc.parallel.data_parallel_size = 8;
    sc.parallel.world_size = 16;
    sc.device.devices_per_node = 4;
    ms_program_view v;
    ms_program *p = build(&sc, 0, &v);
    int a2a = 0;
    for (uint32_t i = 0; i < v.n_ops; i++) {
        const ms_kernel *k = &v.ops[i].kernel;
        if (k->comm == MS_COMM_ALLTOALL) {
            ck_assert_int_eq(k->group_size, 4);
            ck_assert_int_eq(k->link, MS_LINK_INTER_NODE);
            ck_assert_int_eq(k->ranks_per_node, 2);
            a2a++;
        }
    }
    ck_assert_int_eq(a2a, 4); /* dispatch and combine, forward and backward */
    ck_assert_int_gt(check_grad_comms(&v, true, 2, MS_LINK_INTER_NODE, 1), 0);
    ck_assert_int_gt(check_grad_comms(&v, false, 8, MS_LINK_INTER_NODE, 2), 0);
    ms_program_free(p);
}
END_TEST

/* MindFormers' select_recompute / swap regexes find the llama ops. */
START_TEST(llama_op_names)
{
    ms_scenario sc = gpt(1024, 1, 1024, 16, 2, true, true, 1);
    sc.model = llama(1, 1024, 2816, 16, 16);
    sc.model.seq_length = 1024;
    ms_program_view v;
    ms_program *p = build(&sc, 0, &v);
    static const char *const patterns[] = {
        "feed_forward\\.mul", "feed_forward\\.w1\\.activation\\.silu", ".*\\.norm",
        "attention\\.flash_attention", "feed_forward\\.w1\\.matmul", "attention\\.wq",
    };
    for (size_t i = 0; i < sizeof patterns / sizeof patterns[0]; i++) {
        regex_t re;
        ck_assert_int_eq(regcomp(&re, patterns[i], REG_EXTENDED | REG_NOSUB), 0);
        int hits = 0;
        for (uint32_t o = 0; o < v.n_ops; o++)
            hits += v.ops[o].phase == MS_PHASE_FORWARD && v.ops[o].layer == 0 &&
                    regexec(&re, v.ops[o].name, 0, NULL, 0) == 0;
        regfree(&re);
        ck_assert_msg(hits >= 1, "no forward op of layer 0 matches %s", patterns[i]);
    }
    ms_program_free(p);
}
END_TEST

START_TEST(deterministic)
{
    ms_scenario sc = gpt(512, 2, 1024, 16, 2, true, false, 2);
    sc.parallel.num_micro_batches = 2;
    ms_program_view a, b;
    ms_program *pa = build(&sc, 0, &a), *pb = build(&sc, 0, &b);
    ck_assert_uint_eq(a.n_ops, b.n_ops);
    ck_assert_uint_eq(a.n_tensors, b.n_tensors);
    ck_assert_uint_eq(a.n_segments, b.n_segments);
    for (uint32_t i = 0; i < a.n_ops; i++) {
        ck_assert_str_eq(a.ops[i].name, b.ops[i].name);
        ck_assert_uint_eq(a.ops[i].n_inputs, b.ops[i].n_inputs);
        ck_assert_mem_eq(a.ops[i].inputs, b.ops[i].inputs, a.ops[i].n_inputs * sizeof(uint32_t));
        ck_assert_mem_eq(a.ops[i].outputs, b.ops[i].outputs,
                         a.ops[i].n_outputs * sizeof(uint32_t));
        ck_assert_double_eq(a.ops[i].kernel.flops, b.ops[i].kernel.flops);
        ck_assert_double_eq(a.ops[i].kernel.bytes, b.ops[i].kernel.bytes);
    }
    for (uint32_t i = 0; i < a.n_tensors; i++) {
        ck_assert_str_eq(a.tensors[i].name, b.tensors[i].name);
        ck_assert_uint_eq(a.tensors[i].bytes, b.tensors[i].bytes);
    }
    ms_program_free(pa);
    ms_program_free(pb);
}
END_TEST

START_TEST(bad_arguments)
{
    ms_program *p = NULL;
    ms_diag d = {0};
    ck_assert_int_eq(ms_program_build(NULL, 0, &p, &d), MS_EINVAL);
    ms_scenario sc = gpt(512, 1, 1000, 16, 2, true, false, 1); /* 1000 % 16 != 0 */
    ck_assert_int_eq(ms_program_build(&sc, 0, &p, &d), MS_EINVAL);
    ck_assert_ptr_nonnull(strstr(d.msg, "model.hidden_size (1000)"));
    ck_assert_ptr_nonnull(strstr(d.msg, "model.num_attention_heads (16)"));
    /* Context parallelism is ring attention, which is flash attention. */
    sc = gpt(512, 1, 1024, 16, 2, true, false, 1);
    sc.parallel.context_parallel_size = 2;
    ck_assert_int_eq(ms_program_build(&sc, 0, &p, &d), MS_EINVAL);
    ck_assert_ptr_nonnull(strstr(d.msg, "parallel.context_parallel_size"));
    ck_assert_ptr_nonnull(strstr(d.msg, "use_flash_attn"));
    ck_assert_ptr_null(p);
    ck_assert_int_eq(ms_program_free(NULL), MS_EINVAL);
    ck_assert_uint_eq(ms_program_get_view(NULL).n_ops, 0);
    ck_assert_ptr_null(ms_program_get_view(NULL).facts);
    ck_assert_str_eq(ms_tensor_kind_name(MS_TK_OPTIMIZER_STATE), "optimizer_state");
    ck_assert_str_eq(ms_phase_name(MS_PHASE_BACKWARD), "backward");
}
END_TEST

static Suite *workload_suite(void)
{
    Suite *s = suite_create("workload");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, param_counts_llama2);
    tcase_add_test(tc, param_count_gpt22b);
    tcase_add_test(tc, korthikanti_sp);
    tcase_add_test(tc, korthikanti_no_sp);
    tcase_add_test(tc, flash_removes_score_term);
    tcase_add_test(tc, fp8_linear_layers);
    tcase_add_test(tc, overlap_param_gather_in_first_forward);
    tcase_add_test(tc, tp_comm_overlap_in_gemms);
    tcase_add_test(tc, full_recompute_keeps_layer_input);
    tcase_add_test(tc, segments_nest);
    tcase_add_test(tc, flops_match_narayanan);
    tcase_add_test(tc, flash_backward_cost);
    tcase_add_test(tc, programs_are_well_formed);
    tcase_add_test(tc, pipeline_stages);
    tcase_add_test(tc, persistent_bytes_per_param);
    tcase_add_test(tc, fp16_unscales_main_grads);
    tcase_add_test(tc, dp_group_of_tp_size_spans_nodes);
    tcase_add_test(tc, grad_reduce_overlaps_unless_told_not_to);
    tcase_add_test(tc, expert_groups_span_nodes_in_megatron_order);
    tcase_add_test(tc, dp_cp_group_has_every_tp_th_rank);
    tcase_add_test(tc, llama_op_names);
    tcase_add_test(tc, deterministic);
    tcase_add_test(tc, bad_arguments);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(workload_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
