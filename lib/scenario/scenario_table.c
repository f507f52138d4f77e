/* The schema reader for scenario and device files (scenario_table.h). */
#include "scenario_table.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <lauxlib.h>

const char *scn_table_type_name(st_type t)
{
    switch (t) {
    case ST_INT:
        return "an integer";
    case ST_NUM:
        return "a number";
    case ST_BOOL:
        return "a boolean (true or false)";
    case ST_STR:
        return "a string";
    case ST_CURVE:
        return "a list of {x, y} points";
    case ST_TREE:
        return "a value or a table";
    case ST_SIZE:
        return "a byte count (bytes, a size such as \"512MiB\" or \"2GB\", or \"unlimited\")";
    }
    return "?";
}

/* Units as people write sizes: decimal ones (a disk's GB) and binary ones
 * (memsim's and PyTorch's GiB); "b" alone is bytes. */
static bool size_unit(const char *u, double *scale)
{
    static const struct {
        const char *name;
        double scale;
    } units[] = {{"", 1.0},
                 {"b", 1.0},
                 {"kb", 1e3},
                 {"mb", 1e6},
                 {"gb", 1e9},
                 {"tb", 1e12},
                 {"kib", 1024.0},
                 {"mib", 1048576.0},
                 {"gib", 1073741824.0},
                 {"tib", 1099511627776.0}};
    char low[8];
    size_t n = strlen(u);
    if (n >= sizeof low)
        return false;
    for (size_t i = 0; i <= n; i++)
        low[i] = (char)((u[i] >= 'A' && u[i] <= 'Z') ? u[i] - 'A' + 'a' : u[i]);
    for (size_t i = 0; i < sizeof units / sizeof units[0]; i++)
        if (strcmp(low, units[i].name) == 0) {
            *scale = units[i].scale;
            return true;
        }
    return false;
}

bool scn_parse_size(const char *text, int64_t *bytes)
{
    if (strcmp(text, "unlimited") == 0) {
        *bytes = 0;
        return true;
    }
    /* Digits and a fraction only: strtod alone would take "1e3", "inf",
     * "0x10" and a sign. */
    const char *p = text;
    while (*p >= '0' && *p <= '9')
        p++;
    if (*p == '.')
        for (p++; *p >= '0' && *p <= '9'; p++)
            ;
    double scale;
    if (p == text || !(text[0] >= '0' && text[0] <= '9') || !size_unit(p, &scale))
        return false;
    double x = strtod(text, NULL) * scale;
    if (!(x <= 0x1p62))
        return false;
    *bytes = (int64_t)ceil(x);
    return true;
}

void scn_table_path(const st_schema *schema, int i, char *buf, size_t size)
{
    const st_field *f = &schema->fields[i];
    snprintf(buf, size, "%s%s%s", f->section, f->section[0] ? "." : "", f->key);
}

int scn_table_find(const st_schema *schema, const char *path)
{
    char buf[128];
    for (int i = 0; i < schema->n; i++) {
        scn_table_path(schema, i, buf, sizeof buf);
        if (strcmp(buf, path) == 0)
            return i;
    }
    return -1;
}

static bool is_section(const st_schema *schema, const char *name)
{
    for (int i = 0; i < schema->n; i++)
        if (schema->fields[i].section[0] && strcmp(schema->fields[i].section, name) == 0)
            return true;
    return false;
}

/* The closest known key of a section, if close enough to be a typo. */
static const char *suggest(const st_schema *schema, const char *section, const char *key)
{
    const char *best = NULL;
    size_t best_d = 3;
    for (int i = 0; i < schema->n; i++) {
        const st_field *f = &schema->fields[i];
        const char *cand = NULL;
        if (strcmp(f->section, section) == 0)
            cand = f->key;
        else if (section[0] == '\0' && f->section[0])
            cand = f->section;
        if (cand == NULL)
            continue;
        size_t dd = ms_diag_edit_distance(key, cand);
        if (dd < best_d) {
            best_d = dd;
            best = cand;
        }
    }
    return best;
}

static ms_status unknown_key(const st_schema *schema, const char *section, const char *key,
                             int more, const char *file, ms_diag *d)
{
    const char *hint = suggest(schema, section, key);
    char extra[96] = "";
    if (more > 0)
        snprintf(extra, sizeof extra, " (and %d more)", more);
    return ms_diag_set(d, MS_EINVAL, "%s: unknown key '%s%s%s'%s%s%s%s", file, section,
                       section[0] ? "." : "", key, hint ? " (did you mean '" : "",
                       hint ? hint : "", hint ? "'?)" : "", extra);
}

