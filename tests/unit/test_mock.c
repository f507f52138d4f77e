/* Unit tests of the mock NPU (backend_mock/): host clock versus device time,
 * launch queues, memory, determinism, deadlocks and several devices on one
 * engine.  Every expected figure is derived by hand in a comment. */
#include <check.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "backend_mock/mock.h"
#include "lib/base/addr_map.h"
#include "lib/base/obj_fifo.h"
#include "lib/base/obj_pool.h"

#include "test_device_spec.h"

/* ---- helpers ----------------------------------------------------------- */

/* On spec_base() (test_device_spec.h) a 1e11-FLOP matmul takes 100 us and a
 * 1e6 B intra-node send 10 + 5 = 15 us. */
static ms_kernel p2p(ms_comm_kind kind, int peer, int tag, double bytes)
{
    return (ms_kernel){.name = kind == MS_COMM_SEND ? "send" : "recv", .cls = MS_KC_COMM,
                       .dtype = MS_DTYPE_BF16, .comm = kind, .group_size = 2,
                       .link = MS_LINK_INTRA_NODE, .comm_bytes = bytes, .peer = peer,
                       .tag = tag};
}

enum { TRACE_MAX = 128 };
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

static void assert_span(const trace *t, uint64_t tag, int64_t start, int64_t end)
{
    const ms_work_record *w = by_tag(t, tag);
    ck_assert_msg(w->start_ns == start && w->end_ns == end,
                  "tag %llu ran [%lld, %lld], expected [%lld, %lld]", (unsigned long long)tag,
                  (long long)w->start_ns, (long long)w->end_ns, (long long)start, (long long)end);
}

typedef struct rig {
    ms_sim *sim;
    ms_backend *be;
    trace tr;
} rig;

static void rig_open(rig *r, const ms_device_spec *s)
{
    memset(r, 0, sizeof *r);
    ck_assert_int_eq(sim_create(&r->sim), MS_OK);
    ck_assert_int_eq(mock_create(r->sim, s, 0, 42, &r->be), MS_OK);
    ck_assert_int_eq(r->be->ops->set_tracer(r->be->inst, on_work, &r->tr), MS_OK);
}

static void rig_close(rig *r)
{
    ck_assert_int_eq(ms_backend_close(r->be), MS_OK);
    ck_assert_int_eq(sim_destroy(r->sim), MS_OK);
}

#define OPS(r) ((r)->be->ops)
#define INST(r) ((r)->be->inst)

static ms_stream *stream(rig *r, int prio)
{
    ms_stream *s = NULL;
    ck_assert_int_eq(OPS(r)->stream_create(INST(r), prio, &s), MS_OK);
    return s;
}

static ms_event *event(rig *r)
{
    ms_event *e = NULL;
    ck_assert_int_eq(OPS(r)->event_create(INST(r), &e), MS_OK);
    return e;
}

static void launch(rig *r, ms_kernel k, ms_stream *s, uint64_t tag)
{
    ck_assert_int_eq(OPS(r)->launch(INST(r), &k, s, tag), MS_OK);
}

static int64_t host_now(rig *r)
{
    int64_t t = -1;
    ck_assert_int_eq(OPS(r)->now(INST(r), &t), MS_OK);
    return t;
}

static bool query(rig *r, ms_event *e)
{
    bool done = false;
    ck_assert_int_eq(OPS(r)->event_query(INST(r), e, &done), MS_OK);
    return done;
}

/* ---- host clock versus device time ------------------------------------ */

START_TEST(host_runs_ahead_of_device)
{
    ms_device_spec s = spec_base();
    rig r;
    rig_open(&r, &s);
    ms_stream *a = stream(&r, 0), *b = stream(&r, 0);
    ms_event *e0 = event(&r), *e1 = event(&r);
    /* record e0 (host 0 -> 1000; device sees it at 1000); launch a 100 us
     * kernel (host -> 2000; it runs [2000, 102000]); record e1 (host 3000;
     * complete when the kernel is, at 102000). */
    ck_assert_int_eq(OPS(&r)->event_record(INST(&r), e0, a), MS_OK);
    launch(&r, matmul(1e11), a, 1);
    ck_assert_int_eq(OPS(&r)->event_record(INST(&r), e1, a), MS_OK);
    ck_assert_int_eq(host_now(&r), 3000);
    /* The host is at 3000: e0 (1000) is complete, e1 (102000) is not. */
    ck_assert(query(&r, e0));
    ck_assert(!query(&r, e1));
    int64_t ns = 0;
    ck_assert_int_eq(OPS(&r)->event_elapsed_ns(INST(&r), e0, e1, &ns), MS_EAGAIN);
    ck_assert_int_eq(r.tr.n, 0);
    /* The host clock passes the kernel end without blocking: 99 more async
     * calls (records on stream b, 1000 ns each) take it to 102000. */
    ms_event *eb = event(&r);
    for (int i = 0; i < 98; i++)
        ck_assert_int_eq(OPS(&r)->event_record(INST(&r), eb, b), MS_OK);
    ck_assert_int_eq(host_now(&r), 101000);
    ck_assert(!query(&r, e1));
    ck_assert_int_eq(OPS(&r)->event_record(INST(&r), eb, b), MS_OK);
    ck_assert_int_eq(host_now(&r), 102000);
    ck_assert(query(&r, e1));
    /* elapsed: 102000 - 1000. */
    ck_assert_int_eq(OPS(&r)->event_elapsed_ns(INST(&r), e0, e1, &ns), MS_OK);
    ck_assert_int_eq(ns, 101000);
    assert_span(&r.tr, 1, 2000, 102000);
    rig_close(&r);
}
END_TEST

/* The mock remembers kernel prices (the same kernel is launched once per
 * layer and micro-batch): every launch, first or repeated, of kernels that
 * differ in any priced field takes exactly what the cost model says. */
START_TEST(repeated_kernels_take_the_cost_model_time)
{
    ms_device_spec s = spec_base();
    rig r;
    rig_open(&r, &s);
    ms_cost_model *cm = NULL;
    ck_assert_int_eq(sim_cost_model_create(&s, &cm), MS_OK);
    ms_stream *a = stream(&r, 0);
    ms_kernel k[4] = {matmul(1e11), matmul(1e11), matmul(3e10), matmul(1e11)};
    k[1].dtype = MS_DTYPE_FP32; /* same FLOPs, other dtype: another price */
    k[3].bytes = 4e9;           /* memory-bound now */
    int64_t want[4];
    for (int i = 0; i < 4; i++)
        ck_assert_int_eq(sim_cost_kernel_ns(cm, &k[i], &want[i]), MS_OK);
    ck_assert_int_ne(want[0], want[1]);
    ck_assert_int_ne(want[0], want[3]);
    for (int rep = 0; rep < 3; rep++)
        for (int i = 0; i < 4; i++)
            launch(&r, k[i], a, (uint64_t)(rep * 4 + i + 1));
    ck_assert_int_eq(OPS(&r)->device_synchronize(INST(&r)), MS_OK);
    for (int j = 0; j < 12; j++) {
        const ms_work_record *w = by_tag(&r.tr, (uint64_t)j + 1);
        ck_assert_int_eq(w->end_ns - w->start_ns, want[j % 4]);
    }
    sim_cost_model_destroy(cm);
    rig_close(&r);
}
END_TEST

