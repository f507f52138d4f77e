/* Snapshot import and replay (lib/replay/).
 *
 * The synthetic traces in tests/data/traces/ carry, in their comments, the
 * derivation of every segment event from the caching allocator's rules
 * (reference/caching-allocator.md); the figures asserted here come from
 * there.  The three real PyTorch snapshots live outside the repository
 * (../shared/traces, or $MEMSIM_TRACES): when they are absent the program
 * says so and exits 77 (SKIP) after the synthetic tests pass. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "memsim/trace.h"

#define MiB (1ULL << 20)
#define SEG_ALLOC 0
#define SEG_FREE 1
#define SEG_MAP 2
#define SEG_UNMAP 3

static char data_dir[4096];
static char real_dir[4096];

static const char *data(const char *name)
{
    static char path[8192];
    snprintf(path, sizeof path, "%s/%s", data_dir, name);
    return path;
}

static const char *real(const char *name)
{
    static char path[8192];
    snprintf(path, sizeof path, "%s/%s", real_dir, name);
    return path;
}

static ms_snapshot *load(const char *path)
{
    ms_snapshot *s = NULL;
    ms_diag d = {0};
    ms_status st = ms_snapshot_load(path, &s, &d);
    ck_assert_msg(st == MS_OK, "%s: %s", path, d.msg);
    return s;
}

/* Replay with the recorded settings (or conf), every device with events. */
static ms_replay_result replay(const ms_snapshot *s, const char *conf)
{
    ms_replay_options o;
    ms_replay_result r;
    ms_diag d = {0};
    ms_replay_options_default(&o);
    o.alloc_conf = conf;
    ms_status st = ms_replay_run(s, &o, &r, &d);
    ck_assert_msg(st == MS_OK, "replay: %s", d.msg);
    return r;
}

static void assert_count(const ms_replay_count *c, uint64_t rec, uint64_t pred, uint64_t matched)
{
    ck_assert_uint_eq(c->recorded, rec);
    ck_assert_uint_eq(c->predicted, pred);
    ck_assert_uint_eq(c->matched, matched);
}

/* ------------------------------------------------------------ synthetic */

START_TEST(basic_csv)
{
    ms_snapshot *s = load(data("basic.csv"));
    ms_replay_result r = replay(s, NULL);
    ck_assert_uint_eq(r.n_devices, 1);
    const ms_replay_device_result *dv = &r.dev[0];
    ck_assert_uint_eq(dv->n_events, 16);
    /* basic.csv: 2 MiB, 20 MiB, 12 MiB segments; the 12 MiB one released. */
    assert_count(&dv->seg[SEG_ALLOC], 3, 3, 3);
    assert_count(&dv->seg[SEG_FREE], 1, 1, 1);
    assert_count(&dv->seg[SEG_MAP], 0, 0, 0);
    ck_assert(dv->agreement_pct == 100.0);
    ck_assert_uint_eq(dv->allocs, 6);
    ck_assert_uint_eq(dv->allocs_same_addr, 6);
    ck_assert_uint_eq(dv->peak_reserved_recorded, 35651584);
    ck_assert_uint_eq(dv->peak_reserved_predicted, 35651584);
    /* At the peak: 35651584 reserved - 18878464 allocated. */
    ck_assert_uint_eq(dv->fragmentation_at_peak, 16773120);
    ck_assert_uint_eq(dv->release_points, 1); /* the empty_cache at event 13 */
    ck_assert(!dv->capacity_known);
    ck_assert(!dv->oom_recorded && !dv->oom_predicted);
    ck_assert(!dv->first.found && !dv->first_placement.found);
    ms_replay_result_free(&r);
    ms_snapshot_free(s);
}
END_TEST

/* With a known capacity, a release before an alloc is the allocator's own
 * retry only if that alloc could not have been served without it; else it is
 * the user's empty_cache(), taken from the trace. */
