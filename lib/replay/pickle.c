/* A data-only pickle decoder (protocols 2-5).
 *
 * It follows CPython's Lib/pickle.py _Unpickler opcode by opcode for the
 * opcodes that build plain data, so a snapshot decodes to exactly the values
 * pickle.load() gives, and refuses every opcode that would import or call
 * code: a memory snapshot is pure data (reference/caching-allocator.md), so
 * anything else in a file is either corruption or an attack.  Every value is
 * owned by its document; the memo shares values the way Python shares
 * objects. */
#include "pickle.h"
#include "lib/base/growable.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum {
    OP_MARK = 0x28, OP_STOP = 0x2e, OP_POP = 0x30, OP_POP_MARK = 0x31, OP_DUP = 0x32,
    OP_FLOAT = 0x46, OP_INT = 0x49, OP_BININT = 0x4a, OP_BININT1 = 0x4b, OP_LONG = 0x4c,
    OP_BININT2 = 0x4d, OP_NONE = 0x4e, OP_PERSID = 0x50, OP_BINPERSID = 0x51, OP_REDUCE = 0x52,
    OP_STRING = 0x53, OP_BINSTRING = 0x54, OP_SHORT_BINSTRING = 0x55, OP_UNICODE = 0x56,
    OP_BINUNICODE = 0x58, OP_APPEND = 0x61, OP_BUILD = 0x62, OP_GLOBAL = 0x63, OP_DICT = 0x64,
    OP_EMPTY_DICT = 0x7d, OP_APPENDS = 0x65, OP_GET = 0x67, OP_BINGET = 0x68, OP_INST = 0x69,
    OP_LONG_BINGET = 0x6a, OP_LIST = 0x6c, OP_EMPTY_LIST = 0x5d, OP_OBJ = 0x6f, OP_PUT = 0x70,
    OP_BINPUT = 0x71, OP_LONG_BINPUT = 0x72, OP_SETITEM = 0x73, OP_TUPLE = 0x74,
    OP_EMPTY_TUPLE = 0x29, OP_SETITEMS = 0x75, OP_BINFLOAT = 0x47,
    OP_PROTO = 0x80, OP_NEWOBJ = 0x81, OP_EXT1 = 0x82, OP_EXT2 = 0x83, OP_EXT4 = 0x84,
    OP_TUPLE1 = 0x85, OP_TUPLE2 = 0x86, OP_TUPLE3 = 0x87, OP_NEWTRUE = 0x88, OP_NEWFALSE = 0x89,
    OP_LONG1 = 0x8a, OP_LONG4 = 0x8b, OP_BINBYTES = 0x42, OP_SHORT_BINBYTES = 0x43,
    OP_SHORT_BINUNICODE = 0x8c, OP_BINUNICODE8 = 0x8d, OP_BINBYTES8 = 0x8e, OP_EMPTY_SET = 0x8f,
    OP_ADDITEMS = 0x90, OP_FROZENSET = 0x91, OP_NEWOBJ_EX = 0x92, OP_STACK_GLOBAL = 0x93,
    OP_MEMOIZE = 0x94, OP_FRAME = 0x95, OP_BYTEARRAY8 = 0x96, OP_NEXT_BUFFER = 0x97,
    OP_READONLY_BUFFER = 0x98
};

static const char *const opcode_names[256] = {
    [OP_MARK] = "MARK", [OP_STOP] = "STOP", [OP_POP] = "POP", [OP_POP_MARK] = "POP_MARK",
    [OP_DUP] = "DUP", [OP_FLOAT] = "FLOAT", [OP_INT] = "INT", [OP_BININT] = "BININT",
    [OP_BININT1] = "BININT1", [OP_LONG] = "LONG", [OP_BININT2] = "BININT2", [OP_NONE] = "NONE",
    [OP_PERSID] = "PERSID", [OP_BINPERSID] = "BINPERSID", [OP_REDUCE] = "REDUCE",
    [OP_STRING] = "STRING", [OP_BINSTRING] = "BINSTRING", [OP_SHORT_BINSTRING] = "SHORT_BINSTRING",
    [OP_UNICODE] = "UNICODE", [OP_BINUNICODE] = "BINUNICODE", [OP_APPEND] = "APPEND",
    [OP_BUILD] = "BUILD", [OP_GLOBAL] = "GLOBAL", [OP_DICT] = "DICT",
    [OP_EMPTY_DICT] = "EMPTY_DICT", [OP_APPENDS] = "APPENDS", [OP_GET] = "GET",
    [OP_BINGET] = "BINGET", [OP_INST] = "INST", [OP_LONG_BINGET] = "LONG_BINGET",
    [OP_LIST] = "LIST", [OP_EMPTY_LIST] = "EMPTY_LIST", [OP_OBJ] = "OBJ", [OP_PUT] = "PUT",
    [OP_BINPUT] = "BINPUT", [OP_LONG_BINPUT] = "LONG_BINPUT", [OP_SETITEM] = "SETITEM",
    [OP_TUPLE] = "TUPLE", [OP_EMPTY_TUPLE] = "EMPTY_TUPLE", [OP_SETITEMS] = "SETITEMS",
    [OP_BINFLOAT] = "BINFLOAT", [OP_PROTO] = "PROTO", [OP_NEWOBJ] = "NEWOBJ",
    [OP_EXT1] = "EXT1", [OP_EXT2] = "EXT2", [OP_EXT4] = "EXT4", [OP_TUPLE1] = "TUPLE1",
    [OP_TUPLE2] = "TUPLE2", [OP_TUPLE3] = "TUPLE3", [OP_NEWTRUE] = "NEWTRUE",
    [OP_NEWFALSE] = "NEWFALSE", [OP_LONG1] = "LONG1", [OP_LONG4] = "LONG4",
    [OP_BINBYTES] = "BINBYTES", [OP_SHORT_BINBYTES] = "SHORT_BINBYTES",
    [OP_SHORT_BINUNICODE] = "SHORT_BINUNICODE", [OP_BINUNICODE8] = "BINUNICODE8",
    [OP_BINBYTES8] = "BINBYTES8", [OP_EMPTY_SET] = "EMPTY_SET", [OP_ADDITEMS] = "ADDITEMS",
    [OP_FROZENSET] = "FROZENSET", [OP_NEWOBJ_EX] = "NEWOBJ_EX",
    [OP_STACK_GLOBAL] = "STACK_GLOBAL", [OP_MEMOIZE] = "MEMOIZE", [OP_FRAME] = "FRAME",
    [OP_BYTEARRAY8] = "BYTEARRAY8", [OP_NEXT_BUFFER] = "NEXT_BUFFER",
    [OP_READONLY_BUFFER] = "READONLY_BUFFER",
};

const char *rpl_pickle_opcode_name(uint8_t op)
{
    return opcode_names[op];
}

/* Below this many entries a dict or set is searched linearly; above, it
 * keeps an open-addressing index so that building a big dict stays linear
 * (Python semantics: a repeated key replaces the value). */
#define MAP_LINEAR_MAX 8

typedef struct pk_map {
    ms_pickle_value **keys;
    ms_pickle_value **vals; /* NULL for sets */
    size_t n, cap;
    uint32_t *index; /* entry + 1, 0: empty */
    size_t icap;     /* power of two */
} pk_map;

struct ms_pickle_value {
    ms_pickle_kind kind;
    bool hashable;
    uint32_t depth; /* nesting of tuples/frozensets below, for hash/eq */
    uint64_t hash;  /* when hashable (the value is then immutable) */
    union {
        bool b;
        int64_t i;
        double f;
        struct {
            size_t len;
            char *data; /* NUL-terminated */
        } s;
        struct {
            ms_pickle_value **items;
            size_t n, cap;
        } seq;
        pk_map map;
    } u;
};

