/* Unit tests of sim/: the engine, the cost model, the device models and the
 * host threads.  Every expected figure is derived by hand in a comment. */
#include <check.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "sim/sim.h"

#include "test_device_spec.h"

/* ---- helpers ----------------------------------------------------------- */

/* A round-number device: 1 PFLOP/s bf16, 100 TFLOP/s fp32, no fp8;
 * 1 TB/s HBM; 10 GB/s each way on the host link with 2 us latency;
 * intra-node 100 GB/s / 5 us, inter-node 25 GB/s / 20 us; efficiencies 1.0. */
static ms_kernel comm(ms_comm_kind kind, int n, ms_link_kind link, double bytes)
{
    return (ms_kernel){.name = "comm", .cls = MS_KC_COMM, .dtype = MS_DTYPE_BF16, .comm = kind,
                       .group_size = n, .link = link, .comm_bytes = bytes};
}

static ms_kernel p2p(ms_comm_kind kind, int peer, int tag, double bytes)
{
    ms_kernel k = comm(kind, 2, MS_LINK_INTRA_NODE, bytes);
    k.peer = peer;
    k.tag = tag;
    return k;
}

enum { TRACE_MAX = 64 };
typedef struct trace {
    ms_work_record r[TRACE_MAX];
    int n;
} trace;

static void on_work(void *user, const ms_work_record *rec)
{
    trace *t = user;
    if (t->n < TRACE_MAX)
        t->r[t->n++] = *rec;
}

static const ms_work_record *by_tag(const trace *t, uint64_t tag)
{
    for (int i = 0; i < t->n; i++)
        if (t->r[i].tag == tag)
            return &t->r[i];
    ck_abort_msg("no record with tag %llu", (unsigned long long)tag);
    return NULL;
}

/* ---- engine ------------------------------------------------------------ */

typedef struct order_log {
    int seen[16];
    int n;
    ms_sim *sim;
} order_log;

typedef struct order_arg {
    order_log *log;
    int id;
} order_arg;

static void log_event(ms_sim *sim, void *arg)
{
    (void)sim;
    order_arg *a = arg;
    a->log->seen[a->log->n++] = a->id;
}

START_TEST(engine_orders_by_time_then_schedule_order)
{
    ms_sim *sim = NULL;
    ck_assert_int_eq(sim_create(&sim), MS_OK);
    order_log log = {.sim = sim};
    order_arg a[5] = {{&log, 0}, {&log, 1}, {&log, 2}, {&log, 3}, {&log, 4}};
    /* Scheduled: id0@30, id1@10, id2@20, id3@10, id4@10.  Time order first;
     * the three events at 10 run in the order they were scheduled: 1, 3, 4. */
    ck_assert_int_eq(sim_schedule(sim, 30, log_event, &a[0]), MS_OK);
    ck_assert_int_eq(sim_schedule(sim, 10, log_event, &a[1]), MS_OK);
    ck_assert_int_eq(sim_schedule(sim, 20, log_event, &a[2]), MS_OK);
    ck_assert_int_eq(sim_schedule(sim, 10, log_event, &a[3]), MS_OK);
    ck_assert_int_eq(sim_schedule(sim, 10, log_event, &a[4]), MS_OK);
    ck_assert_int_eq(sim_run(sim), MS_OK);
    int want[] = {1, 3, 4, 2, 0};
    ck_assert_int_eq(log.n, 5);
    for (int i = 0; i < 5; i++)
        ck_assert_int_eq(log.seen[i], want[i]);
    int64_t now = 0;
    sim_now(sim, &now);
    ck_assert_int_eq(now, 30);
    uint64_t run = 0, pending = 9;
    sim_stats(sim, &run, &pending);
    ck_assert_uint_eq(run, 5);
    ck_assert_uint_eq(pending, 0);
    ck_assert_int_eq(sim_destroy(sim), MS_OK);
}
END_TEST

/* An event scheduled for "now" from inside a callback runs after the events
 * already queued for that time (they have smaller sequence numbers). */
typedef struct chain {
    order_log *log;
    order_arg later;
} chain;

static void schedule_same_time(ms_sim *sim, void *arg)
{
    chain *c = arg;
    c->log->seen[c->log->n++] = 100;
    int64_t now = 0;
    sim_now(sim, &now);
    ck_assert_int_eq(sim_schedule(sim, now, log_event, &c->later), MS_OK);
}

START_TEST(engine_same_time_event_from_callback_runs_last)
{
    ms_sim *sim = NULL;
    sim_create(&sim);
    order_log log = {.sim = sim};
    chain c = {&log, {&log, 7}};
    order_arg b = {&log, 8};
    sim_schedule(sim, 5, schedule_same_time, &c);
    sim_schedule(sim, 5, log_event, &b);
    sim_run(sim);
    /* 100 (the chain at 5), 8 (queued earlier at 5), then 7 (queued at 5 later). */
    ck_assert_int_eq(log.n, 3);
    ck_assert_int_eq(log.seen[0], 100);
    ck_assert_int_eq(log.seen[1], 8);
    ck_assert_int_eq(log.seen[2], 7);
    sim_destroy(sim);
}
END_TEST

START_TEST(engine_run_until_cancel_and_errors)
{
    ms_sim *sim = NULL;
    sim_create(&sim);
    order_log log = {.sim = sim};
    order_arg a = {&log, 1}, b = {&log, 2};
    sim_schedule(sim, 100, log_event, &a);
    sim_schedule(sim, 200, log_event, &b);
    sim_schedule(sim, 300, log_event, &a);
    /* Runs the event at 100 only; the clock ends at 150. */
    ck_assert_int_eq(sim_run_until(sim, 150), MS_OK);
    int64_t now = 0;
    sim_now(sim, &now);
    ck_assert_int_eq(now, 150);
    ck_assert_int_eq(log.n, 1);
    /* The clock never goes back: until < now is a no-op. */
    ck_assert_int_eq(sim_run_until(sim, 50), MS_OK);
    sim_now(sim, &now);
    ck_assert_int_eq(now, 150);
    /* Scheduling in the past is refused. */
    ck_assert_int_eq(sim_schedule(sim, 149, log_event, &a), MS_EINVAL);
    ck_assert_int_eq(sim_schedule(sim, 150, NULL, &a), MS_EINVAL);
    /* Cancel (log_event, &a): only the one at 300 is still pending. */
    uint64_t n = 0;
    ck_assert_int_eq(sim_cancel(sim, log_event, &a, &n), MS_OK);
    ck_assert_uint_eq(n, 1);
    int64_t next = 0;
    bool any = false;
    sim_next_time(sim, &next, &any);
    ck_assert(any);
    ck_assert_int_eq(next, 200);
    bool ran = false;
    ck_assert_int_eq(sim_step(sim, &ran), MS_OK);
    ck_assert(ran);
    ck_assert_int_eq(sim_step(sim, &ran), MS_OK);
    ck_assert(!ran);
    ck_assert_int_eq(log.n, 2);
    ck_assert_int_eq(log.seen[1], 2);
    ck_assert_int_eq(sim_create(NULL), MS_EINVAL);
    sim_destroy(sim);
}
END_TEST

/* Many events with random times come out sorted by (time, schedule order). */
typedef struct stamp_log {
    int64_t t[4096];
    int id[4096];
    int n;
} stamp_log;

typedef struct stamp_arg {
    stamp_log *log;
    int id;
} stamp_arg;

static void stamp(ms_sim *sim, void *arg)
{
    stamp_arg *a = arg;
    sim_now(sim, &a->log->t[a->log->n]);
    a->log->id[a->log->n++] = a->id;
}

START_TEST(engine_heap_stays_ordered_under_load)
{
    ms_sim *sim = NULL;
    sim_create(&sim);
    static stamp_log log;
    static stamp_arg args[4096];
    log.n = 0;
    uint32_t x = 12345; /* a fixed LCG: times 0..63, many ties */
    for (int i = 0; i < 4096; i++) {
        x = x * 1103515245u + 12345u;
        args[i] = (stamp_arg){&log, i};
        ck_assert_int_eq(sim_schedule(sim, (x >> 16) % 64, stamp, &args[i]), MS_OK);
    }
    sim_run(sim);
    ck_assert_int_eq(log.n, 4096);
    for (int i = 1; i < 4096; i++) {
        ck_assert(log.t[i] >= log.t[i - 1]);
        if (log.t[i] == log.t[i - 1])
            ck_assert(log.id[i] > log.id[i - 1]); /* ties in schedule order */
    }
    sim_destroy(sim);
}
END_TEST

/* ---- cost model -------------------------------------------------------- */

