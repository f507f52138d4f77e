/* The allocator against real PyTorch: replays of memory-snapshot traces
 * (the .trace files of tests/data/allocator, extracted from ../shared/traces by
 * tests/data/allocator/extract.py).  Starting from the snapshot's starting
 * state, every malloc must land at the address PyTorch chose, and every
 * segment_alloc / segment_free / segment_map / segment_unmap must happen in
 * the same order with the same address and size; an oom entry must be an
 * out-of-memory here too.
 *
 * The replay backend answers va_reserve and malloc_device with the addresses
 * the trace shows next, so addresses are the driver's, while every decision
 * (which block, split or not, how many pages, what to release) is the
 * allocator's own. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "memsim/allocator.h"

#define MAX_PENDING 256
#define MAX_SEED_BLOCKS 1024

struct ms_stream {
    int unused;
};
struct ms_event {
    int unused;
};

typedef struct seg_ev {
    char action[24];
    uint64_t addr, size;
    bool claimed; /* handed out by malloc_device / va_reserve */
} seg_ev;

typedef struct replay {
    uint64_t capacity, used;
    seg_ev want[MAX_PENDING]; /* segment entries before the current op */
    int n_want;
    ms_alloc_event got[MAX_PENDING]; /* segment events the allocator emitted */
    int n_got;
} replay;

static replay *R(void *inst)
{
    return inst;
}

/* The next segment entry of the trace with this action nobody took yet. */
static seg_ev *next_wanted(replay *r, const char *action)
{
    for (int i = 0; i < r->n_want; i++)
        if (!r->want[i].claimed && strcmp(r->want[i].action, action) == 0)
            return &r->want[i];
    return NULL;
}

static ms_status r_info(void *inst, uint64_t *free_bytes, uint64_t *total)
{
    *free_bytes = R(inst)->capacity - R(inst)->used;
    *total = R(inst)->capacity;
    return MS_OK;
}

static ms_status r_malloc(void *inst, uint64_t bytes, uint64_t *addr)
{
    seg_ev *w = next_wanted(R(inst), "segment_alloc");
    if (!w)
        return MS_ENOMEM; /* PyTorch did not get a segment here either */
    w->claimed = true;
    *addr = w->addr;
    return bytes == w->size ? MS_OK : MS_EMISMATCH;
}

static ms_status r_free(void *inst, uint64_t addr)
{
    (void)inst;
    (void)addr;
    return MS_OK;
}

static ms_status r_va_reserve(void *inst, uint64_t bytes, uint64_t *addr)
{
    seg_ev *w = next_wanted(R(inst), "segment_map");
    (void)bytes;
    if (!w)
        return MS_EMISMATCH;
    *addr = w->addr; /* a fresh reservation is mapped from its start */
    return MS_OK;
}

static ms_status r_va_release(void *inst, uint64_t addr)
{
    (void)inst;
    (void)addr;
    return MS_OK;
}

static ms_status r_map(void *inst, uint64_t addr, uint64_t bytes)
{
    replay *r = R(inst);
    (void)addr;
    if (bytes > r->capacity - r->used)
        return MS_ENOMEM;
    r->used += bytes;
    return MS_OK;
}

static ms_status r_unmap(void *inst, uint64_t addr, uint64_t bytes)
{
    (void)addr;
    R(inst)->used -= bytes;
    return MS_OK;
}

static ms_status r_stream_sync(void *inst, ms_stream *s)
{
    (void)inst;
    (void)s;
    return MS_OK;
}

static ms_status r_stream_id(void *inst, const ms_stream *s, uint64_t *id)
{
    (void)inst;
    (void)s;
    *id = 0; /* every trace entry is on stream 0 */
    return MS_OK;
}

static ms_status r_event_create(void *inst, ms_event **e)
{
    (void)inst;
    *e = calloc(1, sizeof **e);
    return *e ? MS_OK : MS_ENOMEM;
}

static ms_status r_event_destroy(void *inst, ms_event *e)
{
    (void)inst;
    free(e);
    return MS_OK;
}

static ms_status r_event_record(void *inst, ms_event *e, ms_stream *s)
{
    (void)inst;
    (void)e;
    (void)s;
    return MS_OK;
}

static ms_status r_event_query(void *inst, ms_event *e, bool *complete)
{
    (void)inst;
    (void)e;
    *complete = true;
    return MS_OK;
}