struct ms_pickle {
    ms_pickle_value **values; /* every value, for freeing */
    size_t n, cap;
    ms_pickle_value *root;
};

/* Deep comparisons left to this decode: equal-hash tuples built from
 * distinct but equal halves compare in time exponential in their depth
 * (as in Python), so the work is bounded. */
typedef struct eq_budget {
    size_t left;
} eq_budget;

typedef struct decoder {
    const uint8_t *p;
    size_t len;
    size_t pos;    /* next byte to read */
    size_t op_off; /* offset of the current opcode */
    uint8_t op;
    ms_pickle *doc;
    ms_pickle_limits lim;
    ms_pickle_value **stack;
    size_t sn, scap;
    size_t *marks; /* stack heights at each open MARK */
    size_t mn, mcap;
    ms_pickle_value **memo;
    size_t memo_cap, memo_count;
    eq_budget budget;
    ms_diag *d;
} decoder;

ms_status ms_pickle_limits_default(ms_pickle_limits *lim)
{
    if (lim == NULL)
        return MS_EINVAL;
    lim->max_depth = 256;
    lim->max_stack = (size_t)1 << 24;
    lim->max_memo = (size_t)1 << 24;
    lim->max_values = (size_t)1 << 26;
    lim->max_compare = (size_t)1 << 20;
    return MS_OK;
}