static ms_cost_model *model(const ms_device_spec *s)
{
    ms_cost_model *cm = NULL;
    ck_assert_int_eq(sim_cost_model_create(s, &cm), MS_OK);
    return cm;
}

static int64_t kernel_ns(const ms_cost_model *cm, ms_kernel k)
{
    int64_t ns = -1;
    ck_assert_int_eq(sim_cost_kernel_ns(cm, &k, &ns), MS_OK);
    return ns;
}

START_TEST(cost_matmul_at_known_efficiency)
{
    ms_device_spec s = spec_base();
    s.matmul_eff = (ms_curve){.n = 1, .x = {1e9}, .y = {0.5}};
    s.kernel_overhead_ns = 3000;
    ms_cost_model *cm = model(&s);
    /* 4096^3 matmul: 2 * 4096^3 = 137438953472 FLOPs at 1e15 x 0.5:
     * 137438953472 / 5e14 s = 274877.906944 ns -> 274878, + 3000 overhead. */
    ck_assert_int_eq(kernel_ns(cm, matmul(2.0 * 4096 * 4096 * 4096)), 277878);
    sim_cost_model_destroy(cm);
}
END_TEST

/* A GEMM that overlaps a TP all-gather chunk by chunk (--tp-comm-overlap):
 * the longer of the two plus one of n chunks of the shorter.  All-gather
 * of 8e7 B among 4 ranks at 100 GB/s with 5 us latency: 0.75 x 8e7 / 1e11
 * = 600 us + 3 x 5 us = 615000 ns. */
START_TEST(cost_gemm_overlapping_a_collective)
{
    ms_device_spec s = spec_base();
    ms_cost_model *cm = model(&s);
    ms_kernel ag = comm(MS_COMM_ALLGATHER, 4, MS_LINK_INTRA_NODE, 8e7);
    ck_assert_int_eq(kernel_ns(cm, ag), 615000);
    ms_kernel k = matmul(2e12); /* 2 ms alone */
    k.comm = MS_COMM_ALLGATHER;
    k.group_size = 4;
    k.link = MS_LINK_INTRA_NODE;
    k.comm_bytes = 8e7;
    ck_assert_int_eq(kernel_ns(cm, k), 2000000 + 615000 / 4);
    k.flops = 2e11; /* 200 us: the transfer is the longer */
    ck_assert_int_eq(kernel_ns(cm, k), 615000 + 200000 / 4);
    sim_cost_model_destroy(cm);
}
END_TEST

START_TEST(cost_efficiency_curves_interpolate_and_clamp)
{
    ms_device_spec s = spec_base();
    /* Two points: linear.  x = 5.05e10 is halfway between 1e9 and 1e11,
     * so eff = (0.2 + 0.6) / 2 = 0.4: 5.05e10 / (1e15 x 0.4) = 126250 ns. */
    s.matmul_eff = (ms_curve){.n = 2, .x = {1e9, 1e11}, .y = {0.2, 0.6}};
    /* Three points: Steffen, which passes through its points and is monotone
     * between them. */
    s.attention_eff = (ms_curve){.n = 3, .x = {1e9, 1e10, 1e11}, .y = {0.3, 0.5, 0.8}};
    ms_cost_model *cm = model(&s);
    ck_assert_int_eq(kernel_ns(cm, matmul(5.05e10)), 126250);
    ms_kernel att = matmul(1e10);
    att.cls = MS_KC_ATTENTION;
    /* At the knot 1e10: eff 0.5 -> 1e10 / 5e14 s = 20000 ns. */
    ck_assert_int_eq(kernel_ns(cm, att), 20000);
    /* Past the last point: clamped to 0.8 -> 1e12 / 8e14 s = 1250000 ns. */
    att.flops = 1e12;
    ck_assert_int_eq(kernel_ns(cm, att), 1250000);
    /* Before the first point: clamped to 0.3 -> 1e8 / 3e14 s = 333.3 -> 333 ns. */
    att.flops = 1e8;
    ck_assert_int_eq(kernel_ns(cm, att), 333);
    double y = 0;
    ck_assert_int_eq(sim_cost_curve_eval(cm, MS_CURVE_ATTENTION_EFF, 5e10, &y), MS_OK);
    ck_assert(y > 0.5 && y < 0.8);
    /* An empty efficiency curve is 1.0. */
    ck_assert_int_eq(sim_cost_curve_eval(cm, MS_CURVE_HBM_EFF, 123.0, &y), MS_OK);
    ck_assert(y == 1.0);
    sim_cost_model_destroy(cm);
}
END_TEST

START_TEST(cost_elementwise_is_hbm_bound)
{
    ms_device_spec s = spec_base();
    s.hbm_eff = (ms_curve){.n = 1, .x = {0}, .y = {0.8}};
    ms_cost_model *cm = model(&s);
    /* 1e9 FLOPs fp32 at 1e14: 10 us of compute; 1e9 bytes at 1e12 x 0.8:
     * 1.25 ms of HBM traffic.  The roofline takes the larger: 1250000 ns. */
    ms_kernel k = {.name = "add", .cls = MS_KC_ELEMENTWISE, .dtype = MS_DTYPE_FP32,
                   .flops = 1e9, .bytes = 1e9};
    ck_assert_int_eq(kernel_ns(cm, k), 1250000);
    /* A matmul-class kernel with the same figures but 1e12 FLOPs bf16 is
     * compute bound: 1e12 / 1e15 s = 1 ms < 1.25 ms HBM -> still 1250000;
     * with 2e12 FLOPs: 2 ms > 1.25 ms -> 2000000. */
    k.cls = MS_KC_MATMUL;
    k.dtype = MS_DTYPE_BF16;
    k.flops = 1e12;
    ck_assert_int_eq(kernel_ns(cm, k), 1250000);
    k.flops = 2e12;
    ck_assert_int_eq(kernel_ns(cm, k), 2000000);
    /* No fp8 peak on this device. */
    k.dtype = MS_DTYPE_FP8;
    int64_t ns = 0;
    ck_assert_int_eq(sim_cost_kernel_ns(cm, &k, &ns), MS_EUNSUPPORTED);
    k.dtype = MS_DTYPE_BF16;
    k.flops = -1;
    ck_assert_int_eq(sim_cost_kernel_ns(cm, &k, &ns), MS_EINVAL);
    sim_cost_model_destroy(cm);
}
END_TEST

START_TEST(cost_collectives_alpha_beta)
{
    ms_device_spec s = spec_base();
    ms_cost_model *cm = model(&s);
    /* Ring allreduce, 8 ranks, 1e9 B intra-node (100 GB/s, 5 us):
     * 2 x 7/8 x 1e9 / 1e11 s = 17.5 ms, + 2 x 7 x 5 us = 70 us -> 17570000 ns. */
    ck_assert_int_eq(kernel_ns(cm, comm(MS_COMM_ALLREDUCE, 8, MS_LINK_INTRA_NODE, 1e9)),
                     17570000);
    /* Allgather, 8 ranks, 1e9 B gathered, inter-node (25 GB/s, 20 us):
     * 7/8 x 1e9 / 2.5e10 s = 35 ms, + 7 x 20 us -> 35140000 ns. */
    ck_assert_int_eq(kernel_ns(cm, comm(MS_COMM_ALLGATHER, 8, MS_LINK_INTER_NODE, 1e9)),
                     35140000);
    /* Reduce-scatter, 4 ranks, 1e9 B intra: 3/4 x 10 ms + 3 x 5 us -> 7515000. */
    ck_assert_int_eq(kernel_ns(cm, comm(MS_COMM_REDUCE_SCATTER, 4, MS_LINK_INTRA_NODE, 1e9)),
                     7515000);
    /* All-to-all, 2 ranks, 1e9 B intra: 1/2 x 10 ms + 1 x 5 us -> 5005000. */
    ck_assert_int_eq(kernel_ns(cm, comm(MS_COMM_ALLTOALL, 2, MS_LINK_INTRA_NODE, 1e9)),
                     5005000);
    /* Broadcast 1e9 B intra: 10 ms + 5 us -> 10005000. */
    ck_assert_int_eq(kernel_ns(cm, comm(MS_COMM_BROADCAST, 8, MS_LINK_INTRA_NODE, 1e9)),
                     10005000);
    /* Send 1e6 B intra: 10 us + 5 us -> 15000. */
    ck_assert_int_eq(kernel_ns(cm, p2p(MS_COMM_SEND, 1, 0, 1e6)), 15000);
    /* A group of one moves nothing. */
    ck_assert_int_eq(kernel_ns(cm, comm(MS_COMM_ALLREDUCE, 1, MS_LINK_INTRA_NODE, 1e9)), 0);
    int64_t ns = 0;
    ms_kernel bad = comm(MS_COMM_ALLREDUCE, 0, MS_LINK_INTRA_NODE, 1e9);
    ck_assert_int_eq(sim_cost_kernel_ns(cm, &bad, &ns), MS_EINVAL);
    bad = comm(MS_COMM_NONE, 8, MS_LINK_INTRA_NODE, 1e9);
    ck_assert_int_eq(sim_cost_kernel_ns(cm, &bad, &ns), MS_EINVAL);
    sim_cost_model_destroy(cm);
}
END_TEST

