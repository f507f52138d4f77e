/* The snapshot model: what torch.cuda.memory._snapshot() recorded (segments,
 * per-device traces, allocator settings; reference/caching-allocator.md,
 * "Memory snapshots"), read from its pickle with memsim's data-only decoder,
 * or from a plain CSV trace read through libcsv. */
#include "pickle.h"
#include "lib/base/growable.h"

#include <csv.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct dev_trace {
    ms_trace_event *ev;
    size_t n, cap;
} dev_trace;

struct ms_snapshot {
    bool has_segments;
    ms_snapshot_segment *segs;
    size_t n_segs;
    dev_trace *traces;
    int n_dev;
    ms_snapshot_settings settings;
    char *alloc_conf;
};

static const char *const action_names[MS_TA_COUNT] = {
    "alloc",       "free_requested", "free_completed", "segment_alloc", "segment_free",
    "segment_map", "segment_unmap",  "oom",            "snapshot",      "user_defined",
};

const char *ms_trace_action_name(ms_trace_action a)
{
    return (unsigned)a < MS_TA_COUNT ? action_names[a] : NULL;
}

ms_status ms_trace_action_parse(const char *name, ms_trace_action *out)
{
    if (name == NULL || out == NULL)
        return MS_EINVAL;
    for (int i = 0; i < MS_TA_COUNT; i++) {
        if (strcmp(name, action_names[i]) == 0) {
            *out = (ms_trace_action)i;
            return MS_OK;
        }
    }
    return MS_ENOENT;
}

ms_status ms_snapshot_free(ms_snapshot *s)
{
    if (s == NULL)
        return MS_EINVAL;
    for (size_t i = 0; i < s->n_segs; i++)
        free((void *)s->segs[i].blocks);
    free(s->segs);
    for (int i = 0; i < s->n_dev; i++)
        free(s->traces[i].ev);
    free(s->traces);
    free(s->alloc_conf);
    free(s);
    return MS_OK;
}

static ms_status push_event(dev_trace *t, const ms_trace_event *e)
{
    if (!MS_GROW(t->ev, t->n, t->cap, 256))
        return MS_ENOMEM;
    t->ev[t->n++] = *e;
    return MS_OK;
}

static ms_status set_devices(ms_snapshot *s, int n)
{
    if (n <= s->n_dev)
        return MS_OK;
    dev_trace *t = realloc(s->traces, (size_t)n * sizeof *t);
    if (t == NULL)
        return MS_ENOMEM;
    memset(t + s->n_dev, 0, (size_t)(n - s->n_dev) * sizeof *t);
    s->traces = t;
    s->n_dev = n;
    return MS_OK;
}

/* ---- from the pickle ---- */

static ms_status get_u64(const ms_pickle_value *dict, const char *where, const char *key,
                         uint64_t *out, ms_diag *d)
{
    int64_t v = 0;
    ms_status st = rpl_pickle_get_int(dict, where, key, &v, d);
    if (st != MS_OK)
        return st;
    if (v < 0)
        return ms_diag_set(d, MS_EPARSE, "%s.%s: expected a non-negative int, got %lld", where,
                           key, (long long)v);
    *out = (uint64_t)v;
    return MS_OK;
}

/* An optional key: absent leaves *out as it is. */
static ms_status opt_u64(const ms_pickle_value *dict, const char *where, const char *key,
                         uint64_t *out, ms_diag *d)
{
    const ms_pickle_value *v = NULL;
    if (ms_pickle_dict_get(dict, key, &v) == MS_ENOENT)
        return MS_OK;
    return get_u64(dict, where, key, out, d);
}