static ms_status fail(decoder *dc, ms_status code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static ms_status fail(decoder *dc, ms_status code, const char *fmt, ...)
{
    char what[MS_DIAG_MAX / 2];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    const char *name = opcode_names[dc->op];
    if (name != NULL)
        return ms_diag_set(dc->d, code, "pickle: %s (opcode %s at offset %zu)", what, name,
                           dc->op_off);
    return ms_diag_set(dc->d, code, "pickle: %s (byte 0x%02x at offset %zu)", what, dc->op,
                       dc->op_off);
}

static ms_status oom(decoder *dc)
{
    return fail(dc, MS_ENOMEM, "out of host memory");
}

/* ---- hashing and equality, as Python's dict and set need them ---- */

static uint64_t mix64(uint64_t x)
{
    x += 0x9e3779b97f4a7c15ULL;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
    return x ^ (x >> 31);
}

static uint64_t hash_bytes(uint64_t tag, const char *s, size_t n)
{
    uint64_t h = 0xcbf29ce484222325ULL ^ tag;
    for (size_t i = 0; i < n; i++)
        h = (h ^ (uint8_t)s[i]) * 0x100000001b3ULL;
    return mix64(h);
}

/* An integral float in int64 range equals that int (1.0 == 1 == True in
 * Python), so it must hash like it. */
static bool float_as_int(double f, int64_t *i)
{
    if (!(f >= -9223372036854775808.0 && f < 9223372036854775808.0) || f != trunc(f))
        return false;
    *i = (int64_t)f;
    return true;
}

static uint64_t hash_float(double f)
{
    int64_t i = 0;
    if (float_as_int(f, &i))
        return mix64((uint64_t)i);
    uint64_t bits = 0;
    memcpy(&bits, &f, sizeof bits);
    return mix64(bits ^ 0x5bd1e9955bd1e995ULL);
}

static bool is_intlike(const ms_pickle_value *v)
{
    return v->kind == MS_PK_INT || v->kind == MS_PK_BOOL;
}

static int64_t intlike(const ms_pickle_value *v)
{
    return v->kind == MS_PK_BOOL ? (int64_t)v->u.b : v->u.i;
}

static size_t map_find(const pk_map *m, const ms_pickle_value *key, eq_budget *bud);

static bool value_eq(const ms_pickle_value *a, const ms_pickle_value *b, eq_budget *bud)
{
    if (a == b)
        return true;
    if (a->hash != b->hash || bud->left == 0)
        return false;
    bud->left--;
    if (is_intlike(a) && is_intlike(b))
        return intlike(a) == intlike(b);
    if (a->kind == MS_PK_FLOAT || b->kind == MS_PK_FLOAT) {
        if (a->kind == MS_PK_FLOAT && b->kind == MS_PK_FLOAT)
            return a->u.f == b->u.f;
        const ms_pickle_value *f = a->kind == MS_PK_FLOAT ? a : b;
        const ms_pickle_value *o = a->kind == MS_PK_FLOAT ? b : a;
        int64_t i = 0;
        return is_intlike(o) && float_as_int(f->u.f, &i) && i == intlike(o);
    }
    if (a->kind != b->kind)
        return false;
    switch (a->kind) {
    case MS_PK_NONE:
        return true;
    case MS_PK_STR:
    case MS_PK_BYTES:
    case MS_PK_BIGINT:
        return a->u.s.len == b->u.s.len && memcmp(a->u.s.data, b->u.s.data, a->u.s.len) == 0;
    case MS_PK_TUPLE:
        if (a->u.seq.n != b->u.seq.n)
            return false;
        for (size_t i = 0; i < a->u.seq.n; i++)
            if (!value_eq(a->u.seq.items[i], b->u.seq.items[i], bud))
                return false;
        return true;
    case MS_PK_FROZENSET:
        if (a->u.map.n != b->u.map.n)
            return false;
        for (size_t i = 0; i < a->u.map.n; i++)
            if (map_find(&b->u.map, a->u.map.keys[i], bud) == SIZE_MAX)
                return false;
        return true;
    default:
        return false;
    }
}

static size_t map_find(const pk_map *m, const ms_pickle_value *key, eq_budget *bud)
{
    if (m->index == NULL) {
        for (size_t i = 0; i < m->n; i++)
            if (value_eq(m->keys[i], key, bud))
                return i;
        return SIZE_MAX;
    }
    size_t mask = m->icap - 1;
    for (size_t slot = key->hash & mask;; slot = (slot + 1) & mask) {
        uint32_t e = m->index[slot];
        if (e == 0)
            return SIZE_MAX;
        if (value_eq(m->keys[e - 1], key, bud))
            return e - 1;
    }
}

static bool map_reindex(pk_map *m)
{
    size_t icap = 16;
    while (icap < 4 * m->n)
        icap *= 2;
    uint32_t *idx = calloc(icap, sizeof *idx);
    if (idx == NULL)
        return false;
    free(m->index);
    m->index = idx;
    m->icap = icap;
    for (size_t i = 0; i < m->n; i++) {
        size_t slot = m->keys[i]->hash & (icap - 1);
        while (idx[slot] != 0)
            slot = (slot + 1) & (icap - 1);
        idx[slot] = (uint32_t)(i + 1);
    }
    return true;
}

/* d[key] = val (val NULL for a set): a present key keeps its place and gets
 * the new value, as in Python. */
static ms_status map_put(decoder *dc, pk_map *m, ms_pickle_value *key, ms_pickle_value *val)
{
    if (!key->hashable)
        return fail(dc, MS_EPARSE, "unhashable %s used as a dict key or set element",
                    ms_pickle_kind_name(key->kind));
    size_t at = map_find(m, key, &dc->budget);
    if (dc->budget.left == 0)
        return fail(dc, MS_ELIMIT, "dict keys or set elements took more than %zu comparisons",
                    dc->lim.max_compare);
    if (at != SIZE_MAX) {
        if (m->vals != NULL)
            m->vals[at] = val;
        return MS_OK;
    }
    if (m->n >= UINT32_MAX - 1)
        return fail(dc, MS_ELIMIT, "dict or set too large");
    if (m->n == m->cap) { /* keys and values grow alike */
        size_t cap = base_grown_capacity(m->cap, m->n + 1, 4);
        if (!base_resize_array((void **)&m->keys, cap, sizeof *m->keys) ||
            (m->vals != NULL && !base_resize_array((void **)&m->vals, cap, sizeof *m->vals)))
            return oom(dc);
        m->cap = cap;
    }
    m->keys[m->n] = key;
    if (m->vals != NULL)
        m->vals[m->n] = val;
    m->n++;
    if (m->n > MAP_LINEAR_MAX) {
        if (m->index == NULL || 2 * m->n > m->icap) {
            if (!map_reindex(m))
                return oom(dc);
        } else {
            size_t slot = key->hash & (m->icap - 1);
            while (m->index[slot] != 0)
                slot = (slot + 1) & (m->icap - 1);
            m->index[slot] = (uint32_t)m->n;
        }
    }
    return MS_OK;
}

/* ---- value construction ---- */

static ms_status new_value(decoder *dc, ms_pickle_kind kind, size_t extra, ms_pickle_value **out)
{
    ms_pickle *doc = dc->doc;
    if (doc->n >= dc->lim.max_values)
        return fail(dc, MS_ELIMIT, "more than %zu values", dc->lim.max_values);
    if (!MS_GROW(doc->values, doc->n, doc->cap, 256))
        return oom(dc);
    if (extra > SIZE_MAX - sizeof(ms_pickle_value) - 1)
        return oom(dc);
    ms_pickle_value *v = calloc(1, sizeof *v + extra + 1); /* + NUL of a blob */
    if (v == NULL)
        return oom(dc);
    v->kind = kind;
    doc->values[doc->n++] = v;
    *out = v;
    return MS_OK;
}

static ms_status push(decoder *dc, ms_pickle_value *v)
{
    if (dc->sn >= dc->lim.max_stack)
        return fail(dc, MS_ELIMIT, "stack deeper than %zu values", dc->lim.max_stack);
    if (!MS_GROW(dc->stack, dc->sn, dc->scap, 64))
        return oom(dc);
    dc->stack[dc->sn++] = v;
    return MS_OK;
}

static ms_status push_scalar(decoder *dc, ms_pickle_kind kind, int64_t i, double f)
{
    ms_pickle_value *v = NULL;
    ms_status st = new_value(dc, kind, 0, &v);
    if (st != MS_OK)
        return st;
    v->hashable = true;
    if (kind == MS_PK_INT) {
        v->u.i = i;
        v->hash = mix64((uint64_t)i);
    } else if (kind == MS_PK_BOOL) {
        v->u.b = i != 0;
        v->hash = mix64((uint64_t)(i != 0));
    } else if (kind == MS_PK_FLOAT) {
        v->u.f = f;
        v->hash = hash_float(f);
    } else {
        v->hash = mix64(0x4e6f6e65ULL); /* None */
    }
    return push(dc, v);
}

static ms_status push_blob(decoder *dc, ms_pickle_kind kind, const void *data, size_t len)
{
    ms_pickle_value *v = NULL;
    ms_status st = new_value(dc, kind, len, &v);
    if (st != MS_OK)
        return st;
    v->u.s.len = len;
    v->u.s.data = (char *)(v + 1);
    if (len > 0)
        memcpy(v->u.s.data, data, len);
    v->u.s.data[len] = '\0';
    v->hashable = kind != MS_PK_BYTEARRAY;
    v->hash = hash_bytes((uint64_t)kind, v->u.s.data, len);
    return push(dc, v);
}

/* Items above the innermost open MARK (the only ones an opcode may use). */
static size_t avail(const decoder *dc)
{
    return dc->sn - (dc->mn ? dc->marks[dc->mn - 1] : 0);
}

static ms_status need(decoder *dc, size_t n)
{
    if (avail(dc) < n)
        return fail(dc, MS_EPARSE, "stack underflow: needs %zu value%s, %zu available", n,
                    n == 1 ? "" : "s", avail(dc));
    return MS_OK;
}

static ms_status pop_mark(decoder *dc, size_t *base)
{
    if (dc->mn == 0)
        return fail(dc, MS_EPARSE, "no MARK to pop");
    *base = dc->marks[--dc->mn];
    return MS_OK;
}

/* A tuple or list of stack[base..sn), which the caller then pops. */
static ms_status make_seq(decoder *dc, ms_pickle_kind kind, size_t base, ms_pickle_value **out)
{
    size_t n = dc->sn - base;
    ms_pickle_value *v = NULL;
    ms_status st = new_value(dc, kind, 0, &v);
    if (st != MS_OK)
        return st;
    if (n > 0) {
        v->u.seq.items = malloc(n * sizeof *v->u.seq.items);
        if (v->u.seq.items == NULL)
            return oom(dc);
        memcpy(v->u.seq.items, dc->stack + base, n * sizeof *v->u.seq.items);
    }
    v->u.seq.n = v->u.seq.cap = n;
    if (kind == MS_PK_TUPLE) {
        uint64_t h = 0x345678ULL + n;
        bool hashable = true;
        uint32_t depth = 0;
        for (size_t i = 0; i < n; i++) {
            const ms_pickle_value *it = v->u.seq.items[i];
            hashable = hashable && it->hashable;
            h = mix64(h ^ it->hash);
            if (it->depth > depth)
                depth = it->depth;
        }
        v->hashable = hashable;
        v->hash = h;
        v->depth = depth + 1;
        if (v->depth > dc->lim.max_depth)
            return fail(dc, MS_ELIMIT, "tuples nested deeper than %zu", dc->lim.max_depth);
    }
    *out = v;
    return MS_OK;
}

static ms_status new_map(decoder *dc, ms_pickle_kind kind, ms_pickle_value **out)
{
    ms_status st = new_value(dc, kind, 0, out);
    if (st != MS_OK)
        return st;
    if (kind == MS_PK_DICT) {
        /* A dict keeps a values array from the start, even empty. */
        (*out)->u.map.vals = malloc(4 * sizeof(ms_pickle_value *));
        (*out)->u.map.keys = malloc(4 * sizeof(ms_pickle_value *));
        if ((*out)->u.map.vals == NULL || (*out)->u.map.keys == NULL)
            return oom(dc);
        (*out)->u.map.cap = 4;
    }
    return MS_OK;
}

static ms_status make_frozenset(decoder *dc, size_t base, ms_pickle_value **out)
{
    ms_pickle_value *v = NULL;
    ms_status st = new_map(dc, MS_PK_FROZENSET, &v);
    for (size_t i = base; st == MS_OK && i < dc->sn; i++)
        st = map_put(dc, &v->u.map, dc->stack[i], NULL);
    if (st != MS_OK)
        return st;
    /* Order-independent, as frozenset equality is. */
    uint64_t h = 0x6672737AULL + v->u.map.n;
    uint32_t depth = 0;
    for (size_t i = 0; i < v->u.map.n; i++) {
        h += mix64(v->u.map.keys[i]->hash);
        if (v->u.map.keys[i]->depth > depth)
            depth = v->u.map.keys[i]->depth;
    }
    v->hashable = true;
    v->hash = mix64(h);
    v->depth = depth + 1;
    if (v->depth > dc->lim.max_depth)
        return fail(dc, MS_ELIMIT, "frozensets nested deeper than %zu", dc->lim.max_depth);
    *out = v;
    return MS_OK;
}

/* ---- reading arguments ---- */

static ms_status take(decoder *dc, size_t n, const uint8_t **out)
{
    if (dc->len - dc->pos < n)
        return fail(dc, MS_EPARSE, "truncated: needs %zu more byte%s, input ends at offset %zu",
                    n, n == 1 ? "" : "s", dc->len);
    *out = dc->p + dc->pos;
    dc->pos += n;
    return MS_OK;
}

static ms_status take_le(decoder *dc, size_t n, uint64_t *out)
{
    const uint8_t *b = NULL;
    ms_status st = take(dc, n, &b);
    if (st != MS_OK)
        return st;
    uint64_t v = 0;
    for (size_t i = n; i-- > 0;)
        v = (v << 8) | b[i];
    *out = v;
    return MS_OK;
}

/* A text argument up to (not including) its newline. */
static ms_status take_line(decoder *dc, const char **line, size_t *len)
{
    const uint8_t *start = dc->p + dc->pos;
    const uint8_t *nl = memchr(start, '\n', dc->len - dc->pos);
    if (nl == NULL)
        return fail(dc, MS_EPARSE, "truncated: no newline ends the argument before offset %zu",
                    dc->len);
    *line = (const char *)start;
    *len = (size_t)(nl - start);
    dc->pos += *len + 1;
    return MS_OK;
}

/* Decimal integer of a text opcode (INT, LONG, GET, PUT), in int64 range.
 * Python accepts wider ints here; memsim reports them as out of range. */
static ms_status parse_decimal(decoder *dc, const char *s, size_t n, int64_t *out)
{
    char buf[64];
    while (n > 0 && (s[n - 1] == ' ' || s[n - 1] == '\r' || s[n - 1] == '\t'))
        n--;
    if (n == 0 || n >= sizeof buf)
        return fail(dc, n == 0 ? MS_EPARSE : MS_ERANGE, "bad integer argument");
    memcpy(buf, s, n);
    buf[n] = '\0';
    const char *p = buf;
    while (*p == ' ' || *p == '\t')
        p++;
    if (*p == '+' || *p == '-')
        p++;
    if (*p < '0' || *p > '9')
        return fail(dc, MS_EPARSE, "bad integer argument '%s'", buf);
    char *end;
    errno = 0;
    long long v = strtoll(buf, &end, 10);
    if (errno == ERANGE)
        return fail(dc, MS_ERANGE, "integer '%s' beyond int64", buf);
    if (*end != '\0')
        return fail(dc, MS_EPARSE, "bad integer argument '%s'", buf);
    *out = v;
    return MS_OK;
}

/* LONG1/LONG4 bytes: little-endian two's complement.  Within int64 it is an
 * int; beyond, a bigint holding the minimal encoding. */
static ms_status push_long_bytes(decoder *dc, const uint8_t *b, size_t n)
{
    size_t m = n;
    /* Strip redundant sign bytes (0x00 before a clear top bit, 0xff before
     * a set one) so equal ints compare equal. */
    while (m > 1 && ((b[m - 1] == 0x00 && !(b[m - 2] & 0x80)) ||
                     (b[m - 1] == 0xff && (b[m - 2] & 0x80))))
        m--;
    if (m <= 8) {
        uint64_t u = 0;
        for (size_t i = m; i-- > 0;)
            u = (u << 8) | b[i];
        if (m > 0 && m < 8 && (b[m - 1] & 0x80))
            u |= ~(uint64_t)0 << (8 * m);
        return push_scalar(dc, MS_PK_INT, (int64_t)u, 0);
    }
    return push_blob(dc, MS_PK_BIGINT, b, m);
}

static bool utf8_valid(const uint8_t *s, size_t n)
{
    size_t i = 0;
    while (i < n) {
        uint8_t c = s[i];
        size_t k = 0;
        uint32_t cp;
        if (c < 0x80) {
            i++;
            continue;
        } else if ((c & 0xe0) == 0xc0) {
            k = 1;
            cp = c & 0x1f;
        } else if ((c & 0xf0) == 0xe0) {
            k = 2;
            cp = c & 0x0f;
        } else if ((c & 0xf8) == 0xf0) {
            k = 3;
            cp = c & 0x07;
        } else {
            return false;
        }
        if (n - i <= k)
            return false;
        for (size_t j = 1; j <= k; j++) {
            if ((s[i + j] & 0xc0) != 0x80)
                return false;
            cp = (cp << 6) | (s[i + j] & 0x3f);
        }
        /* Overlong forms and code points past U+10FFFF are invalid;
         * surrogates pass (Python pickles str with 'surrogatepass'). */
        if ((k == 1 && cp < 0x80) || (k == 2 && cp < 0x800) || (k == 3 && cp < 0x10000) ||
            cp > 0x10ffff)
            return false;
        i += k + 1;
    }
    return true;
}

static ms_status push_unicode(decoder *dc, size_t lenbytes)
{
    uint64_t n = 0;
    const uint8_t *b = NULL;
    ms_status st = take_le(dc, lenbytes, &n);
    if (st != MS_OK)
        return st;
    if (n > dc->len - dc->pos)
        return fail(dc, MS_EPARSE, "truncated: string of %llu bytes, input ends at offset %zu",
                    (unsigned long long)n, dc->len);
    st = take(dc, (size_t)n, &b);
    if (st != MS_OK)
        return st;
    if (!utf8_valid(b, (size_t)n))
        return fail(dc, MS_EPARSE, "string is not valid UTF-8");
    return push_blob(dc, MS_PK_STR, b, (size_t)n);
}

static ms_status push_bytes(decoder *dc, size_t lenbytes, ms_pickle_kind kind)
{
    uint64_t n = 0;
    const uint8_t *b = NULL;
    ms_status st = take_le(dc, lenbytes, &n);
    if (st != MS_OK)
        return st;
    if (n > dc->len - dc->pos)
        return fail(dc, MS_EPARSE, "truncated: %llu bytes of data, input ends at offset %zu",
                    (unsigned long long)n, dc->len);
    st = take(dc, (size_t)n, &b);
    return st != MS_OK ? st : push_blob(dc, kind, b, (size_t)n);
}

static bool ascii_only(const uint8_t *b, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (b[i] >= 0x80)
            return false;
    return true;
}

/* BINSTRING / SHORT_BINSTRING: Python 3 decodes these protocol-2 str8
 * values with the default encoding 'ASCII' into str. */
static ms_status push_str8(decoder *dc, size_t lenbytes)
{
    uint64_t n = 0;
    const uint8_t *b = NULL;
    ms_status st = take_le(dc, lenbytes, &n);
    if (st != MS_OK)
        return st;
    if (lenbytes == 4 && n > INT32_MAX)
        return fail(dc, MS_EPARSE, "negative BINSTRING length");
    if (n > dc->len - dc->pos)
        return fail(dc, MS_EPARSE, "truncated: string of %llu bytes, input ends at offset %zu",
                    (unsigned long long)n, dc->len);
    st = take(dc, (size_t)n, &b);
    if (st != MS_OK)
        return st;
    if (!ascii_only(b, (size_t)n))
        return fail(dc, MS_EPARSE, "8-bit string is not ASCII");
    return push_blob(dc, MS_PK_STR, b, (size_t)n);
}

static int hexval(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

/* STRING: a quoted Python literal, unescaped as codecs.escape_decode does. */
static ms_status push_string_text(decoder *dc)
{
    const char *s = NULL;
    size_t n = 0;
    ms_status st = take_line(dc, &s, &n);
    if (st != MS_OK)
        return st;
    if (n < 2 || s[0] != s[n - 1] || (s[0] != '\'' && s[0] != '"'))
        return fail(dc, MS_EPARSE, "the STRING argument must be quoted");
    s++;
    n -= 2;
    char *out = malloc(n + 1);
    if (out == NULL)
        return oom(dc);
    size_t o = 0;
    for (size_t i = 0; i < n; i++) {
        if (s[i] != '\\') {
            out[o++] = s[i];
            continue;
        }
        if (++i == n) {
            free(out);
            return fail(dc, MS_EPARSE, "trailing \\ in STRING argument");
        }
        char c = s[i];
        static const char plain[] = "\\'\"abfnrtv";
        static const char mapped[] = "\\'\"\a\b\f\n\r\t\v";
        const char *hit = strchr(plain, c);
        if (c != '\0' && hit != NULL) {
            out[o++] = mapped[hit - plain];
        } else if (c == '\n') {
            /* a line continuation */
        } else if (c == 'x') {
            int hi = i + 1 < n ? hexval(s[i + 1]) : -1;
            int lo = i + 2 < n ? hexval(s[i + 2]) : -1;
            if (hi < 0 || lo < 0) {
                free(out);
                return fail(dc, MS_EPARSE, "bad \\x escape in STRING argument");
            }
            out[o++] = (char)(hi * 16 + lo);
            i += 2;
        } else if (c >= '0' && c <= '7') {
            int v = c - '0';
            for (int k = 0; k < 2 && i + 1 < n && s[i + 1] >= '0' && s[i + 1] <= '7'; k++)
                v = v * 8 + (s[++i] - '0');
            out[o++] = (char)(v & 0xff);
        } else {
            /* Unknown escapes stay as written, as escape_decode keeps them. */
            out[o++] = '\\';
            out[o++] = c;
        }
    }
    if (!ascii_only((const uint8_t *)out, o)) {
        free(out);
        return fail(dc, MS_EPARSE, "8-bit string is not ASCII");
    }
    st = push_blob(dc, MS_PK_STR, out, o);
    free(out);
    return st;
}

static ms_status push_float_text(decoder *dc)
{
    const char *s = NULL;
    size_t n = 0;
    char buf[128];
    ms_status st = take_line(dc, &s, &n);
    if (st != MS_OK)
        return st;
    if (n == 0 || n >= sizeof buf)
        return fail(dc, MS_EPARSE, "bad FLOAT argument");
    memcpy(buf, s, n);
    buf[n] = '\0';
    char *end;
    double f = strtod(buf, &end);
    while (*end == ' ' || *end == '\r' || *end == '\t')
        end++;
    if (end == buf || *end != '\0')
        return fail(dc, MS_EPARSE, "bad FLOAT argument '%s'", buf);
    return push_scalar(dc, MS_PK_FLOAT, 0, f);
}

static ms_status push_int_text(decoder *dc, bool is_long)
{
    const char *s = NULL;
    size_t n = 0;
    ms_status st = take_line(dc, &s, &n);
    if (st != MS_OK)
        return st;
    if (!is_long && n == 2 && s[0] == '0' && (s[1] == '0' || s[1] == '1'))
        return push_scalar(dc, MS_PK_BOOL, s[1] == '1', 0);
    if (is_long && n > 0 && s[n - 1] == 'L')
        n--;
    int64_t v = 0;
    st = parse_decimal(dc, s, n, &v);
    return st != MS_OK ? st : push_scalar(dc, MS_PK_INT, v, 0);
}

/* ---- memo ---- */

static ms_status memo_put(decoder *dc, uint64_t idx)
{
    ms_status st = need(dc, 1);
    if (st != MS_OK)
        return st;
    if (idx >= dc->lim.max_memo)
        return fail(dc, MS_ELIMIT, "memo index %llu beyond the limit %zu",
                    (unsigned long long)idx, dc->lim.max_memo);
    if (idx >= dc->memo_cap) {
        size_t cap = dc->memo_cap ? dc->memo_cap : 64;
        while (cap <= idx)
            cap *= 2;
        if (cap > dc->lim.max_memo)
            cap = dc->lim.max_memo;
        ms_pickle_value **m = realloc(dc->memo, cap * sizeof *m);
        if (m == NULL)
            return oom(dc);
        memset(m + dc->memo_cap, 0, (cap - dc->memo_cap) * sizeof *m);
        dc->memo = m;
        dc->memo_cap = cap;
    }
    if (dc->memo[idx] == NULL)
        dc->memo_count++;
    dc->memo[idx] = dc->stack[dc->sn - 1];
    return MS_OK;
}

static ms_status memo_get(decoder *dc, uint64_t idx)
{
    if (idx >= dc->memo_cap || dc->memo[idx] == NULL)
        return fail(dc, MS_EPARSE, "memo key %llu not found", (unsigned long long)idx);
    return push(dc, dc->memo[idx]);
}

static ms_status memo_text(decoder *dc, bool put)
{
    const char *s = NULL;
    size_t n = 0;
    int64_t idx = 0;
    ms_status st = take_line(dc, &s, &n);
    if (st == MS_OK)
        st = parse_decimal(dc, s, n, &idx);
    if (st != MS_OK)
        return st;
    if (idx < 0)
        return fail(dc, MS_EPARSE, "negative memo index");
    return put ? memo_put(dc, (uint64_t)idx) : memo_get(dc, (uint64_t)idx);
}

static ms_status memo_bin(decoder *dc, size_t nbytes, bool put)
{
    uint64_t idx = 0;
    ms_status st = take_le(dc, nbytes, &idx);
    if (st != MS_OK)
        return st;
    return put ? memo_put(dc, idx) : memo_get(dc, idx);
}

/* ---- container opcodes ---- */

static ms_status list_extend(decoder *dc, ms_pickle_value *list, size_t from)
{
    size_t add = dc->sn - from;
    if (list->kind != MS_PK_LIST)
        return fail(dc, MS_EPARSE, "appending to a %s (expected list)",
                    ms_pickle_kind_name(list->kind));
    if (add == 0)
        return MS_OK; /* APPENDS of nothing: the list may still have no array */
    if (add > SIZE_MAX / sizeof(ms_pickle_value *) - list->u.seq.n)
        return oom(dc);
    if (!MS_GROW_TO(list->u.seq.items, list->u.seq.n + add, list->u.seq.cap, 4))
        return oom(dc);
    memcpy(list->u.seq.items + list->u.seq.n, dc->stack + from, add * sizeof *dc->stack);
    list->u.seq.n += add;
    dc->sn = from;
    return MS_OK;
}

static ms_status dict_setitems(decoder *dc, ms_pickle_value *dict, size_t from)
{
    if (dict->kind != MS_PK_DICT)
        return fail(dc, MS_EPARSE, "setting items on a %s (expected dict)",
                    ms_pickle_kind_name(dict->kind));
    if ((dc->sn - from) % 2 != 0)
        return fail(dc, MS_EPARSE, "odd number of values for dict items");
    for (size_t i = from; i < dc->sn; i += 2) {
        ms_status st = map_put(dc, &dict->u.map, dc->stack[i], dc->stack[i + 1]);
        if (st != MS_OK)
            return st;
    }
    dc->sn = from;
    return MS_OK;
}

static ms_status set_additems(decoder *dc, ms_pickle_value *set, size_t from)
{
    if (set->kind != MS_PK_SET)
        return fail(dc, MS_EPARSE, "adding items to a %s (expected set)",
                    ms_pickle_kind_name(set->kind));
    for (size_t i = from; i < dc->sn; i++) {
        ms_status st = map_put(dc, &set->u.map, dc->stack[i], NULL);
        if (st != MS_OK)
            return st;
    }
    dc->sn = from;
    return MS_OK;
}

/* An opcode working on the items above the innermost MARK, on the container
 * just below that MARK (APPENDS, SETITEMS, ADDITEMS). */
static ms_status marked_update(decoder *dc)
{
    size_t base = 0;
    ms_status st = pop_mark(dc, &base);
    if (st != MS_OK)
        return st;
    if (base == 0 || base <= (dc->mn ? dc->marks[dc->mn - 1] : 0))
        return fail(dc, MS_EPARSE, "stack underflow: no container below the MARK");
    ms_pickle_value *target = dc->stack[base - 1];
    if (dc->op == OP_APPENDS)
        return list_extend(dc, target, base);
    if (dc->op == OP_SETITEMS)
        return dict_setitems(dc, target, base);
    return set_additems(dc, target, base);
}

/* LIST, TUPLE, DICT, FROZENSET: a new container from the items above the
 * innermost MARK. */
static ms_status marked_build(decoder *dc)
{
    size_t base = 0;
    ms_status st = pop_mark(dc, &base);
    if (st != MS_OK)
        return st;
    ms_pickle_value *v = NULL;
    if (dc->op == OP_LIST || dc->op == OP_TUPLE) {
        st = make_seq(dc, dc->op == OP_LIST ? MS_PK_LIST : MS_PK_TUPLE, base, &v);
    } else if (dc->op == OP_FROZENSET) {
        st = make_frozenset(dc, base, &v);
    } else {
        st = new_map(dc, MS_PK_DICT, &v);
        if (st == MS_OK)
            st = dict_setitems(dc, v, base);
    }
    if (st != MS_OK)
        return st;
    dc->sn = base;
    return push(dc, v);
}

static ms_status tuple_n(decoder *dc, size_t n)
{
    ms_status st = need(dc, n);
    ms_pickle_value *v = NULL;
    if (st == MS_OK)
        st = make_seq(dc, MS_PK_TUPLE, dc->sn - n, &v);
    if (st != MS_OK)
        return st;
    dc->sn -= n;
    return push(dc, v);
}

static ms_status empty(decoder *dc, ms_pickle_kind kind)
{
    ms_pickle_value *v = NULL;
    ms_status st;
    if (kind == MS_PK_TUPLE || kind == MS_PK_LIST)
        st = make_seq(dc, kind, dc->sn, &v);
    else
        st = new_map(dc, kind, &v);
    return st != MS_OK ? st : push(dc, v);
}

static ms_status one_item(decoder *dc)
{
    ms_status st;
    if (dc->op == OP_APPEND) {
        st = need(dc, 2);
        return st != MS_OK ? st : list_extend(dc, dc->stack[dc->sn - 2], dc->sn - 1);
    }
    st = need(dc, 3); /* SETITEM */
    return st != MS_OK ? st : dict_setitems(dc, dc->stack[dc->sn - 3], dc->sn - 2);
}

/* ---- the opcode loop ---- */

static ms_status binint(decoder *dc, size_t n)
{
    uint64_t u = 0;
    ms_status st = take_le(dc, n, &u);
    if (st != MS_OK)
        return st;
    int64_t v = n == 4 ? (int64_t)(int32_t)(uint32_t)u : (int64_t)u;
    return push_scalar(dc, MS_PK_INT, v, 0);
}

static ms_status long_bin(decoder *dc, size_t lenbytes)
{
    uint64_t n = 0;
    const uint8_t *b = NULL;
    ms_status st = take_le(dc, lenbytes, &n);
    if (st != MS_OK)
        return st;
    if (lenbytes == 4 && n > INT32_MAX)
        return fail(dc, MS_EPARSE, "negative LONG4 byte count");
    if (n > dc->len - dc->pos)
        return fail(dc, MS_EPARSE, "truncated: %llu bytes of integer, input ends at offset %zu",
                    (unsigned long long)n, dc->len);
    st = take(dc, (size_t)n, &b);
    return st != MS_OK ? st : push_long_bytes(dc, b, (size_t)n);
}

static ms_status binfloat(decoder *dc)
{
    const uint8_t *b = NULL;
    ms_status st = take(dc, 8, &b);
    if (st != MS_OK)
        return st;
    uint64_t u = 0;
    for (int i = 0; i < 8; i++)
        u = (u << 8) | b[i]; /* big-endian IEEE 754 */
    double f = 0;
    memcpy(&f, &u, sizeof f);
    return push_scalar(dc, MS_PK_FLOAT, 0, f);
}

static ms_status proto(decoder *dc)
{
    const uint8_t *b = NULL;
    ms_status st = take(dc, 1, &b);
    if (st != MS_OK)
        return st;
    if (b[0] < 2 || b[0] > 5)
        return fail(dc, MS_EUNSUPPORTED, "unsupported pickle protocol %u (memsim reads 2 to 5)",
                    b[0]);
    return MS_OK;
}

static ms_status frame(decoder *dc)
{
    uint64_t n = 0;
    ms_status st = take_le(dc, 8, &n);
    if (st != MS_OK)
        return st;
    if (n > dc->len - dc->pos)
        return fail(dc, MS_EPARSE, "truncated: frame of %llu bytes, input ends at offset %zu",
                    (unsigned long long)n, dc->len);
    return MS_OK;
}

static ms_status pop_one(decoder *dc)
{
    size_t base = 0;
    /* Python's load_pop: with nothing above the MARK, POP drops the MARK. */
    if (avail(dc) > 0) {
        dc->sn--;
        return MS_OK;
    }
    if (dc->mn == 0)
        return fail(dc, MS_EPARSE, "stack underflow: nothing to pop");
    return pop_mark(dc, &base);
}

static ms_status pop_to_mark(decoder *dc)
{
    size_t base = 0;
    ms_status st = pop_mark(dc, &base);
    if (st == MS_OK)
        dc->sn = base;
    return st;
}

static ms_status mark(decoder *dc)
{
    if (dc->mn >= dc->lim.max_depth)
        return fail(dc, MS_ELIMIT, "more than %zu nested MARKs", dc->lim.max_depth);
    if (!MS_GROW(dc->marks, dc->mn, dc->mcap, 16))
        return oom(dc);
    dc->marks[dc->mn++] = dc->sn;
    return MS_OK;
}

static ms_status dup_top(decoder *dc)
{
    ms_status st = need(dc, 1);
    return st != MS_OK ? st : push(dc, dc->stack[dc->sn - 1]);
}

static ms_status refused(decoder *dc)
{
    return fail(dc, MS_EUNSUPPORTED,
                "refused: this opcode imports or calls code, and a memory snapshot is pure data");
}

static ms_status step(decoder *dc)
{
    switch (dc->op) {
    case OP_PROTO: return proto(dc);
    case OP_FRAME: return frame(dc);
    case OP_MARK: return mark(dc);
    case OP_POP: return pop_one(dc);
    case OP_POP_MARK: return pop_to_mark(dc);
    case OP_DUP: return dup_top(dc);
    case OP_NONE: return push_scalar(dc, MS_PK_NONE, 0, 0);
    case OP_NEWTRUE: return push_scalar(dc, MS_PK_BOOL, 1, 0);
    case OP_NEWFALSE: return push_scalar(dc, MS_PK_BOOL, 0, 0);
    case OP_INT: return push_int_text(dc, false);
    case OP_LONG: return push_int_text(dc, true);
    case OP_BININT: return binint(dc, 4);
    case OP_BININT1: return binint(dc, 1);
    case OP_BININT2: return binint(dc, 2);
    case OP_LONG1: return long_bin(dc, 1);
    case OP_LONG4: return long_bin(dc, 4);
    case OP_FLOAT: return push_float_text(dc);
    case OP_BINFLOAT: return binfloat(dc);
    case OP_STRING: return push_string_text(dc);
    case OP_BINSTRING: return push_str8(dc, 4);
    case OP_SHORT_BINSTRING: return push_str8(dc, 1);
    case OP_BINUNICODE: return push_unicode(dc, 4);
    case OP_SHORT_BINUNICODE: return push_unicode(dc, 1);
    case OP_BINUNICODE8: return push_unicode(dc, 8);
    case OP_BINBYTES: return push_bytes(dc, 4, MS_PK_BYTES);
    case OP_SHORT_BINBYTES: return push_bytes(dc, 1, MS_PK_BYTES);
    case OP_BINBYTES8: return push_bytes(dc, 8, MS_PK_BYTES);
    case OP_BYTEARRAY8: return push_bytes(dc, 8, MS_PK_BYTEARRAY);
    case OP_EMPTY_LIST: return empty(dc, MS_PK_LIST);
    case OP_EMPTY_TUPLE: return empty(dc, MS_PK_TUPLE);
    case OP_EMPTY_DICT: return empty(dc, MS_PK_DICT);
    case OP_EMPTY_SET: return empty(dc, MS_PK_SET);
    case OP_APPEND:
    case OP_SETITEM: return one_item(dc);
    case OP_APPENDS:
    case OP_SETITEMS:
    case OP_ADDITEMS: return marked_update(dc);
    case OP_LIST:
    case OP_TUPLE:
    case OP_DICT:
    case OP_FROZENSET: return marked_build(dc);
    case OP_TUPLE1: return tuple_n(dc, 1);
    case OP_TUPLE2: return tuple_n(dc, 2);
    case OP_TUPLE3: return tuple_n(dc, 3);
    case OP_GET: return memo_text(dc, false);
    case OP_PUT: return memo_text(dc, true);
    case OP_BINGET: return memo_bin(dc, 1, false);
    case OP_LONG_BINGET: return memo_bin(dc, 4, false);
    case OP_BINPUT: return memo_bin(dc, 1, true);
    case OP_LONG_BINPUT: return memo_bin(dc, 4, true);
    case OP_MEMOIZE: return memo_put(dc, dc->memo_count);
    case OP_GLOBAL:
    case OP_STACK_GLOBAL:
    case OP_REDUCE:
    case OP_BUILD:
    case OP_INST:
    case OP_OBJ:
    case OP_NEWOBJ:
    case OP_NEWOBJ_EX:
    case OP_EXT1:
    case OP_EXT2:
    case OP_EXT4:
    case OP_PERSID:
    case OP_BINPERSID:
    case OP_NEXT_BUFFER:
    case OP_READONLY_BUFFER: return refused(dc);
    default:
        if (opcode_names[dc->op] != NULL)
            return fail(dc, MS_EUNSUPPORTED, "opcode not supported by memsim's decoder");
        return fail(dc, MS_EPARSE, "invalid opcode");
    }
}

/* Input that does not start with PROTO: say what it is, as far as its first
 * bytes tell, rather than call every such file an old pickle. */
static ms_status not_protocol_2(decoder *dc)
{
    const uint8_t *p = dc->p;
    size_t n = dc->len;
    size_t i = 0;
    while (i < n && (p[i] == ' ' || p[i] == '\t' || p[i] == '\r' || p[i] == '\n'))
        i++;
    if (n == 0)
        return ms_diag_set(dc->d, MS_EPARSE, "not a pickle: the input is empty");
    if (i < n && (p[i] == '{' || p[i] == '[' || p[i] == '"'))
        return ms_diag_set(dc->d, MS_EPARSE,
                           "not a pickle: the input looks like JSON (it starts with '%c'); "
                           "memsim reads the pickle torch.cuda.memory._dump_snapshot() writes",
                           p[i]);
    if (n >= 4 && p[0] == 'P' && p[1] == 'K' && p[2] == 3 && p[3] == 4)
        return ms_diag_set(dc->d, MS_EPARSE,
                           "not a pickle: the input is a zip archive (torch.save writes those); "
                           "memsim reads the pickle torch.cuda.memory._dump_snapshot() writes");
    if (n >= 2 && p[0] == 0x1f && p[1] == 0x8b)
        return ms_diag_set(dc->d, MS_EPARSE,
                           "not a pickle: the input is gzip-compressed; decompress it first");
    /* A protocol 0 or 1 pickle starts with an opcode and ends with STOP. */
    if (opcode_names[p[0]] != NULL && p[n - 1] == OP_STOP)
        return ms_diag_set(dc->d, MS_EUNSUPPORTED,
                           "pickle: protocol 0 or 1 (no PROTO opcode 0x80 at offset 0), which "
                           "memsim does not read: pickle it again with protocol 2 to 5");
    char hex[3 * 8 + 1] = "";
    for (size_t k = 0, at = 0; k < n && k < 8; k++)
        at += (size_t)snprintf(hex + at, sizeof hex - at, "%s%02x", k ? " " : "", p[k]);
    return ms_diag_set(dc->d, MS_EPARSE,
                       "not a pickle: a pickle starts with the PROTO opcode 0x80, this input "
                       "with the bytes %s",
                       hex);
}

static ms_status run(decoder *dc)
{
    if (dc->len == 0 || dc->p[0] != OP_PROTO) {
        dc->op = dc->len ? dc->p[0] : 0;
        return not_protocol_2(dc);
    }
    while (dc->pos < dc->len) {
        dc->op_off = dc->pos;
        dc->op = dc->p[dc->pos++];
        if (dc->op == OP_STOP) {
            ms_status st = need(dc, 1);
            if (st != MS_OK)
                return st;
            dc->doc->root = dc->stack[dc->sn - 1];
            return MS_OK;
        }
        ms_status st = step(dc);
        if (st != MS_OK)
            return st;
    }
    dc->op_off = dc->len;
    dc->op = 0;
    return ms_diag_set(dc->d, MS_EPARSE, "pickle: truncated: input ends at offset %zu before STOP",
                       dc->len);
}

ms_status ms_pickle_decode(const void *data, size_t len, const ms_pickle_limits *lim,
                           ms_pickle **out, ms_diag *d)
{
    if (out == NULL || (data == NULL && len > 0))
        return ms_diag_set(d, MS_EINVAL, "ms_pickle_decode: NULL argument");
    *out = NULL;
    decoder dc = {.p = data, .len = len, .d = d};
    if (lim != NULL)
        dc.lim = *lim;
    else
        ms_pickle_limits_default(&dc.lim);
    dc.budget.left = dc.lim.max_compare;
    dc.doc = calloc(1, sizeof *dc.doc);
    if (dc.doc == NULL)
        return ms_diag_set(d, MS_ENOMEM, "pickle: out of host memory");
    ms_status st = run(&dc);
    free(dc.stack);
    free(dc.marks);
    free(dc.memo);
    if (st != MS_OK) {
        ms_pickle_free(dc.doc);
        return st;
    }
    *out = dc.doc;
    return MS_OK;
}

ms_status ms_pickle_free(ms_pickle *p)
{
    if (p == NULL)
        return MS_EINVAL;
    for (size_t i = 0; i < p->n; i++) {
        ms_pickle_value *v = p->values[i];
        if (v->kind == MS_PK_LIST || v->kind == MS_PK_TUPLE) {
            free(v->u.seq.items);
        } else if (v->kind == MS_PK_DICT || v->kind == MS_PK_SET || v->kind == MS_PK_FROZENSET) {
            free(v->u.map.keys);
            free(v->u.map.vals);
            free(v->u.map.index);
        }
        free(v);
    }
    free(p->values);
    free(p);
    return MS_OK;
}

/* ---- accessors ---- */

const ms_pickle_value *ms_pickle_root(const ms_pickle *p)
{
    return p ? p->root : NULL;
}

ms_pickle_kind ms_pickle_kind_of(const ms_pickle_value *v)
{
    return v ? v->kind : MS_PK_COUNT;
}

const char *ms_pickle_kind_name(ms_pickle_kind k)
{
    static const char *const names[MS_PK_COUNT] = {
        "NoneType", "bool", "int", "int (beyond int64)", "float", "str", "bytes",
        "bytearray", "list", "tuple", "dict", "set", "frozenset",
    };
    return (unsigned)k < MS_PK_COUNT ? names[k] : "invalid";
}

static bool is_map(const ms_pickle_value *v)
{
    return v->kind == MS_PK_DICT || v->kind == MS_PK_SET || v->kind == MS_PK_FROZENSET;
}

static bool is_blob(const ms_pickle_value *v)
{
    return v->kind == MS_PK_STR || v->kind == MS_PK_BYTES || v->kind == MS_PK_BYTEARRAY ||
           v->kind == MS_PK_BIGINT;
}

ms_status ms_pickle_len(const ms_pickle_value *v, size_t *n)
{
    if (v == NULL || n == NULL)
        return MS_EINVAL;
    if (v->kind == MS_PK_LIST || v->kind == MS_PK_TUPLE)
        *n = v->u.seq.n;
    else if (is_map(v))
        *n = v->u.map.n;
    else if (is_blob(v))
        *n = v->u.s.len;
    else
        return MS_EINVAL;
    return MS_OK;
}

ms_status ms_pickle_item(const ms_pickle_value *v, size_t i, const ms_pickle_value **out)
{
    if (v == NULL || out == NULL)
        return MS_EINVAL;
    if (v->kind == MS_PK_LIST || v->kind == MS_PK_TUPLE) {
        if (i >= v->u.seq.n)
            return MS_ERANGE;
        *out = v->u.seq.items[i];
        return MS_OK;
    }
    if (v->kind == MS_PK_SET || v->kind == MS_PK_FROZENSET) {
        if (i >= v->u.map.n)
            return MS_ERANGE;
        *out = v->u.map.keys[i];
        return MS_OK;
    }
    return MS_EINVAL;
}

ms_status ms_pickle_dict_item(const ms_pickle_value *v, size_t i, const ms_pickle_value **key,
                              const ms_pickle_value **val)
{
    if (v == NULL || key == NULL || val == NULL || v->kind != MS_PK_DICT)
        return MS_EINVAL;
    if (i >= v->u.map.n)
        return MS_ERANGE;
    *key = v->u.map.keys[i];
    *val = v->u.map.vals[i];
    return MS_OK;
}

ms_status ms_pickle_dict_get(const ms_pickle_value *dict, const char *key,
                             const ms_pickle_value **out)
{
    if (dict == NULL || key == NULL || out == NULL || dict->kind != MS_PK_DICT)
        return MS_EINVAL;
    /* A probe value shaped like the str the key would be. */
    ms_pickle_value probe = {.kind = MS_PK_STR, .hashable = true};
    probe.u.s.len = strlen(key);
    probe.u.s.data = (char *)key;
    probe.hash = hash_bytes((uint64_t)MS_PK_STR, key, probe.u.s.len);
    eq_budget bud = {SIZE_MAX};
    size_t at = map_find(&dict->u.map, &probe, &bud);
    if (at == SIZE_MAX)
        return MS_ENOENT;
    *out = dict->u.map.vals[at];
    return MS_OK;
}

ms_status ms_pickle_as_int(const ms_pickle_value *v, int64_t *out)
{
    if (v == NULL || out == NULL)
        return MS_EINVAL;
    if (v->kind == MS_PK_BIGINT)
        return MS_ERANGE;
    if (!is_intlike(v))
        return MS_EINVAL;
    *out = intlike(v);
    return MS_OK;
}

ms_status ms_pickle_as_float(const ms_pickle_value *v, double *out)
{
    if (v == NULL || out == NULL)
        return MS_EINVAL;
    if (v->kind == MS_PK_FLOAT)
        *out = v->u.f;
    else if (is_intlike(v))
        *out = (double)intlike(v);
    else
        return MS_EINVAL;
    return MS_OK;
}

ms_status ms_pickle_as_bool(const ms_pickle_value *v, bool *out)
{
    if (v == NULL || out == NULL || v->kind != MS_PK_BOOL)
        return MS_EINVAL;
    *out = v->u.b;
    return MS_OK;
}

ms_status ms_pickle_as_str(const ms_pickle_value *v, const char **s, size_t *len)
{
    if (v == NULL || s == NULL || v->kind != MS_PK_STR)
        return MS_EINVAL;
    *s = v->u.s.data;
    if (len != NULL)
        *len = v->u.s.len;
    return MS_OK;
}

ms_status ms_pickle_as_bytes(const ms_pickle_value *v, const uint8_t **b, size_t *len)
{
    if (v == NULL || b == NULL || len == NULL ||
        (v->kind != MS_PK_BYTES && v->kind != MS_PK_BYTEARRAY && v->kind != MS_PK_BIGINT))
        return MS_EINVAL;
    *b = (const uint8_t *)v->u.s.data;
    *len = v->u.s.len;
    return MS_OK;
}

/* ---- typed dict reads with a path in the message (private API) ---- */

static ms_status lookup(const ms_pickle_value *dict, const char *where, const char *key,
                        const ms_pickle_value **v, ms_diag *d)
{
    if (dict == NULL || key == NULL || v == NULL)
        return ms_diag_set(d, MS_EINVAL, "pickle lookup: NULL argument");
    ms_status st = ms_pickle_dict_get(dict, key, v);
    if (st == MS_EINVAL)
        return ms_diag_set(d, MS_EPARSE, "%s: expected a dict, got %s", where ? where : "value",
                           ms_pickle_kind_name(dict->kind));
    if (st == MS_ENOENT)
        return ms_diag_set(d, MS_EPARSE, "%s: missing key '%s'", where ? where : "dict", key);
    return st;
}

static ms_status wrong_kind(const char *where, const char *key, const char *expected,
                            const ms_pickle_value *v, ms_diag *d)
{
    return ms_diag_set(d, MS_EPARSE, "%s.%s: expected %s, got %s", where ? where : "dict", key,
                       expected, ms_pickle_kind_name(v->kind));
}

ms_status rpl_pickle_get_int(const ms_pickle_value *dict, const char *where, const char *key,
                             int64_t *out, ms_diag *d)
{
    const ms_pickle_value *v = NULL;
    ms_status st = lookup(dict, where, key, &v, d);
    if (st != MS_OK)
        return st;
    if (out == NULL || v->kind != MS_PK_INT)
        return v->kind == MS_PK_BIGINT
                   ? ms_diag_set(d, MS_ERANGE, "%s.%s: integer beyond int64",
                                 where ? where : "dict", key)
                   : wrong_kind(where, key, "int", v, d);
    *out = v->u.i;
    return MS_OK;
}

ms_status rpl_pickle_get_float(const ms_pickle_value *dict, const char *where, const char *key,
                               double *out, ms_diag *d)
{
    const ms_pickle_value *v = NULL;
    ms_status st = lookup(dict, where, key, &v, d);
    if (st != MS_OK)
        return st;
    if (out == NULL || ms_pickle_as_float(v, out) != MS_OK)
        return wrong_kind(where, key, "float", v, d);
    return MS_OK;
}

ms_status rpl_pickle_get_bool(const ms_pickle_value *dict, const char *where, const char *key,
                              bool *out, ms_diag *d)
{
    const ms_pickle_value *v = NULL;
    ms_status st = lookup(dict, where, key, &v, d);
    if (st != MS_OK)
        return st;
    if (out == NULL || v->kind != MS_PK_BOOL)
        return wrong_kind(where, key, "bool", v, d);
    *out = v->u.b;
    return MS_OK;
}

ms_status rpl_pickle_get_str(const ms_pickle_value *dict, const char *where, const char *key,
                             const char **out, ms_diag *d)
{
    const ms_pickle_value *v = NULL;
    ms_status st = lookup(dict, where, key, &v, d);
    if (st != MS_OK)
        return st;
    if (out == NULL || v->kind != MS_PK_STR)
        return wrong_kind(where, key, "str", v, d);
    *out = v->u.s.data;
    return MS_OK;
}

ms_status rpl_pickle_get_kind(const ms_pickle_value *dict, const char *where, const char *key,
                              ms_pickle_kind kind, const ms_pickle_value **out, ms_diag *d)
{
    const ms_pickle_value *v = NULL;
    ms_status st = lookup(dict, where, key, &v, d);
    if (st != MS_OK)
        return st;
    if (out == NULL || v->kind != kind)
        return wrong_kind(where, key, ms_pickle_kind_name(kind), v, d);
    *out = v;
    return MS_OK;
}