/* GEMM efficiency by shape (device.h): max x M/(M+m_half) x N/(N+n_half) x
 * K/(K+k_half), the batch folded into M; without a shape, by FLOPs. */
START_TEST(cost_gemm_by_shape)
{
    ms_device_spec s = spec_base();
    s.matmul_eff = (ms_curve){.n = 1, .x = {1e9}, .y = {0.5}};
    s.gemm.max[MS_DTYPE_BF16] = 0.8;
    s.gemm.m_half = 1024;
    s.gemm.n_half = 1024;
    s.gemm.k_half = 1024;
    ms_cost_model *cm = model(&s);
    /* 1024^3: each factor 1/2 -> 0.8 / 8 = 0.1 of 1 PFLOP/s:
     * 2147483648 / 1e14 s = 21474.84 ns -> 21475. */
    ms_kernel k = matmul(2.0 * 1024 * 1024 * 1024);
    k.shape[0] = k.shape[1] = k.shape[2] = 1024;
    ck_assert_int_eq(kernel_ns(cm, k), 21475);
    /* The same FLOPs as 4 x (256 x 1024 x 1024): M = 4 x 256 folded, the same. */
    k.shape[0] = 256;
    k.shape[3] = 4;
    ck_assert_int_eq(kernel_ns(cm, k), 21475);
    /* 3072 x 1024 x 1024 (3x the FLOPs): M factor 3/4 -> 0.15 of peak:
     * 6442450944 / 1.5e14 s = 42949.67 ns. */
    k = matmul(2.0 * 3072 * 1024 * 1024);
    k.shape[0] = 3072;
    k.shape[1] = k.shape[2] = 1024;
    ck_assert_int_eq(kernel_ns(cm, k), 42950);
    /* No shape: the FLOPs curve (0.5). */
    ck_assert_int_eq(kernel_ns(cm, matmul(2.0 * 1024 * 1024 * 1024)), 4295);
    sim_cost_model_destroy(cm);
}
END_TEST

/* Collective bandwidth: the link's x its efficiency at the message size x
 * the kind's efficiency relative to all-reduce; on a full mesh a group of n
 * of P devices gets (n-1)/(P-1) of it; an inter-node group with k ranks a
 * node crosses on k NICs, bounded by the intra-node link. */
START_TEST(cost_collective_efficiencies)
{
    ms_device_spec s = spec_base();
    s.intra_node_eff = (ms_curve){.n = 1, .x = {0}, .y = {0.5}};
    s.collective_eff[MS_COMM_ALLGATHER] = 0.8;
    ms_cost_model *cm = model(&s);
    /* All-reduce 8 ranks 1e9 B at 100 GB/s x 0.5: 35 ms + 70 us. */
    ck_assert_int_eq(kernel_ns(cm, comm(MS_COMM_ALLREDUCE, 8, MS_LINK_INTRA_NODE, 1e9)), 35070000);
    /* All-gather at x 0.8 more: 7/8 x 1e9 / 4e10 s = 21.875 ms + 35 us. */
    ck_assert_int_eq(kernel_ns(cm, comm(MS_COMM_ALLGATHER, 8, MS_LINK_INTRA_NODE, 1e9)), 21910000);
    sim_cost_model_destroy(cm);
    s = spec_base();
    s.intra_node_mesh = true;
    cm = model(&s);
    /* Mesh of 8: a group of 2 uses 1 of 7 links: all-reduce 2 ranks 1e9 B:
     * 2 x 1/2 x 1e9 / (1e11 / 7) s = 70 ms + 2 x 5 us. */
    ck_assert_int_eq(kernel_ns(cm, comm(MS_COMM_ALLREDUCE, 2, MS_LINK_INTRA_NODE, 1e9)), 70010000);
    /* A group of all 8 gets the whole link, as on a switch. */
    ck_assert_int_eq(kernel_ns(cm, comm(MS_COMM_ALLREDUCE, 8, MS_LINK_INTRA_NODE, 1e9)), 17570000);
    sim_cost_model_destroy(cm);
    s = spec_base();
    cm = model(&s);
    /* Inter-node all-reduce of 16 with 2 ranks a node: 2 NICs, 50 GB/s:
     * 2 x 15/16 x 1e9 / 5e10 s = 37.5 ms + 2 x 15 x 20 us = 600 us. */
    ms_kernel k = comm(MS_COMM_ALLREDUCE, 16, MS_LINK_INTER_NODE, 1e9);
    k.ranks_per_node = 2;
    ck_assert_int_eq(kernel_ns(cm, k), 38100000);
    /* 8 ranks a node would be 200 GB/s: bounded by the 100 GB/s intra link. */
    k.ranks_per_node = 8;
    ck_assert_int_eq(kernel_ns(cm, k), 18750000 + 600000);
    sim_cost_model_destroy(cm);
    /* An all-to-all of 16 over two nodes (8 ranks a node) sends 8/16 of 1e9 B
     * through each rank's own 25 GB/s NIC (20 ms) while 7/16 of it crosses
     * the 100 GB/s intra link (4.375 ms): 20 ms + 15 x 20 us.  Counted one
     * rank a node, all 15/16 would cross the NIC: 37.5 ms + 300 us. */
    cm = model(&s);
    k = comm(MS_COMM_ALLTOALL, 16, MS_LINK_INTER_NODE, 1e9);
    ck_assert_int_eq(kernel_ns(cm, k), 37800000);
    k.ranks_per_node = 8;
    ck_assert_int_eq(kernel_ns(cm, k), 20300000);
    /* Four nodes of 4: 12/16 out (30 ms). */
    k.ranks_per_node = 4;
    ck_assert_int_eq(kernel_ns(cm, k), 30300000);
    sim_cost_model_destroy(cm);
    /* With a 10 GB/s intra link the 7/16 on it take 43.75 ms, the longer. */
    s.intra_node_bw = 1e10;
    cm = model(&s);
    k.ranks_per_node = 8;
    ck_assert_int_eq(kernel_ns(cm, k), 44050000);
    sim_cost_model_destroy(cm);
}
END_TEST

START_TEST(cost_copies)
{
    ms_device_spec s = spec_base();
    /* D2H bandwidth by size: linear from 1 GB/s at 1 KB to 20 GB/s at 1 GB. */
    s.d2h_bw = (ms_curve){.n = 2, .x = {1e3, 1e9}, .y = {1e9, 2e10}};
    s.kernel_overhead_ns = 500;
    ms_cost_model *cm = model(&s);
    int64_t ns = 0;
    /* H2D 1e6 B at 10 GB/s: 100 us + 2 us latency -> 102000. */
    ck_assert_int_eq(sim_cost_copy_ns(cm, MS_COPY_H2D, 1000000, &ns), MS_OK);
    ck_assert_int_eq(ns, 102000);
    /* D2H 1e9 B at 20 GB/s: 50 ms + 2 us -> 50002000. */
    ck_assert_int_eq(sim_cost_copy_ns(cm, MS_COPY_D2H, 1000000000, &ns), MS_OK);
    ck_assert_int_eq(ns, 50002000);
    /* D2H 1e2 B: below the first point, clamped to 1 GB/s: 100 ns + 2 us. */
    ck_assert_int_eq(sim_cost_copy_ns(cm, MS_COPY_D2H, 100, &ns), MS_OK);
    ck_assert_int_eq(ns, 2100);
    /* D2D 1e6 B reads and writes 2e6 B at 1 TB/s: 2 us, + 500 ns overhead. */
    ck_assert_int_eq(sim_cost_copy_ns(cm, MS_COPY_D2D, 1000000, &ns), MS_OK);
    ck_assert_int_eq(ns, 2500);
    int64_t lat = 0;
    double xfer = 0;
    ck_assert_int_eq(sim_cost_copy_parts(cm, MS_COPY_H2D, 1000000, &lat, &xfer), MS_OK);
    ck_assert_int_eq(lat, 2000);
    ck_assert(fabs(xfer - 100000.0) < 1e-6);
    ck_assert_int_eq(sim_cost_copy_ns(cm, (ms_copy_kind)9, 1, &ns), MS_EINVAL);
    sim_cost_model_destroy(cm);
}
END_TEST

