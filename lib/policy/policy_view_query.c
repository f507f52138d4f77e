/* The walks over a program that run in C: the arrays' select methods and
 * profile.ops:backward_starts.  Reading a field
 * through a view entry is a metamethod call; a policy that walked every
 * tensor or op that way spent a quarter of its own instructions there on a
 * llama2-70B stage (bench/README.md), so the walks a policy always needs
 * are done here. */
#include "policy_view.h"

#include <string.h>

#include <lauxlib.h>

static const vref *check_array(lua_State *L, int type, const char *method)
{
    vref *r = luaL_testudata(L, 1, MT_ARRAY);
    if (r == NULL || r->type != type)
        luaL_error(L, "%s: call it as profile.%s:%s(...)", method, pol_view_array_names[type], method);
    pol_view_blob(L, 1, r);
    return r;
}

static int32_t check_index_field(lua_State *L, int idx, const char *key)
{
    int ok = 0;
    lua_Integer v = lua_tointegerx(L, idx, &ok);
    if (!ok || lua_type(L, idx) != LUA_TNUMBER || v < INT32_MIN || v > INT32_MAX)
        luaL_error(L, "select: %s: expected an integer, got %s", key, luaL_tolstring(L, idx, NULL));
    return (int32_t)v;
}

static bool check_bool_field(lua_State *L, int idx, const char *key)
{
    if (lua_type(L, idx) != LUA_TBOOLEAN)
        luaL_error(L, "select: %s: expected a boolean, got %s", key, luaL_tolstring(L, idx, NULL));
    return lua_toboolean(L, idx);
}

/* A filter on an id field (layer, micro-batch, segment): an entry without
 * one (nil) never passes. */
typedef struct index_test {
    bool on;
    int32_t v;
} index_test;

static void set_index_test(lua_State *L, int val, const char *key, index_test *t)
{
    t->on = true;
    t->v = check_index_field(L, val, key);
}

static bool index_passes(const index_test *t, int32_t v)
{
    return !t->on || (v >= 0 && v == t->v);
}

/* The filter of profile.tensors:select, checked whole before any tensor is
 * looked at: a misspelt key or kind is an error, not an empty answer. */
typedef struct tensor_filter {
    bool kinds[MS_TK_COUNT];
    int saved; /* -1: either */
    double min_bytes;
    index_test layer, micro_batch;
} tensor_filter;

static int kind_code(lua_State *L, int idx)
{
    const char *name = lua_type(L, idx) == LUA_TSTRING ? lua_tostring(L, idx) : NULL;
    for (int k = 0; name != NULL && k < MS_TK_COUNT; k++)
        if (strcmp(name, ms_tensor_kind_name((ms_tensor_kind)k)) == 0)
            return k;
    return luaL_error(L,
                      "select: kind: expected a tensor kind (weight, grad, optimizer_state, "
                      "activation, temp, comm_buffer), got %s",
                      luaL_tolstring(L, idx, NULL));
}

/* kind: one name, or a set of names (a name whose value is false or nil is
 * not taken, as a Lua set reads). */
static void check_kinds(lua_State *L, int idx, tensor_filter *f)
{
    if (lua_type(L, idx) != LUA_TTABLE) {
        f->kinds[kind_code(L, idx)] = true;
        return;
    }
    lua_pushnil(L);
    while (lua_next(L, idx) != 0) {
        int k = kind_code(L, -2);
        f->kinds[k] = lua_toboolean(L, -1);
        lua_pop(L, 1);
    }
}

/* The fields of a filter table, each handed to `key` (which raises on one it
 * does not know); keys must be strings. */
typedef void (*filter_key_fn)(lua_State *L, const char *key, int val, void *filter);

static void read_filter(lua_State *L, int idx, filter_key_fn key, void *filter)
{
    if (lua_isnoneornil(L, idx))
        return;
    luaL_checktype(L, idx, LUA_TTABLE);
    lua_pushnil(L);
    while (lua_next(L, idx) != 0) {
        if (lua_type(L, -2) != LUA_TSTRING)
            luaL_error(L, "select: filter keys are field names, got %s",
                       luaL_tolstring(L, -2, NULL));
        key(L, lua_tostring(L, -2), lua_gettop(L), filter);
        lua_pop(L, 1);
    }
}

/* Whether entry i of the blob passes the filter. */
typedef bool (*entry_test)(const vblob *b, uint32_t i, const void *filter);

/* The select methods' answer: a new list of the array's entries (the array
 * at index 1) that pass, in id order. */