START_TEST(synchronize_moves_host_to_completion)
{
    ms_device_spec s = spec_base();
    rig r;
    rig_open(&r, &s);
    ms_stream *a = stream(&r, 0);
    ms_event *e = event(&r), *fresh = event(&r);
    /* launch at host 0: runs [1000, 101000]; record at host 2000. */
    launch(&r, matmul(1e11), a, 1);
    ck_assert_int_eq(OPS(&r)->event_record(INST(&r), e, a), MS_OK);
    ck_assert(!query(&r, e));
    ck_assert_int_eq(OPS(&r)->event_synchronize(INST(&r), e), MS_OK);
    ck_assert_int_eq(host_now(&r), 101000);
    ck_assert(query(&r, e));
    /* A never-recorded event is complete; synchronizing on it is immediate;
     * elapsed with it is invalid. */
    ck_assert(query(&r, fresh));
    ck_assert_int_eq(OPS(&r)->event_synchronize(INST(&r), fresh), MS_OK);
    int64_t ns = 0;
    ck_assert_int_eq(OPS(&r)->event_elapsed_ns(INST(&r), fresh, e, &ns), MS_EINVAL);
    /* Another kernel at host 101000: [102000, 202000]; stream sync -> 202000;
     * a second sync with nothing pending costs nothing. */
    launch(&r, matmul(1e11), a, 2);
    ck_assert_int_eq(OPS(&r)->stream_synchronize(INST(&r), a), MS_OK);
    ck_assert_int_eq(host_now(&r), 202000);
    ck_assert_int_eq(OPS(&r)->device_synchronize(INST(&r)), MS_OK);
    ck_assert_int_eq(host_now(&r), 202000);
    assert_span(&r.tr, 2, 102000, 202000);
    rig_close(&r);
}
END_TEST

START_TEST(full_launch_queue_blocks_the_host)
{
    ms_device_spec s = spec_base();
    s.launch_queue_depth = 2;
    rig r;
    rig_open(&r, &s);
    ms_stream *a = stream(&r, 0);
    ms_event *e = event(&r);
    /* L1: host 0 -> 1000, K1 runs [1000, 101000].
     * L2: device caught up to 1000, K1 started: 0 waiting -> host 2000.
     * L3: K2 (issued 2000) waits for the engine: 1 waiting -> host 3000.
     * An event record takes no slot: host 4000.
     * L4: K2 and K3 wait: the queue (depth 2) is full.  The host blocks until
     * K2 starts at 101000, then spends its 1000: host 102000; K4 is issued
     * at 102000 and runs after K3: K2 [101000, 201000], K3 [201000, 301000],
     * K4 [301000, 401000]. */
    launch(&r, matmul(1e11), a, 1);
    ck_assert_int_eq(host_now(&r), 1000);
    launch(&r, matmul(1e11), a, 2);
    ck_assert_int_eq(host_now(&r), 2000);
    launch(&r, matmul(1e11), a, 3);
    ck_assert_int_eq(host_now(&r), 3000);
    ck_assert_int_eq(OPS(&r)->event_record(INST(&r), e, a), MS_OK);
    ck_assert_int_eq(host_now(&r), 4000);
    launch(&r, matmul(1e11), a, 4);
    ck_assert_int_eq(host_now(&r), 102000);
    /* A kernel that cannot be priced fails before blocking (no fp8 peak). */
    ms_kernel bad = matmul(1e11);
    bad.dtype = MS_DTYPE_FP8;
    ck_assert_int_eq(OPS(&r)->launch(INST(&r), &bad, a, 9), MS_EUNSUPPORTED);
    ck_assert_int_eq(host_now(&r), 102000);
    ck_assert_int_eq(OPS(&r)->device_synchronize(INST(&r)), MS_OK);
    ck_assert_int_eq(host_now(&r), 401000);
    assert_span(&r.tr, 1, 1000, 101000);
    assert_span(&r.tr, 2, 101000, 201000);
    assert_span(&r.tr, 3, 201000, 301000);
    assert_span(&r.tr, 4, 301000, 401000);
    /* The same holds for copies: D2H of 1e6 B = 102000 ns each. */
    ck_assert_int_eq(OPS(&r)->memcpy_async(INST(&r), 0, 0, 1000000, MS_COPY_D2H, a, 5), MS_OK);
    ck_assert_int_eq(OPS(&r)->memcpy_async(INST(&r), 0, 0, 1000000, MS_COPY_D2H, a, 6), MS_OK);
    ck_assert_int_eq(OPS(&r)->memcpy_async(INST(&r), 0, 0, 1000000, MS_COPY_D2H, a, 7), MS_OK);
    /* C5 issued at 402000 starts then; C6 (403000) and C7 (404000) wait
     * behind it; the 4th copy blocks until C6 starts when C5 ends at
     * 402000 + 102000 = 504000: host 505000. */
    ck_assert_int_eq(host_now(&r), 404000);
    ck_assert_int_eq(OPS(&r)->memcpy_async(INST(&r), 0, 0, 1000000, MS_COPY_D2H, a, 8), MS_OK);
    ck_assert_int_eq(host_now(&r), 505000);
    rig_close(&r);
}
END_TEST

START_TEST(stream_and_tracer_bookkeeping)
{
    ms_device_spec s = spec_base();
    s.launch_overhead_ns = 0;
    rig r;
    rig_open(&r, &s);
    ms_stream *a = stream(&r, 0), *b = stream(&r, -1), *c = stream(&r, 0);
    uint64_t id = 99;
    OPS(&r)->stream_id(INST(&r), a, &id);
    ck_assert_uint_eq(id, 0);
    OPS(&r)->stream_id(INST(&r), b, &id);
    ck_assert_uint_eq(id, 1);
    OPS(&r)->stream_id(INST(&r), c, &id);
    ck_assert_uint_eq(id, 2);
    ms_kernel k = matmul(1e11);
    k.name = "layers.0.mlp.fc1";
    k.bytes = 4096;
    launch(&r, k, b, 77);
    ck_assert_int_eq(OPS(&r)->memcpy_async(INST(&r), 0, 0, 1000000, MS_COPY_H2D, c, 78), MS_OK);
    /* As cudaStreamDestroy: returns at once, the work still runs. */
    ck_assert_int_eq(OPS(&r)->stream_destroy(INST(&r), b), MS_OK);
    ck_assert_int_eq(OPS(&r)->device_synchronize(INST(&r)), MS_OK);
    /* Completion order: the H2D ends at 102000, the kernel at 100000. */
    ck_assert_int_eq(r.tr.n, 2);
    ck_assert_uint_eq(r.tr.r[0].tag, 77);
    ck_assert_str_eq(r.tr.r[0].name, "layers.0.mlp.fc1");
    ck_assert_uint_eq(r.tr.r[0].stream_id, 1);
    ck_assert(!r.tr.r[0].is_copy);
    ck_assert_uint_eq(r.tr.r[0].bytes, 4096);
    ck_assert_int_eq(r.tr.r[0].end_ns, 100000);
    ck_assert_uint_eq(r.tr.r[1].tag, 78);
    ck_assert(r.tr.r[1].is_copy && r.tr.r[1].copy_kind == MS_COPY_H2D);
    ck_assert_str_eq(r.tr.r[1].name, "memcpy");
    ck_assert_uint_eq(r.tr.r[1].stream_id, 2);
    ck_assert_int_eq(r.tr.r[1].end_ns, 102000);
    /* Another device's stream, or a bad copy kind, is refused. */
    ms_backend *other = NULL;
    ck_assert_int_eq(mock_create(r.sim, &s, 1, 0, &other), MS_OK);
    ck_assert_int_eq(other->ops->launch(other->inst, &k, a, 1), MS_EINVAL);
    ck_assert_int_eq(OPS(&r)->memcpy_async(INST(&r), 0, 0, 1, (ms_copy_kind)7, a, 1), MS_EINVAL);
    ms_stream *o = NULL;
    ck_assert_int_eq(other->ops->stream_create(other->inst, 0, &o), MS_OK);
    other->ops->stream_id(other->inst, o, &id);
    ck_assert_uint_eq(id, 0); /* ids count per device */
    /* The same device index twice on one engine is refused. */
    ms_backend *dup = NULL;
    ck_assert_int_eq(mock_create(r.sim, &s, 1, 0, &dup), MS_EINVAL);
    ms_simdev *sd = NULL;
    ck_assert_int_eq(mock_simdev(other, &sd), MS_OK);
    ck_assert_ptr_nonnull(sd);
    ms_backend_close(other);
    rig_close(&r);
}
END_TEST

/* ---- memory ------------------------------------------------------------ */

#define MIB (1ULL << 20)
#define KIB (1ULL << 10)
#define DEV0 0x7f0000000000ULL