START_TEST(cost_model_rejects_bad_spec)
{
    ms_device_spec s = spec_base();
    s.matmul_eff = (ms_curve){.n = 3, .x = {1, 3, 2}, .y = {0.1, 0.2, 0.3}};
    ms_cost_model *cm = NULL;
    ck_assert_int_ne(sim_cost_model_create(&s, &cm), MS_OK);
    ck_assert_ptr_null(cm);
    s = spec_base();
    s.hbm_bw = 0;
    ck_assert_int_ne(sim_cost_model_create(&s, &cm), MS_OK);
}
END_TEST

/* ---- device models ---------------------------------------------------- */

typedef struct rig {
    ms_sim *sim;
    ms_simdev *dev;
    trace tr;
} rig;

static void rig_open(rig *r, const ms_device_spec *s)
{
    memset(r, 0, sizeof *r);
    ck_assert_int_eq(sim_create(&r->sim), MS_OK);
    ck_assert_int_eq(sim_dev_create(r->sim, s, 0, &r->dev), MS_OK);
    ck_assert_int_eq(sim_dev_set_tracer(r->dev, on_work, &r->tr), MS_OK);
}

static void rig_close(rig *r)
{
    ck_assert_int_eq(sim_dev_destroy(r->dev), MS_OK);
    ck_assert_int_eq(sim_destroy(r->sim), MS_OK);
}

static ms_simstream *stream(rig *r, int prio)
{
    ms_simstream *s = NULL;
    ck_assert_int_eq(sim_stream_create(r->dev, prio, &s), MS_OK);
    return s;
}

static void launch(ms_simstream *s, ms_kernel k, int64_t at, uint64_t tag)
{
    ck_assert_int_eq(sim_stream_launch(s, &k, at, tag), MS_OK);
}

static void assert_span(const trace *t, uint64_t tag, int64_t start, int64_t end)
{
    const ms_work_record *w = by_tag(t, tag);
    ck_assert_msg(w->start_ns == start && w->end_ns == end,
                  "tag %llu ran [%lld, %lld], expected [%lld, %lld]", (unsigned long long)tag,
                  (long long)w->start_ns, (long long)w->end_ns, (long long)start, (long long)end);
}

START_TEST(stream_is_fifo)
{
    ms_device_spec s = spec_base();
    rig r;
    rig_open(&r, &s);
    ms_simstream *a = stream(&r, 0);
    /* 1e11 FLOPs = 100 us, 5e10 = 50 us, all issued at 0: back to back. */
    launch(a, matmul(1e11), 0, 1);
    launch(a, matmul(5e10), 0, 2);
    /* A D2H of 1e6 B (2 us + 100 us) waits for both kernels on the same
     * stream although the copy engine is free: [150000, 252000]. */
    ck_assert_int_eq(sim_stream_copy(a, MS_COPY_D2H, 1000000, 0, 3), MS_OK);
    launch(a, matmul(1e10), 0, 4); /* then 10 us: [252000, 262000] */
    sim_run(r.sim);
    ck_assert_int_eq(r.tr.n, 4);
    for (int i = 0; i < 4; i++)
        ck_assert_uint_eq(r.tr.r[i].tag, (uint64_t)i + 1); /* completion order */
    assert_span(&r.tr, 1, 0, 100000);
    assert_span(&r.tr, 2, 100000, 150000);
    assert_span(&r.tr, 3, 150000, 252000);
    assert_span(&r.tr, 4, 252000, 262000);
    ck_assert(r.tr.r[2].is_copy && r.tr.r[2].copy_kind == MS_COPY_D2H);
    ck_assert_uint_eq(r.tr.r[2].bytes, 1000000);
    ms_simstream_info info;
    sim_stream_info_get(a, &info);
    ck_assert_uint_eq(info.queued, 0);
    ck_assert_int_eq(info.last_done_ns, 262000);
    /* Work issued later than the device is free starts at its issue time. */
    launch(a, matmul(1e10), 300000, 5);
    sim_run(r.sim);
    assert_span(&r.tr, 5, 300000, 310000);
    rig_close(&r);
}
END_TEST

START_TEST(cross_stream_wait_on_event)
{
    ms_device_spec s = spec_base();
    rig r;
    rig_open(&r, &s);
    ms_simstream *a = stream(&r, 0), *b = stream(&r, 0), *c = stream(&r, 0);
    ms_simevent *e = NULL;
    ck_assert_int_eq(sim_event_create(r.dev, &e), MS_OK);
    /* Stream A: an 8-rank allreduce of 1e9 B (17570000 ns, see the cost
     * test) on the comm link, then a record of e. */
    launch(a, comm(MS_COMM_ALLREDUCE, 8, MS_LINK_INTRA_NODE, 1e9), 0, 1);
    ck_assert_int_eq(sim_stream_record(a, e, 0), MS_OK);
    /* Stream B waits for e, then a 100 us matmul: it cannot start before the
     * allreduce ends although the compute engine is idle: [17570000, 17670000]. */
    ck_assert_int_eq(sim_stream_wait_event(b, e, 0), MS_OK);
    launch(b, matmul(1e11), 0, 2);
    /* Stream C has no wait: its 100 us matmul overlaps the allreduce: [0, 100000]. */
    launch(c, matmul(1e11), 0, 3);
    bool rec = false, done = true;
    sim_event_status(e, &rec, &done, NULL);
    ck_assert(rec && !done);
    sim_run(r.sim);
    assert_span(&r.tr, 1, 0, 17570000);
    assert_span(&r.tr, 3, 0, 100000);
    assert_span(&r.tr, 2, 17570000, 17670000);
    int64_t t = 0;
    sim_event_status(e, &rec, &done, &t);
    ck_assert(rec && done);
    ck_assert_int_eq(t, 17570000);
    sim_event_destroy(e);
    rig_close(&r);
}
END_TEST

START_TEST(wait_keeps_the_capture_it_saw)
{
    ms_device_spec s = spec_base();
    rig r;
    rig_open(&r, &s);
    ms_simstream *a = stream(&r, 0), *b = stream(&r, 0);
    ms_simevent *e = NULL, *never = NULL;
    sim_event_create(r.dev, &e);
    sim_event_create(r.dev, &never);
    /* A: send (1e6 B to an unattached peer: 15000 ns on the comm link),
     * record e, another send, record e again.  B's wait is issued between
     * the two records, so it waits for the first capture only (CUDA). */
    launch(a, p2p(MS_COMM_SEND, 9, 0, 1e6), 0, 1);
    sim_stream_record(a, e, 0);
    ck_assert_int_eq(sim_stream_wait_event(b, e, 0), MS_OK);
    /* A wait on a never-recorded event is a no-op. */
    ck_assert_int_eq(sim_stream_wait_event(b, never, 0), MS_OK);
    launch(b, matmul(1e11), 0, 2);
    launch(a, p2p(MS_COMM_SEND, 9, 0, 1e6), 0, 3);
    sim_stream_record(a, e, 0);
    /* The event handle can go while its capture is still pending. */
    sim_event_destroy(never);
    sim_run(r.sim);
    assert_span(&r.tr, 1, 0, 15000);
    assert_span(&r.tr, 3, 15000, 30000);
    assert_span(&r.tr, 2, 15000, 115000); /* not 30000 */
    int64_t t = 0;
    sim_event_status(e, NULL, NULL, &t);
    ck_assert_int_eq(t, 30000);
    sim_event_destroy(e);
    rig_close(&r);
}
END_TEST

START_TEST(compute_engine_picks_priority_then_readiness)
{
    ms_device_spec s = spec_base();
    for (int variant = 0; variant < 2; variant++) {
        rig r;
        rig_open(&r, &s);
        ms_simstream *s0 = stream(&r, 0), *s1 = stream(&r, 0);
        ms_simstream *s2 = stream(&r, variant == 0 ? -1 : 0);
        /* K0 holds the compute engine [0, 100000].  K1 (stream 1) is issued
         * at 10 ns, K2 (stream 2) at 20 ns; both wait for the engine. */
        launch(s0, matmul(1e11), 0, 0);
        launch(s1, matmul(1e11), 10, 1);
        launch(s2, matmul(5e10), 20, 2);
        sim_run(r.sim);
        if (variant == 0) {
            /* Stream 2 has the higher priority (-1 < 0): K2 first. */
            assert_span(&r.tr, 2, 100000, 150000);
            assert_span(&r.tr, 1, 150000, 250000);
        } else {
            /* Equal priorities: K1 became ready first. */
            assert_span(&r.tr, 1, 100000, 200000);
            assert_span(&r.tr, 2, 200000, 250000);
        }
        rig_close(&r);
    }
}
END_TEST