START_TEST(empty_cache_is_not_a_retry)
{
    ms_replay_options o;
    ms_replay_result r;
    ms_diag d = {0};
    ms_snapshot *s = load(data("empty-cache.csv"));
    ms_replay_options_default(&o);
    o.capacity = 80ULL << 30;
    ck_assert_int_eq(ms_replay_run(s, &o, &r, &d), MS_OK);
    ck_assert(r.dev[0].capacity_known);
    assert_count(&r.dev[0].seg[SEG_FREE], 1, 1, 1);
    assert_count(&r.dev[0].seg[SEG_ALLOC], 2, 2, 2);
    ck_assert_msg(r.dev[0].agreement_pct == 100.0, "%s", r.dev[0].first.what);
    ck_assert_uint_eq(r.dev[0].release_points, 1);
    ms_replay_result_free(&r);
    ms_snapshot_free(s);
    s = load(data("retry.csv"));
    o.capacity = 40ULL << 20;
    ck_assert_int_eq(ms_replay_run(s, &o, &r, &d), MS_OK);
    ck_assert_msg(r.dev[0].agreement_pct == 100.0, "%s", r.dev[0].first.what);
    ck_assert_uint_eq(r.dev[0].release_points, 0); /* the model released by itself */
    ms_replay_result_free(&r);
    ms_snapshot_free(s);
}
END_TEST

/* A free completed later (record_stream) keeps its block busy meanwhile:
 * freeing it at free_requested would move the alloc at event 3. */
START_TEST(deferred_free)
{
    ms_snapshot *s = load(data("deferred.csv"));
    ms_replay_result r = replay(s, NULL);
    const ms_replay_device_result *dv = &r.dev[0];
    assert_count(&dv->seg[SEG_ALLOC], 1, 1, 1);
    ck_assert_uint_eq(dv->allocs, 3);
    ck_assert_uint_eq(dv->allocs_same_addr, 3);
    ck_assert(!dv->first_placement.found);
    ms_replay_result_free(&r);
    ms_snapshot_free(s);
}
END_TEST

/* Two deferred frees that complete in the other order than requested: each
 * block is free again at its own free_completed, not held behind the other's
 * event (the caching allocator's FIFO of events per stream). */
START_TEST(deferred_frees_out_of_order)
{
    ms_snapshot *s = load(data("deferred-out-of-order.csv"));
    ms_replay_result r = replay(s, NULL);
    const ms_replay_device_result *dv = &r.dev[0];
    assert_count(&dv->seg[SEG_ALLOC], 2, 2, 2);
    ck_assert_msg(dv->agreement_pct == 100.0, "%s", dv->first.what);
    ck_assert_uint_eq(dv->allocs, 5);
    ck_assert_msg(dv->allocs_same_addr == 5, "%s", dv->first_placement.what);
    ms_replay_result_free(&r);
    ms_snapshot_free(s);
}
END_TEST

START_TEST(oom_reproduced)
{
    ms_snapshot *s = load(data("oom.csv"));
    ms_replay_result r = replay(s, NULL);
    const ms_replay_device_result *dv = &r.dev[0];
    /* Capacity: 40 MiB reserved at the oom + device_free 10 MiB. */
    ck_assert(dv->capacity_known);
    ck_assert_uint_eq(dv->capacity, 50 * MiB);
    ck_assert(dv->oom_recorded && dv->oom_predicted && dv->oom_same_event);
    ck_assert_uint_eq(dv->oom_recorded_index, 6);
    ck_assert_uint_eq(dv->oom_predicted_index, 6);
    assert_count(&dv->seg[SEG_ALLOC], 2, 2, 2);
    ck_assert_uint_eq(dv->peak_reserved_predicted, 40 * MiB);
    ck_assert_uint_eq(dv->allocs_same_addr, 5);
    ck_assert_uint_eq(dv->release_points, 0);
    ms_replay_result_free(&r);
    ms_snapshot_free(s);
}
END_TEST

/* oom.csv under expandable segments: two mapped 20 MiB pages hold the four
 * 8 MiB blocks with 8 MiB free at the end, where the 6 MiB request fits. */