static void mem_info(rig *r, uint64_t *free_b, uint64_t *total)
{
    ck_assert_int_eq(OPS(r)->mem_get_info(INST(r), free_b, total), MS_OK);
}

START_TEST(device_memory_oom_leaves_state_unchanged)
{
    ms_device_spec s = spec_base();
    s.hbm_bytes = 1 * MIB;
    rig r;
    rig_open(&r, &s);
    uint64_t a = 0, b = 0, c = 0, fr = 0, tot = 0;
    /* Two 512 KiB segments fill 1 MiB; addresses are first fit from the
     * device window's base. */
    ck_assert_int_eq(OPS(&r)->malloc_device(INST(&r), 512 * KIB, &a), MS_OK);
    ck_assert_int_eq(OPS(&r)->malloc_device(INST(&r), 512 * KIB, &b), MS_OK);
    ck_assert_uint_eq(a, DEV0);
    ck_assert_uint_eq(b, DEV0 + 512 * KIB);
    mem_info(&r, &fr, &tot);
    ck_assert_uint_eq(fr, 0);
    ck_assert_uint_eq(tot, 1 * MIB);
    /* At capacity: MS_ENOMEM, nothing changed. */
    c = 12345;
    ck_assert_int_eq(OPS(&r)->malloc_device(INST(&r), 1, &c), MS_ENOMEM);
    ck_assert_uint_eq(c, 12345);
    mem_info(&r, &fr, &tot);
    ck_assert_uint_eq(fr, 0);
    /* Free the first: 1000 B rounds up to 1024 and reuses the lowest hole. */
    ck_assert_int_eq(OPS(&r)->free_device(INST(&r), a), MS_OK);
    ck_assert_int_eq(OPS(&r)->malloc_device(INST(&r), 1000, &c), MS_OK);
    ck_assert_uint_eq(c, DEV0);
    mem_info(&r, &fr, &tot);
    ck_assert_uint_eq(fr, 512 * KIB - 1024);
    /* 512 KiB no longer fits (512 KiB - 1 KiB free). */
    ck_assert_int_eq(OPS(&r)->malloc_device(INST(&r), 512 * KIB, &a), MS_ENOMEM);
    /* Unknown and double frees are invalid. */
    ck_assert_int_eq(OPS(&r)->free_device(INST(&r), DEV0 + 7), MS_EINVAL);
    ck_assert_int_eq(OPS(&r)->free_device(INST(&r), b), MS_OK);
    ck_assert_int_eq(OPS(&r)->free_device(INST(&r), b), MS_EINVAL);
    ck_assert_int_eq(OPS(&r)->malloc_device(INST(&r), 0, &a), MS_EINVAL);
    rig_close(&r);
}
END_TEST

START_TEST(mapped_pages_count_against_capacity)
{
    ms_device_spec s = spec_base();
    s.hbm_bytes = 8 * MIB;
    rig r;
    rig_open(&r, &s);
    uint64_t seg = 0, va = 0, fr = 0, tot = 0;
    ck_assert_int_eq(OPS(&r)->malloc_device(INST(&r), 2 * MIB, &seg), MS_OK);
    /* Reserving 16 MiB of address space (more than the device has) costs
     * no capacity: 6 MiB stay free. */
    ck_assert_int_eq(OPS(&r)->va_reserve(INST(&r), 16 * MIB, &va), MS_OK);
    ck_assert_uint_eq(va, DEV0 + 2 * MIB);
    mem_info(&r, &fr, &tot);
    ck_assert_uint_eq(fr, 6 * MIB);
    /* Map two 2 MiB pages: 2 MiB left. */
    ck_assert_int_eq(OPS(&r)->mem_map(INST(&r), va, 2 * MIB), MS_OK);
    ck_assert_int_eq(OPS(&r)->mem_map(INST(&r), va + 2 * MIB, 2 * MIB), MS_OK);
    mem_info(&r, &fr, &tot);
    ck_assert_uint_eq(fr, 2 * MIB);
    /* Double map, a range leaving the reservation, an unreserved range. */
    ck_assert_int_eq(OPS(&r)->mem_map(INST(&r), va + 1 * MIB, 2 * MIB), MS_EINVAL);
    ck_assert_int_eq(OPS(&r)->mem_map(INST(&r), va + 15 * MIB, 2 * MIB), MS_EINVAL);
    ck_assert_int_eq(OPS(&r)->mem_map(INST(&r), seg, 2 * MIB), MS_EINVAL);
    /* Over capacity: 4 MiB more does not fit in 2 MiB; nothing changes. */
    ck_assert_int_eq(OPS(&r)->mem_map(INST(&r), va + 4 * MIB, 4 * MIB), MS_ENOMEM);
    mem_info(&r, &fr, &tot);
    ck_assert_uint_eq(fr, 2 * MIB);
    ck_assert_int_eq(OPS(&r)->mem_map(INST(&r), va + 4 * MIB, 2 * MIB), MS_OK);
    /* Unmap 1 MiB out of the middle of the mapped 6 MiB: 1 MiB free. */
    ck_assert_int_eq(OPS(&r)->mem_unmap(INST(&r), va + 3 * MIB, 1 * MIB), MS_OK);
    mem_info(&r, &fr, &tot);
    ck_assert_uint_eq(fr, 1 * MIB);
    /* Unmapping it again, or a range straddling the hole, is invalid. */
    ck_assert_int_eq(OPS(&r)->mem_unmap(INST(&r), va + 3 * MIB, 1 * MIB), MS_EINVAL);
    ck_assert_int_eq(OPS(&r)->mem_unmap(INST(&r), va + 2 * MIB, 2 * MIB), MS_EINVAL);
    ck_assert_int_eq(OPS(&r)->mem_unmap(INST(&r), va + 8 * MIB, 1 * MIB), MS_EINVAL);
    /* A reservation with mapped pages cannot be released; it is not a
     * segment either. */
    ck_assert_int_eq(OPS(&r)->va_release(INST(&r), va), MS_EINVAL);
    ck_assert_int_eq(OPS(&r)->free_device(INST(&r), va), MS_EINVAL);
    ck_assert_int_eq(OPS(&r)->va_release(INST(&r), seg), MS_EINVAL);
    ck_assert_int_eq(OPS(&r)->mem_unmap(INST(&r), va, 3 * MIB), MS_OK);
    ck_assert_int_eq(OPS(&r)->mem_unmap(INST(&r), va + 4 * MIB, 2 * MIB), MS_OK);
    mem_info(&r, &fr, &tot);
    ck_assert_uint_eq(fr, 6 * MIB);
    ck_assert_int_eq(OPS(&r)->va_release(INST(&r), va), MS_OK);
    ck_assert_int_eq(OPS(&r)->mem_map(INST(&r), va, 2 * MIB), MS_EINVAL);
    /* The address space is reused: a new 4 MiB segment lands at the old
     * reservation's start. */
    uint64_t seg2 = 0;
    ck_assert_int_eq(OPS(&r)->malloc_device(INST(&r), 4 * MIB, &seg2), MS_OK);
    ck_assert_uint_eq(seg2, va);
    rig_close(&r);
}
END_TEST

START_TEST(pinned_host_memory_is_bounded)
{
    ms_device_spec s = spec_base();
    s.host_pinned_bytes = 1 * MIB;
    rig r;
    rig_open(&r, &s);
    uint64_t h = 0, h2 = 0, fr = 0, tot = 0;
    ck_assert_int_eq(OPS(&r)->malloc_host(INST(&r), 1 * MIB, &h), MS_OK);
    ck_assert_uint_eq(h, DEV0 + (1ULL << 43)); /* the window's upper half */
    ck_assert_int_eq(OPS(&r)->malloc_host(INST(&r), 1, &h2), MS_ENOMEM);
    /* Pinned host memory is not device memory. */
    mem_info(&r, &fr, &tot);
    ck_assert_uint_eq(fr, tot);
    ck_assert_int_eq(OPS(&r)->free_host(INST(&r), h + 512), MS_EINVAL);
    ck_assert_int_eq(OPS(&r)->free_host(INST(&r), h), MS_OK);
    ck_assert_int_eq(OPS(&r)->malloc_host(INST(&r), 1 * MIB, &h2), MS_OK);
    ck_assert_uint_eq(h2, h);
    rig_close(&r);
}
END_TEST