START_TEST(same_instant_readiness_respects_priority)
{
    ms_device_spec s = spec_base();
    rig r;
    rig_open(&r, &s);
    /* Both kernels are issued at 500 ns on an idle device, the low-priority
     * one first: the high-priority kernel runs first: [500, 50500]. */
    ms_simstream *lo = stream(&r, 5), *hi = stream(&r, -5), *cp = stream(&r, 0);
    launch(lo, matmul(1e11), 500, 1);
    launch(hi, matmul(5e10), 500, 2);
    sim_run(r.sim);
    assert_span(&r.tr, 2, 500, 50500);
    assert_span(&r.tr, 1, 50500, 150500);
    /* Readiness from different sources at one instant.  From 200000: K3 on
     * lo takes 102000 ns -> [200000, 302000], K4 queued behind it.  A D2H of
     * 1e6 B on cp also ends at 302000 (2000 + 100000); hi waits for an event
     * recorded after it, then K5.  At 302000 the kernel's end is processed
     * before the copy's, but the compute engine collects everything ready at
     * 302000 before choosing: K5 (priority -5) first [302000, 352000], then
     * K4 [352000, 452000]. */
    ms_simevent *e = NULL;
    sim_event_create(r.dev, &e);
    launch(lo, matmul(1.02e11), 200000, 3);
    launch(lo, matmul(1e11), 200000, 4);
    sim_stream_copy(cp, MS_COPY_D2H, 1000000, 200000, 6);
    sim_stream_record(cp, e, 200000);
    sim_stream_wait_event(hi, e, 200000);
    launch(hi, matmul(5e10), 200000, 5);
    sim_run(r.sim);
    assert_span(&r.tr, 3, 200000, 302000);
    assert_span(&r.tr, 6, 200000, 302000);
    assert_span(&r.tr, 5, 302000, 352000);
    assert_span(&r.tr, 4, 352000, 452000);
    sim_event_destroy(e);
    rig_close(&r);
}
END_TEST

START_TEST(concurrent_d2h_copies_share_bandwidth)
{
    ms_device_spec s = spec_base();
    rig r;
    rig_open(&r, &s);
    ms_simstream *a = stream(&r, 0), *b = stream(&r, 0);
    /* Alone: 1e6 B D2H = 2000 latency + 100000 transfer: [0, 102000]. */
    sim_stream_copy(a, MS_COPY_D2H, 1000000, 0, 1);
    sim_run(r.sim);
    assert_span(&r.tr, 1, 0, 102000);
    /* Two at once (from 200000): latency to 202000, then both share 10 GB/s:
     * each needs 100000 ns of the link alone, so both end after 200000 ns:
     * [200000, 402000], a transfer twice as long as one copy alone. */
    sim_stream_copy(a, MS_COPY_D2H, 1000000, 200000, 2);
    sim_stream_copy(b, MS_COPY_D2H, 1000000, 200000, 3);
    sim_run(r.sim);
    assert_span(&r.tr, 2, 200000, 402000);
    assert_span(&r.tr, 3, 200000, 402000);
    ck_assert_int_eq((402000 - 202000), 2 * (102000 - 2000));
    /* Staggered: copy 4 at 500000, copy 5 at 501000.  4 alone moves during
     * [502000, 503000]: 1000 ns of its 100000.  Then both share: 4 needs
     * 99000 more at half rate -> 198000 -> ends 701000; by then 5 has moved
     * 99000 -> its last 1000 alone -> ends 702000. */
    sim_stream_copy(a, MS_COPY_D2H, 1000000, 500000, 4);
    sim_stream_copy(b, MS_COPY_D2H, 1000000, 501000, 5);
    sim_run(r.sim);
    assert_span(&r.tr, 4, 500000, 701000);
    assert_span(&r.tr, 5, 501000, 702000);
    rig_close(&r);
}
END_TEST

/* Two all-reduces on one network link share it, as two copies share the
 * host link; compute beside them runs overlap_compute_slowdown slower over
 * the part that overlaps. */
START_TEST(collectives_share_link_and_slow_compute)
{
    ms_device_spec s = spec_base();
    s.intra_node_latency_ns = 0;
    s.overlap_compute_slowdown = 0.5;
    rig r;
    rig_open(&r, &s);
    ms_simstream *a = stream(&r, 0), *b = stream(&r, 0), *c = stream(&r, 0);
    /* Alone: all-reduce 2 ranks 1e8 B at 100 GB/s: 1 ms. */
    launch(a, comm(MS_COMM_ALLREDUCE, 2, MS_LINK_INTRA_NODE, 1e8), 0, 1);
    sim_run(r.sim);
    assert_span(&r.tr, 1, 0, 1000000);
    /* Two at once: each ends after 2 ms. */
    launch(a, comm(MS_COMM_ALLREDUCE, 2, MS_LINK_INTRA_NODE, 1e8), 2000000, 2);
    launch(b, comm(MS_COMM_ALLREDUCE, 2, MS_LINK_INTRA_NODE, 1e8), 2000000, 3);
    sim_run(r.sim);
    assert_span(&r.tr, 2, 2000000, 4000000);
    assert_span(&r.tr, 3, 2000000, 4000000);
    /* A 2 ms matmul (2e12 FLOPs at 1 PFLOP/s) starting with a 1 ms
     * all-reduce: its first 1 ms overlaps, +50% of it: 2.5 ms. */
    launch(a, comm(MS_COMM_ALLREDUCE, 2, MS_LINK_INTRA_NODE, 1e8), 5000000, 4);
    launch(c, matmul(2e12), 5000000, 5);
    sim_run(r.sim);
    assert_span(&r.tr, 4, 5000000, 6000000);
    assert_span(&r.tr, 5, 5000000, 7500000);
    /* Alone again: 2 ms. */
    launch(c, matmul(2e12), 8000000, 6);
    sim_run(r.sim);
    assert_span(&r.tr, 6, 8000000, 10000000);
    rig_close(&r);
}
END_TEST

/* With overlap_copy_slowdown a host copy moves its bytes 1 + slow times
 * slower while a compute kernel runs, and only then; its latency and the
 * kernel are unchanged. */
START_TEST(host_copies_slow_beside_compute)
{
    ms_device_spec s = spec_base();
    s.overlap_copy_slowdown = 0.5;
    rig r;
    rig_open(&r, &s);
    ms_simstream *a = stream(&r, 0), *c = stream(&r, 0);
    /* Alone: 2000 ns latency + 1e6 B at 10 GB/s (100000 ns). */
    sim_stream_copy(a, MS_COPY_H2D, 1000000, 0, 1);
    sim_run(r.sim);
    assert_span(&r.tr, 1, 0, 102000);
    /* Beside a 2 ms matmul that outlasts it: the 100000 ns of transfer
     * take 150000 -> [200000, 352000]; the matmul keeps its 2 ms. */
    launch(c, matmul(2e12), 200000, 2);
    sim_stream_copy(a, MS_COPY_D2H, 1000000, 200000, 3);
    sim_run(r.sim);
    assert_span(&r.tr, 2, 200000, 2200000);
    assert_span(&r.tr, 3, 200000, 352000);
    /* A 50 us matmul (5e10 FLOPs) from 3000000: the copy's transfer starts
     * at 3002000, moves 48000 / 1.5 = 32000 ns of its work by 3050000,
     * then the other 68000 alone: ends 3118000. */
    launch(c, matmul(5e10), 3000000, 4);
    sim_stream_copy(a, MS_COPY_H2D, 1000000, 3000000, 5);
    sim_run(r.sim);
    assert_span(&r.tr, 4, 3000000, 3050000);
    assert_span(&r.tr, 5, 3000000, 3118000);
    rig_close(&r);
}
END_TEST

START_TEST(opposite_directions_are_independent)
{
    ms_device_spec s = spec_base();
    rig r;
    rig_open(&r, &s);
    ms_simstream *a = stream(&r, 0), *b = stream(&r, 0);
    /* Full duplex: a D2H and an H2D together each take what they take
     * alone: 2000 + 100000 -> [0, 102000] both. */
    sim_stream_copy(a, MS_COPY_D2H, 1000000, 0, 1);
    sim_stream_copy(b, MS_COPY_H2D, 1000000, 0, 2);
    sim_run(r.sim);
    assert_span(&r.tr, 1, 0, 102000);
    assert_span(&r.tr, 2, 0, 102000);
    /* A D2D copy uses the compute engine, not the host link: 2e6 B at 1 TB/s
     * = 2000 ns, overlapping an H2D on another stream. */
    sim_stream_copy(a, MS_COPY_D2D, 1000000, 200000, 3);
    sim_stream_copy(b, MS_COPY_H2D, 1000000, 200000, 4);
    sim_run(r.sim);
    assert_span(&r.tr, 3, 200000, 202000);
    assert_span(&r.tr, 4, 200000, 302000);
    rig_close(&r);
}
END_TEST