START_TEST(oom_avoided_by_expandable_segments)
{
    ms_snapshot *s = load(data("oom.csv"));
    ms_replay_result r = replay(s, "expandable_segments:True");
    const ms_replay_device_result *dv = &r.dev[0];
    ck_assert(dv->oom_recorded);
    ck_assert(!dv->oom_predicted);
    assert_count(&dv->seg[SEG_MAP], 0, 2, 0);
    assert_count(&dv->seg[SEG_ALLOC], 2, 0, 0);
    ck_assert(dv->agreement_pct == 0.0);
    ck_assert_uint_eq(dv->peak_reserved_predicted, 40 * MiB);
    /* The peak is reached with three 8 MiB blocks allocated. */
    ck_assert_uint_eq(dv->fragmentation_at_peak, 16 * MiB);
    /* Recorded segment_alloc at 0, predicted segment_map there. */
    ck_assert(dv->first.found);
    ck_assert_uint_eq(dv->first.index, 0);
    ck_assert_int_eq(dv->first.action, MS_TA_SEGMENT_ALLOC);
    ms_replay_result_free(&r);
    ms_snapshot_free(s);
}
END_TEST

START_TEST(unknown_address_free)
{
    ms_snapshot *s = load(data("unknown-free.csv"));
    ms_replay_options o;
    ms_replay_result r;
    ms_diag d = {0};
    ms_replay_options_default(&o);
    ck_assert_int_eq(ms_replay_run(s, &o, &r, &d), MS_EMISMATCH);
    ck_assert_ptr_nonnull(strstr(d.msg, "device 0 event 2 (free_requested addr 0x7f0000000400"));
    ck_assert_ptr_nonnull(strstr(d.msg, "not allocated"));
    ck_assert_ptr_null(r.dev);
    ms_snapshot_free(s);
}
END_TEST

START_TEST(double_free)
{
    static const char csv[] = "alloc,0x1000000,512,0,1\n"
                              "free_requested,0x1000000,512,0,2\n"
                              "free_completed,0x1000000,512,0,3\n"
                              "free_requested,0x1000000,512,0,4\n";
    ms_snapshot *s = NULL;
    ms_diag d = {0};
    ck_assert_int_eq(ms_snapshot_load_buffer(csv, sizeof csv - 1, "double.csv", &s, &d), MS_OK);
    ms_replay_result r;
    ck_assert_int_eq(ms_replay_run(s, NULL, &r, &d), MS_EMISMATCH);
    ck_assert_ptr_nonnull(strstr(d.msg, "event 3"));
    ms_snapshot_free(s);
}
END_TEST

START_TEST(contradicting_snapshot)
{
    ms_snapshot *s = load(data("contradict.pickle"));
    ms_replay_result r;
    ms_diag d = {0};
    ck_assert_int_eq(ms_replay_run(s, NULL, &r, &d), MS_EMISMATCH);
    ck_assert_ptr_nonnull(strstr(d.msg, "device 0 event 3 (alloc"));
    ck_assert_ptr_nonnull(strstr(d.msg, "contradicts"));
    ms_snapshot_free(s);
}
END_TEST

/* small.pickle (make_small_pickle.py): the pickle path end to end, and the
 * size of a block freed in the trace but allocated before it. */