/* ---- determinism ------------------------------------------------------- */

/* A small program: compute and comm streams, swap copies on their own
 * streams ordered by events, interleaved allocation. */
static void run_program(trace *out, uint64_t *addrs)
{
    ms_device_spec s = spec_base();
    s.launch_queue_depth = 4;
    rig r;
    rig_open(&r, &s);
    ms_stream *comp = stream(&r, 0), *comm = stream(&r, -1), *out_s = stream(&r, 0),
              *in_s = stream(&r, 0);
    ms_event *ev[8];
    for (int i = 0; i < 8; i++)
        ev[i] = event(&r);
    ms_kernel ar = {.name = "allreduce", .cls = MS_KC_COMM, .dtype = MS_DTYPE_BF16,
                    .comm = MS_COMM_ALLREDUCE, .group_size = 8, .link = MS_LINK_INTRA_NODE,
                    .comm_bytes = 1e8};
    for (int i = 0; i < 8; i++) {
        ck_assert_int_eq(OPS(&r)->malloc_device(INST(&r), (uint64_t)(i + 1) * MIB, &addrs[i]),
                         MS_OK);
        launch(&r, matmul(1e10 * (i % 3 + 1)), comp, (uint64_t)i * 10);
        OPS(&r)->event_record(INST(&r), ev[i], comp);
        OPS(&r)->stream_wait_event(INST(&r), out_s, ev[i]);
        OPS(&r)->memcpy_async(INST(&r), 0, addrs[i], (uint64_t)(i + 1) * 100000, MS_COPY_D2H,
                              out_s, (uint64_t)i * 10 + 1);
        OPS(&r)->memcpy_async(INST(&r), addrs[i], 0, 300000, MS_COPY_H2D, in_s,
                              (uint64_t)i * 10 + 2);
        if (i % 2 == 1) {
            OPS(&r)->stream_wait_event(INST(&r), comm, ev[i]);
            launch(&r, ar, comm, (uint64_t)i * 10 + 3);
        }
        if (i >= 2)
            OPS(&r)->free_device(INST(&r), addrs[i - 2]);
    }
    ck_assert_int_eq(OPS(&r)->device_synchronize(INST(&r)), MS_OK);
    *out = r.tr;
    rig_close(&r);
}

START_TEST(same_program_twice_gives_identical_records)
{
    static trace t1, t2;
    uint64_t a1[8], a2[8];
    run_program(&t1, a1);
    run_program(&t2, a2);
    /* 8 kernels + 16 copies + 4 allreduces. */
    ck_assert_int_eq(t1.n, 28);
    ck_assert_int_eq(t2.n, t1.n);
    for (int i = 0; i < t1.n; i++) {
        const ms_work_record *x = &t1.r[i], *y = &t2.r[i];
        ck_assert_uint_eq(x->tag, y->tag);
        ck_assert_int_eq(x->start_ns, y->start_ns);
        ck_assert_int_eq(x->end_ns, y->end_ns);
        ck_assert_uint_eq(x->stream_id, y->stream_id);
        ck_assert_uint_eq(x->bytes, y->bytes);
        ck_assert_str_eq(x->name, y->name);
        ck_assert(x->is_copy == y->is_copy);
        if (i > 0)
            ck_assert_int_ge(x->end_ns, t1.r[i - 1].end_ns); /* completion order */
    }
    for (int i = 0; i < 8; i++)
        ck_assert_uint_eq(a1[i], a2[i]);
}
END_TEST

/* ---- deadlock ---------------------------------------------------------- */

START_TEST(waiting_for_work_that_cannot_run_is_a_deadlock)
{
    ms_device_spec s = spec_base();
    s.launch_queue_depth = 1;
    rig r;
    rig_open(&r, &s);
    ms_stream *a = stream(&r, 0);
    /* A receive from device 0 (this device, attached) that is never sent:
     * the stream can never drain. */
    launch(&r, p2p(MS_COMM_RECV, 0, 5, 1e6), a, 1);
    launch(&r, matmul(1e11), a, 2); /* queued behind it, not started */
    int64_t before = host_now(&r);
    ck_assert_int_eq(before, 2000);
    ck_assert_int_eq(OPS(&r)->stream_synchronize(INST(&r), a), MS_EDEADLOCK);
    ck_assert_int_eq(OPS(&r)->device_synchronize(INST(&r)), MS_EDEADLOCK);
    /* The queue (depth 1) is full and its head can never start. */
    ms_kernel k = matmul(1e11);
    ck_assert_int_eq(OPS(&r)->launch(INST(&r), &k, a, 3), MS_EDEADLOCK);
    ck_assert_int_eq(host_now(&r), before);
    /* The matching send unblocks it: send (15000 ns on the comm link of
     * another stream) issued at 3000 -> [3000, 18000]; the receive ends at
     * 18000 and the matmul runs [18000, 118000]. */
    ms_stream *b = stream(&r, 0);
    launch(&r, p2p(MS_COMM_SEND, 0, 5, 1e6), b, 4);
    ck_assert_int_eq(OPS(&r)->device_synchronize(INST(&r)), MS_OK);
    ck_assert_int_eq(host_now(&r), 118000);
    assert_span(&r.tr, 4, 3000, 18000);
    assert_span(&r.tr, 1, 1000, 18000);
    assert_span(&r.tr, 2, 18000, 118000);
    rig_close(&r);
}
END_TEST

/* ---- several devices on one engine ----------------------------------- */