static ms_status read_block(const ms_pickle_value *b, const char *where, uint64_t next_addr,
                            ms_snapshot_block *out, ms_diag *d)
{
    const char *state = NULL;
    /* Snapshots before torch 2.1 give no block address: blocks tile the
     * segment in order. */
    out->addr = next_addr;
    ms_status st = opt_u64(b, where, "address", &out->addr, d);
    if (st == MS_OK)
        st = get_u64(b, where, "size", &out->size, d);
    out->requested = out->size;
    if (st == MS_OK)
        st = opt_u64(b, where, "requested_size", &out->requested, d);
    if (st == MS_OK)
        st = rpl_pickle_get_str(b, where, "state", &state, d);
    if (st != MS_OK)
        return st;
    if (strcmp(state, "inactive") == 0)
        out->state = MS_BLOCK_INACTIVE;
    else if (strcmp(state, "active_allocated") == 0)
        out->state = MS_BLOCK_ACTIVE_ALLOCATED;
    else if (strcmp(state, "active_pending_free") == 0)
        out->state = MS_BLOCK_ACTIVE_PENDING_FREE;
    else
        return ms_diag_set(d, MS_EPARSE,
                           "%s.state: '%s' is none of inactive, active_allocated, "
                           "active_pending_free",
                           where, state);
    return MS_OK;
}

static ms_status read_blocks(const ms_pickle_value *seg, const char *where,
                             ms_snapshot_segment *out, ms_diag *d)
{
    const ms_pickle_value *list = NULL, *b = NULL;
    size_t n = 0;
    ms_status st = rpl_pickle_get_kind(seg, where, "blocks", MS_PK_LIST, &list, d);
    if (st != MS_OK)
        return st;
    ms_pickle_len(list, &n);
    ms_snapshot_block *blocks = calloc(n ? n : 1, sizeof *blocks);
    if (blocks == NULL)
        return ms_diag_set(d, MS_ENOMEM, "out of host memory");
    out->blocks = blocks;
    out->n_blocks = n;
    uint64_t next = out->addr;
    for (size_t i = 0; i < n; i++) {
        char path[160];
        snprintf(path, sizeof path, "%s.blocks[%zu]", where, i);
        ms_pickle_item(list, i, &b);
        st = read_block(b, path, next, &blocks[i], d);
        if (st != MS_OK)
            return st;
        next = blocks[i].addr + blocks[i].size;
    }
    return MS_OK;
}

static ms_status read_pool_id(const ms_pickle_value *seg, const char *where, int64_t id[2],
                              ms_diag *d)
{
    const ms_pickle_value *v = NULL, *x = NULL;
    size_t n = 0;
    id[0] = id[1] = 0;
    if (ms_pickle_dict_get(seg, "segment_pool_id", &v) != MS_OK)
        return MS_OK;
    if (ms_pickle_kind_of(v) != MS_PK_TUPLE || ms_pickle_len(v, &n) != MS_OK || n != 2)
        return ms_diag_set(d, MS_EPARSE, "%s.segment_pool_id: expected a tuple of two ints",
                           where);
    for (size_t i = 0; i < 2; i++) {
        ms_pickle_item(v, i, &x);
        if (ms_pickle_as_int(x, &id[i]) != MS_OK)
            return ms_diag_set(d, MS_EPARSE, "%s.segment_pool_id[%zu]: expected int", where, i);
    }
    return MS_OK;
}

