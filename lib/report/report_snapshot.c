/* The run as a PyTorch memory snapshot (ms_report_write_snapshot): the dict
 * torch.cuda.memory._snapshot() returns and _dump_snapshot() pickles,
 *   {"segments": [{"device", "address", "total_size", "allocated_size",
 *                  "active_size", "requested_size", "stream", "segment_type",
 *                  "segment_pool_id", "is_expandable", "frames",
 *                  "blocks": [{"address", "size", "requested_size", "state",
 *                              "frames"}]}],
 *    "device_traces": [[{"action", "addr", "size", "stream", "time_us",
 *                        "frames"}] per device],
 *    "allocator_settings": {...}}
 * with the names of ../shared/reference/caching-allocator.md ("Memory
 * snapshots").  A trace is a window of the allocator's history ending where
 * the segments were taken, so a replay can rebuild the state it began from. */
#include "memsim/report.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "pickle_out.h"
#include "report_internal.h"

/* Where each device's trace ends: the last step whose allocator blocks the
 * record holds, at that step's end or at its OOM. */
typedef struct window {
    int step; /* -1: none */
    ms_snapshot_when when;
    size_t end; /* memory rows of the step before this index */
} window;

/* (address, tensor) of the allocations before a window's end. */
typedef struct owner {
    uint64_t addr;
    size_t row;
    uint32_t tensor;
} owner;

static int cmp_owner(const void *a, const void *b)
{
    const owner *x = a, *y = b;
    if (x->addr != y->addr)
        return x->addr < y->addr ? -1 : 1;
    return x->row < y->row ? -1 : x->row > y->row;
}

typedef struct export_ctx {
    const ms_run_record *rec;
    const ms_program_view *programs;
    size_t n_programs;
    int n_devices;
    window *win; /* n_devices */
    rep_pickle pk;
} export_ctx;

static int devices_of(const ms_run_record *rec)
{
    int max = -1;
    for (size_t i = 0; i < ms_record_n_mem(rec); i++)
        max = ms_record_mem(rec, i)->device > max ? ms_record_mem(rec, i)->device : max;
    for (size_t i = 0; i < ms_record_n_segments(rec); i++)
        max = ms_record_segment(rec, i)->device > max ? ms_record_segment(rec, i)->device : max;
    return max + 1;
}

static void find_windows(export_ctx *x)
{
    for (int dev = 0; dev < x->n_devices; dev++)
        x->win[dev] = (window){.step = -1};
    for (size_t i = 0; i < ms_record_n_segments(x->rec); i++) {
        const ms_segment_row *s = ms_record_segment(x->rec, i);
        window *w = &x->win[s->device];
        if (s->device >= 0 && s->step > w->step)
            *w = (window){.step = s->step, .when = s->when};
    }
    /* The trace of a step that ran out of memory ends at its oom event: the
     * blocks were taken there, before the step's tensors were released. */
    for (size_t i = 0; i < ms_record_n_mem(x->rec); i++) {
        const ms_mem_row *m = ms_record_mem(x->rec, i);
        if (m->device < 0 || m->device >= x->n_devices)
            continue;
        window *w = &x->win[m->device];
        if (m->step != w->step)
            continue;
        if (w->when == MS_SNAP_STEP_END || m->action == MS_AA_OOM || w->end == 0)
            w->end = i + 1;
    }
}

static const ms_program_view *program_of(const export_ctx *x, int device)
{
    return device >= 0 && (size_t)device < x->n_programs ? &x->programs[device] : NULL;
}

/* The frame a block or event shows in PyTorch's viewer: the tensor, and the
 * op that makes it as the "file" and its id as the "line". */