START_TEST(pipeline_stages_share_an_engine)
{
    ms_device_spec s = spec_base();
    ms_sim *sim = NULL;
    sim_create(&sim);
    ms_backend *st[2] = {NULL, NULL};
    static trace tr[2];
    memset(tr, 0, sizeof tr);
    ms_stream *comp[2], *comm[2];
    ms_event *e[2];
    for (int d = 0; d < 2; d++) {
        ck_assert_int_eq(mock_create(sim, &s, d, 7, &st[d]), MS_OK);
        st[d]->ops->set_tracer(st[d]->inst, on_work, &tr[d]);
        st[d]->ops->stream_create(st[d]->inst, 0, &comp[d]);
        st[d]->ops->stream_create(st[d]->inst, -1, &comm[d]);
        st[d]->ops->event_create(st[d]->inst, &e[d]);
    }
    const ms_backend_ops *o0 = st[0]->ops, *o1 = st[1]->ops;
    void *i0 = st[0]->inst, *i1 = st[1]->inst;
    /* Stage 0: 100 us forward (host 0 -> 1000: [1000, 101000]), record
     * (2000), comm waits (3000), send 1e6 B (4000; 15000 ns: [101000,
     * 116000]).  Stage 1: receive (issued 1000), record (2000), compute waits
     * (3000), 100 us forward (4000): [116000, 216000].  The calls interleave
     * as two host threads would, the smaller clock first. */
    ms_kernel fwd = matmul(1e11), snd = p2p(MS_COMM_SEND, 1, 0, 1e6),
              rcv = p2p(MS_COMM_RECV, 0, 0, 1e6);
    ck_assert_int_eq(o0->launch(i0, &fwd, comp[0], 1), MS_OK);
    ck_assert_int_eq(o1->launch(i1, &rcv, comm[1], 11), MS_OK);
    ck_assert_int_eq(o0->event_record(i0, e[0], comp[0]), MS_OK);
    ck_assert_int_eq(o1->event_record(i1, e[1], comm[1]), MS_OK);
    ck_assert_int_eq(o0->stream_wait_event(i0, comm[0], e[0]), MS_OK);
    ck_assert_int_eq(o1->stream_wait_event(i1, comp[1], e[1]), MS_OK);
    ck_assert_int_eq(o0->launch(i0, &snd, comm[0], 2), MS_OK);
    ck_assert_int_eq(o1->launch(i1, &fwd, comp[1], 12), MS_OK);
    /* Both hosts are at 4000.  Stage 0's sync may not run the engine past
     * stage 1's host (4000): MS_EAGAIN, stage 0 parked. */
    ck_assert_int_eq(o0->device_synchronize(i0), MS_EAGAIN);
    /* Stage 1's sync runs the engine; at 116000 stage 0's device is idle, so
     * stage 0 wakes with clock 116000 and bounds the engine again: stage 1
     * gets MS_EAGAIN at 116000. */
    ck_assert_int_eq(o1->device_synchronize(i1), MS_EAGAIN);
    /* Stage 0's retry completes at 116000; its step is done: idle. */
    ck_assert_int_eq(o0->device_synchronize(i0), MS_OK);
    int64_t t = 0;
    o0->now(i0, &t);
    ck_assert_int_eq(t, 116000);
    ck_assert_int_eq(mock_set_host_idle(st[0]), MS_OK);
    ck_assert_int_eq(o1->device_synchronize(i1), MS_OK);
    o1->now(i1, &t);
    ck_assert_int_eq(t, 216000);
    assert_span(&tr[0], 1, 1000, 101000);
    assert_span(&tr[0], 2, 101000, 116000);
    assert_span(&tr[1], 11, 1000, 116000);
    assert_span(&tr[1], 12, 116000, 216000);
    /* Both stages waiting on receives that no one sends: stage 0 is told to
     * retry (stage 1 might still send), stage 1 then finds a deadlock. */
    ms_kernel r0 = p2p(MS_COMM_RECV, 1, 9, 1e6), r1 = p2p(MS_COMM_RECV, 0, 9, 1e6);
    ck_assert_int_eq(o0->launch(i0, &r0, comm[0], 3), MS_OK);
    ck_assert_int_eq(o1->launch(i1, &r1, comm[1], 13), MS_OK);
    ck_assert_int_eq(o0->device_synchronize(i0), MS_EAGAIN);
    ck_assert_int_eq(o1->device_synchronize(i1), MS_EDEADLOCK);
    /* Closing a device with pending work leaves the engine usable. */
    ck_assert_int_eq(ms_backend_close(st[0]), MS_OK);
    ck_assert_int_eq(mock_set_host_idle(st[1]), MS_OK);
    ck_assert_int_eq(o1->launch(i1, &fwd, comp[1], 14), MS_OK);
    ck_assert_int_eq(sim_destroy(sim), MS_EINVAL); /* stage 1 still attached */
    ck_assert_int_eq(ms_backend_close(st[1]), MS_OK);
    ck_assert_int_eq(sim_run(sim), MS_OK);
    ck_assert_int_eq(sim_destroy(sim), MS_OK);
}
END_TEST

/* The devices of a group price from one table (mock_share_prices): the
 * second device's kernels, all found in the table the first filled, still
 * take the cost model's time, and only mocks on one engine may share. */
START_TEST(shared_prices_give_each_device_the_cost_model_time)
{
    ms_device_spec s = spec_base();
    ms_cost_model *cm = NULL;
    ck_assert_int_eq(sim_cost_model_create(&s, &cm), MS_OK);
    ms_kernel k[3] = {matmul(1e11), matmul(3e10), matmul(1e11)};
    k[2].bytes = 4e9; /* memory-bound: another price for the same FLOPs */
    int64_t want[3];
    for (int i = 0; i < 3; i++)
        ck_assert_int_eq(sim_cost_kernel_ns(cm, &k[i], &want[i]), MS_OK);
    ms_sim *sim = NULL, *other_sim = NULL;
    ck_assert_int_eq(sim_create(&sim), MS_OK);
    ck_assert_int_eq(sim_create(&other_sim), MS_OK);
    ms_backend *dev[2] = {NULL, NULL}, *stranger = NULL;
    static trace tr[2];
    memset(tr, 0, sizeof tr);
    for (int d = 0; d < 2; d++) {
        ck_assert_int_eq(mock_create(sim, &s, d, 0, &dev[d]), MS_OK);
        ck_assert_int_eq(dev[d]->ops->set_tracer(dev[d]->inst, on_work, &tr[d]), MS_OK);
    }
    ck_assert_int_eq(mock_create(other_sim, &s, 0, 0, &stranger), MS_OK);
    ck_assert_int_eq(mock_share_prices(dev[1], stranger), MS_EINVAL);
    ck_assert_int_eq(mock_share_prices(dev[1], NULL), MS_EINVAL);
    ck_assert_int_eq(mock_share_prices(NULL, dev[0]), MS_EINVAL);
    ck_assert_int_eq(mock_share_prices(dev[1], dev[0]), MS_OK);
    for (int d = 0; d < 2; d++) {
        const ms_backend_ops *o = dev[d]->ops;
        ms_stream *st = NULL;
        ck_assert_int_eq(mock_set_host_idle(dev[1 - d]), MS_OK);
        ck_assert_int_eq(mock_set_host_active(dev[d]), MS_OK);
        ck_assert_int_eq(o->stream_create(dev[d]->inst, 0, &st), MS_OK);
        for (int i = 0; i < 3; i++)
            ck_assert_int_eq(o->launch(dev[d]->inst, &k[i], st, (uint64_t)i + 1), MS_OK);
        ck_assert_int_eq(o->device_synchronize(dev[d]->inst), MS_OK);
        for (int i = 0; i < 3; i++) {
            const ms_work_record *w = by_tag(&tr[d], (uint64_t)i + 1);
            ck_assert_int_eq(w->end_ns - w->start_ns, want[i]);
        }
    }
    for (int d = 1; d >= 0; d--)
        ck_assert_int_eq(ms_backend_close(dev[d]), MS_OK);
    ck_assert_int_eq(ms_backend_close(stranger), MS_OK);
    ck_assert_int_eq(sim_destroy(sim), MS_OK);
    ck_assert_int_eq(sim_destroy(other_sim), MS_OK);
    sim_cost_model_destroy(cm);
}
END_TEST

START_TEST(create_rejects_bad_arguments)
{
    ms_device_spec s = spec_base();
    ms_sim *sim = NULL;
    sim_create(&sim);
    ms_backend *b = NULL;
    ck_assert_int_eq(mock_create(NULL, &s, 0, 0, &b), MS_EINVAL);
    ck_assert_int_eq(mock_create(sim, &s, -1, 0, &b), MS_EINVAL);
    s.launch_queue_depth = 0;
    ck_assert_int_ne(mock_create(sim, &s, 0, 0, &b), MS_OK);
    ck_assert_ptr_null(b);
    ck_assert_int_eq(sim_destroy(sim), MS_OK);
}
END_TEST

/* A group numbers its devices from first_device (p2p peers are run indices)
 * and runs every device's body; with one device the body runs directly. */
static ms_status note_body(void *user, int device)
{
    int *seen = user;
    seen[device]++;
    return device == 1 ? MS_ERANGE : MS_OK;
}

START_TEST(group_opens_numbers_and_runs_devices)
{
    ms_device_spec s = spec_base();
    ms_device_group *g = NULL;
    ms_group_config cfg = {.spec = &s, .n_devices = 2, .first_device = 3, .seed = 1};
    ck_assert_int_eq(mock_group_open(&cfg, &g, NULL), MS_OK);
    ck_assert_int_eq(ms_group_device(g, 0)->device, 3);
    ck_assert_int_eq(ms_group_device(g, 1)->device, 4);
    ck_assert_ptr_null(ms_group_device(g, 2));
    ck_assert_ptr_null(ms_group_device(g, -1));
    int seen[2] = {0, 0};
    /* Every body runs; the first error by device index is the result. */
    ck_assert_int_eq(ms_group_run(g, note_body, seen), MS_ERANGE);
    ck_assert_int_eq(seen[0], 1);
    ck_assert_int_eq(seen[1], 1);
    ck_assert_int_eq(ms_group_close(g), MS_OK);

    cfg.n_devices = 1;
    ck_assert_int_eq(mock_group_open(&cfg, &g, NULL), MS_OK);
    ck_assert_str_eq(ms_group_device(g, 0)->ops->name, "mock");
    seen[0] = 0;
    ck_assert_int_eq(ms_group_run(g, note_body, seen), MS_OK);
    ck_assert_int_eq(seen[0], 1);
    ck_assert_int_eq(ms_group_cancel(g), MS_OK);
    ck_assert_int_eq(ms_group_close(g), MS_OK);

    ms_diag d = {0};
    cfg.n_devices = 0;
    ck_assert_int_eq(mock_group_open(&cfg, &g, &d), MS_EINVAL);
    ck_assert_ptr_nonnull(strstr(d.msg, "device group"));
}
END_TEST