static ms_status read_segment(const ms_pickle_value *seg, const char *where,
                              ms_snapshot_segment *out, ms_diag *d)
{
    int64_t dev = 0;
    const char *type = NULL;
    const ms_pickle_value *v = NULL;
    ms_status st = MS_OK;
    if (ms_pickle_dict_get(seg, "device", &v) == MS_OK)
        st = rpl_pickle_get_int(seg, where, "device", &dev, d);
    if (st == MS_OK && (dev < 0 || dev > 4095))
        st = ms_diag_set(d, MS_EPARSE, "%s.device: %lld is not a device index", where,
                         (long long)dev);
    out->device = (int)dev;
    if (st == MS_OK)
        st = get_u64(seg, where, "address", &out->addr, d);
    if (st == MS_OK)
        st = get_u64(seg, where, "total_size", &out->total_size, d);
    if (st == MS_OK && out->addr + out->total_size < out->addr)
        st = ms_diag_set(d, MS_EPARSE, "%s: address + total_size is beyond 64 bits", where);
    if (st == MS_OK)
        st = opt_u64(seg, where, "allocated_size", &out->allocated_size, d);
    if (st == MS_OK)
        st = opt_u64(seg, where, "active_size", &out->active_size, d);
    if (st == MS_OK)
        st = opt_u64(seg, where, "requested_size", &out->requested_size, d);
    if (st == MS_OK)
        st = get_u64(seg, where, "stream", &out->stream, d);
    if (st == MS_OK)
        st = rpl_pickle_get_str(seg, where, "segment_type", &type, d);
    if (st != MS_OK)
        return st;
    if (strcmp(type, "large") != 0 && strcmp(type, "small") != 0)
        return ms_diag_set(d, MS_EPARSE, "%s.segment_type: '%s' is neither large nor small",
                           where, type);
    out->is_large = type[0] == 'l';
    if (ms_pickle_dict_get(seg, "is_expandable", &v) == MS_OK)
        st = rpl_pickle_get_bool(seg, where, "is_expandable", &out->is_expandable, d);
    if (st == MS_OK)
        st = read_pool_id(seg, where, out->pool_id, d);
    return st != MS_OK ? st : read_blocks(seg, where, out, d);
}

static ms_status read_segments(const ms_pickle_value *root, ms_snapshot *s, ms_diag *d)
{
    const ms_pickle_value *list = NULL, *seg = NULL;
    ms_status st = rpl_pickle_get_kind(root, "snapshot", "segments", MS_PK_LIST, &list, d);
    if (st != MS_OK)
        return st;
    size_t n = 0;
    ms_pickle_len(list, &n);
    s->segs = calloc(n ? n : 1, sizeof *s->segs);
    if (s->segs == NULL)
        return ms_diag_set(d, MS_ENOMEM, "out of host memory");
    for (size_t i = 0; i < n; i++) {
        char path[64];
        snprintf(path, sizeof path, "segments[%zu]", i);
        ms_pickle_item(list, i, &seg);
        s->n_segs = i + 1; /* owned blocks are freed even on error */
        st = read_segment(seg, path, &s->segs[i], d);
        if (st == MS_OK)
            st = set_devices(s, s->segs[i].device + 1);
        if (st != MS_OK)
            return st == MS_ENOMEM ? ms_diag_set(d, st, "out of host memory") : st;
    }
    return MS_OK;
}

static ms_status read_event(const ms_pickle_value *e, const char *where, ms_trace_event *out,
                            ms_diag *d)
{
    const char *action = NULL;
    const ms_pickle_value *v = NULL;
    memset(out, 0, sizeof *out);
    ms_status st = rpl_pickle_get_str(e, where, "action", &action, d);
    if (st != MS_OK)
        return st;
    if (ms_trace_action_parse(action, &out->action) != MS_OK)
        return ms_diag_set(d, MS_EPARSE, "%s.action: unknown action '%s'", where, action);
    if (ms_pickle_dict_get(e, "addr", &v) == MS_OK)
        st = get_u64(e, where, "addr", &out->addr, d);
    else if (out->action != MS_TA_OOM && out->action != MS_TA_SNAPSHOT &&
             out->action != MS_TA_USER_DEFINED)
        st = ms_diag_set(d, MS_EPARSE, "%s: missing key 'addr'", where);
    if (st == MS_OK && ms_pickle_dict_get(e, "device_free", &v) == MS_OK) {
        out->has_device_free = true;
        st = get_u64(e, where, "device_free", &out->device_free, d);
    }
    if (st == MS_OK)
        st = opt_u64(e, where, "size", &out->size, d);
    if (st == MS_OK)
        st = opt_u64(e, where, "stream", &out->stream, d);
    if (st == MS_OK && ms_pickle_dict_get(e, "time_us", &v) == MS_OK)
        st = rpl_pickle_get_int(e, where, "time_us", &out->time_us, d);
    if (st == MS_OK && out->addr + out->size < out->addr)
        st = ms_diag_set(d, MS_EPARSE, "%s: addr + size is beyond 64 bits", where);
    return st;
}