static ms_status r_event_sync(void *inst, ms_event *e)
{
    (void)inst;
    (void)e;
    return MS_OK;
}

static ms_status r_device_sync(void *inst)
{
    (void)inst;
    return MS_OK;
}

static const ms_backend_ops replay_ops = {
    .name = "replay",
    .mem_get_info = r_info,
    .malloc_device = r_malloc,
    .free_device = r_free,
    .va_reserve = r_va_reserve,
    .va_release = r_va_release,
    .mem_map = r_map,
    .mem_unmap = r_unmap,
    .stream_synchronize = r_stream_sync,
    .stream_id = r_stream_id,
    .event_create = r_event_create,
    .event_destroy = r_event_destroy,
    .event_record = r_event_record,
    .event_query = r_event_query,
    .event_synchronize = r_event_sync,
    .device_synchronize = r_device_sync,
};

static void observe(void *user, const ms_alloc_event *ev)
{
    replay *r = user;
    if (ev->action == MS_AA_SEGMENT_ALLOC || ev->action == MS_AA_SEGMENT_FREE ||
        ev->action == MS_AA_SEGMENT_MAP || ev->action == MS_AA_SEGMENT_UNMAP) {
        ck_assert_int_lt(r->n_got, MAX_PENDING);
        r->got[r->n_got++] = *ev;
    }
}

/* The segment entries the trace shows before this op, against ours. */
static void check_segments(replay *r, int line)
{
    ck_assert_msg(r->n_got == r->n_want, "line %d: %d segment events, the trace has %d", line,
                  r->n_got, r->n_want);
    for (int i = 0; i < r->n_got; i++) {
        const char *name = ms_alloc_action_name(r->got[i].action);
        ck_assert_msg(strcmp(name, r->want[i].action) == 0 && r->got[i].addr == r->want[i].addr &&
                          r->got[i].size == r->want[i].size,
                      "line %d: %s %llx %llu, the trace has %s %llx %llu", line, name,
                      (unsigned long long)r->got[i].addr, (unsigned long long)r->got[i].size,
                      r->want[i].action, (unsigned long long)r->want[i].addr,
                      (unsigned long long)r->want[i].size);
    }
    r->n_got = r->n_want = 0;
}

static FILE *open_trace(const char *name)
{
    const char *src = getenv("MEMSIM_SRCDIR");
    char path[1024];
    snprintf(path, sizeof path, "%s/tests/data/allocator/%s", src ? src : MS_SRCDIR, name);
    FILE *f = fopen(path, "r");
    ck_assert_msg(f != NULL, "cannot open %s", path);
    return f;
}

static void import_segment(ms_alloc *a, ms_stream *s, FILE *f, const char *line)
{
    static ms_seed_block blocks[MAX_SEED_BLOCKS];
    unsigned long long base, total;
    int small, n;
    ck_assert_int_eq(sscanf(line, "seg %llu %llu %d %d", &base, &total, &small, &n), 4);
    ck_assert_int_le(n, MAX_SEED_BLOCKS);
    for (int i = 0; i < n; i++) {
        char buf[256];
        unsigned long long addr, size, req;
        int allocated;
        ck_assert_ptr_nonnull(fgets(buf, sizeof buf, f));
        ck_assert_int_eq(sscanf(buf, "blk %llu %llu %llu %d", &addr, &size, &req, &allocated), 4);
        blocks[i] = (ms_seed_block){addr, size, req, allocated != 0};
    }
    ms_seed_segment seg = {base, total, s, false, small != 0, 0, blocks, (uint32_t)n};
    ck_assert_int_eq(ms_alloc_import_seed(a, &seg), MS_OK);
}

typedef struct outcome {
    int allocs, ooms;
    char oom_msg[MS_DIAG_MAX];
} outcome;