/* ---- the functional mode ------------------------------------------------ */

static void fill_bytes(uint8_t *p, size_t n, uint8_t seed)
{
    for (size_t i = 0; i < n; i++)
        p[i] = (uint8_t)(seed + i * 7);
}

static uint64_t host_buffer(rig *r, uint64_t bytes)
{
    uint64_t a = 0;
    ck_assert_int_eq(OPS(r)->malloc_host(INST(r), bytes, &a), MS_OK);
    return a;
}

static uint64_t device_buffer(rig *r, uint64_t bytes)
{
    uint64_t a = 0;
    ck_assert_int_eq(OPS(r)->malloc_device(INST(r), bytes, &a), MS_OK);
    return a;
}

static void copy(rig *r, uint64_t dst, uint64_t src, uint64_t bytes, ms_copy_kind k, ms_stream *s)
{
    ck_assert_int_eq(OPS(r)->memcpy_async(INST(r), dst, src, bytes, k, s, 0), MS_OK);
}

/* Real bytes go to the device and back; pinned host addresses are host
 * pointers.  1 MiB at 10 GB/s takes ~105 us each way. */
START_TEST(functional_copies_move_bytes)
{
    ms_device_spec s = spec_base();
    rig r;
    rig_open(&r, &s);
    ck_assert(!r.be->carries_data);
    ck_assert_int_eq(mock_enable_data(r.be), MS_OK);
    ck_assert(r.be->carries_data);
    enum { N = 1 << 20 };
    uint64_t h0 = host_buffer(&r, N), h1 = host_buffer(&r, N), dev = device_buffer(&r, N);
    fill_bytes((uint8_t *)(uintptr_t)h0, N, 3);
    ms_stream *a = stream(&r, 0);
    copy(&r, dev, h0, N, MS_COPY_H2D, a);
    copy(&r, h1, dev, N, MS_COPY_D2H, a);
    /* Issued, not run: the bytes move in device time. */
    ck_assert_uint_eq(((uint8_t *)(uintptr_t)h1)[1], 0);
    ck_assert_int_eq(OPS(&r)->stream_synchronize(INST(&r), a), MS_OK);
    ck_assert_int_eq(memcmp((void *)(uintptr_t)h0, (void *)(uintptr_t)h1, N), 0);
    ck_assert_int_eq(OPS(&r)->free_host(INST(&r), h0), MS_OK);
    ck_assert_int_eq(OPS(&r)->free_host(INST(&r), h1), MS_OK);
    ck_assert_int_eq(OPS(&r)->free_device(INST(&r), dev), MS_OK);
    rig_close(&r);
}
END_TEST

/* A copy on another stream that does not wait reads the block before the
 * H2D has landed: what a missing stream_wait_event does on hardware. */
START_TEST(functional_unordered_copy_reads_old_bytes)
{
    ms_device_spec s = spec_base();
    rig r;
    rig_open(&r, &s);
    ck_assert_int_eq(mock_enable_data(r.be), MS_OK);
    enum { N = 1 << 20 };
    uint64_t h0 = host_buffer(&r, N), h1 = host_buffer(&r, N), dev = device_buffer(&r, N);
    fill_bytes((uint8_t *)(uintptr_t)h0, N, 9);
    ms_stream *a = stream(&r, 0), *b = stream(&r, 0);
    /* A 1e11-FLOP kernel (100 us) delays the H2D on stream a; the D2H on
     * stream b runs at once (the two directions of the link are
     * independent) and finishes first. */
    launch(&r, matmul(1e11), a, 1);
    copy(&r, dev, h0, N, MS_COPY_H2D, a);
    copy(&r, h1, dev, N, MS_COPY_D2H, b);
    ck_assert_int_eq(OPS(&r)->device_synchronize(INST(&r)), MS_OK);
    const uint8_t *got = (const uint8_t *)(uintptr_t)h1;
    for (size_t i = 0; i < N; i += 4096)
        ck_assert_uint_eq(got[i], 0);
    rig_close(&r);
}
END_TEST

/* A copy whose block was freed before it ran is a sticky fault, as an
 * illegal address is on CUDA. */
START_TEST(functional_copy_from_freed_memory_faults)
{
    ms_device_spec s = spec_base();
    rig r;
    rig_open(&r, &s);
    ck_assert_int_eq(mock_enable_data(r.be), MS_OK);
    enum { N = 1 << 20 };
    uint64_t h = host_buffer(&r, N), dev = device_buffer(&r, N);
    ms_stream *a = stream(&r, 0);
    copy(&r, h, dev, N, MS_COPY_D2H, a);
    ck_assert_int_eq(OPS(&r)->free_device(INST(&r), dev), MS_OK);
    ck_assert_int_eq(OPS(&r)->stream_synchronize(INST(&r), a), MS_EHAZARD);
    ck_assert_int_eq(OPS(&r)->device_synchronize(INST(&r)), MS_EHAZARD);
    ck_assert_ptr_nonnull(strstr(mock_data_fault_message(r.be), "source was not allocated device"));
    rig_close(&r);
}
END_TEST

/* The mode holds real bytes in host memory, so it keeps to a budget: device
 * pages count once a copy writes them (and stop counting when freed),
 * pinned buffers whole; past it, a sticky fault that says why, instead of
 * the OOM killer. */
START_TEST(functional_mode_keeps_to_its_host_budget)
{
    enum { MiB = 1 << 20 };
    ms_device_spec s = spec_base();
    rig r;
    rig_open(&r, &s);
    ck_assert_int_eq(mock_enable_data(r.be), MS_OK);
    ck_assert_int_eq(mock_data_set_host_budget(r.be, 2 * MiB), MS_OK);
    uint64_t h = host_buffer(&r, MiB), dev = device_buffer(&r, 4 * MiB);
    ms_stream *a = stream(&r, 0);
    copy(&r, dev, h, MiB, MS_COPY_H2D, a);
    copy(&r, dev, h, MiB, MS_COPY_H2D, a); /* the same pages: nothing more */
    ck_assert_int_eq(OPS(&r)->stream_synchronize(INST(&r), a), MS_OK);
    /* Freeing the segment gives its written pages back. */
    ck_assert_int_eq(OPS(&r)->free_device(INST(&r), dev), MS_OK);
    dev = device_buffer(&r, 4 * MiB);
    copy(&r, dev, h, MiB, MS_COPY_H2D, a);
    ck_assert_int_eq(OPS(&r)->stream_synchronize(INST(&r), a), MS_OK);
    ck_assert_str_eq(OPS(&r)->last_error(INST(&r)), "");
    copy(&r, dev + MiB, h, MiB, MS_COPY_H2D, a);
    ck_assert_int_eq(OPS(&r)->stream_synchronize(INST(&r), a), MS_EHAZARD);
    const char *why = mock_data_fault_message(r.be);
    ck_assert_msg(strstr(why, "the functional mock (--verify) keeps device and pinned bytes in "
                              "host memory and a copy of 1048576 bytes would take it to 0.00 GiB, "
                              "beyond its budget of 0.00 GiB") != NULL,
                  "%s", why);
    ck_assert_str_eq(OPS(&r)->last_error(INST(&r)), why);
    rig_close(&r);

    rig_open(&r, &s);
    ck_assert_int_eq(mock_enable_data(r.be), MS_OK);
    ck_assert_int_eq(mock_data_set_host_budget(r.be, 2 * MiB), MS_OK);
    h = host_buffer(&r, MiB);
    uint64_t more = 0;
    ck_assert_int_eq(OPS(&r)->malloc_host(INST(&r), 2 * MiB, &more), MS_EHAZARD);
    ck_assert_ptr_nonnull(strstr(mock_data_fault_message(r.be), "a pinned buffer of that size"));
    rig_close(&r);
}
END_TEST