static ms_status read_traces(const ms_pickle_value *root, ms_snapshot *s, ms_diag *d)
{
    const ms_pickle_value *list = NULL, *dev = NULL, *e = NULL;
    ms_status st;
    if (ms_pickle_dict_get(root, "device_traces", &list) == MS_ENOENT)
        return MS_OK; /* a snapshot taken without recording history */
    st = rpl_pickle_get_kind(root, "snapshot", "device_traces", MS_PK_LIST, &list, d);
    if (st != MS_OK)
        return st;
    size_t n = 0;
    ms_pickle_len(list, &n);
    if (n > 4096)
        return ms_diag_set(d, MS_EPARSE, "device_traces: %zu devices", n);
    if (set_devices(s, (int)n) != MS_OK)
        return ms_diag_set(d, MS_ENOMEM, "out of host memory");
    for (size_t i = 0; i < n; i++) {
        size_t m = 0;
        ms_pickle_item(list, i, &dev);
        if (ms_pickle_kind_of(dev) != MS_PK_LIST)
            return ms_diag_set(d, MS_EPARSE, "device_traces[%zu]: expected a list, got %s", i,
                               ms_pickle_kind_name(ms_pickle_kind_of(dev)));
        ms_pickle_len(dev, &m);
        for (size_t j = 0; j < m; j++) {
            char path[64];
            ms_trace_event ev;
            snprintf(path, sizeof path, "device_traces[%zu][%zu]", i, j);
            ms_pickle_item(dev, j, &e);
            st = read_event(e, path, &ev, d);
            if (st != MS_OK)
                return st;
            if (push_event(&s->traces[i], &ev) != MS_OK)
                return ms_diag_set(d, MS_ENOMEM, "out of host memory");
        }
    }
    return MS_OK;
}

/* roundup_power2_divisions is keyed by the band's lower bound in MiB
 * ("1", "2", ..., "32768"): band i covers [2^i MiB, 2^(i+1) MiB). */
static ms_status read_divisions(const ms_pickle_value *v, ms_snapshot_settings *set, ms_diag *d)
{
    size_t n = 0;
    const ms_pickle_value *k = NULL, *x = NULL;
    ms_pickle_len(v, &n);
    for (size_t i = 0; i < n; i++) {
        const char *key = NULL;
        int64_t div = 0;
        if (ms_pickle_kind_of(v) == MS_PK_LIST) {
            ms_pickle_item(v, i, &x);
            key = NULL;
        } else {
            ms_pickle_dict_item(v, i, &k, &x);
            if (ms_pickle_as_str(k, &key, NULL) != MS_OK)
                return ms_diag_set(d, MS_EPARSE,
                                   "allocator_settings.roundup_power2_divisions: keys must be "
                                   "str");
        }
        if (ms_pickle_as_int(x, &div) != MS_OK || div < 0 || div > 1 << 20)
            return ms_diag_set(d, MS_EPARSE,
                               "allocator_settings.roundup_power2_divisions[%zu]: expected a "
                               "non-negative int",
                               i);
        size_t band = i;
        if (key != NULL) {
            char *end;
            errno = 0;
            unsigned long long mib = strtoull(key, &end, 10);
            if (*end != '\0' || errno != 0 || mib == 0 || (mib & (mib - 1)) != 0)
                return ms_diag_set(d, MS_EPARSE,
                                   "allocator_settings.roundup_power2_divisions: key '%s' is "
                                   "not a power of two of MiB",
                                   key);
            band = (size_t)__builtin_ctzll(mib);
        }
        if (band < MS_ALLOC_BANDS)
            set->roundup_power2_divisions[band] = (unsigned)div;
    }
    return MS_OK;
}