/* Every key of the table at idx must be a field (or, at the top level, a
 * section).  Of several unknown keys the first in byte order is named, so
 * the message does not depend on Lua's table order. */
static ms_status check_keys(lua_State *L, int idx, const st_schema *schema, const char *section,
                            const char *file, ms_diag *d)
{
    char first[128] = "";
    int unknown = 0;
    idx = lua_absindex(L, idx);
    lua_pushnil(L);
    while (lua_next(L, idx) != 0) {
        lua_pop(L, 1); /* the value */
        if (lua_type(L, -1) != LUA_TSTRING) {
            lua_pop(L, 1);
            return ms_diag_set(d, MS_EINVAL, "%s: %s%s%s has an entry without a name "
                               "(keys must be names like 'num_layers = 32')", file,
                               section[0] ? "table '" : "the returned table", section,
                               section[0] ? "'" : "");
        }
        const char *key = lua_tostring(L, -1);
        char path[128];
        snprintf(path, sizeof path, "%s%s%s", section, section[0] ? "." : "", key);
        bool known =
            scn_table_find(schema, path) >= 0 || (section[0] == '\0' && is_section(schema, key));
        if (!known && (unknown++ == 0 || strcmp(key, first) < 0))
            snprintf(first, sizeof first, "%s", key);
    }
    if (unknown > 0)
        return unknown_key(schema, section, first, unknown - 1, file, d);
    return MS_OK;
}

static const char *got(lua_State *L, int idx, char *buf, size_t size)
{
    int t = lua_type(L, idx);
    if (t == LUA_TNUMBER)
        snprintf(buf, size, "%.17g", lua_tonumber(L, idx));
    else if (t == LUA_TSTRING)
        snprintf(buf, size, "the string \"%.40s\"", lua_tostring(L, idx));
    else if (t == LUA_TBOOLEAN)
        snprintf(buf, size, "%s", lua_toboolean(L, idx) ? "true" : "false");
    else
        snprintf(buf, size, "a %s", lua_typename(L, t));
    return buf;
}

static ms_status read_curve(lua_State *L, int idx, ms_curve *c, const char *path,
                            const char *file, ms_diag *d)
{
    idx = lua_absindex(L, idx);
    lua_Integer n = (lua_Integer)lua_rawlen(L, idx);
    if (n < 1 || n > MS_CURVE_MAX)
        return ms_diag_set(d, MS_ERANGE, "%s: field '%s' must have 1 to %d {x, y} points "
                           "(got %lld)", file, path, MS_CURVE_MAX, (long long)n);
    /* Only the sequence 1..n: a stray named entry is a mistake. */
    int entries = 0;
    lua_pushnil(L);
    while (lua_next(L, idx) != 0) {
        lua_pop(L, 1);
        entries++;
    }
    if (entries != n)
        return ms_diag_set(d, MS_EINVAL, "%s: field '%s' must be a plain list of {x, y} points",
                           file, path);
    c->n = (int)n;
    for (lua_Integer i = 1; i <= n; i++) {
        bool ok = lua_rawgeti(L, idx, i) == LUA_TTABLE && lua_rawlen(L, -1) == 2;
        for (int k = 1; ok && k <= 2; k++) {
            ok = lua_rawgeti(L, -1, k) == LUA_TNUMBER && isfinite(lua_tonumber(L, -1));
            (k == 1 ? c->x : c->y)[i - 1] = lua_tonumber(L, -1);
            lua_pop(L, 1);
        }
        lua_pop(L, 1);
        if (!ok)
            return ms_diag_set(d, MS_EINVAL, "%s: field '%s' point %lld must be {x, y} with two "
                               "numbers", file, path, (long long)i);
    }
    return MS_OK;
}

/* ---- trees: nested values copied out of the sandbox ------------------- */

/* Deep enough for select_recompute = { { ['p'] = { {1, 2}, {3, 4} } } };
 * entries capped so a hostile file cannot make the reader allocate much
 * more than the sandbox's own heap cap. */
#define TREE_DEPTH 8
#define TREE_ITEMS (1u << 20)