/* The mode starts before anything exists; the accounting is unchanged. */
START_TEST(functional_mode_is_chosen_first)
{
    ms_device_spec s = spec_base();
    s.host_pinned_bytes = 1 << 20;
    rig r;
    rig_open(&r, &s);
    uint64_t dev = device_buffer(&r, 4096);
    ck_assert_int_eq(mock_enable_data(r.be), MS_EINVAL);
    ck_assert(!r.be->carries_data);
    ck_assert_int_eq(OPS(&r)->free_device(INST(&r), dev), MS_OK);
    ck_assert_int_eq(mock_enable_data(r.be), MS_OK);
    uint64_t h = host_buffer(&r, 1 << 20), more = 0;
    ck_assert_int_eq(OPS(&r)->malloc_host(INST(&r), 512, &more), MS_ENOMEM);
    ck_assert_int_eq(OPS(&r)->free_host(INST(&r), h + 512), MS_EINVAL);
    ck_assert_int_eq(OPS(&r)->free_host(INST(&r), h), MS_OK);
    ck_assert_int_eq(OPS(&r)->malloc_host(INST(&r), 512, &more), MS_OK);
    ck_assert_int_eq(OPS(&r)->free_host(INST(&r), more), MS_OK);
    rig_close(&r);
}
END_TEST

/* A functional group: every device carries data, the cooperative wrappers
 * of a pipeline included. */
START_TEST(functional_group_devices_carry_data)
{
    ms_device_spec s = spec_base();
    ms_group_config cfg = {.spec = &s, .n_devices = 2, .functional = true};
    ms_device_group *g = NULL;
    ck_assert_int_eq(mock_group_open(&cfg, &g, NULL), MS_OK);
    ck_assert(ms_group_device(g, 0)->carries_data);
    ck_assert(ms_group_device(g, 1)->carries_data);
    ck_assert_int_eq(ms_group_close(g), MS_OK);
    cfg.functional = false;
    ck_assert_int_eq(mock_group_open(&cfg, &g, NULL), MS_OK);
    ck_assert(!ms_group_device(g, 1)->carries_data);
    ck_assert_int_eq(ms_group_close(g), MS_OK);
}
END_TEST

/* Objects are distinct, aligned and whole; what is put back serves the next
 * get, and only running dry adds a slab.  Hand-derived: 10 objects of 4 a
 * slab need 3 slabs; putting 3 back and taking 3 adds none. */
START_TEST(obj_pool_recycles_before_it_grows)
{
    base_pool p;
    base_pool_init(&p, 24, 4);
    ck_assert_uint_eq(p.size % _Alignof(max_align_t), 0);
    unsigned char *obj[10];
    for (int i = 0; i < 10; i++) {
        obj[i] = base_pool_get(&p);
        ck_assert_ptr_nonnull(obj[i]);
        ck_assert_uint_eq((uintptr_t)obj[i] % _Alignof(max_align_t), 0);
        memset(obj[i], 0xa0 + i, 24);
    }
    for (int i = 0; i < 10; i++)
        for (int b = 0; b < 24; b++)
            ck_assert_uint_eq(obj[i][b], 0xa0 + i);
    ck_assert_uint_eq(p.n_slabs, 3);
    for (int i = 2; i < 5; i++)
        base_pool_put(&p, obj[i]);
    for (int i = 4; i >= 2; i--)
        ck_assert_ptr_eq(base_pool_get(&p), obj[i]);
    ck_assert_uint_eq(p.n_slabs, 3);
    base_pool_fini(&p);
    ck_assert_ptr_null(p.slabs);
    ck_assert_ptr_null(p.free);
    /* A slab whose size overflows is refused, not wrapped around. */
    base_pool_init(&p, 64, SIZE_MAX / 8);
    ck_assert_ptr_null(base_pool_get(&p));
    base_pool_fini(&p);
}
END_TEST

/* Objects come out in the order they went in, one after another in memory
 * within a chunk, and a ring of chunks grows only when its oldest chunk is
 * still in use.  Hand-derived, 4 objects a chunk: 6 pushed need 2 chunks;
 * popping 5 leaves the 6th in slot 1 of the second chunk; 3 more go into
 * its slots 2 and 3 and slot 0 of the first chunk (the 9th object takes the
 * 1st one's memory); 3 more fill the first chunk, and the 13th, whose next
 * chunk holds the oldest object, adds a third. */
START_TEST(obj_fifo_keeps_making_order)
{
    base_fifo f;
    base_fifo_init(&f, 24, 4);
    ck_assert_uint_eq(f.size % _Alignof(max_align_t), 0);
    unsigned char *obj[13];
    for (int i = 0; i < 6; i++) {
        obj[i] = base_fifo_push(&f);
        ck_assert_ptr_nonnull(obj[i]);
        ck_assert_uint_eq((uintptr_t)obj[i] % _Alignof(max_align_t), 0);
        memset(obj[i], 0xa0 + i, 24);
    }
    for (int i = 1; i < 4; i++)
        ck_assert_ptr_eq(obj[i], obj[i - 1] + f.size); /* contiguous in a chunk */
    ck_assert_uint_eq(f.n_chunks, 2);
    for (size_t k = 0; k < 6; k++)
        ck_assert_ptr_eq(base_fifo_at(&f, k), obj[k]);
    ck_assert_ptr_null(base_fifo_at(&f, 6));
    for (int i = 0; i < 5; i++)
        ck_assert(base_fifo_pop(&f, obj[i]));
    for (int i = 6; i < 9; i++) {
        obj[i] = base_fifo_push(&f);
        memset(obj[i], 0xa0 + i, 24);
    }
    ck_assert_ptr_eq(obj[8], obj[0]); /* the 9th wrapped into the first chunk */
    ck_assert_uint_eq(f.n_chunks, 2);
    for (int i = 9; i < 13; i++) {
        ck_assert_uint_eq(f.n_chunks, 2);
        obj[i] = base_fifo_push(&f);
        memset(obj[i], 0xa0 + i, 24);
    }
    ck_assert_uint_eq(f.n_chunks, 3);
    /* Out of order is refused and changes nothing. */
    ck_assert(!base_fifo_pop(&f, obj[6]));
    ck_assert(!base_fifo_unpush(&f, obj[11]));
    ck_assert_uint_eq(f.count, 8);
    for (int i = 5; i < 13; i++) {
        ck_assert_ptr_eq(base_fifo_at(&f, 0), obj[i]);
        for (int b = 0; b < 24; b++)
            ck_assert_uint_eq(obj[i][b], 0xa0 + i);
        ck_assert(base_fifo_pop(&f, obj[i]));
    }
    /* Empty, it starts over at the front of the chunk it used last; a push
     * taken back leaves the next push the same memory. */
    unsigned char *a = base_fifo_push(&f);
    ck_assert(base_fifo_unpush(&f, a));
    ck_assert_ptr_eq(base_fifo_push(&f), a);
    ck_assert_ptr_eq(a + f.size, base_fifo_push(&f));
    ck_assert_uint_eq(f.count, 2);
    base_fifo_fini(&f);
    ck_assert_uint_eq(f.n_chunks, 0);
    ck_assert_ptr_null(f.head);
    /* A chunk whose size overflows is refused, not wrapped around. */
    base_fifo_init(&f, 64, SIZE_MAX / 8);
    ck_assert_ptr_null(base_fifo_push(&f));
    base_fifo_fini(&f);
}
END_TEST

/* The map of live allocations by address (lib/base/addr_map.h), under the
 * pattern that made it: a thousand 512-byte-aligned buffers (its load stays
 * at most one half, so probe runs collide and wrap), freed in an order
 * unrelated to their addresses (i * 7919 mod 1000 visits each once, 7919
 * being prime).  After every removal each live range is found with its
 * size, each removed one is not, and the sorted view is exactly the live
 * ones by address.  A removal that broke a probe run (backward shift gone
 * wrong) would lose a live range here. */