START_TEST(small_pickle)
{
    ms_snapshot *s = load(data("small.pickle"));
    int nd = 0;
    nd = ms_snapshot_devices(s);
    ck_assert_int_eq(nd, 2);
    const ms_snapshot_segment *segs;
    size_t n;
    segs = ms_snapshot_segments(s, &n);
    ck_assert_uint_eq(n, 1);
    ck_assert_uint_eq(segs[0].addr, 0x7F1000000000ULL);
    ck_assert_uint_eq(segs[0].n_blocks, 2);
    ck_assert_int_eq(segs[0].blocks[1].state, MS_BLOCK_ACTIVE_ALLOCATED);
    ck_assert(segs[0].is_large && !segs[0].is_expandable);
    const ms_trace_event *ev;
    ck_assert_int_eq(ms_snapshot_trace(s, 0, &ev, &n), MS_OK);
    ck_assert_uint_eq(n, 6);
    ck_assert_int_eq(ev[5].action, MS_TA_SEGMENT_FREE);
    ck_assert_int_eq(ev[5].time_us, 105);
    const ms_snapshot_settings *set;
    set = ms_snapshot_settings_get(s);
    ck_assert(set->recorded && !set->expandable_segments);
    ck_assert_int_eq(set->max_split_size, -1);
    ck_assert_str_eq(set->alloc_conf, "");

    ms_replay_result r = replay(s, NULL);
    ck_assert_uint_eq(r.n_devices, 1); /* device 1 has no events */
    const ms_replay_device_result *dv = &r.dev[0];
    /* Start: the 20 MiB segment plus the small 2 MiB segment released at
     * the end.  The pre-trace block at S (3.5 MiB requested) is 4 MiB: the
     * 512 KiB after it could never have been split off (large pool, rest
     * <= 1 MiB), so with the 16 MiB block 20 MiB were allocated. */
    ck_assert_uint_eq(dv->start_reserved, 22 * MiB);
    ck_assert_uint_eq(dv->start_allocated, 20 * MiB);
    ck_assert_uint_eq(dv->peak_reserved_recorded, 22 * MiB);
    ck_assert_uint_eq(dv->peak_reserved_predicted, 22 * MiB);
    assert_count(&dv->seg[SEG_FREE], 1, 1, 1);
    ck_assert_uint_eq(dv->allocs_same_addr, 1);
    ck_assert_uint_eq(dv->release_points, 1);
    ms_replay_result_free(&r);

    /* --device 1: replayed although empty. */
    ms_replay_options o;
    ms_diag d = {0};
    ms_replay_options_default(&o);
    o.device = 1;
    ck_assert_int_eq(ms_replay_run(s, &o, &r, &d), MS_OK);
    ck_assert_uint_eq(r.n_devices, 1);
    ck_assert_int_eq(r.dev[0].device, 1);
    ck_assert_uint_eq(r.dev[0].n_events, 0);
    ms_replay_result_free(&r);
    o.device = 2;
    ck_assert_int_eq(ms_replay_run(s, &o, &r, &d), MS_ENOENT);
    ck_assert_ptr_nonnull(strstr(d.msg, "devices 0 to 1"));
    ms_snapshot_free(s);
}
END_TEST

/* expandable.pickle (make_small_pickle.py): the trace ends with an
 * empty_cache() that unmapped a wholly free 20 MiB page, so it began with
 * two pages mapped as one range; the model, seeded with that range, serves
 * the 8 MiB alloc behind the pre-trace block without mapping and unmaps
 * the same page. */
START_TEST(expandable_start_state)
{
    ms_snapshot *s = load(data("expandable.pickle"));
    ms_replay_result r = replay(s, NULL);
    const ms_replay_device_result *dv = &r.dev[0];
    ck_assert_uint_eq(dv->start_reserved, 40 * MiB);
    ck_assert_uint_eq(dv->start_allocated, 8 * MiB);
    assert_count(&dv->seg[SEG_UNMAP], 1, 1, 1);
    assert_count(&dv->seg[SEG_MAP], 0, 0, 0);
    ck_assert_uint_eq(dv->allocs_same_addr, 1);
    ck_assert_uint_eq(dv->peak_reserved_predicted, 40 * MiB);
    ck_assert_uint_eq(dv->release_points, 1);
    ms_replay_result_free(&r);
    ms_snapshot_free(s);
}
END_TEST

START_TEST(csv_time_series)
{
    char path[] = "/tmp/memsim-replay-XXXXXX";
    int fd = mkstemp(path);
    ck_assert_int_ge(fd, 0);
    close(fd);
    ms_snapshot *s = load(data("basic.csv"));
    ms_replay_options o;
    ms_replay_result r;
    ms_diag d = {0};
    ms_replay_options_default(&o);
    o.csv_path = path;
    ck_assert_int_eq(ms_replay_run(s, &o, &r, &d), MS_OK);
    ms_replay_result_free(&r);
    o.csv_append = true;
    o.alloc_conf = "expandable_segments:True";
    ck_assert_int_eq(ms_replay_run(s, &o, &r, &d), MS_OK);
    ms_replay_result_free(&r);
    FILE *f = fopen(path, "r");
    ck_assert_ptr_nonnull(f);
    char text[8192];
    size_t len = fread(text, 1, sizeof text - 1, f);
    text[len] = '\0';
    fclose(f);
    unlink(path);
    ck_assert_ptr_eq(strstr(text, "device,config,event,time_us,action,allocated,reserved,"
                                  "active,recorded_reserved\n"),
                     text);
    /* After event 9: 1024 + 3072 + 6 MiB + 12 MiB allocated, 34 MiB
     * reserved (basic.csv). */
    ck_assert_ptr_nonnull(strstr(text, "\n0,recorded,9,10,alloc,18878464,35651584,18878464,"
                                       "35651584\n"));
    /* One header only; the what-if rows follow with their label. */
    ck_assert_ptr_null(strstr(text + 1, "device,config"));
    ck_assert_ptr_nonnull(strstr(text, "\n0,expandable_segments:True,1,2,alloc,1024,"));
    ms_snapshot_free(s);
}
END_TEST