START_TEST(hbm_capacity_accounting)
{
    ms_device_spec s = spec_base();
    rig r;
    rig_open(&r, &s);
    uint64_t used = 1, peak = 1, cap = 0;
    sim_dev_hbm_usage(r.dev, &used, &peak, &cap);
    ck_assert_uint_eq(cap, 1ULL << 30);
    ck_assert_uint_eq(used, 0);
    ck_assert_int_eq(sim_dev_hbm_charge(r.dev, 3ULL << 28), MS_OK); /* 768 MiB */
    ck_assert_int_eq(sim_dev_hbm_charge(r.dev, 1ULL << 28), MS_OK); /* full */
    ck_assert_int_eq(sim_dev_hbm_charge(r.dev, 1), MS_ENOMEM);
    sim_dev_hbm_usage(r.dev, &used, &peak, NULL);
    ck_assert_uint_eq(used, 1ULL << 30);
    ck_assert_int_eq(sim_dev_hbm_uncharge(r.dev, 1ULL << 29), MS_OK);
    ck_assert_int_eq(sim_dev_hbm_uncharge(r.dev, 1ULL << 30), MS_EINVAL);
    sim_dev_hbm_usage(r.dev, &used, &peak, NULL);
    ck_assert_uint_eq(used, 1ULL << 29);
    ck_assert_uint_eq(peak, 1ULL << 30);
    rig_close(&r);
}
END_TEST

START_TEST(p2p_recv_waits_for_matching_send)
{
    ms_device_spec s = spec_base();
    ms_sim *sim = NULL;
    sim_create(&sim);
    ms_simdev *d0 = NULL, *d1 = NULL, *dup = NULL;
    ck_assert_int_eq(sim_dev_create(sim, &s, 0, &d0), MS_OK);
    ck_assert_int_eq(sim_dev_create(sim, &s, 1, &d1), MS_OK);
    ck_assert_int_eq(sim_dev_create(sim, &s, 1, &dup), MS_EINVAL); /* index taken */
    trace t0 = {0}, t1 = {0};
    sim_dev_set_tracer(d0, on_work, &t0);
    sim_dev_set_tracer(d1, on_work, &t1);
    ms_simstream *s0 = NULL, *s1 = NULL;
    sim_stream_create(d0, 0, &s0);
    sim_stream_create(d1, 0, &s1);
    /* Device 1 posts its receive first (tag 7), then a 100 us matmul.
     * Device 0 computes 50 us, then sends 1e6 B with tag 6 (15000 ns on its
     * link: [50000, 65000]), which does not match, then with tag 7
     * ([65000, 80000]).  The receive completes when the tag-7 send does, at
     * 80000, and the matmul follows: [80000, 180000]. */
    launch(s1, p2p(MS_COMM_RECV, 0, 7, 1e6), 0, 10);
    launch(s1, matmul(1e11), 0, 11);
    launch(s0, matmul(5e10), 0, 20);
    launch(s0, p2p(MS_COMM_SEND, 1, 6, 1e6), 0, 21);
    launch(s0, p2p(MS_COMM_SEND, 1, 7, 1e6), 0, 22);
    sim_run(sim);
    assert_span(&t0, 21, 50000, 65000);
    assert_span(&t0, 22, 65000, 80000);
    assert_span(&t1, 10, 0, 80000); /* the receive spans its wait */
    assert_span(&t1, 11, 80000, 180000);
    /* The tag-6 send is still posted: a later receive takes it at once. */
    launch(s1, p2p(MS_COMM_RECV, 0, 6, 1e6), 200000, 12);
    sim_run(sim);
    assert_span(&t1, 12, 200000, 200000);
    /* A receive from a device not on this engine costs its alpha-beta
     * time on the link: 15000 ns. */
    launch(s1, p2p(MS_COMM_RECV, 5, 1, 1e6), 300000, 13);
    sim_run(sim);
    assert_span(&t1, 13, 300000, 315000);
    ck_assert_int_eq(sim_destroy(sim), MS_EINVAL); /* devices attached */
    sim_dev_destroy(d0);
    sim_dev_destroy(d1);
    ck_assert_int_eq(sim_destroy(sim), MS_OK);
}
END_TEST

START_TEST(device_destroyed_with_pending_work_leaves_engine_safe)
{
    ms_device_spec s = spec_base();
    ms_sim *sim = NULL;
    sim_create(&sim);
    ms_simdev *d0 = NULL, *d1 = NULL;
    sim_dev_create(sim, &s, 0, &d0);
    sim_dev_create(sim, &s, 1, &d1);
    trace t1 = {0};
    sim_dev_set_tracer(d1, on_work, &t1);
    ms_simstream *a = NULL, *b = NULL;
    sim_stream_create(d0, 0, &a);
    sim_stream_create(d1, 0, &b);
    ms_simevent *e = NULL;
    sim_event_create(d0, &e); /* left open: freed with the device */
    launch(a, matmul(1e11), 0, 1);
    sim_stream_record(a, e, 0);
    sim_stream_copy(a, MS_COPY_D2H, 1000000, 10, 2);
    launch(b, matmul(1e11), 0, 3);
    sim_run_until(sim, 50000);
    ck_assert_int_eq(sim_dev_destroy(d0), MS_OK);
    /* Device 1's work runs on; nothing of device 0 is left on the engine. */
    sim_run(sim);
    ck_assert_int_eq(t1.n, 1);
    assert_span(&t1, 3, 0, 100000);
    int64_t now = 0;
    sim_now(sim, &now);
    ck_assert_int_eq(now, 100000);
    sim_dev_destroy(d1);
    ck_assert_int_eq(sim_destroy(sim), MS_OK);
}
END_TEST

START_TEST(destroyed_stream_drains_first)
{
    ms_device_spec s = spec_base();
    rig r;
    rig_open(&r, &s);
    ms_simstream *a = stream(&r, 0), *b = stream(&r, 0);
    launch(a, matmul(1e11), 0, 1);
    launch(a, matmul(1e11), 0, 2);
    /* As cudaStreamDestroy: returns now, the work still runs. */
    ck_assert_int_eq(sim_stream_destroy(a), MS_OK);
    bool idle = true;
    sim_dev_idle(r.dev, &idle);
    ck_assert(!idle);
    sim_run(r.sim);
    assert_span(&r.tr, 2, 100000, 200000);
    sim_dev_idle(r.dev, &idle);
    ck_assert(idle);
    /* Ids keep counting: the next stream is number 2. */
    ms_simstream *c = stream(&r, 0);
    ms_simstream_info info;
    sim_stream_info_get(c, &info);
    ck_assert_uint_eq(info.id, 2);
    sim_stream_info_get(b, &info);
    ck_assert_uint_eq(info.id, 1);
    rig_close(&r);
}
END_TEST

/* ---- host threads ------------------------------------------------------- */

static bool stream_idle(const void *ctx)
{
    ms_simstream_info info;
    sim_stream_info_get(ctx, &info);
    return info.queued == 0;
}

START_TEST(host_waits_run_the_engine)
{
    ms_device_spec s = spec_base();
    rig r;
    rig_open(&r, &s);
    ms_simhost *h = NULL;
    ck_assert_int_eq(sim_host_create(r.sim, &h), MS_OK);
    ms_simstream *a = stream(&r, 0);
    sim_host_advance(h, 1000);
    launch(a, matmul(1e11), 1000, 1);
    /* Catching up runs the device to the host clock (1000) only. */
    sim_host_catch_up(h);
    int64_t now = 0;
    sim_now(r.sim, &now);
    ck_assert_int_le(now, 1000);
    ck_assert_int_eq(r.tr.n, 0);
    /* The wait ends when the kernel does: host clock 101000. */
    ck_assert_int_eq(sim_host_wait(h, stream_idle, a), MS_OK);
    sim_host_now(h, &now);
    ck_assert_int_eq(now, 101000);
    /* A receive nobody will send: the engine runs dry -> deadlock, and the
     * host clock is unchanged. */
    ms_simdev *peer = NULL;
    sim_dev_create(r.sim, &s, 1, &peer);
    launch(a, p2p(MS_COMM_RECV, 1, 3, 1e6), 101000, 2);
    ck_assert_int_eq(sim_host_wait(h, stream_idle, a), MS_EDEADLOCK);
    sim_host_now(h, &now);
    ck_assert_int_eq(now, 101000);
    sim_dev_destroy(peer);
    sim_host_destroy(h);
    rig_close(&r);
}
END_TEST

/* A watched host's condition is asked again only after its own device
 * changed, and it still wakes at the engine step that makes it hold. */