START_TEST(addr_map_keeps_every_live_range)
{
    enum { N = 1000 };
    static bool live[N];
    ms_addr_map m = {0};
    for (uint64_t i = 0; i < N; i++) {
        ck_assert_int_eq(base_addr_map_reserve(&m, 1), MS_OK);
        base_addr_map_add(&m, (ms_range){(1ull << 40) + i * 512, i + 1});
        live[i] = true;
    }
    ck_assert_uint_eq(m.n, N);
    ck_assert_uint_ge(m.cap, 2 * N);
    for (uint64_t k = 0; k < N; k++) {
        uint64_t gone = k * 7919 % N;
        ms_range r;
        ck_assert(base_addr_map_remove(&m, (1ull << 40) + gone * 512, &r));
        ck_assert_uint_eq(r.size, gone + 1);
        live[gone] = false;
        ck_assert(!base_addr_map_remove(&m, (1ull << 40) + gone * 512, NULL));
        if (k % 97 != 0 && k != N - 1)
            continue;
        for (uint64_t i = 0; i < N; i++) {
            ck_assert(base_addr_map_find(&m, (1ull << 40) + i * 512, &r) == live[i]);
            if (live[i])
                ck_assert_uint_eq(r.size, i + 1);
        }
        ms_range *v;
        ck_assert_int_eq(base_addr_map_sorted(&m, &v), MS_OK);
        size_t j = 0;
        for (uint64_t i = 0; i < N; i++)
            if (live[i]) {
                ck_assert_uint_eq(v[j].addr, (1ull << 40) + i * 512);
                j++;
            }
        ck_assert_uint_eq(j, m.n);
        free(v);
    }
    ck_assert_uint_eq(m.n, 0);
    ck_assert(!base_addr_map_find(&m, 1ull << 40, NULL));
    base_addr_map_fini(&m);
}
END_TEST

/* The slot an address lands in, alone in a map of 16 slots. */
static size_t home_slot(uint64_t addr)
{
    ms_addr_map m = {0};
    ck_assert_int_eq(base_addr_map_reserve(&m, 8), MS_OK);
    ck_assert_uint_eq(m.cap, 16);
    base_addr_map_add(&m, (ms_range){addr, 1});
    size_t i = 0;
    while (m.slot[i].addr != addr)
        i++;
    base_addr_map_fini(&m);
    return i;
}

/* Removal at the table's end: A lives in the last slot and E in the first,
 * its own.  Freeing A must leave E where it is, since a probe for E starts
 * at slot 0; moving E back into A's slot across the end would lose it. */
START_TEST(addr_map_removal_across_the_end)
{
    uint64_t a = 0, e = 0;
    for (uint64_t x = 512; a == 0 || e == 0; x += 512) {
        size_t h = home_slot(x);
        if (h == 15 && a == 0)
            a = x;
        if (h == 0 && e == 0)
            e = x;
    }
    ms_addr_map m = {0};
    ck_assert_int_eq(base_addr_map_reserve(&m, 8), MS_OK);
    base_addr_map_add(&m, (ms_range){a, 1});
    base_addr_map_add(&m, (ms_range){e, 2});
    ck_assert_uint_eq(m.slot[15].addr, a);
    ck_assert_uint_eq(m.slot[0].addr, e);
    ck_assert(base_addr_map_remove(&m, a, NULL));
    ms_range r;
    ck_assert(base_addr_map_find(&m, e, &r));
    ck_assert_uint_eq(r.size, 2);
    ck_assert_uint_eq(m.n, 1);
    base_addr_map_fini(&m);
}
END_TEST

/* The cooperative scheduler hands the turn to the host with the smallest
 * clock among those that may move, ties to the lowest index (cohost.c, its
 * heap of ready hosts).  Twenty hosts start at time 0; each notes its entry,
 * issues a 100 us kernel and waits for its device, which parks it (the
 * others, still at 0, bound the engine).  So they enter in index order.
 * Host 19, the last, waits with every other host parked: nothing bounds it,
 * it runs the engine to its kernel's end (every kernel ends then) and
 * finishes first; the others wake at that same time and finish in index
 * order. */
typedef struct turn_log {
    int entered[20], finished[20];
    int n_entered, n_finished;
    ms_device_group *g;
} turn_log;

static ms_status turn_body(void *user, int device)
{
    turn_log *log = user;
    log->entered[log->n_entered++] = device;
    ms_backend *b = ms_group_device(log->g, device);
    ms_stream *st = NULL;
    ms_status rc = b->ops->stream_create(b->inst, 0, &st);
    ms_kernel k = matmul(1e11);
    if (rc == MS_OK)
        rc = b->ops->launch(b->inst, &k, st, 1);
    if (rc == MS_OK)
        rc = b->ops->device_synchronize(b->inst);
    if (st != NULL)
        b->ops->stream_destroy(b->inst, st);
    log->finished[log->n_finished++] = device;
    return rc;
}

START_TEST(hosts_take_turns_by_clock_then_index)
{
    ms_device_spec s = spec_base();
    turn_log log = {0};
    ms_group_config cfg = {.spec = &s, .n_devices = 20, .first_device = 0, .seed = 1};
    ck_assert_int_eq(mock_group_open(&cfg, &log.g, NULL), MS_OK);
    ck_assert_int_eq(ms_group_run(log.g, turn_body, &log), MS_OK);
    ck_assert_int_eq(log.n_entered, 20);
    ck_assert_int_eq(log.n_finished, 20);
    for (int i = 0; i < 20; i++)
        ck_assert_msg(log.entered[i] == i && log.finished[i] == (i + 19) % 20,
                      "turn %d: entered %d, finished %d", i, log.entered[i], log.finished[i]);
    ck_assert_int_eq(ms_group_close(log.g), MS_OK);
}
END_TEST

static Suite *mock_suite(void)
{
    Suite *s = suite_create("mock");
    TCase *tc = tcase_create("time");
    tcase_add_test(tc, host_runs_ahead_of_device);
    tcase_add_test(tc, repeated_kernels_take_the_cost_model_time);
    tcase_add_test(tc, synchronize_moves_host_to_completion);
    tcase_add_test(tc, full_launch_queue_blocks_the_host);
    tcase_add_test(tc, stream_and_tracer_bookkeeping);
    tcase_add_test(tc, same_program_twice_gives_identical_records);
    tcase_add_test(tc, waiting_for_work_that_cannot_run_is_a_deadlock);
    tcase_add_test(tc, pipeline_stages_share_an_engine);
    tcase_add_test(tc, shared_prices_give_each_device_the_cost_model_time);
    tcase_add_test(tc, create_rejects_bad_arguments);
    tcase_add_test(tc, group_opens_numbers_and_runs_devices);
    tcase_add_test(tc, hosts_take_turns_by_clock_then_index);
    suite_add_tcase(s, tc);
    tc = tcase_create("memory");
    tcase_add_test(tc, device_memory_oom_leaves_state_unchanged);
    tcase_add_test(tc, mapped_pages_count_against_capacity);
    tcase_add_test(tc, pinned_host_memory_is_bounded);
    tcase_add_test(tc, addr_map_keeps_every_live_range);
    tcase_add_test(tc, addr_map_removal_across_the_end);
    tcase_add_test(tc, obj_pool_recycles_before_it_grows);
    tcase_add_test(tc, obj_fifo_keeps_making_order);
    suite_add_tcase(s, tc);
    tc = tcase_create("functional");
    tcase_add_test(tc, functional_copies_move_bytes);
    tcase_add_test(tc, functional_unordered_copy_reads_old_bytes);
    tcase_add_test(tc, functional_copy_from_freed_memory_faults);
    tcase_add_test(tc, functional_mode_is_chosen_first);
    tcase_add_test(tc, functional_mode_keeps_to_its_host_budget);
    tcase_add_test(tc, functional_group_devices_carry_data);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(mock_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