void scn_table_tree_release(st_tree *t)
{
    if (t == NULL)
        return;
    for (uint32_t k = 0; t->items != NULL && k < t->n_items; k++)
        scn_table_tree_release(&t->items[k]);
    for (uint32_t k = 0; t->keys != NULL && k < t->n_items; k++)
        free(t->keys[k]);
    free(t->items);
    free(t->keys);
    free(t->s);
    memset(t, 0, sizeof *t);
}

void scn_table_values_release(st_value *vals, int n)
{
    for (int i = 0; vals != NULL && i < n; i++) {
        scn_table_tree_release(vals[i].tree);
        free(vals[i].tree);
        vals[i].tree = NULL;
    }
}

const char *scn_table_tree_describe(const st_tree *t, char *buf, size_t size)
{
    switch (t->type) {
    case STT_BOOL:
        snprintf(buf, size, "%s", t->b ? "true" : "false");
        break;
    case STT_INT:
        snprintf(buf, size, "%lld", (long long)t->i);
        break;
    case STT_NUM:
        snprintf(buf, size, "%.17g", t->n);
        break;
    case STT_STR:
        snprintf(buf, size, "the string \"%.40s\"", t->s);
        break;
    case STT_LIST:
        snprintf(buf, size, "a list of %u entr%s", t->n_items, t->n_items == 1 ? "y" : "ies");
        break;
    case STT_DICT:
        snprintf(buf, size, "a table with named entries");
        break;
    }
    return buf;
}

static ms_status read_tree(lua_State *L, int idx, st_tree *t, int depth, const char *path,
                           const char *file, ms_diag *d);

static ms_status tree_scalar(lua_State *L, int idx, st_tree *t, const char *path,
                             const char *file, ms_diag *d)
{
    char buf[96];
    switch (lua_type(L, idx)) {
    case LUA_TBOOLEAN:
        t->type = STT_BOOL;
        t->b = lua_toboolean(L, idx);
        return MS_OK;
    case LUA_TNUMBER: {
        double x = lua_tonumber(L, idx);
        if (lua_isinteger(L, idx) || (x == floor(x) && fabs(x) < 0x1p53)) {
            t->type = STT_INT;
            t->i = lua_isinteger(L, idx) ? (int64_t)lua_tointeger(L, idx) : (int64_t)x;
        } else {
            t->type = STT_NUM;
            t->n = x;
        }
        return MS_OK;
    }
    case LUA_TSTRING: {
        size_t len;
        const char *s = lua_tolstring(L, idx, &len);
        if (len >= ST_STR_MAX || strlen(s) != len)
            return ms_diag_set(d, MS_ERANGE, "%s: field '%s' must be a string of at most %d "
                               "bytes without NULs", file, path, ST_STR_MAX - 1);
        t->type = STT_STR;
        t->s = malloc(len + 1);
        if (t->s == NULL)
            return ms_diag_set(d, MS_ENOMEM, "%s: out of memory reading '%s'", file, path);
        memcpy(t->s, s, len + 1);
        return MS_OK;
    }
    default:
        return ms_diag_set(d, MS_EINVAL, "%s: field '%s' must be a boolean, number, string or "
                           "table (got %s)", file, path, got(L, idx, buf, sizeof buf));
    }
}

/* Count the entries of the table at idx and check its keys are all 1..n or
 * all strings. */
static ms_status tree_shape(lua_State *L, int idx, uint32_t *n, bool *dict, const char *path,
                            const char *file, ms_diag *d)
{
    lua_Integer len = (lua_Integer)lua_rawlen(L, idx);
    uint32_t count = 0, strings = 0;
    lua_pushnil(L);
    while (lua_next(L, idx) != 0) {
        lua_pop(L, 1);
        strings += lua_type(L, -1) == LUA_TSTRING;
        if (++count > TREE_ITEMS) {
            lua_pop(L, 1);
            return ms_diag_set(d, MS_ERANGE, "%s: field '%s' has more than %u entries", file,
                               path, TREE_ITEMS);
        }
    }
    *n = count;
    *dict = strings > 0;
    if ((strings == count && count > 0) || (strings == 0 && len == (lua_Integer)count))
        return MS_OK;
    return ms_diag_set(d, MS_EINVAL, "%s: field '%s' must be a list {a, b, ...} or a table of "
                       "named entries {name = value, ...}, not a mix", file, path);
}