typedef struct counted_idle {
    ms_simstream *s;
    int asked;
} counted_idle;

static bool counted_stream_idle(const void *ctx)
{
    counted_idle *c = (counted_idle *)ctx;
    c->asked++;
    return stream_idle(c->s);
}

static bool never(const void *ctx)
{
    (void)ctx;
    return false;
}

/* The scheduler of several hosts re-reads only the hosts whose clock or
 * parked state changed: each is listed once until drained, a host whose
 * clock did not move is not listed, and parking, waking and going idle
 * from parked all list it. */
START_TEST(changed_hosts_are_listed_once_until_drained)
{
    ms_sim *sim = NULL;
    ms_simhost *h[3] = {NULL};
    ck_assert_int_eq(sim_create(&sim), MS_OK);
    for (int i = 0; i < 3; i++) {
        ck_assert_int_eq(sim_host_create(sim, &h[i]), MS_OK);
        ck_assert_int_eq(sim_host_set_tag(h[i], 10 + i), MS_OK);
    }
    int tags[4] = {0};
    sim_hosts_drain_changes(sim, NULL, 0);
    ck_assert_int_eq(sim_host_advance(h[1], 0), MS_OK); /* no move */
    ck_assert_uint_eq(sim_hosts_drain_changes(sim, tags, 4), 0);
    ck_assert_int_eq(sim_host_advance(h[1], 5), MS_OK);
    ck_assert_int_eq(sim_host_advance(h[1], 5), MS_OK);
    ck_assert_int_eq(sim_host_advance(h[2], 1), MS_OK);
    size_t n = sim_hosts_drain_changes(sim, tags, 4);
    ck_assert_uint_eq(n, 2);
    ck_assert(tags[0] + tags[1] == 23 && tags[0] != tags[1]);
    ck_assert_uint_eq(sim_hosts_drain_changes(sim, tags, 4), 0);
    /* h[0] waits on a condition that never holds, with h[1] still able to
     * issue: it parks, and that is a change; going idle from parked too. */
    ck_assert_int_eq(sim_host_wait(h[0], never, NULL), MS_EAGAIN);
    ck_assert_uint_eq(sim_hosts_drain_changes(sim, tags, 4), 1);
    ck_assert_int_eq(tags[0], 10);
    ck_assert_int_eq(sim_host_set_idle(h[0]), MS_OK);
    ck_assert_uint_eq(sim_hosts_drain_changes(sim, tags, 4), 1);
    /* More changes than room: the count says so. */
    for (int i = 0; i < 3; i++)
        ck_assert_int_eq(sim_host_advance(h[i], 7), MS_OK);
    ck_assert_uint_eq(sim_hosts_drain_changes(sim, tags, 2), 3);
    ck_assert_int_eq(sim_host_set_tag(h[0], -1), MS_EINVAL);
    for (int i = 0; i < 3; i++)
        sim_host_destroy(h[i]);
    sim_destroy(sim);
}
END_TEST

START_TEST(watched_host_is_asked_only_when_its_device_changes)
{
    ms_device_spec s = spec_base();
    ms_sim *sim = NULL;
    sim_create(&sim);
    ms_simdev *d0 = NULL, *d1 = NULL;
    sim_dev_create(sim, &s, 0, &d0);
    sim_dev_create(sim, &s, 1, &d1);
    ms_simhost *h0 = NULL, *h1 = NULL;
    sim_host_create(sim, &h0);
    sim_host_create(sim, &h1);
    ck_assert_int_eq(sim_host_watch(h1, d1), MS_OK);
    ck_assert_int_eq(sim_host_watch(h0, d1), MS_EINVAL); /* d1 has its watcher */
    ck_assert_int_eq(sim_host_watch(NULL, d0), MS_EINVAL);
    ck_assert_int_eq(sim_host_watch(h0, d0), MS_OK);
    ms_simstream *s0 = NULL, *s1 = NULL;
    sim_stream_create(d0, 0, &s0);
    sim_stream_create(d1, 0, &s1);
    /* As in hosts_on_one_engine_synchronise_conservatively: host 1 parks on
     * a receive; host 0 runs ten kernels (each an engine step on device 0
     * only), then the send that completes host 1's receive at 517000. */
    launch(s1, p2p(MS_COMM_RECV, 0, 1, 1e6), 0, 1);
    counted_idle c = {.s = s1};
    ck_assert_int_eq(sim_host_wait(h1, counted_stream_idle, &c), MS_EAGAIN);
    int asked_when_parked = c.asked;
    uint64_t moves = sim_host_clock_moves(h0);
    sim_host_advance(h0, 2000);
    ck_assert_uint_eq(sim_host_clock_moves(h0), moves + 1);
    sim_host_advance(h0, 0); /* no move */
    ck_assert_uint_eq(sim_host_clock_moves(h1), moves + 1);
    for (int i = 0; i < 10; i++)
        launch(s0, matmul(5e10), 2000, 2 + i);
    ck_assert_int_eq(sim_host_wait(h0, stream_idle, s0), MS_OK);
    /* Ten kernels ran on device 0; device 1 did not change after host 1
     * parked, so its condition was asked once (the look after parking). */
    ck_assert_int_eq(c.asked, asked_when_parked + 1);
    bool parked = false;
    sim_host_parked(h1, &parked);
    ck_assert(parked);
    int64_t now = 0;
    sim_host_now(h0, &now);
    int64_t before_send = now;
    launch(s0, p2p(MS_COMM_SEND, 1, 1, 1e6), now, 20);
    launch(s0, matmul(5e10), now, 21);
    /* The engine step that completes the receive (the send's 15000 ns after
     * host 0's clock) wakes host 1 at that time; awake, host 1 bounds host
     * 0, whose wait for its last kernel parks. */
    ck_assert_int_eq(sim_host_wait(h0, stream_idle, s0), MS_EAGAIN);
    sim_host_parked(h1, &parked);
    ck_assert(!parked);
    ck_assert_int_gt(c.asked, asked_when_parked + 1);
    sim_host_now(h1, &now);
    ck_assert_int_eq(now, before_send + 15000);
    sim_host_set_idle(h1);
    ck_assert_int_eq(sim_host_wait(h0, stream_idle, s0), MS_OK);
    sim_host_destroy(h0);
    sim_host_destroy(h1);
    sim_dev_destroy(d0);
    sim_dev_destroy(d1);
    ck_assert_int_eq(sim_destroy(sim), MS_OK);
}
END_TEST

START_TEST(hosts_on_one_engine_synchronise_conservatively)
{
    ms_device_spec s = spec_base();
    ms_sim *sim = NULL;
    sim_create(&sim);
    ms_simdev *d0 = NULL, *d1 = NULL;
    sim_dev_create(sim, &s, 0, &d0);
    sim_dev_create(sim, &s, 1, &d1);
    trace t1 = {0};
    sim_dev_set_tracer(d1, on_work, &t1);
    ms_simhost *h0 = NULL, *h1 = NULL;
    sim_host_create(sim, &h0);
    sim_host_create(sim, &h1);
    ms_simstream *s0 = NULL, *s1 = NULL;
    sim_stream_create(d0, 0, &s0);
    sim_stream_create(d1, 0, &s1);
    /* Host 1 receives from device 0 and waits.  Host 0 is still at time 0,
     * so host 1 may not run the engine past 0: MS_EAGAIN, parked. */
    launch(s1, p2p(MS_COMM_RECV, 0, 1, 1e6), 0, 1);
    ck_assert_int_eq(sim_host_wait(h1, stream_idle, s1), MS_EAGAIN);
    bool parked = false;
    ck_assert_int_eq(sim_host_parked(h1, &parked), MS_OK);
    ck_assert(parked);
    sim_host_parked(h0, &parked);
    ck_assert(!parked);
    /* Host 0 computes 50 us and sends (15000 ns) at host time 2000, then
     * waits for its stream: kernel [2000, 52000], send [52000, 67000].  The
     * parked host 1 does not bound host 0. */
    sim_host_advance(h0, 2000);
    launch(s0, matmul(5e10), 2000, 2);
    launch(s0, p2p(MS_COMM_SEND, 1, 1, 1e6), 2000, 3);
    ck_assert_int_eq(sim_host_wait(h0, stream_idle, s0), MS_OK);
    int64_t now = 0;
    sim_host_now(h0, &now);
    ck_assert_int_eq(now, 67000);
    /* Host 1's condition became true at 67000 while host 0 ran the engine:
     * its retry succeeds with its clock at 67000. */
    ck_assert_int_eq(sim_host_wait(h1, stream_idle, s1), MS_OK);
    sim_host_now(h1, &now);
    ck_assert_int_eq(now, 67000);
    sim_host_parked(h1, &parked);
    ck_assert(!parked);
    ck_assert_int_eq(sim_host_parked(NULL, &parked), MS_EINVAL);
    assert_span(&t1, 1, 0, 67000);
    /* An active host bounds the other: host 1 at 67000 issues a 100 us
     * kernel at 68000 and waits; host 0 (at 67000) bounds the engine, so
     * host 1 gets MS_EAGAIN; once host 0 goes idle, the wait completes. */
    sim_host_advance(h1, 1000);
    launch(s1, matmul(1e11), 68000, 4);
    ck_assert_int_eq(sim_host_wait(h1, stream_idle, s1), MS_EAGAIN);
    sim_host_set_idle(h0);
    ck_assert_int_eq(sim_host_wait(h1, stream_idle, s1), MS_OK);
    sim_host_now(h1, &now);
    ck_assert_int_eq(now, 168000);
    /* Host 0 resumes no earlier than the engine clock it finds. */
    sim_host_catch_up(h0);
    sim_host_now(h0, &now);
    ck_assert_int_eq(now, 168000);
    sim_host_destroy(h0);
    sim_host_destroy(h1);
    sim_dev_destroy(d0);
    sim_dev_destroy(d1);
    ck_assert_int_eq(sim_destroy(sim), MS_OK);
}
END_TEST