static void replay_op(ms_alloc *a, ms_stream *s, replay *r, const char *action,
                      unsigned long long addr, unsigned long long size, int line, outcome *out)
{
    uint64_t got = 0;
    ms_diag d = {0};
    if (strncmp(action, "segment_", 8) == 0) {
        ck_assert_int_lt(r->n_want, MAX_PENDING);
        seg_ev *w = &r->want[r->n_want++];
        snprintf(w->action, sizeof w->action, "%s", action);
        w->addr = addr;
        w->size = size;
        w->claimed = false;
    } else if (strcmp(action, "alloc") == 0) {
        ms_status st = ms_alloc_malloc(a, size, s, 0, &got, &d);
        ck_assert_msg(st == MS_OK, "line %d: malloc(%llu): %s", line, size, d.msg);
        check_segments(r, line);
        ck_assert_msg(got == addr, "line %d: malloc(%llu) at %llx, PyTorch %llx", line, size,
                      (unsigned long long)got, addr);
        out->allocs++;
    } else if (strcmp(action, "free_requested") == 0) {
        ck_assert_msg(ms_alloc_free(a, addr) == MS_OK, "line %d: free %llx", line, addr);
    } else if (strcmp(action, "oom") == 0) {
        /* size is the rounded request, so it rounds to itself. */
        ck_assert_int_eq(ms_alloc_malloc(a, size, s, 0, &got, &d), MS_ENOMEM);
        check_segments(r, line);
        snprintf(out->oom_msg, sizeof out->oom_msg, "%s", d.msg);
        out->ooms++;
    }
}

static outcome run_trace(const char *name)
{
    static replay r;
    memset(&r, 0, sizeof r);
    outcome out = {0, 0, ""};
    FILE *f = open_trace(name);
    char line[512];
    ck_assert_ptr_nonnull(fgets(line, sizeof line, f));
    unsigned long long capacity = 0;
    ck_assert_int_eq(sscanf(line, "capacity %llu", &capacity), 1);
    r.capacity = capacity;
    ck_assert_ptr_nonnull(fgets(line, sizeof line, f));
    ck_assert(strncmp(line, "conf", 4) == 0);
    line[strcspn(line, "\n")] = '\0';
    ms_alloc_config cfg;
    ms_alloc_config_default(MS_ALLOC_CUDA, &cfg);
    ck_assert_int_eq(ms_alloc_config_parse(line[4] ? line + 5 : "", &cfg, NULL), MS_OK);
    ms_backend be = {.ops = &replay_ops, .inst = &r, .device = 0};
    ms_stream stream = {0};
    ms_alloc *a = NULL;
    ck_assert_int_eq(ms_alloc_create(&be, &cfg, &a), MS_OK);
    ck_assert_int_eq(ms_alloc_set_observer(a, observe, &r), MS_OK); /* imports emit nothing */
    int n = 2;
    while (fgets(line, sizeof line, f)) {
        n++;
        if (strncmp(line, "seg ", 4) == 0) {
            import_segment(a, &stream, f, line);
            continue;
        }
        char action[24];
        unsigned long long addr, size;
        ck_assert_int_eq(sscanf(line, "ev %23s %llu %llu", action, &addr, &size), 3);
        replay_op(a, &stream, &r, action, addr, size, n, &out);
    }
    fclose(f);
    ck_assert_int_eq(ms_alloc_destroy(a), MS_OK);
    return out;
}

START_TEST(test_trace_expandable)
{
    /* A complete history with expandable segments: 175 maps of 2 and 20
     * MiB pages in two reservations, 392 allocations. */
    outcome o = run_trace("expandable-dev2.trace");
    ck_assert_int_eq(o.allocs, 392);
}
END_TEST

START_TEST(test_trace_expandable_oom)
{
    /* Expandable segments into an OOM: release_cached_blocks unmaps six
     * free ranges (100 MiB - 2.5 GiB) in PyTorch's order, the retry maps
     * 4.94 GiB, and the next 4.94 GiB request fails. */
    outcome o = run_trace("expandable-oom-dev1.trace");
    ck_assert_int_eq(o.allocs, 199);
    ck_assert_int_eq(o.ooms, 1);
    ck_assert_msg(strncmp(o.oom_msg, "CUDA out of memory. Tried to allocate 4.95 GiB. ", 48) == 0,
                  "%s", o.oom_msg);
}
END_TEST

START_TEST(test_trace_train_step)
{
    /* A training step with the optimizer, from the snapshot's starting
     * state (96 ordinary segments): the first 2500 entries. */
    outcome o = run_trace("train-step.trace");
    ck_assert_int_eq(o.allocs, 837);
}
END_TEST

static Suite *traces_suite(void)
{
    Suite *s = suite_create("allocator_traces");
    TCase *tc = tcase_create("pytorch");
    tcase_add_test(tc, test_trace_expandable);
    tcase_add_test(tc, test_trace_expandable_oom);
    tcase_add_test(tc, test_trace_train_step);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(traces_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
