/* Replay of a recorded trace through the caching-allocator model, and the
 * comparison of what the model did with what the real allocator recorded.
 *
 * Per device: rebuild the starting state (replay_start.c), import it, then
 * drive every alloc / free_requested / free_completed / oom through
 * ms_alloc_* on the replay backend (replay_backend.c).  Segment events are
 * never driven: the model must produce them.  Those the model emits while
 * serving the request at trace index i are its prediction of the recorded
 * run of segment events just before i (the real allocator records
 * segment_alloc / segment_map, and any segment_free / segment_unmap of a
 * release, before the alloc they serve), so both are lined up backwards
 * from i: "predicted at the same event index".  docs/replay.md has the
 * rules and the report. */
#include "replay_start.h"
#include "lib/base/growable.h"

#include <csv.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

_Static_assert((int)MS_TA_ALLOC == (int)MS_AA_ALLOC && (int)MS_TA_OOM == (int)MS_AA_OOM &&
                   (int)MS_TA_SEGMENT_ALLOC == (int)MS_AA_SEGMENT_ALLOC &&
                   (int)MS_TA_SEGMENT_UNMAP == (int)MS_AA_SEGMENT_UNMAP,
               "trace actions mirror allocator actions");

#define TIB (1ULL << 40)
#define MAX_CAPACITY (1ULL << 50)
#define SEG_INDEX(a) ((int)(a) - (int)MS_TA_SEGMENT_ALLOC)

/* ---- recorded address -> model address ---- */

enum { SLOT_EMPTY = 0, SLOT_FULL, SLOT_DELETED };
enum { ADDR_LIVE = 1, ADDR_FAILED, ADDR_PENDING };

typedef struct amap_slot {
    uint64_t key, val;
    uint8_t state, tag;
} amap_slot;

typedef struct amap {
    amap_slot *s;
    size_t cap, n, used; /* used counts tombstones too */
} amap;

static uint64_t hash_addr(uint64_t x)
{
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdULL;
    x ^= x >> 33;
    return x;
}

static amap_slot *amap_find(const amap *m, uint64_t key)
{
    if (m->cap == 0)
        return NULL;
    for (size_t i = hash_addr(key) & (m->cap - 1);; i = (i + 1) & (m->cap - 1)) {
        if (m->s[i].state == SLOT_EMPTY)
            return NULL;
        if (m->s[i].state == SLOT_FULL && m->s[i].key == key)
            return &m->s[i];
    }
}

static ms_status amap_grow(amap *m)
{
    size_t cap = m->cap ? m->cap : 64;
    while (cap < 4 * (m->n + 1))
        cap *= 2;
    amap_slot *s = calloc(cap, sizeof *s);
    if (s == NULL)
        return MS_ENOMEM;
    for (size_t i = 0; i < m->cap; i++) {
        if (m->s[i].state != SLOT_FULL)
            continue;
        size_t j = hash_addr(m->s[i].key) & (cap - 1);
        while (s[j].state != SLOT_EMPTY)
            j = (j + 1) & (cap - 1);
        s[j] = m->s[i];
    }
    free(m->s);
    m->s = s;
    m->cap = cap;
    m->used = m->n;
    return MS_OK;
}

static ms_status amap_put(amap *m, uint64_t key, uint64_t val, uint8_t tag)
{
    amap_slot *hit = amap_find(m, key);
    if (hit != NULL) {
        hit->val = val;
        hit->tag = tag;
        return MS_OK;
    }
    if (2 * (m->used + 1) > m->cap && amap_grow(m) != MS_OK)
        return MS_ENOMEM;
    size_t i = hash_addr(key) & (m->cap - 1);
    while (m->s[i].state == SLOT_FULL)
        i = (i + 1) & (m->cap - 1);
    if (m->s[i].state == SLOT_EMPTY)
        m->used++;
    m->s[i] = (amap_slot){.key = key, .val = val, .state = SLOT_FULL, .tag = tag};
    m->n++;
    return MS_OK;
}

static void amap_del(amap *m, amap_slot *s)
{
    s->state = SLOT_DELETED;
    m->n--;
}

/* ---- one device's replay ---- */

typedef struct model_ev {
    ms_trace_action action;
    uint64_t addr, size;
} model_ev;