static void put_frames(export_ctx *x, int device, uint32_t tensor)
{
    rep_pickle *p = &x->pk;
    const ms_program_view *pv = program_of(x, device);
    rep_pkl_list_begin(p);
    if (pv != NULL && tensor < pv->n_tensors) {
        const ms_tensor *t = &pv->tensors[tensor];
        char name[400];
        snprintf(name, sizeof name, "%s [%s]", t->name ? t->name : "?",
                 ms_tensor_kind_name(t->kind));
        bool made = t->producer != MS_NONE && (uint32_t)t->producer < pv->n_ops;
        rep_pkl_dict_begin(p);
        rep_pkl_key(p, "filename");
        rep_pkl_str(p, made ? pv->ops[t->producer].name : "(before the step: persistent or input)");
        rep_pkl_key(p, "line");
        rep_pkl_int(p, made ? t->producer : 0);
        rep_pkl_key(p, "name");
        rep_pkl_str(p, name);
        rep_pkl_dict_end(p);
    }
    rep_pkl_list_end(p);
}

static void put_event(export_ctx *x, const ms_mem_row *m)
{
    rep_pickle *p = &x->pk;
    rep_pkl_dict_begin(p);
    rep_pkl_key(p, "action");
    rep_pkl_str(p, ms_alloc_action_name((ms_alloc_action)m->action));
    rep_pkl_key(p, "addr");
    rep_pkl_int(p, (int64_t)m->addr);
    rep_pkl_key(p, "size");
    rep_pkl_int(p, (int64_t)m->bytes);
    rep_pkl_key(p, "stream");
    rep_pkl_int(p, (int64_t)m->stream_id);
    rep_pkl_key(p, "time_us");
    rep_pkl_int(p, m->time_ns / 1000);
    if (m->action == MS_AA_OOM) {
        /* As PyTorch records it: addr holds the device's free bytes. */
        rep_pkl_key(p, "device_free");
        rep_pkl_int(p, (int64_t)m->addr);
    }
    rep_pkl_key(p, "frames");
    put_frames(x, m->device, m->tensor);
    rep_pkl_dict_end(p);
}

static void put_traces(export_ctx *x)
{
    rep_pickle *p = &x->pk;
    rep_pkl_list_begin(p);
    for (int dev = 0; dev < x->n_devices; dev++) {
        const window *w = &x->win[dev];
        rep_pkl_list_begin(p);
        for (size_t i = 0; w->step >= 0 && i < w->end; i++) {
            const ms_mem_row *m = ms_record_mem(x->rec, i);
            if (m->device == dev && m->step == w->step)
                put_event(x, m);
        }
        rep_pkl_list_end(p);
    }
    rep_pkl_list_end(p);
}

/* The allocations of a device up to its window's end, latest per address. */
static ms_status owners_of(const export_ctx *x, int dev, owner **out, size_t *n)
{
    const window *w = &x->win[dev];
    size_t cap = 0;
    *out = NULL;
    *n = 0;
    for (size_t i = 0; i < w->end; i++) {
        const ms_mem_row *m = ms_record_mem(x->rec, i);
        cap += m->device == dev && m->action == MS_AA_ALLOC && m->tensor != UINT32_MAX;
    }
    owner *o = malloc((cap ? cap : 1) * sizeof *o);
    if (o == NULL)
        return MS_ENOMEM;
    for (size_t i = 0; i < w->end; i++) {
        const ms_mem_row *m = ms_record_mem(x->rec, i);
        if (m->device == dev && m->action == MS_AA_ALLOC && m->tensor != UINT32_MAX)
            o[(*n)++] = (owner){m->addr, i, m->tensor};
    }
    qsort(o, *n, sizeof *o, cmp_owner);
    *out = o;
    return MS_OK;
}