static ms_status read_settings(const ms_pickle_value *root, ms_snapshot *s, ms_diag *d)
{
    const ms_pickle_value *set = NULL, *v = NULL;
    const char *where = "allocator_settings";
    ms_snapshot_settings *out = &s->settings;
    out->max_split_size = -1;
    if (ms_pickle_dict_get(root, "allocator_settings", &set) == MS_ENOENT)
        return MS_OK;
    ms_status st = rpl_pickle_get_kind(root, "snapshot", where, MS_PK_DICT, &set, d);
    if (st != MS_OK)
        return st;
    out->recorded = true;
    const char *conf = "";
    if (ms_pickle_dict_get(set, "PYTORCH_CUDA_ALLOC_CONF", &v) == MS_OK &&
        ms_pickle_kind_of(v) != MS_PK_NONE)
        st = rpl_pickle_get_str(set, where, "PYTORCH_CUDA_ALLOC_CONF", &conf, d);
    if (st == MS_OK && ms_pickle_dict_get(set, "max_split_size", &v) == MS_OK)
        st = rpl_pickle_get_int(set, where, "max_split_size", &out->max_split_size, d);
    if (st == MS_OK && ms_pickle_dict_get(set, "garbage_collection_threshold", &v) == MS_OK)
        st = rpl_pickle_get_float(set, where, "garbage_collection_threshold",
                                  &out->garbage_collection_threshold, d);
    if (st == MS_OK && ms_pickle_dict_get(set, "expandable_segments", &v) == MS_OK)
        st = rpl_pickle_get_bool(set, where, "expandable_segments", &out->expandable_segments, d);
    const char *flavour = NULL;
    if (st == MS_OK && ms_pickle_dict_get(set, "memsim_flavour", &v) == MS_OK &&
        (st = rpl_pickle_get_str(set, where, "memsim_flavour", &flavour, d)) == MS_OK) {
        if (strcmp(flavour, "cuda") != 0 && strcmp(flavour, "npu") != 0)
            return ms_diag_set(d, MS_EPARSE, "%s.memsim_flavour: '%s' is neither cuda nor npu",
                               where, flavour);
        out->has_flavour = true;
        out->flavour = flavour[0] == 'n' ? MS_ALLOC_NPU : MS_ALLOC_CUDA;
    }
    if (st == MS_OK && ms_pickle_dict_get(set, "roundup_power2_divisions", &v) == MS_OK) {
        if (ms_pickle_kind_of(v) != MS_PK_DICT && ms_pickle_kind_of(v) != MS_PK_LIST)
            return ms_diag_set(d, MS_EPARSE, "%s.roundup_power2_divisions: expected a dict",
                               where);
        st = read_divisions(v, out, d);
    }
    if (st != MS_OK)
        return st;
    s->alloc_conf = strdup(conf);
    if (s->alloc_conf == NULL)
        return ms_diag_set(d, MS_ENOMEM, "out of host memory");
    out->alloc_conf = s->alloc_conf;
    return MS_OK;
}

static ms_status from_pickle(const void *data, size_t len, ms_snapshot *s, ms_diag *d)
{
    ms_pickle *p = NULL;
    ms_status st = ms_pickle_decode(data, len, NULL, &p, d);
    if (st != MS_OK)
        return st;
    const ms_pickle_value *root = ms_pickle_root(p);
    s->has_segments = true;
    if (ms_pickle_kind_of(root) != MS_PK_DICT)
        st = ms_diag_set(d, MS_EPARSE,
                         "snapshot: expected a dict with 'segments' and 'device_traces', got %s",
                         ms_pickle_kind_name(ms_pickle_kind_of(root)));
    if (st == MS_OK)
        st = read_segments(root, s, d);
    if (st == MS_OK)
        st = read_traces(root, s, d);
    if (st == MS_OK)
        st = read_settings(root, s, d);
    ms_pickle_free(p);
    return st;
}

/* ---- from a CSV trace (libcsv) ---- */

#define CSV_FIELDS 6

typedef struct csv_state {
    ms_snapshot *s;
    ms_diag *d;
    ms_status st;
    size_t line;
    size_t nf;
    char field[CSV_FIELDS][64];
    bool header_seen;
    bool too_long;
} csv_state;