typedef struct rctx {
    const ms_trace_event *ev;
    size_t n;
    int dev;
    ms_start_state start;
    ms_backend *be;
    ms_rb *rb;
    ms_alloc *a;
    model_ev *batch;
    size_t nb, cb;
    bool recording, batch_nomem;
    amap live;
    size_t *next_completed; /* per free_requested: its free_completed, or SIZE_MAX */
    ms_replay_device_result *res;
    uint64_t reserved;   /* predicted, from the model's segment events */
    uint64_t batch_peak; /* highest reserved since the last after_point */
    FILE *csv;
    const char *label;
    ms_diag *d;
} rctx;

static void observe(void *user, const ms_alloc_event *ev)
{
    rctx *c = user;
    if (!c->recording || ev->action < MS_AA_SEGMENT_ALLOC || ev->action > MS_AA_SEGMENT_UNMAP)
        return;
    if (!MS_GROW(c->batch, c->nb, c->cb, 16)) {
        c->batch_nomem = true;
        return;
        }
    c->batch[c->nb++] = (model_ev){(ms_trace_action)ev->action, ev->addr, ev->size};
}

static void note(ms_replay_divergence *dv, size_t index, ms_trace_action action, uint64_t rec,
                 uint64_t pred, const char *what)
{
    if (dv->found && dv->index <= index)
        return;
    dv->found = true;
    dv->index = index;
    dv->action = action;
    dv->recorded_size = rec;
    dv->predicted_size = pred;
    snprintf(dv->what, sizeof dv->what, "%s", what);
}

static void compare_pair(rctx *c, size_t index, const ms_trace_event *r, const model_ev *p)
{
    char what[200];
    if (r != NULL && p != NULL && r->action == p->action && r->size == p->size) {
        c->res->seg[SEG_INDEX(r->action)].matched++;
        return;
    }
    if (r != NULL && p != NULL)
        snprintf(what, sizeof what, "event %zu: recorded %s of %llu bytes, predicted %s of %llu",
                 index, ms_trace_action_name(r->action), (unsigned long long)r->size,
                 ms_trace_action_name(p->action), (unsigned long long)p->size);
    else if (r != NULL)
        snprintf(what, sizeof what, "event %zu: recorded %s of %llu bytes, not predicted", index,
                 ms_trace_action_name(r->action), (unsigned long long)r->size);
    else
        snprintf(what, sizeof what, "event %zu: predicted %s of %llu bytes, not in the trace",
                 index, ms_trace_action_name(p->action), (unsigned long long)p->size);
    note(&c->res->first, index, r ? r->action : p->action, r ? r->size : 0, p ? p->size : 0,
         what);
}

/* Recorded segment events [gs, i) against what the model emitted serving
 * event i, both read backwards from i. */
static void compare_group(rctx *c, size_t gs, size_t i)
{
    const ms_trace_event *r = c->ev + gs;
    size_t nr = i - gs, np = c->nb;
    for (size_t k = 0; k < nr; k++)
        c->res->seg[SEG_INDEX(r[k].action)].recorded++;
    for (size_t k = 0; k < np; k++) {
        const model_ev *p = &c->batch[k];
        c->res->seg[SEG_INDEX(p->action)].predicted++;
        if (p->action == MS_TA_SEGMENT_ALLOC || p->action == MS_TA_SEGMENT_MAP)
            c->reserved += p->size;
        else
            c->reserved = c->reserved >= p->size ? c->reserved - p->size : 0;
        /* A request may reserve and release within itself (a retry). */
        if (c->reserved > c->batch_peak)
            c->batch_peak = c->reserved;
    }
    for (size_t k = nr > np ? nr : np; k > 0; k--)
        compare_pair(c, i >= k ? i - k : 0, k <= nr ? &r[nr - k] : NULL,
                     k <= np ? &c->batch[np - k] : NULL);
}

static ms_status fail_at(rctx *c, size_t i, ms_status st, const char *what, ms_diag *md)
{
    const ms_trace_event *e = &c->ev[i];
    return ms_diag_set(c->d, st == MS_OK ? MS_EMISMATCH : st,
                       "device %d event %zu (%s addr 0x%llx size %llu): %s%s%s", c->dev, i,
                       ms_trace_action_name(e->action), (unsigned long long)e->addr,
                       (unsigned long long)e->size, what, md && md->msg[0] ? ": " : "",
                       md ? md->msg : "");
}

static ms_status trace_stream(rctx *c, uint64_t id, ms_stream **s)
{
    ms_status st = rpl_backend_stream(c->rb, id, s);
    return st == MS_OK ? st : ms_diag_set(c->d, st, "device %d: stream %llu: %s", c->dev,
                                          (unsigned long long)id, ms_strerror(st));
}