static uint32_t owner_at(const owner *o, size_t n, uint64_t addr)
{
    size_t lo = 0, hi = n;
    while (lo < hi) { /* the last entry with this address */
        size_t mid = lo + (hi - lo) / 2;
        if (o[mid].addr <= addr)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo > 0 && o[lo - 1].addr == addr ? o[lo - 1].tensor : UINT32_MAX;
}

static const char *block_state(const ms_block_info *b)
{
    return b->allocated ? "active_allocated" : b->pending_free ? "active_pending_free" : "inactive";
}

/* One segment: the rows [first, last) of the record's segment rows. */
static void put_segment(export_ctx *x, size_t first, size_t last, const owner *o, size_t n_o)
{
    rep_pickle *p = &x->pk;
    const ms_segment_row *s0 = ms_record_segment(x->rec, first);
    uint64_t allocated = 0, active = 0, requested = 0;
    for (size_t i = first; i < last; i++) {
        const ms_block_info *b = &ms_record_segment(x->rec, i)->block;
        allocated += b->allocated ? b->size : 0;
        active += b->allocated || b->pending_free ? b->size : 0;
        requested += b->allocated || b->pending_free ? b->requested : 0;
    }
    rep_pkl_dict_begin(p);
    rep_pkl_key(p, "device");
    rep_pkl_int(p, s0->device);
    rep_pkl_key(p, "address");
    rep_pkl_int(p, (int64_t)s0->block.segment_addr);
    rep_pkl_key(p, "total_size");
    rep_pkl_int(p, (int64_t)s0->block.segment_size);
    rep_pkl_key(p, "allocated_size");
    rep_pkl_int(p, (int64_t)allocated);
    rep_pkl_key(p, "active_size");
    rep_pkl_int(p, (int64_t)active);
    rep_pkl_key(p, "requested_size");
    rep_pkl_int(p, (int64_t)requested);
    rep_pkl_key(p, "stream");
    rep_pkl_int(p, (int64_t)s0->block.stream_id);
    rep_pkl_key(p, "segment_type");
    rep_pkl_str(p, s0->block.small ? "small" : "large");
    rep_pkl_key(p, "segment_pool_id");
    rep_pkl_tuple2_int(p, 0, s0->block.pool);
    rep_pkl_key(p, "is_expandable");
    rep_pkl_bool(p, s0->block.expandable);
    rep_pkl_key(p, "frames");
    rep_pkl_list_begin(p);
    rep_pkl_list_end(p);
    rep_pkl_key(p, "blocks");
    rep_pkl_list_begin(p);
    for (size_t i = first; i < last; i++) {
        const ms_block_info *b = &ms_record_segment(x->rec, i)->block;
        bool live = b->allocated || b->pending_free;
        rep_pkl_dict_begin(p);
        rep_pkl_key(p, "address");
        rep_pkl_int(p, (int64_t)b->addr);
        rep_pkl_key(p, "size");
        rep_pkl_int(p, (int64_t)b->size);
        rep_pkl_key(p, "requested_size");
        rep_pkl_int(p, live ? (int64_t)b->requested : 0);
        rep_pkl_key(p, "state");
        rep_pkl_str(p, block_state(b));
        rep_pkl_key(p, "frames");
        put_frames(x, s0->device, live ? owner_at(o, n_o, b->addr) : UINT32_MAX);
        rep_pkl_dict_end(p);
    }
    rep_pkl_list_end(p);
    rep_pkl_dict_end(p);
}

static ms_status put_segments(export_ctx *x)
{
    rep_pickle *p = &x->pk;
    size_t n = ms_record_n_segments(x->rec);
    rep_pkl_list_begin(p);
    for (int dev = 0; dev < x->n_devices; dev++) {
        const window *w = &x->win[dev];
        owner *o = NULL;
        size_t n_o = 0;
        if (w->step < 0)
            continue;
        if (owners_of(x, dev, &o, &n_o) != MS_OK)
            return MS_ENOMEM;
        for (size_t i = 0; i < n;) {
            const ms_segment_row *s = ms_record_segment(x->rec, i);
            if (s->device != dev || s->step != w->step || s->when != w->when) {
                i++;
                continue;
            }
            size_t j = i + 1;
            while (j < n && ms_record_segment(x->rec, j)->device == dev &&
                   ms_record_segment(x->rec, j)->step == w->step &&
                   ms_record_segment(x->rec, j)->when == w->when &&
                   ms_record_segment(x->rec, j)->block.segment_addr == s->block.segment_addr)
                j++;
            put_segment(x, i, j, o, n_o);
            i = j;
        }
        free(o);
    }
    rep_pkl_list_end(p);
    return MS_OK;
}

/* The settings as PyTorch's snapshot reports them; the explicit fields are
 * what a replay trusts over the conf string. */
static void put_settings(export_ctx *x, const char *conf, const ms_alloc_config *cfg)
{
    rep_pickle *p = &x->pk;
    rep_pkl_dict_begin(p);
    /* memsim's own key (PyTorch ignores unknown ones): which allocator's
     * rules made the trace, so a replay uses the same. */
    rep_pkl_key(p, "memsim_flavour");
    rep_pkl_str(p, cfg->flavour == MS_ALLOC_NPU ? "npu" : "cuda");
    rep_pkl_key(p, "PYTORCH_CUDA_ALLOC_CONF");
    rep_pkl_str(p, conf);
    rep_pkl_key(p, "max_split_size");
    rep_pkl_int(p, cfg->max_split_size == UINT64_MAX ? -1 : (int64_t)cfg->max_split_size);
    rep_pkl_key(p, "garbage_collection_threshold");
    rep_pkl_float(p, cfg->garbage_collection_threshold);
    rep_pkl_key(p, "expandable_segments");
    rep_pkl_bool(p, cfg->expandable_segments);
    rep_pkl_key(p, "roundup_power2_divisions");
    rep_pkl_dict_begin(p);
    for (int band = 0; band < MS_ALLOC_BANDS; band++) {
        char mib[24];
        snprintf(mib, sizeof mib, "%llu", 1ULL << band);
        rep_pkl_key(p, mib);
        rep_pkl_int(p, cfg->roundup_power2_divisions[band]);
    }
    rep_pkl_dict_end(p);
    rep_pkl_dict_end(p);
}

ms_status ms_report_write_snapshot(const char *path, const ms_run_record *record,
                                   const ms_program_view *programs, size_t n_programs,
                                   const ms_snapshot_export *opt, ms_diag *d)
{
    if (path == NULL || record == NULL)
        return ms_diag_set(d, MS_EINVAL, "snapshot export: %s is missing",
                           path == NULL ? "the path" : "the run record");
    const char *conf = opt != NULL && opt->alloc_conf != NULL ? opt->alloc_conf : "";
    ms_alloc_config cfg;
    ms_status st = ms_alloc_config_default(opt != NULL ? opt->flavour : MS_ALLOC_CUDA, &cfg);
    if (st == MS_OK && conf[0] != '\0' && (st = ms_alloc_config_parse(conf, &cfg, d)) != MS_OK) {
        ms_diag_prefix(d, "%s: allocator settings '%s': ", path, conf);
        return st;
    }
    export_ctx x = {.rec = record,
                    .programs = programs,
                    .n_programs = n_programs,
                    .n_devices = devices_of(record)};
    x.win = calloc((size_t)x.n_devices + 1, sizeof *x.win);
    if (x.win == NULL)
        return ms_diag_set(d, MS_ENOMEM, "%s: out of memory", path);
    find_windows(&x);
    char tmp[4200];
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    FILE *f = fopen(tmp, "wb");
    if (f == NULL) {
        int err = errno;
        free(x.win);
        return ms_diag_set(d, MS_EIO, "%s: cannot write: %s", tmp, strerror(err));
    }
    rep_pkl_begin(&x.pk, f);
    rep_pkl_dict_begin(&x.pk);
    rep_pkl_key(&x.pk, "segments");
    st = put_segments(&x);
    if (st == MS_OK) {
        rep_pkl_key(&x.pk, "device_traces");
        put_traces(&x);
        rep_pkl_key(&x.pk, "allocator_settings");
        put_settings(&x, conf, &cfg);
        rep_pkl_dict_end(&x.pk);
        rep_pkl_end(&x.pk);
    }
    free(x.win);
    if (st != MS_OK) {
        fclose(f);
        remove(tmp);
        return ms_diag_set(d, st, "%s: %s", path, ms_strerror(st));
    }
    return rep_file_commit(f, tmp, path, d);
}