static int key_order(const void *a, const void *b)
{
    const st_tree *x = a, *y = b;
    return strcmp(x->s, y->s);
}

/* A dict: read every (key, value) into items, then sort by key.  Each key
 * is parked in items[k].s while sorting, then moved into keys. */
static ms_status tree_dict(lua_State *L, int idx, st_tree *t, int depth, const char *path,
                           const char *file, ms_diag *d)
{
    uint32_t k = 0;
    ms_status st = MS_OK;
    st_tree *kv = calloc(t->n_items, sizeof *kv); /* key holders */
    if (kv == NULL)
        return ms_diag_set(d, MS_ENOMEM, "%s: out of memory reading '%s'", file, path);
    lua_pushnil(L);
    while (st == MS_OK && lua_next(L, idx) != 0) {
        char sub[160];
        const char *key = lua_tostring(L, -2);
        snprintf(sub, sizeof sub, "%s['%s']", path, key);
        kv[k].s = strdup(key);
        kv[k].n_items = k;
        st = kv[k].s == NULL ? ms_diag_set(d, MS_ENOMEM, "%s: out of memory", file)
                             : read_tree(L, lua_gettop(L), &t->items[k], depth + 1, sub, file, d);
        lua_pop(L, 1);
        k++;
    }
    if (st != MS_OK)
        lua_pop(L, 1); /* the key lua_next left */
    if (st == MS_OK) {
        qsort(kv, t->n_items, sizeof *kv, key_order);
        st_tree *sorted = calloc(t->n_items, sizeof *sorted);
        if (sorted == NULL) {
            st = ms_diag_set(d, MS_ENOMEM, "%s: out of memory reading '%s'", file, path);
        } else {
            for (uint32_t j = 0; j < t->n_items; j++) {
                sorted[j] = t->items[kv[j].n_items];
                t->keys[j] = kv[j].s;
                kv[j].s = NULL;
            }
            free(t->items);
            t->items = sorted;
        }
    }
    for (uint32_t j = 0; j < t->n_items; j++)
        free(kv[j].s);
    free(kv);
    return st;
}

static ms_status read_tree(lua_State *L, int idx, st_tree *t, int depth, const char *path,
                           const char *file, ms_diag *d)
{
    idx = lua_absindex(L, idx);
    if (lua_type(L, idx) != LUA_TTABLE)
        return tree_scalar(L, idx, t, path, file, d);
    if (depth >= TREE_DEPTH)
        return ms_diag_set(d, MS_ERANGE, "%s: field '%s' nests tables deeper than %d", file,
                           path, TREE_DEPTH);
    luaL_checkstack(L, 6, "tree reader");
    bool dict = false;
    uint32_t n = 0;
    ms_status st = tree_shape(L, idx, &n, &dict, path, file, d);
    if (st != MS_OK)
        return st;
    t->type = dict ? STT_DICT : STT_LIST;
    if (n == 0)
        return MS_OK;
    t->items = calloc(n, sizeof *t->items);
    t->keys = dict ? calloc(n, sizeof *t->keys) : NULL;
    if (t->items == NULL || (dict && t->keys == NULL))
        return ms_diag_set(d, MS_ENOMEM, "%s: out of memory reading '%s'", file, path);
    t->n_items = n;
    if (dict)
        return tree_dict(L, idx, t, depth, path, file, d);
    for (uint32_t k = 0; st == MS_OK && k < n; k++) {
        char sub[160];
        snprintf(sub, sizeof sub, "%s[%u]", path, k + 1);
        lua_rawgeti(L, idx, (lua_Integer)k + 1);
        st = read_tree(L, -1, &t->items[k], depth + 1, sub, file, d);
        lua_pop(L, 1);
    }
    return st;
}