static ms_status do_alloc(rctx *c, size_t i)
{
    const ms_trace_event *e = &c->ev[i];
    ms_stream *s = NULL;
    uint64_t maddr = 0;
    ms_diag md = {0};
    ms_status st = trace_stream(c, e->stream, &s);
    if (st != MS_OK)
        return st;
    amap_slot *old = amap_find(&c->live, e->addr);
    if (old != NULL && old->tag != ADDR_FAILED)
        return fail_at(c, i, MS_EMISMATCH, "the address is still allocated in the trace", NULL);
    st = ms_alloc_malloc(c->a, e->size, s, 0, &maddr, &md);
    if (st == MS_ENOMEM) {
        char what[200];
        if (!c->res->oom_predicted) {
            c->res->oom_predicted = true;
            c->res->oom_predicted_index = i;
        }
        snprintf(what, sizeof what,
                 "event %zu: the model ran out of memory for an alloc of %llu bytes that "
                 "succeeded",
                 i, (unsigned long long)e->size);
        note(&c->res->first, i, MS_TA_ALLOC, e->size, 0, what);
        return amap_put(&c->live, e->addr, 0, ADDR_FAILED) == MS_OK
                   ? MS_OK
                   : ms_diag_set(c->d, MS_ENOMEM, "out of host memory");
    }
    if (st != MS_OK)
        return fail_at(c, i, st, "the allocator failed", &md);
    c->res->allocs++;
    if (maddr == e->addr) {
        c->res->allocs_same_addr++;
    } else {
        char what[200];
        snprintf(what, sizeof what,
                 "event %zu: alloc of %llu bytes placed at 0x%llx, recorded at 0x%llx", i,
                 (unsigned long long)e->size, (unsigned long long)maddr,
                 (unsigned long long)e->addr);
        note(&c->res->first_placement, i, MS_TA_ALLOC, e->size, e->size, what);
    }
    return amap_put(&c->live, e->addr, maddr, ADDR_LIVE) == MS_OK
               ? MS_OK
               : ms_diag_set(c->d, MS_ENOMEM, "out of host memory");
}

/* A recorded oom: the request (its rounded size) must fail in the model. */
static ms_status do_oom(rctx *c, size_t i, ms_alloc_flavour flavour)
{
    const ms_trace_event *e = &c->ev[i];
    ms_stream *s = NULL;
    uint64_t maddr = 0, size = e->size;
    ms_diag md = {0};
    /* NPU rounding pads by 32 bytes before rounding (reference "Sizes"):
     * take it back so the model rounds to the same size. */
    if (flavour == MS_ALLOC_NPU && size > 32)
        size -= 32;
    ms_status st = trace_stream(c, e->stream, &s);
    if (st != MS_OK)
        return st;
    st = ms_alloc_malloc(c->a, size, s, 0, &maddr, &md);
    if (st == MS_ENOMEM) {
        if (!c->res->oom_predicted) {
            c->res->oom_predicted = true;
            c->res->oom_predicted_index = i;
        }
        return MS_OK;
    }
    if (st != MS_OK)
        return fail_at(c, i, st, "the allocator failed", &md);
    char what[200];
    snprintf(what, sizeof what, "event %zu: recorded oom for %llu bytes, the model served it", i,
             (unsigned long long)e->size);
    note(&c->res->first, i, MS_TA_OOM, e->size, 0, what);
    /* It never existed in the recorded run: give it back at once. */
    st = ms_alloc_free(c->a, maddr);
    return st == MS_OK ? st : fail_at(c, i, st, "the allocator refused a free", NULL);
}

static ms_status do_free_requested(rctx *c, size_t i, bool *skip_next)
{
    const ms_trace_event *e = &c->ev[i];
    amap_slot *slot = amap_find(&c->live, e->addr);
    if (slot == NULL || slot->tag == ADDR_PENDING)
        return fail_at(c, i, MS_EMISMATCH, "free of an address that is not allocated", NULL);
    size_t done = c->next_completed[i];
    *skip_next = done == i + 1;
    if (slot->tag == ADDR_FAILED) {
        amap_del(&c->live, slot);
        if (done != SIZE_MAX && done != i + 1)
            return amap_put(&c->live, e->addr, 0, ADDR_FAILED);
        return MS_OK;
    }
    uint64_t maddr = slot->val;
    ms_status st;
    if (done != i + 1) {
        /* Completed later (record_stream): the block waits on a stream whose
         * event completes at that free_completed. */
        ms_stream *side = NULL;
        st = rpl_backend_side_stream(c->rb, done, &side);
        if (st == MS_OK)
            st = ms_alloc_record_stream(c->a, maddr, side);
        if (st != MS_OK)
            return fail_at(c, i, st, "record_stream for a deferred free failed", NULL);
        slot->tag = ADDR_PENDING;
    } else {
        amap_del(&c->live, slot);
    }
    st = ms_alloc_free(c->a, maddr);
    return st == MS_OK ? st : fail_at(c, i, st, "the allocator refused the free", NULL);
}