static int push_matching(lua_State *L, const vref *r, entry_test test, const void *filter)
{
    lua_settop(L, 1);
    lua_createtable(L, 0, 0);
    lua_Integer n = 0;
    for (uint32_t i = 0; i < r->blob->n[r->type]; i++) {
        if (!test(r->blob, i, filter))
            continue;
        pol_view_push_entry(L, 1, r, (lua_Integer)i + 1);
        lua_rawseti(L, 2, ++n);
    }
    return 1;
}

static void tensor_key(lua_State *L, const char *key, int val, void *filter)
{
    tensor_filter *f = filter;
    if (strcmp(key, "kind") == 0) {
        memset(f->kinds, 0, sizeof f->kinds);
        check_kinds(L, val, f);
    } else if (strcmp(key, "saved") == 0) {
        f->saved = check_bool_field(L, val, key);
    } else if (strcmp(key, "min_bytes") == 0) {
        if (lua_type(L, val) != LUA_TNUMBER)
            luaL_error(L, "select: min_bytes: expected a number, got %s",
                       luaL_tolstring(L, val, NULL));
        f->min_bytes = lua_tonumber(L, val);
    } else if (strcmp(key, "layer") == 0) {
        set_index_test(L, val, key, &f->layer);
    } else if (strcmp(key, "micro_batch") == 0) {
        set_index_test(L, val, key, &f->micro_batch);
    } else {
        luaL_error(L,
                   "select: unknown filter field '%s' (expected kind, saved, min_bytes, layer, "
                   "micro_batch)",
                   key);
    }
}

static bool tensor_matches(const vblob *b, uint32_t i, const void *filter)
{
    const vtensor *t = &b->tensors[i];
    const tensor_filter *f = filter;
    return f->kinds[t->kind] && (f->saved < 0 || t->saved == f->saved) &&
           (double)t->bytes >= f->min_bytes &&
           index_passes(&f->layer, t->layer) && index_passes(&f->micro_batch, t->micro_batch);
}

/* profile.tensors:select(filter): the tensors matching every field of the
 * filter, in id order.  A policy's walk over all the tensors through
 * __index was a quarter of the Lua side of a 70B search (bench/README.md). */
int pol_view_select(lua_State *L)
{
    const vref *r = check_array(L, ENTRY_TENSOR, "select");
    tensor_filter f = {.saved = -1, .min_bytes = -1};
    for (int k = 0; k < MS_TK_COUNT; k++)
        f.kinds[k] = true;
    read_filter(L, 2, tensor_key, &f);
    return push_matching(L, r, tensor_matches, &f);
}

/* The filter of profile.segments:select. */
typedef struct segment_filter {
    int top; /* -1: either; 1: layer segments only (no parent); 0: the others */
    index_test layer, micro_batch;
} segment_filter;

static void segment_key(lua_State *L, const char *key, int val, void *filter)
{
    segment_filter *f = filter;
    if (strcmp(key, "top") == 0) {
        f->top = check_bool_field(L, val, key);
    } else if (strcmp(key, "layer") == 0) {
        set_index_test(L, val, key, &f->layer);
    } else if (strcmp(key, "micro_batch") == 0) {
        set_index_test(L, val, key, &f->micro_batch);
    } else {
        luaL_error(L, "select: unknown filter field '%s' (expected top, layer, micro_batch)", key);
    }
}

static bool segment_matches(const vblob *b, uint32_t i, const void *filter)
{
    const vsegment *s = &b->segments[i];
    const segment_filter *f = filter;
    return (f->top < 0 || (s->parent < 0) == (f->top == 1)) &&
           index_passes(&f->layer, s->layer) && index_passes(&f->micro_batch, s->micro_batch);
}

/* profile.segments:select(filter): the segments matching every field, in id
 * order; { top = true } is every whole layer of every micro-batch, what
 * full recompute walks (lib.memsim.layer_segments). */
int pol_view_select_segments(lua_State *L)
{
    const vref *r = check_array(L, ENTRY_SEGMENT, "select");
    segment_filter f = {.top = -1};
    read_filter(L, 2, segment_key, &f);
    return push_matching(L, r, segment_matches, &f);
}

/* The filter of profile.ops:select. */
typedef struct op_filter {
    int phase, stream; /* -1: any */
    index_test layer, micro_batch, segment;
} op_filter;

/* A name among n names (ms_phase_name, the stream roles), or an error that
 * says which were expected. */
static int name_code(lua_State *L, int idx, const char *key, const char *const *names, int n,
                     const char *expected)
{
    const char *name = lua_type(L, idx) == LUA_TSTRING ? lua_tostring(L, idx) : NULL;
    for (int k = 0; name != NULL && k < n; k++)
        if (strcmp(name, names[k]) == 0)
            return k;
    return luaL_error(L, "select: %s: expected %s, got %s", key, expected,
                      luaL_tolstring(L, idx, NULL));
}