/* Twenty hosts on one engine, enough for the heap of active clocks
 * (host.c, HEAP_HOSTS), all created at time 0, and one device with a
 * 50 us kernel issued at 0 ([0, 50000]). */
enum { MANY = 20 };
typedef struct many_hosts {
    ms_sim *sim;
    ms_simdev *d0;
    ms_simstream *s0;
    ms_simhost *h[MANY];
} many_hosts;

static void many_open(many_hosts *m)
{
    ms_device_spec s = spec_base();
    *m = (many_hosts){0};
    ck_assert_int_eq(sim_create(&m->sim), MS_OK);
    ck_assert_int_eq(sim_dev_create(m->sim, &s, 0, &m->d0), MS_OK);
    ck_assert_int_eq(sim_stream_create(m->d0, 0, &m->s0), MS_OK);
    for (int i = 0; i < MANY; i++)
        ck_assert_int_eq(sim_host_create(m->sim, &m->h[i]), MS_OK);
    for (int i = 0; i < MANY; i++)
        ck_assert_int_eq(sim_host_advance(m->h[i], 1000 * i), MS_OK);
    launch(m->s0, matmul(5e10), 0, 1);
}

static void many_close(many_hosts *m)
{
    for (int i = 0; i < MANY; i++)
        sim_host_destroy(m->h[i]);
    sim_dev_destroy(m->d0);
    ck_assert_int_eq(sim_destroy(m->sim), MS_OK);
}

/* Host i at 1000 i; host 0 waits for the kernel and may run the engine
 * only up to the smallest clock of the other active hosts, whichever moved,
 * went idle or came back.  Host 0 itself is the heap's root (clock 0) while
 * it asks, so the bound comes from the root's children. */
START_TEST(many_hosts_bound_the_engine_by_the_smallest_other_clock)
{
    many_hosts m;
    many_open(&m);
    ms_simhost **h = m.h;
    /* Host 1, at 1000, bounds host 0. */
    ck_assert_int_eq(sim_host_wait(h[0], stream_idle, m.s0), MS_EAGAIN);
    /* Hosts 1 and 2 move past the kernel's end; host 3, at 3000, bounds
     * now (a clock that grew must leave the hosts below it in front). */
    sim_host_advance(h[1], 59000);
    ck_assert_int_eq(sim_host_wait(h[0], stream_idle, m.s0), MS_EAGAIN);
    sim_host_advance(h[2], 58000);
    ck_assert_int_eq(sim_host_wait(h[0], stream_idle, m.s0), MS_EAGAIN);
    /* Hosts 3..18 go idle: host 19, at 19000, bounds. */
    for (int i = 3; i < MANY - 1; i++)
        sim_host_set_idle(h[i]);
    ck_assert_int_eq(sim_host_wait(h[0], stream_idle, m.s0), MS_EAGAIN);
    /* Host 10 comes back (at the engine's clock, still short of the
     * kernel's end) and bounds again once host 19 moves on. */
    sim_host_catch_up(h[10]);
    sim_host_advance(h[19], 36000); /* 55000 */
    ck_assert_int_eq(sim_host_wait(h[0], stream_idle, m.s0), MS_EAGAIN);
    int64_t now = 0;
    sim_host_now(h[10], &now);
    ck_assert_int_lt(now, 50000);
    /* Host 10 moves past it too: the smallest other clock is 55000. */
    sim_host_advance(h[10], 60000 - now);
    ck_assert_int_eq(sim_host_wait(h[0], stream_idle, m.s0), MS_OK);
    sim_host_now(h[0], &now);
    ck_assert_int_eq(now, 50000);
    many_close(&m);
}
END_TEST

/* The heap after clocks move with no host parking in between (parking
 * rebuilds part of it): host 0 moves to 100 us, hosts 1 and 2 past the
 * kernel's end, host 3 stays at 3000.  A catch-up of host 0 may run the
 * engine to 3000 only, so the kernel still runs; once every other host
 * moves on, it is done.  Hosts 1 and 2 are the root's children here: with
 * their moves not sifted, the bound would read 60000. */
START_TEST(moved_clocks_keep_the_bound)
{
    many_hosts m;
    many_open(&m);
    sim_host_advance(m.h[0], 100000);
    sim_host_advance(m.h[1], 59000);
    sim_host_advance(m.h[2], 58000);
    ck_assert_int_eq(sim_host_catch_up(m.h[0]), MS_OK);
    ck_assert(!stream_idle(m.s0));
    for (int i = 3; i < MANY; i++)
        sim_host_advance(m.h[i], 60000 - 1000 * i);
    ck_assert_int_eq(sim_host_catch_up(m.h[0]), MS_OK);
    ck_assert(stream_idle(m.s0));
    many_close(&m);
}
END_TEST

static Suite *sim_suite(void)
{
    Suite *s = suite_create("sim");
    TCase *tc = tcase_create("engine");
    tcase_add_test(tc, engine_orders_by_time_then_schedule_order);
    tcase_add_test(tc, engine_same_time_event_from_callback_runs_last);
    tcase_add_test(tc, engine_run_until_cancel_and_errors);
    tcase_add_test(tc, engine_heap_stays_ordered_under_load);
    suite_add_tcase(s, tc);
    tc = tcase_create("cost_model");
    tcase_add_test(tc, cost_matmul_at_known_efficiency);
    tcase_add_test(tc, cost_gemm_overlapping_a_collective);
    tcase_add_test(tc, cost_efficiency_curves_interpolate_and_clamp);
    tcase_add_test(tc, cost_elementwise_is_hbm_bound);
    tcase_add_test(tc, cost_collectives_alpha_beta);
    tcase_add_test(tc, cost_gemm_by_shape);
    tcase_add_test(tc, cost_collective_efficiencies);
    tcase_add_test(tc, cost_copies);
    tcase_add_test(tc, cost_model_rejects_bad_spec);
    suite_add_tcase(s, tc);
    tc = tcase_create("device");
    tcase_add_test(tc, stream_is_fifo);
    tcase_add_test(tc, cross_stream_wait_on_event);
    tcase_add_test(tc, wait_keeps_the_capture_it_saw);
    tcase_add_test(tc, compute_engine_picks_priority_then_readiness);
    tcase_add_test(tc, same_instant_readiness_respects_priority);
    tcase_add_test(tc, concurrent_d2h_copies_share_bandwidth);
    tcase_add_test(tc, collectives_share_link_and_slow_compute);
    tcase_add_test(tc, host_copies_slow_beside_compute);
    tcase_add_test(tc, opposite_directions_are_independent);
    tcase_add_test(tc, hbm_capacity_accounting);
    tcase_add_test(tc, p2p_recv_waits_for_matching_send);
    tcase_add_test(tc, device_destroyed_with_pending_work_leaves_engine_safe);
    tcase_add_test(tc, destroyed_stream_drains_first);
    suite_add_tcase(s, tc);
    tc = tcase_create("host");
    tcase_add_test(tc, host_waits_run_the_engine);
    tcase_add_test(tc, hosts_on_one_engine_synchronise_conservatively);
    tcase_add_test(tc, many_hosts_bound_the_engine_by_the_smallest_other_clock);
    tcase_add_test(tc, moved_clocks_keep_the_bound);
    tcase_add_test(tc, watched_host_is_asked_only_when_its_device_changes);
    tcase_add_test(tc, changed_hosts_are_listed_once_until_drained);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(sim_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