static ms_status do_free_completed(rctx *c, size_t i)
{
    const ms_trace_event *e = &c->ev[i];
    amap_slot *slot = amap_find(&c->live, e->addr);
    if (slot == NULL)
        return fail_at(c, i, MS_EMISMATCH, "free of an address that is not allocated", NULL);
    uint8_t tag = slot->tag;
    uint64_t maddr = slot->val;
    amap_del(&c->live, slot);
    if (tag != ADDR_LIVE)
        return MS_OK; /* pending: its event completes now; failed: never existed */
    /* Requested before the trace began: free it now. */
    ms_status st = ms_alloc_free(c->a, maddr);
    return st == MS_OK ? st : fail_at(c, i, st, "the allocator refused the free", NULL);
}

/* As every memsim CSV (docs/csv-schemas.md): a plain token is written
 * bare, anything else through libcsv's quoting. */
static void csv_text(FILE *f, const char *s)
{
    bool plain = s[0] != '\0';
    for (const char *p = s; *p && plain; p++)
        plain = (*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') ||
                strchr("._-+:/", *p) != NULL;
    if (plain)
        fputs(s, f);
    else
        csv_fwrite(f, s, strlen(s));
}

static void write_row(rctx *c, size_t i, const ms_alloc_stats *stats)
{
    const ms_trace_event *e = &c->ev[i];
    fprintf(c->csv, "%d,", c->dev);
    csv_text(c->csv, c->label);
    fprintf(c->csv, ",%zu,%lld,%s,%lld,%llu,%lld,%llu\n", i, (long long)e->time_us,
            ms_trace_action_name(e->action),
            (long long)stats->allocated_bytes[MS_STAT_ALL].current,
            (unsigned long long)c->reserved, (long long)stats->active_bytes[MS_STAT_ALL].current,
            (unsigned long long)c->start.reserved_after[i]);
}

static ms_status after_point(rctx *c, size_t i)
{
    ms_alloc_stats stats = ms_alloc_get_stats(c->a);
    uint64_t allocated = stats.allocated_bytes[MS_STAT_ALL].current > 0
                             ? (uint64_t)stats.allocated_bytes[MS_STAT_ALL].current
                             : 0;
    ms_replay_device_result *r = c->res;
    uint64_t peak = c->batch_peak > c->reserved ? c->batch_peak : c->reserved;
    c->batch_peak = 0;
    if (peak > r->peak_reserved_predicted) {
        r->peak_reserved_predicted = peak;
        r->fragmentation_at_peak = peak > allocated ? peak - allocated : 0;
    }
    if (allocated > r->peak_allocated_predicted)
        r->peak_allocated_predicted = allocated;
    if (c->csv != NULL && i < c->n)
        write_row(c, i, &stats);
    return MS_OK;
}

static bool is_release(ms_trace_action a)
{
    return a == MS_TA_SEGMENT_FREE || a == MS_TA_SEGMENT_UNMAP;
}

/* Whether the segments released in [gs, i) before the alloc at i are the
 * allocator's own retry.  PyTorch releases cached segments itself only after
 * a device malloc failed (malloc: alloc_block fails, then
 * release_available_cached_blocks or release_cached_blocks, then alloc_block
 * again), so a retry ends with the new memory it could then get, and that
 * memory did not fit beside what was reserved before the release.  Anything
 * else - no new memory, or memory that fitted anyway - is the user's
 * torch.cuda.empty_cache() followed by an allocation. */
static bool is_retry(const rctx *c, size_t gs, size_t i)
{
    uint64_t before = gs > 0 ? c->start.reserved_after[gs - 1] : c->start.reserved;
    uint64_t grown = 0;
    for (size_t k = gs; k < i; k++)
        if (c->ev[k].action == MS_TA_SEGMENT_ALLOC || c->ev[k].action == MS_TA_SEGMENT_MAP)
            grown += c->ev[k].size;
    return grown > 0 && before + grown > c->res->capacity;
}

/* Replay trace event i (i == n: the end), whose recorded segment events
 * are [gs, i). */
static ms_status replay_point(rctx *c, size_t gs, size_t i, ms_alloc_flavour flavour,
                              bool *skip_next)
{
    bool release = false;
    for (size_t k = gs; k < i; k++)
        release = release || is_release(c->ev[k].action);
    ms_trace_action act = i < c->n ? c->ev[i].action : MS_TA_SNAPSHOT;
    bool serves = act == MS_TA_ALLOC || act == MS_TA_OOM;
    ms_status st = rpl_backend_set_hints(c->rb, c->ev + gs, i - gs);
    if (st == MS_OK)
        st = rpl_backend_set_cursor(c->rb, i, i < c->n ? c->ev[i].time_us : 0);
    if (st != MS_OK)
        return ms_diag_set(c->d, st, "out of host memory");
    c->nb = 0;
    /* Segments released where nothing is served are an empty_cache(); where
     * an alloc follows they may be the allocator's own retry after a failed
     * device malloc (is_retry), which the model must find itself, given the
     * capacity.  Without a known capacity it cannot: the release is taken
     * from the trace. */
    if (release && (!serves || !c->res->capacity_known || !is_retry(c, gs, i))) {
        c->res->release_points++;
        st = ms_alloc_empty_cache(c->a);
        if (st != MS_OK)
            return ms_diag_set(c->d, st, "device %d event %zu: empty_cache: %s", c->dev, i,
                               ms_strerror(st));
    }
    *skip_next = false;
    if (act == MS_TA_ALLOC)
        st = do_alloc(c, i);
    else if (act == MS_TA_OOM)
        st = do_oom(c, i, flavour);
    else if (act == MS_TA_FREE_REQUESTED)
        st = do_free_requested(c, i, skip_next);
    else if (act == MS_TA_FREE_COMPLETED)
        st = do_free_completed(c, i);
    if (st != MS_OK)
        return st;
    if (c->batch_nomem)
        return ms_diag_set(c->d, MS_ENOMEM, "out of host memory");
    if (i < c->n && act != MS_TA_SNAPSHOT && act != MS_TA_USER_DEFINED)
        c->res->n_replayed++;
    compare_group(c, gs, i);
    return after_point(c, i);
}

static ms_status run_events(rctx *c, ms_alloc_flavour flavour)
{
    size_t gs = 0;
    bool skip = false;
    for (size_t i = 0; i < c->n; i++) {
        ms_trace_action a = c->ev[i].action;
        if (a >= MS_TA_SEGMENT_ALLOC && a <= MS_TA_SEGMENT_UNMAP)
            continue;
        if (skip && a == MS_TA_FREE_COMPLETED) {
            /* The second half of a free the model already completed. */
            skip = false;
            ms_status st = after_point(c, i);
            if (st != MS_OK)
                return st;
            gs = i + 1;
            continue;
        }
        ms_status st = replay_point(c, gs, i, flavour, &skip);
        if (st != MS_OK)
            return st;
        gs = i + 1;
    }
    bool unused;
    return gs < c->n ? replay_point(c, gs, c->n, flavour, &unused) : MS_OK;
}

/* For each free_requested, the index of the free_completed of the same
 * address (SIZE_MAX: none in the trace). */
static ms_status link_frees(rctx *c)
{
    amap next = {0};
    c->next_completed = malloc((c->n ? c->n : 1) * sizeof *c->next_completed);
    if (c->next_completed == NULL)
        return ms_diag_set(c->d, MS_ENOMEM, "out of host memory");
    ms_status st = MS_OK;
    for (size_t i = c->n; i-- > 0 && st == MS_OK;) {
        const ms_trace_event *e = &c->ev[i];
        c->next_completed[i] = SIZE_MAX;
        if (e->action == MS_TA_FREE_COMPLETED) {
            st = amap_put(&next, e->addr, i, ADDR_LIVE);
        } else if (e->action == MS_TA_FREE_REQUESTED) {
            amap_slot *s = amap_find(&next, e->addr);
            if (s != NULL) {
                c->next_completed[i] = (size_t)s->val;
                amap_del(&next, s);
            }
        } else if (e->action == MS_TA_ALLOC) {
            amap_slot *s = amap_find(&next, e->addr);
            if (s != NULL)
                amap_del(&next, s);
        }
    }
    free(next.s);
    return st == MS_OK ? st : ms_diag_set(c->d, st, "out of host memory");
}

static int cmp_u64(const void *x, const void *y)
{
    uint64_t a = *(const uint64_t *)x, b = *(const uint64_t *)y;
    return a < b ? -1 : a > b;
}

/* Every stream handle the trace and its starting state use. */
static ms_status declare_streams(rctx *c)
{
    size_t n = c->n + c->start.n_segs, k = 0;
    uint64_t *h = malloc((n ? n : 1) * sizeof *h);
    if (h == NULL)
        return ms_diag_set(c->d, MS_ENOMEM, "out of host memory");
    for (size_t i = 0; i < c->n; i++)
        h[k++] = c->ev[i].stream;
    for (size_t i = 0; i < c->start.n_segs; i++)
        h[k++] = c->start.segs[i].stream;
    qsort(h, k, sizeof *h, cmp_u64);
    size_t u = 0;
    for (size_t i = 0; i < k; i++)
        if (u == 0 || h[i] != h[u - 1])
            h[u++] = h[i];
    ms_status st = u >= 0xffff ? MS_ERANGE : rpl_backend_set_stream_handles(c->rb, h, u);
    free(h);
    if (st != MS_OK)
        return ms_diag_set(c->d, st, "device %d: %zu streams: %s", c->dev, u, ms_strerror(st));
    return MS_OK;
}

static ms_status import_start(rctx *c)
{
    for (size_t k = 0; k < c->start.n_segs; k++) {
        const ms_start_segment *sg = &c->start.segs[k];
        ms_stream *s = NULL;
        ms_status st = rpl_backend_account(c->rb, sg->addr, sg->size, sg->expandable);
        if (st == MS_OK)
            st = trace_stream(c, sg->stream, &s);
        if (st == MS_OK)
            st = ms_alloc_import_segment(c->a, sg->addr, sg->size, s, sg->expandable, sg->blocks,
                                         sg->n_blocks);
        if (st != MS_OK)
            return ms_diag_set(c->d, st,
                               "device %d: importing the starting segment at 0x%llx (%llu bytes): "
                               "%s",
                               c->dev, (unsigned long long)sg->addr,
                               (unsigned long long)sg->size, ms_strerror(st));
        for (uint32_t b = 0; b < sg->n_blocks; b++) {
            if (sg->blocks[b].allocated &&
                amap_put(&c->live, sg->blocks[b].addr, sg->blocks[b].addr, ADDR_LIVE) != MS_OK)
                return ms_diag_set(c->d, MS_ENOMEM, "out of host memory");
        }
    }
    return MS_OK;
}

/* reserved + device_free at the first oom that recorded device_free. */
static bool oom_capacity(const ms_trace_event *ev, size_t n, const ms_start_state *start,
                         uint64_t *cap, size_t *index)
{
    for (size_t i = 0; i < n; i++) {
        if (ev[i].action != MS_TA_OOM)
            continue;
        if (index != NULL)
            *index = i;
        if (!ev[i].has_device_free)
            return false;
        *cap = (i > 0 ? start->reserved_after[i - 1] : start->reserved) + ev[i].device_free;
        return true;
    }
    return false;
}

typedef struct run_setup {
    const ms_snapshot *s;
    const ms_replay_options *opt;
    ms_alloc_config rec_cfg;   /* what the trace ran with: sizes its blocks */
    ms_alloc_config model_cfg; /* what the model runs with */
    uint64_t borrowed_cap;     /* from another device's oom; 0: none */
    uint64_t fresh_base;
    FILE *csv;
    const char *label;
} run_setup;

static void pick_capacity(rctx *c, const run_setup *rs)
{
    ms_replay_device_result *r = c->res;
    uint64_t cap = 0;
    size_t oom_at = 0;
    bool own = oom_capacity(c->ev, c->n, &c->start, &cap, &oom_at);
    if (rs->opt->capacity > 0) {
        cap = rs->opt->capacity;
        r->capacity_known = true;
    } else if (own) {
        r->capacity_known = true;
    } else if (rs->borrowed_cap > 0) {
        /* The devices of one snapshot are one process's GPUs: the same
         * capacity is the best guess (used for sizing only, not trusted to
         * predict releases). */
        cap = rs->borrowed_cap;
    } else {
        uint64_t peak = c->start.peak_reserved;
        cap = peak >= MAX_CAPACITY / 2 ? MAX_CAPACITY : 2 * peak > TIB ? 2 * peak : TIB;
    }
    /* No device holds a petabyte; the bound keeps a corrupt device_free from
     * sizing the model's page tables (expandable segments) absurdly. */
    if (cap > MAX_CAPACITY)
        cap = MAX_CAPACITY;
    if (cap < c->start.reserved)
        cap = c->start.reserved;
    r->capacity = cap;
}

static ms_status replay_device(const run_setup *rs, int dev, ms_replay_device_result *r,
                               ms_diag *d)
{
    rctx c = {.dev = dev, .res = r, .d = d, .csv = rs->csv, .label = rs->label};
    ms_status st = ms_snapshot_trace(rs->s, dev, &c.ev, &c.n);
    if (st != MS_OK)
        return ms_diag_set(d, st, "device %d: not in the snapshot", dev);
    memset(r, 0, sizeof *r);
    r->device = dev;
    r->n_events = c.n;
    for (size_t i = 0; i < c.n && !r->oom_recorded; i++) {
        if (c.ev[i].action == MS_TA_OOM) {
            r->oom_recorded = true;
            r->oom_recorded_index = i;
        }
    }
    st = rpl_start_state_build(rs->s, dev, &rs->rec_cfg, &c.start, d);
    if (st != MS_OK)
        return st;
    r->start_reserved = c.start.reserved;
    r->start_allocated = c.start.allocated;
    r->peak_reserved_recorded = c.start.peak_reserved;
    c.reserved = c.start.reserved;
    r->peak_reserved_predicted = c.start.reserved;
    r->fragmentation_at_peak = c.start.reserved - c.start.allocated;
    pick_capacity(&c, rs);
    st = link_frees(&c);
    if (st == MS_OK &&
        rpl_backend_create(r->capacity, r->capacity, rs->fresh_base, &c.be, &c.rb) != MS_OK)
        st = ms_diag_set(d, MS_ENOMEM, "out of host memory");
    if (st == MS_OK)
        st = declare_streams(&c);
    if (st == MS_OK) {
        st = ms_alloc_create(c.be, &rs->model_cfg, &c.a);
        if (st != MS_OK)
            st = ms_diag_set(d, st, "device %d: creating the allocator model: %s", dev,
                             ms_strerror(st));
    }
    if (st == MS_OK)
        st = ms_alloc_set_observer(c.a, observe, &c);
    if (st == MS_OK)
        st = import_start(&c);
    c.recording = true;
    if (st == MS_OK)
        st = run_events(&c, rs->model_cfg.flavour);
    uint64_t rec = 0, matched = 0, pred = 0;
    for (int k = 0; k < 4; k++) {
        rec += r->seg[k].recorded;
        pred += r->seg[k].predicted;
        matched += r->seg[k].matched;
    }
    uint64_t denom = rec + pred - matched;
    r->agreement_pct = denom ? 100.0 * (double)matched / (double)denom : 100.0;
    r->oom_same_event = r->oom_recorded && r->oom_predicted &&
                        r->oom_recorded_index == r->oom_predicted_index;
    if (r->oom_recorded && !r->oom_predicted)
        note(&r->first, r->oom_recorded_index, MS_TA_OOM, c.ev[r->oom_recorded_index].size, 0,
             "the recorded oom was not reproduced: the model served every request");
    if (c.a != NULL)
        ms_alloc_destroy(c.a);
    if (c.be != NULL)
        ms_backend_close(c.be);
    rpl_start_state_free(&c.start);
    free(c.batch);
    free(c.live.s);
    free(c.next_completed);
    return st;
}

/* Fresh addresses start above every address the snapshot mentions. */
static uint64_t fresh_base(const ms_snapshot *s)
{
    const ms_snapshot_segment *segs = NULL;
    size_t n = 0;
    int nd = 0;
    uint64_t top = 0;
    segs = ms_snapshot_segments(s, &n);
    for (size_t i = 0; i < n; i++)
        if (segs[i].addr + segs[i].total_size > top)
            top = segs[i].addr + segs[i].total_size;
    nd = ms_snapshot_devices(s);
    for (int dev = 0; dev < nd; dev++) {
        const ms_trace_event *ev = NULL;
        ms_snapshot_trace(s, dev, &ev, &n);
        for (size_t i = 0; i < n; i++)
            if (ev[i].addr + ev[i].size > top)
                top = ev[i].addr + ev[i].size;
    }
    return (top / (1ULL << 30) + 2) * (1ULL << 30);
}

static ms_status setup(const ms_snapshot *s, const ms_replay_options *opt, run_setup *rs,
                       ms_diag *d)
{
    memset(rs, 0, sizeof *rs);
    rs->s = s;
    rs->opt = opt;
    ms_status st = ms_snapshot_alloc_config(s, opt->flavour, &rs->rec_cfg, d);
    if (st != MS_OK)
        return st;
    rs->model_cfg = rs->rec_cfg;
    if (opt->alloc_conf != NULL) {
        st = ms_alloc_config_default(opt->flavour, &rs->model_cfg);
        if (st == MS_OK)
            st = ms_alloc_config_parse(opt->alloc_conf, &rs->model_cfg, d);
        if (st != MS_OK) {
            ms_diag_prefix(d, "--allocator-conf '%s': ", opt->alloc_conf);
            return st;
        }
    }
    rs->fresh_base = fresh_base(s);
    rs->label = opt->label ? opt->label : opt->alloc_conf ? opt->alloc_conf : "recorded";
    return MS_OK;
}

/* A capacity any device's oom tells, for devices whose trace has none. */
static ms_status borrow_capacity(run_setup *rs, int nd, ms_diag *d)
{
    for (int dev = 0; dev < nd && rs->borrowed_cap == 0; dev++) {
        const ms_trace_event *ev = NULL;
        size_t n = 0;
        bool has_oom = false;
        ms_snapshot_trace(rs->s, dev, &ev, &n);
        for (size_t i = 0; i < n && !has_oom; i++)
            has_oom = ev[i].action == MS_TA_OOM;
        if (!has_oom)
            continue;
        ms_start_state st;
        uint64_t cap = 0;
        ms_status s = rpl_start_state_build(rs->s, dev, &rs->rec_cfg, &st, d);
        if (s != MS_OK)
            return s;
        if (oom_capacity(ev, n, &st, &cap, NULL))
            rs->borrowed_cap = cap;
        rpl_start_state_free(&st);
    }
    return MS_OK;
}

ms_status ms_replay_options_default(ms_replay_options *o)
{
    if (o == NULL)
        return MS_EINVAL;
    memset(o, 0, sizeof *o);
    o->flavour = MS_ALLOC_CUDA;
    o->device = -1;
    return MS_OK;
}

static ms_status open_csv(const ms_replay_options *opt, FILE **out, ms_diag *d)
{
    *out = NULL;
    if (opt->csv_path == NULL)
        return MS_OK;
    FILE *f = fopen(opt->csv_path, opt->csv_append ? "a" : "w");
    if (f == NULL)
        return ms_diag_set(d, MS_EIO, "%s: cannot write", opt->csv_path);
    if (!opt->csv_append)
        fputs("device,config,event,time_us,action,allocated,reserved,active,recorded_reserved\n",
              f);
    *out = f;
    return MS_OK;
}

ms_status ms_replay_run(const ms_snapshot *s, const ms_replay_options *opt, ms_replay_result *out,
                        ms_diag *d)
{
    ms_replay_options defaults;
    if (s == NULL || out == NULL)
        return ms_diag_set(d, MS_EINVAL, "ms_replay_run: NULL argument");
    memset(out, 0, sizeof *out);
    if (opt == NULL) {
        ms_replay_options_default(&defaults);
        opt = &defaults;
    }
    int nd = 0;
    nd = ms_snapshot_devices(s);
    if (opt->device >= nd || opt->device < -1)
        return ms_diag_set(d, MS_ENOENT, "device %d: the snapshot has devices 0 to %d",
                           opt->device, nd - 1);
    run_setup rs;
    ms_status st = setup(s, opt, &rs, d);
    if (st == MS_OK)
        st = borrow_capacity(&rs, nd, d);
    if (st != MS_OK)
        return st;
    out->dev = calloc(nd > 0 ? (size_t)nd : 1, sizeof *out->dev);
    if (out->dev == NULL)
        return ms_diag_set(d, MS_ENOMEM, "out of host memory");
    st = open_csv(opt, &rs.csv, d);
    for (int dev = 0; dev < nd && st == MS_OK; dev++) {
        const ms_trace_event *ev = NULL;
        size_t n = 0;
        ms_snapshot_trace(s, dev, &ev, &n);
        if (opt->device >= 0 ? dev != opt->device : n == 0)
            continue;
        st = replay_device(&rs, dev, &out->dev[out->n_devices], d);
        out->n_devices++;
    }
    if (rs.csv != NULL && fclose(rs.csv) != 0 && st == MS_OK)
        st = ms_diag_set(d, MS_EIO, "%s: write error", opt->csv_path);
    if (st != MS_OK)
        ms_replay_result_free(out);
    return st;
}

ms_status ms_replay_result_free(ms_replay_result *r)
{
    if (r == NULL)
        return MS_EINVAL;
    free(r->dev);
    r->dev = NULL;
    r->n_devices = 0;
    return MS_OK;
}