static ms_status load_text(const char *text, const char *name, ms_diag *d)
{
    ms_snapshot *s = NULL;
    ms_status st = ms_snapshot_load_buffer(text, strlen(text), name, &s, d);
    if (s != NULL)
        ms_snapshot_free(s);
    return st;
}

START_TEST(csv_errors)
{
    ms_diag d = {0};
    ck_assert_int_eq(load_text("action,addr,size,stream,time_us\nallocate,1,2,0,0\n", "t.csv", &d),
                     MS_EPARSE);
    ck_assert_ptr_nonnull(strstr(d.msg, "t.csv: line 2: field action: unknown action 'allocate'"));
    ck_assert_int_eq(load_text("# c\n\nalloc,0x10,-5,0,0\n", "t.csv", &d), MS_EPARSE);
    ck_assert_ptr_nonnull(strstr(d.msg, "line 3: field size: '-5'"));
    ck_assert_int_eq(load_text("alloc,16,512\n", "t.csv", &d), MS_EPARSE);
    ck_assert_ptr_nonnull(strstr(d.msg, "line 1: expected 5 or 6 fields"));
    ck_assert_int_eq(load_text("alloc,0xzz,512,0,0\n", "t.csv", &d), MS_EPARSE);
    ck_assert_ptr_nonnull(strstr(d.msg, "field addr"));
    ck_assert_int_eq(load_text("alloc,\"16,512,0,0\n", "t.csv", &d), MS_EPARSE);
    ck_assert_ptr_nonnull(strstr(d.msg, "t.csv: line 1"));
    /* Not a trace at all: said so, not a puzzling CSV line. */
    ck_assert_int_eq(load_text("", "t.csv", &d), MS_EPARSE);
    ck_assert_ptr_nonnull(strstr(d.msg, "t.csv: the file is empty: expected the pickle"));
    ck_assert_int_eq(load_text("{\"segments\": []}", "t.json", &d), MS_EPARSE);
    ck_assert_ptr_nonnull(strstr(d.msg, "t.json: the file looks like JSON"));
    ck_assert_int_eq(load_text("ab\x01\x02", "t.bin", &d), MS_EPARSE);
    ck_assert_ptr_nonnull(strstr(d.msg, "binary data (byte 0x01 at offset 2) that is no pickle"));
    ck_assert_int_eq(load_text("[1, 2]", "t.pickle", &d), MS_EPARSE);
    ck_assert_ptr_nonnull(strstr(d.msg, "t.pickle: not a pickle: the input looks like JSON"));
    /* A segment_free of more than is reserved. */
    ms_snapshot *s = NULL;
    const char *bad = "segment_free,0x200000,2097152,0,0\n";
    ck_assert_int_eq(ms_snapshot_load_buffer(bad, strlen(bad), "t.csv", &s, &d), MS_OK);
    ms_replay_result r;
    ck_assert_int_eq(ms_replay_run(s, NULL, &r, &d), MS_EMISMATCH);
    ck_assert_ptr_nonnull(strstr(d.msg, "event 0"));
    ms_snapshot_free(s);
}
END_TEST