static void csv_field(void *data, size_t len, void *user)
{
    csv_state *cs = user;
    if (cs->nf < CSV_FIELDS) {
        if (len >= sizeof cs->field[0]) {
            cs->too_long = true;
            len = sizeof cs->field[0] - 1;
        }
        memcpy(cs->field[cs->nf], data ? data : "", len);
        cs->field[cs->nf][len] = '\0';
    }
    cs->nf++;
}

/* Decimal, or hexadecimal with 0x (addresses are often written so). */
static bool parse_u64(const char *s, uint64_t *out)
{
    char *end;
    errno = 0;
    if (s[0] == '\0' || s[0] == '-' || s[0] == '+' || s[0] == ' ')
        return false;
    bool hex = s[0] == '0' && (s[1] == 'x' || s[1] == 'X');
    unsigned long long v = strtoull(hex ? s + 2 : s, &end, hex ? 16 : 10);
    if (errno != 0 || *end != '\0' || (hex && s[2] == '\0'))
        return false;
    *out = v;
    return true;
}

static ms_status csv_record_fail(csv_state *cs, const char *fmt, const char *arg)
{
    char what[256];
    snprintf(what, sizeof what, fmt, arg);
    cs->st = ms_diag_set(cs->d, MS_EPARSE, "line %zu: %s", cs->line, what);
    return cs->st;
}

static const char *const csv_columns[CSV_FIELDS] = {"action", "addr",    "size",
                                                    "stream", "time_us", "device_free"};

static void csv_record(int c, void *user)
{
    csv_state *cs = user;
    size_t nf = cs->nf;
    bool too_long = cs->too_long;
    cs->nf = 0;
    cs->too_long = false;
    if (cs->st != MS_OK || nf == 0 || (nf == 1 && cs->field[0][0] == '\0'))
        return;
    if (cs->field[0][0] == '#')
        return; /* a comment line */
    if (!cs->header_seen && strcmp(cs->field[0], "action") == 0) {
        cs->header_seen = true;
        return;
    }
    cs->header_seen = true;
    if (nf < 5 || nf > CSV_FIELDS) {
        csv_record_fail(cs, "expected 5 or 6 fields (action,addr,size,stream,time_us"
                            "[,device_free])%s", "");
        return;
    }
    if (too_long) {
        csv_record_fail(cs, "field longer than 63 characters%s", "");
        return;
    }
    ms_trace_event ev = {0};
    if (ms_trace_action_parse(cs->field[0], &ev.action) != MS_OK) {
        csv_record_fail(cs, "field action: unknown action '%s'", cs->field[0]);
        return;
    }
    uint64_t *dst[CSV_FIELDS] = {NULL, &ev.addr, &ev.size, &ev.stream, NULL, &ev.device_free};
    uint64_t time_us = 0;
    dst[4] = &time_us;
    for (size_t i = 1; i < nf; i++) {
        const char *f = cs->field[i];
        bool optional = (i == 1 && ev.action == MS_TA_OOM) || i == 5;
        if (f[0] == '\0' && optional)
            continue;
        if (!parse_u64(f, dst[i])) {
            char what[160];
            snprintf(what, sizeof what, "field %s: '%s' is not a non-negative integer",
                     csv_columns[i], f);
            csv_record_fail(cs, "%s", what);
            return;
        }
        if (i == 5)
            ev.has_device_free = true;
    }
    if (time_us > INT64_MAX) {
        csv_record_fail(cs, "field time_us out of range%s", "");
        return;
    }
    if (ev.addr + ev.size < ev.addr) {
        csv_record_fail(cs, "addr + size is beyond 64 bits%s", "");
        return;
    }
    ev.time_us = (int64_t)time_us;
    if (push_event(&cs->s->traces[0], &ev) != MS_OK)
        cs->st = ms_diag_set(cs->d, MS_ENOMEM, "out of host memory");
    (void)c;
}