static void op_key(lua_State *L, const char *key, int val, void *filter)
{
    op_filter *f = filter;
    static const char *const phases[] = {"forward", "backward", "optimizer"};
    static const char *const streams[] = {"compute", "comm"};
    if (strcmp(key, "phase") == 0) {
        f->phase = name_code(L, val, key, phases, 3, "forward, backward or optimizer");
    } else if (strcmp(key, "stream") == 0) {
        f->stream = name_code(L, val, key, streams, 2, "compute or comm");
    } else if (strcmp(key, "layer") == 0) {
        set_index_test(L, val, key, &f->layer);
    } else if (strcmp(key, "micro_batch") == 0) {
        set_index_test(L, val, key, &f->micro_batch);
    } else if (strcmp(key, "segment") == 0) {
        set_index_test(L, val, key, &f->segment);
    } else {
        luaL_error(L, "select: unknown filter field '%s' (expected phase, stream, layer, "
                   "micro_batch, segment)", key);
    }
}

static bool op_matches(const vblob *b, uint32_t i, const void *filter)
{
    const vop *o = &b->ops[i];
    const op_filter *f = filter;
    return (f->phase < 0 || o->phase == f->phase) && (f->stream < 0 || o->stream == f->stream) &&
           index_passes(&f->layer, o->layer) && index_passes(&f->micro_batch, o->micro_batch) &&
           index_passes(&f->segment, o->segment);
}

/* profile.ops:select(filter): the ops matching every field, in issue order
 * (adaptive_memory's backward time of one layer, without a walk of every op
 * through the view). */
int pol_view_select_ops(lua_State *L)
{
    const vref *r = check_array(L, ENTRY_OP, "select");
    op_filter f = {.phase = -1, .stream = -1};
    read_filter(L, 2, op_key, &f);
    return push_matching(L, r, op_matches, &f);
}

/* t[k], a new table there first if there is none; left on the stack. */
static void sub_table(lua_State *L, int t, lua_Integer k)
{
    if (lua_rawgeti(L, t, k) != LUA_TNIL)
        return;
    lua_pop(L, 1);
    lua_createtable(L, 0, 0);
    lua_pushvalue(L, -1);
    lua_rawseti(L, t, k);
}

static void set_once(lua_State *L, int t, lua_Integer k, lua_Integer v)
{
    if (lua_rawgeti(L, t, k) == LUA_TNIL) {
        lua_pushinteger(L, v);
        lua_rawseti(L, t, k);
    }
    lua_pop(L, 1);
}

/* first[mb][layer], the first op of the phase in each (micro-batch, layer),
 * and mb_first[mb], its first op in each micro-batch.  The tables are filled
 * in the order a walk in Lua would fill them, so pairs() visits them alike. */
static int phase_starts(lua_State *L, ms_phase phase, const char *method)
{
    const vref *r = check_array(L, ENTRY_OP, method);
    lua_settop(L, 1);
    lua_createtable(L, 0, 0); /* 2: first */
    lua_createtable(L, 0, 0); /* 3: mb_first */
    for (uint32_t i = 0; i < r->blob->n[ENTRY_OP]; i++) {
        const vop *o = &r->blob->ops[i];
        if (o->phase != phase || o->micro_batch < 0)
            continue;
        set_once(L, 3, o->micro_batch, i);
        if (o->layer < 0)
            continue;
        sub_table(L, 2, o->micro_batch);
        set_once(L, lua_gettop(L), o->layer, i);
        lua_pop(L, 1);
    }
    return 2;
}

/* profile.ops:backward_starts() (lib.memsim.backward_starts: where a swap
 * comes back from) and profile.ops:forward_starts() (smart_swap's stage
 * bounds). */
int pol_view_backward_starts(lua_State *L)
{
    return phase_starts(L, MS_PHASE_BACKWARD, "backward_starts");
}

int pol_view_forward_starts(lua_State *L)
{
    return phase_starts(L, MS_PHASE_FORWARD, "forward_starts");
}

/* profile.ops:layer_range(): the lowest and highest layer any op belongs
 * to, or nothing when no op has a layer (a stage's layers, as offload_layers
 * and smart_swap count them). */
int pol_view_layer_range(lua_State *L)
{
    const vref *r = check_array(L, ENTRY_OP, "layer_range");
    int32_t lo = -1, hi = -1;
    for (uint32_t i = 0; i < r->blob->n[ENTRY_OP]; i++) {
        int32_t l = r->blob->ops[i].layer;
        if (l < 0)
            continue;
        lo = lo < 0 || l < lo ? l : lo;
        hi = l > hi ? l : hi;
    }
    if (lo < 0)
        return 0;
    lua_pushinteger(L, lo);
    lua_pushinteger(L, hi);
    return 2;
}