START_TEST(pickle_snapshot_errors)
{
    ms_diag d = {0};
    ms_snapshot *s = NULL;
    /* pickle.dumps([], protocol=4) minus the frame: a list, not a dict. */
    ck_assert_int_eq(ms_snapshot_load_buffer("\x80\x04].", 4, "a.pickle", &s, &d), MS_EPARSE);
    ck_assert_ptr_nonnull(strstr(d.msg, "a.pickle: snapshot: expected a dict"));
    /* {} has no segments. */
    ck_assert_int_eq(ms_snapshot_load_buffer("\x80\x04}.", 4, "b.pickle", &s, &d), MS_EPARSE);
    ck_assert_ptr_nonnull(strstr(d.msg, "missing key 'segments'"));
    /* {'segments': [{'address': 'x'}]} */
    static const char seg[] = "\x80\x04}\x8c\x08segments]}\x8c\x07" "address\x8c\x01xsas.";
    ck_assert_int_eq(ms_snapshot_load_buffer(seg, sizeof seg - 1, "c.pickle", &s, &d), MS_EPARSE);
    ck_assert_ptr_nonnull(strstr(d.msg, "segments[0].address: expected int, got str"));
    /* A GLOBAL in a .pickle is refused by the decoder, with its offset. */
    ck_assert_int_eq(ms_snapshot_load_buffer("\x80\x02" "cos\nsystem\n.", 14, "d.pickle", &s, &d),
                     MS_EUNSUPPORTED);
    ck_assert_ptr_nonnull(strstr(d.msg, "d.pickle: pickle: refused"));
    ck_assert_ptr_nonnull(strstr(d.msg, "GLOBAL at offset 2"));
    ck_assert_int_eq(ms_snapshot_load("/nonexistent/trace.pickle", &s, &d), MS_ENOENT);
    ck_assert_ptr_null(s);
}
END_TEST

/* ------------------------------------------------------------ real traces */

static ms_replay_result replay_real(const char *name, ms_snapshot **s)
{
    *s = load(real(name));
    return replay(*s, NULL);
}

/* Every recorded segment event predicted, nothing extra, same peak, every
 * alloc at its recorded address. */
static void assert_exact(const ms_replay_device_result *dv)
{
    for (int k = 0; k < 4; k++) {
        ck_assert_uint_eq(dv->seg[k].matched, dv->seg[k].recorded);
        ck_assert_uint_eq(dv->seg[k].predicted, dv->seg[k].recorded);
    }
    ck_assert_msg(dv->agreement_pct == 100.0, "device %d: %.2f%%: %s", dv->device,
                  dv->agreement_pct, dv->first.what);
    ck_assert_uint_eq(dv->peak_reserved_predicted, dv->peak_reserved_recorded);
    ck_assert_uint_eq(dv->allocs_same_addr, dv->allocs);
}

/* Figures from reading the pickles with Python: 3 segment_alloc, no frees
 * of blocks older than the trace, final reserved 1107296256. */
START_TEST(real_small_forward)
{
    ms_snapshot *s;
    ms_replay_result r = replay_real("pytorch-small-forward.pickle", &s);
    ck_assert_uint_eq(r.n_devices, 1);
    const ms_replay_device_result *dv = &r.dev[0];
    ck_assert_uint_eq(dv->n_events, 8507);
    ck_assert_uint_eq(dv->seg[SEG_ALLOC].recorded, 3);
    ck_assert_uint_eq(dv->peak_reserved_recorded, 1107296256);
    ck_assert_uint_eq(dv->allocs, 2998);
    assert_exact(dv);
    ms_replay_result_free(&r);
    ms_snapshot_free(s);
}
END_TEST

/* No segment events at all: 2162 allocs served from cached blocks, 222 of
 * them freeing blocks allocated before the trace. */
START_TEST(real_train_step)
{
    ms_snapshot *s;
    ms_replay_result r = replay_real("pytorch-train-step-optimizer.pickle", &s);
    const ms_replay_device_result *dv = &r.dev[0];
    ck_assert_uint_eq(dv->n_events, 6486);
    ck_assert_uint_eq(dv->allocs, 2162);
    ck_assert_uint_eq(dv->peak_reserved_recorded, 4238344192ULL);
    ck_assert_uint_eq(dv->start_reserved, 4238344192ULL);
    assert_exact(dv);
    ms_replay_result_free(&r);
    ms_snapshot_free(s);
}
END_TEST

/* Expandable segments on devices 0-2; device 1 runs out of memory at event
 * 421 (5308694528 bytes) after releasing six ranges (events 413-418) and
 * mapping 5305794560 more (419).  Capacity: reserved 84202749952 then +
 * device_free 95682560. */