static ms_status from_csv(const char *data, size_t len, ms_snapshot *s, ms_diag *d)
{
    struct csv_parser p;
    if (csv_init(&p, CSV_STRICT | CSV_STRICT_FINI | CSV_APPEND_NULL) != 0)
        return ms_diag_set(d, MS_ENOMEM, "out of host memory");
    if (set_devices(s, 1) != MS_OK) {
        csv_free(&p);
        return ms_diag_set(d, MS_ENOMEM, "out of host memory");
    }
    s->settings.max_split_size = -1;
    s->settings.alloc_conf = "";
    csv_state cs = {.s = s, .d = d, .st = MS_OK, .line = 0};
    /* One physical line at a time, so errors can name their line. */
    size_t pos = 0;
    while (pos < len && cs.st == MS_OK) {
        const char *nl = memchr(data + pos, '\n', len - pos);
        size_t n = nl ? (size_t)(nl - (data + pos)) + 1 : len - pos;
        cs.line++;
        if (csv_parse(&p, data + pos, n, csv_field, csv_record, &cs) != n) {
            cs.st = ms_diag_set(d, MS_EPARSE, "line %zu: %s", cs.line,
                                csv_strerror(csv_error(&p)));
        }
        pos += n;
    }
    if (cs.st == MS_OK && csv_fini(&p, csv_field, csv_record, &cs) != 0)
        cs.st = ms_diag_set(d, MS_EPARSE, "line %zu: %s", cs.line, csv_strerror(csv_error(&p)));
    csv_free(&p);
    return cs.st;
}

/* ---- loading ---- */

static bool ends_with(const char *s, const char *suffix)
{
    size_t n = strlen(s), m = strlen(suffix);
    return n >= m && strcmp(s + n - m, suffix) == 0;
}

/* Input read as a CSV trace that plainly is none (empty, JSON, binary) is
 * named for what it is, before libcsv reports a puzzling line 1. */
static ms_status not_a_csv_trace(const uint8_t *b, size_t len, ms_diag *d)
{
    static const char expected[] = "expected the pickle torch.cuda.memory._dump_snapshot() "
                                   "writes or a CSV trace (action,addr,size,stream,time_us)";
    if (len == 0)
        return ms_diag_set(d, MS_EPARSE, "the file is empty: %s", expected);
    size_t i = 0;
    while (i < len && (b[i] == ' ' || b[i] == '\t' || b[i] == '\r' || b[i] == '\n'))
        i++;
    if (i < len && (b[i] == '{' || b[i] == '['))
        return ms_diag_set(d, MS_EPARSE, "the file looks like JSON (it starts with '%c'): %s", b[i],
                           expected);
    for (size_t k = 0; k < len && k < 4096; k++)
        if (b[k] == 0 || (b[k] < 0x20 && b[k] != '\t' && b[k] != '\r' && b[k] != '\n'))
            return ms_diag_set(d, MS_EPARSE,
                               "binary data (byte 0x%02x at offset %zu) that is no pickle (a "
                               "pickle starts with 0x80): %s",
                               b[k], k, expected);
    return MS_OK;
}

ms_status ms_snapshot_load_buffer(const void *data, size_t len, const char *name,
                                  ms_snapshot **out, ms_diag *d)
{
    if (out == NULL || (data == NULL && len > 0))
        return ms_diag_set(d, MS_EINVAL, "ms_snapshot_load_buffer: NULL argument");
    *out = NULL;
    if (name == NULL)
        name = "(buffer)";
    ms_snapshot *s = calloc(1, sizeof *s);
    if (s == NULL)
        return ms_diag_set(d, MS_ENOMEM, "out of host memory");
    const uint8_t *b = data;
    bool pickle = (len > 0 && b[0] == 0x80) || ends_with(name, ".pickle") ||
                  ends_with(name, ".pkl");
    ms_status st = pickle ? from_pickle(data, len, s, d) : not_a_csv_trace(b, len, d);
    if (st == MS_OK && !pickle)
        st = from_csv(data, len, s, d);
    if (st != MS_OK) {
        ms_diag_prefix(d, "%s: ", name);
        ms_snapshot_free(s);
        return st;
    }
    *out = s;
    return MS_OK;
}