/* Read the value on top of the stack into v as field f. */
static ms_status read_value(lua_State *L, const st_field *f, st_value *v, const char *path,
                            const char *file, ms_diag *d)
{
    char buf[96];
    int t = lua_type(L, -1);
    bool ok = false;
    switch (f->type) {
    case ST_INT:
        if (t == LUA_TNUMBER && lua_isinteger(L, -1)) {
            v->i = lua_tointeger(L, -1);
            ok = true;
        } else if (t == LUA_TNUMBER) {
            double x = lua_tonumber(L, -1);
            ok = x == floor(x) && fabs(x) < 0x1p53;
            v->i = ok ? (int64_t)x : 0;
        }
        break;
    case ST_NUM:
        ok = t == LUA_TNUMBER && isfinite(lua_tonumber(L, -1));
        v->n = ok ? lua_tonumber(L, -1) : 0;
        break;
    case ST_BOOL:
        ok = t == LUA_TBOOLEAN;
        v->b = lua_toboolean(L, -1);
        break;
    case ST_STR:
        ok = t == LUA_TSTRING;
        if (ok) {
            size_t len;
            const char *s = lua_tolstring(L, -1, &len);
            if (len >= sizeof v->s || strlen(s) != len)
                return ms_diag_set(d, MS_ERANGE, "%s: field '%s' must be a string of at most "
                                   "%zu bytes without NULs", file, path, sizeof v->s - 1);
            memcpy(v->s, s, len + 1);
        }
        break;
    case ST_CURVE:
        if (t == LUA_TTABLE) {
            ms_status st = read_curve(L, -1, &v->c, path, file, d);
            v->set = st == MS_OK;
            return st;
        }
        break;
    case ST_SIZE:
        if (t == LUA_TNUMBER) {
            double x = lua_tonumber(L, -1);
            ok = x >= 0 && x == floor(x) && x <= 0x1p62;
            v->i = ok ? (int64_t)x : 0;
        } else if (t == LUA_TSTRING)
            ok = scn_parse_size(lua_tostring(L, -1), &v->i);
        break;
    case ST_TREE:
        /* Attached before reading so a failure half-way is still freed. */
        v->tree = calloc(1, sizeof *v->tree);
        if (v->tree == NULL)
            return ms_diag_set(d, MS_ENOMEM, "%s: out of memory reading '%s'", file, path);
        v->set = true;
        return read_tree(L, -1, v->tree, 0, path, file, d);
    }
    if (!ok)
        return ms_diag_set(d, MS_EINVAL, "%s: field '%s' must be %s (got %s)", file, path,
                           scn_table_type_name(f->type), got(L, -1, buf, sizeof buf));
    v->set = true;
    return MS_OK;
}

/* Push the section table of field f (or the top table), or return false if
 * the section is absent. */
static ms_status push_section(lua_State *L, int top, const char *section, bool *present,
                              const char *file, ms_diag *d)
{
    *present = true;
    if (section[0] == '\0') {
        lua_pushvalue(L, top);
        return MS_OK;
    }
    lua_pushstring(L, section);
    int t = lua_rawget(L, top);
    if (t == LUA_TNIL) {
        lua_pop(L, 1);
        *present = false;
        return MS_OK;
    }
    if (t != LUA_TTABLE) {
        char buf[96];
        ms_status st = ms_diag_set(d, MS_EINVAL, "%s: field '%s' must be a table (got %s)", file,
                                   section, got(L, -1, buf, sizeof buf));
        lua_pop(L, 1);
        return st;
    }
    return MS_OK;
}

ms_status scn_table_read(lua_State *L, int idx, const st_schema *schema, st_value *vals,
                         const char *file, ms_diag *d)
{
    luaL_checkstack(L, 8, "schema reader");
    int top = lua_absindex(L, idx);
    ms_status st = check_keys(L, top, schema, "", file, d);
    /* Sections, in schema order. */
    for (int i = 0; st == MS_OK && i < schema->n; i++) {
        const char *sec = schema->fields[i].section;
        if (sec[0] == '\0' || (i > 0 && strcmp(schema->fields[i - 1].section, sec) == 0))
            continue;
        bool present;
        st = push_section(L, top, sec, &present, file, d);
        if (st == MS_OK && present) {
            st = check_keys(L, -1, schema, sec, file, d);
            lua_pop(L, 1);
        }
    }
    for (int i = 0; st == MS_OK && i < schema->n; i++) {
        const st_field *f = &schema->fields[i];
        bool present;
        st = push_section(L, top, f->section, &present, file, d);
        if (st != MS_OK || !present)
            continue;
        lua_pushstring(L, f->key);
        if (lua_rawget(L, -2) != LUA_TNIL) {
            char path[128];
            scn_table_path(schema, i, path, sizeof path);
            st = read_value(L, f, &vals[i], path, file, d);
        }
        lua_pop(L, 2);
    }
    return st;
}