START_TEST(real_expandable_oom)
{
    ms_snapshot *s;
    ms_replay_result r = replay_real("pytorch-expandable-oom.pickle", &s);
    ck_assert_uint_eq(r.n_devices, 3);
    ms_alloc_config cfg;
    ck_assert_int_eq(ms_snapshot_alloc_config(s, MS_ALLOC_CUDA, &cfg, NULL), MS_OK);
    ck_assert(cfg.expandable_segments);
    static const uint64_t maps[3] = {175, 40, 78};
    static const uint64_t peaks[3] = {8541700096ULL, 84202749952ULL, 21883781120ULL};
    for (int i = 0; i < 3; i++) {
        const ms_replay_device_result *dv = &r.dev[i];
        ck_assert_int_eq(dv->device, i);
        ck_assert_uint_eq(dv->seg[SEG_MAP].recorded, maps[i]);
        ck_assert_uint_eq(dv->peak_reserved_recorded, peaks[i]);
        assert_exact(dv);
    }
    const ms_replay_device_result *d1 = &r.dev[1];
    ck_assert_uint_eq(d1->seg[SEG_UNMAP].recorded, 6);
    ck_assert(d1->capacity_known);
    ck_assert_uint_eq(d1->capacity, 84202749952ULL + 95682560ULL);
    ck_assert(d1->oom_recorded && d1->oom_same_event);
    ck_assert_uint_eq(d1->oom_recorded_index, 421);
    ck_assert_uint_eq(d1->release_points, 0); /* the model found the release itself */
    ck_assert(!r.dev[0].oom_predicted && !r.dev[2].oom_predicted);
    ms_replay_result_free(&r);
    ms_snapshot_free(s);
}
END_TEST

static bool real_traces_present(void)
{
    const char *names[] = {"pytorch-train-step-optimizer.pickle", "pytorch-small-forward.pickle",
                           "pytorch-expandable-oom.pickle"};
    for (size_t i = 0; i < 3; i++)
        if (access(real(names[i]), R_OK) != 0)
            return false;
    return true;
}

int main(void)
{
    const char *src = getenv("MEMSIM_SRCDIR");
    const char *traces = getenv("MEMSIM_TRACES");
    snprintf(data_dir, sizeof data_dir, "%s/tests/data/traces", src ? src : MS_SRCDIR);
    if (traces != NULL)
        snprintf(real_dir, sizeof real_dir, "%s", traces);
    else
        snprintf(real_dir, sizeof real_dir, "%s/../shared/traces", src ? src : MS_SRCDIR);
    bool have_real = real_traces_present();

    Suite *s = suite_create("replay");
    TCase *syn = tcase_create("synthetic");
    tcase_add_test(syn, basic_csv);
    tcase_add_test(syn, deferred_free);
    tcase_add_test(syn, deferred_frees_out_of_order);
    tcase_add_test(syn, empty_cache_is_not_a_retry);
    tcase_add_test(syn, oom_reproduced);
    tcase_add_test(syn, oom_avoided_by_expandable_segments);
    tcase_add_test(syn, unknown_address_free);
    tcase_add_test(syn, double_free);
    tcase_add_test(syn, contradicting_snapshot);
    tcase_add_test(syn, small_pickle);
    tcase_add_test(syn, expandable_start_state);
    tcase_add_test(syn, csv_time_series);
    tcase_add_test(syn, csv_errors);
    tcase_add_test(syn, pickle_snapshot_errors);
    suite_add_tcase(s, syn);
    if (have_real) {
        TCase *tc = tcase_create("real");
        tcase_add_test(tc, real_small_forward);
        tcase_add_test(tc, real_train_step);
        tcase_add_test(tc, real_expandable_oom);
        suite_add_tcase(s, tc);
    }
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    if (failed)
        return EXIT_FAILURE;
    if (!have_real) {
        printf("SKIP: the real PyTorch snapshots are not in %s (set MEMSIM_TRACES); the "
               "synthetic replay tests passed\n",
               real_dir);
        return 77;
    }
    return EXIT_SUCCESS;
}