ms_status ms_snapshot_load(const char *path, ms_snapshot **out, ms_diag *d)
{
    if (path == NULL || out == NULL)
        return ms_diag_set(d, MS_EINVAL, "ms_snapshot_load: NULL argument");
    *out = NULL;
    FILE *f = fopen(path, "rb");
    if (f == NULL)
        return ms_diag_set(d, errno == ENOENT ? MS_ENOENT : MS_EIO, "%s: cannot open: %s", path,
                           strerror(errno));
    char *buf = NULL;
    size_t len = 0, cap = 0;
    ms_status st = MS_OK;
    for (;;) {
        if (!MS_GROW(buf, len, cap, 1 << 20)) {
            st = ms_diag_set(d, MS_ENOMEM, "%s: out of host memory", path);
            break;
        }
        size_t got = fread(buf + len, 1, cap - len, f);
        len += got;
        if (got == 0) {
            if (ferror(f))
                st = ms_diag_set(d, MS_EIO, "%s: read error", path);
            break;
        }
    }
    fclose(f);
    if (st == MS_OK)
        st = ms_snapshot_load_buffer(buf, len, path, out, d);
    free(buf);
    return st;
}

/* ---- accessors ---- */

int ms_snapshot_devices(const ms_snapshot *s)
{
    return s != NULL ? s->n_dev : 0;
}

ms_status ms_snapshot_trace(const ms_snapshot *s, int device, const ms_trace_event **events,
                            size_t *n)
{
    if (s == NULL || events == NULL || n == NULL || device < 0)
        return MS_EINVAL;
    if (device >= s->n_dev)
        return MS_ENOENT;
    *events = s->traces[device].ev;
    *n = s->traces[device].n;
    return MS_OK;
}

bool ms_snapshot_has_segments(const ms_snapshot *s)
{
    return s != NULL && s->has_segments;
}

const ms_snapshot_segment *ms_snapshot_segments(const ms_snapshot *s, size_t *n)
{
    if (n != NULL)
        *n = s != NULL ? s->n_segs : 0;
    return s != NULL ? s->segs : NULL;
}

const ms_snapshot_settings *ms_snapshot_settings_get(const ms_snapshot *s)
{
    return s != NULL ? &s->settings : NULL;
}

ms_status ms_snapshot_alloc_config(const ms_snapshot *s, ms_alloc_flavour flavour,
                                   ms_alloc_config *cfg, ms_diag *d)
{
    if (s == NULL || cfg == NULL)
        return ms_diag_set(d, MS_EINVAL, "ms_snapshot_alloc_config: NULL argument");
    ms_status st = ms_alloc_config_default(flavour, cfg);
    if (st != MS_OK)
        return ms_diag_set(d, st, "allocator defaults: %s", ms_strerror(st));
    const ms_snapshot_settings *set = &s->settings;
    if (!set->recorded)
        return MS_OK;
    if (set->alloc_conf != NULL && set->alloc_conf[0] != '\0') {
        st = ms_alloc_config_parse(set->alloc_conf, cfg, d);
        if (st != MS_OK) {
            ms_diag_prefix(d, "allocator_settings.PYTORCH_CUDA_ALLOC_CONF '%s': ",
                           set->alloc_conf);
            return st;
        }
    }
    /* The explicit fields are what the allocator ran with (the conf string
     * may be partial or spelled differently): they win. */
    if (set->max_split_size > 0)
        cfg->max_split_size = (uint64_t)set->max_split_size;
    cfg->garbage_collection_threshold = set->garbage_collection_threshold;
    cfg->expandable_segments = set->expandable_segments;
    for (int i = 0; i < MS_ALLOC_BANDS; i++)
        cfg->roundup_power2_divisions[i] = set->roundup_power2_divisions[i];
    return MS_OK;
}
