/* The walks over a program that run in C: the arrays' select methods and
 * profile.ops:backward_starts.  Reading a field
 * through a view entry is a metamethod call; a policy that walked every
 * tensor or op that way spent a quarter of its own instructions there on a
 * llama2-70B stage (bench/README.md), so the walks a policy always needs
 * are done here. */
#include "policy_view.h"

#include <string.h>

#include <lauxlib.h>

static const char *const array_word[ENTRY_COUNT] = {"ops", "tensors", "segments"};

static const vref *check_array(lua_State *L, int type, const char *method)
{
    const vref *r = luaL_testudata(L, 1, MT_ARRAY);
    if (r == NULL || r->type != type)
        luaL_error(L, "%s: call it as profile.%s:%s(...)", method, array_word[type], method);
    return r;
}

/* The filter of profile.tensors:select, checked whole before any tensor is
 * looked at: a misspelt key or kind is an error, not an empty answer. */
typedef struct tensor_filter {
    bool kinds[MS_TK_COUNT];
    int saved; /* -1: either */
    double min_bytes;
    bool by_layer, by_micro_batch;
    int32_t layer, micro_batch;
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

static int32_t check_index_field(lua_State *L, int idx, const char *key)
{
    int ok = 0;
    lua_Integer v = lua_tointegerx(L, idx, &ok);
    if (!ok || lua_type(L, idx) != LUA_TNUMBER || v < INT32_MIN || v > INT32_MAX)
        luaL_error(L, "select: %s: expected an integer, got %s", key, luaL_tolstring(L, idx, NULL));
    return (int32_t)v;
}

static void check_filter_key(lua_State *L, const char *key, int val, tensor_filter *f)
{
    if (strcmp(key, "kind") == 0) {
        memset(f->kinds, 0, sizeof f->kinds);
        check_kinds(L, val, f);
    } else if (strcmp(key, "saved") == 0) {
        if (lua_type(L, val) != LUA_TBOOLEAN)
            luaL_error(L, "select: saved: expected a boolean, got %s",
                       luaL_tolstring(L, val, NULL));
        f->saved = lua_toboolean(L, val);
    } else if (strcmp(key, "min_bytes") == 0) {
        if (lua_type(L, val) != LUA_TNUMBER)
            luaL_error(L, "select: min_bytes: expected a number, got %s",
                       luaL_tolstring(L, val, NULL));
        f->min_bytes = lua_tonumber(L, val);
    } else if (strcmp(key, "layer") == 0) {
        f->by_layer = true;
        f->layer = check_index_field(L, val, key);
    } else if (strcmp(key, "micro_batch") == 0) {
        f->by_micro_batch = true;
        f->micro_batch = check_index_field(L, val, key);
    } else {
        luaL_error(L,
                   "select: unknown filter field '%s' (expected kind, saved, min_bytes, layer, "
                   "micro_batch)",
                   key);
    }
}

static void check_filter(lua_State *L, int idx, tensor_filter *f)
{
    *f = (tensor_filter){.saved = -1, .min_bytes = -1};
    for (int k = 0; k < MS_TK_COUNT; k++)
        f->kinds[k] = true;
    if (lua_isnoneornil(L, idx))
        return;
    luaL_checktype(L, idx, LUA_TTABLE);
    lua_pushnil(L);
    while (lua_next(L, idx) != 0) {
        if (lua_type(L, -2) != LUA_TSTRING)
            luaL_error(L, "select: filter keys are field names, got %s",
                       luaL_tolstring(L, -2, NULL));
        check_filter_key(L, lua_tostring(L, -2), lua_gettop(L), f);
        lua_pop(L, 1);
    }
}

static bool tensor_matches(const vtensor *t, const tensor_filter *f)
{
    return f->kinds[t->kind] && (f->saved < 0 || t->saved == f->saved) &&
           (double)t->bytes >= f->min_bytes &&
           (!f->by_layer || (t->layer >= 0 && t->layer == f->layer)) &&
           (!f->by_micro_batch || (t->micro_batch >= 0 && t->micro_batch == f->micro_batch));
}

/* profile.tensors:select(filter): the tensors matching every field of the
 * filter, in id order.  A policy's walk over all the tensors through
 * __index was a quarter of the Lua side of a 70B search (bench/README.md). */
int pol_view_select(lua_State *L)
{
    const vref *r = check_array(L, ENTRY_TENSOR, "select");
    tensor_filter f;
    check_filter(L, 2, &f);
    lua_settop(L, 1);
    lua_createtable(L, 0, 0);
    lua_Integer n = 0;
    for (uint32_t i = 0; i < r->blob->n[ENTRY_TENSOR]; i++) {
        if (!tensor_matches(&r->blob->tensors[i], &f))
            continue;
        pol_view_push_entry(L, 1, r, (lua_Integer)i + 1);
        lua_rawseti(L, 2, ++n);
    }
    return 1;
}

/* The filter of profile.segments:select. */
typedef struct segment_filter {
    int top; /* -1: either; 1: layer segments only (no parent); 0: the others */
    bool by_layer, by_micro_batch;
    int32_t layer, micro_batch;
} segment_filter;

static void check_segment_key(lua_State *L, const char *key, int val, segment_filter *f)
{
    if (strcmp(key, "top") == 0) {
        if (lua_type(L, val) != LUA_TBOOLEAN)
            luaL_error(L, "select: top: expected a boolean, got %s", luaL_tolstring(L, val, NULL));
        f->top = lua_toboolean(L, val);
    } else if (strcmp(key, "layer") == 0) {
        f->by_layer = true;
        f->layer = check_index_field(L, val, key);
    } else if (strcmp(key, "micro_batch") == 0) {
        f->by_micro_batch = true;
        f->micro_batch = check_index_field(L, val, key);
    } else {
        luaL_error(L, "select: unknown filter field '%s' (expected top, layer, micro_batch)", key);
    }
}

static void check_segment_filter(lua_State *L, int idx, segment_filter *f)
{
    *f = (segment_filter){.top = -1};
    if (lua_isnoneornil(L, idx))
        return;
    luaL_checktype(L, idx, LUA_TTABLE);
    lua_pushnil(L);
    while (lua_next(L, idx) != 0) {
        if (lua_type(L, -2) != LUA_TSTRING)
            luaL_error(L, "select: filter keys are field names, got %s",
                       luaL_tolstring(L, -2, NULL));
        check_segment_key(L, lua_tostring(L, -2), lua_gettop(L), f);
        lua_pop(L, 1);
    }
}

static bool segment_matches(const vsegment *s, const segment_filter *f)
{
    return (f->top < 0 || (s->parent < 0) == (f->top == 1)) &&
           (!f->by_layer || (s->layer >= 0 && s->layer == f->layer)) &&
           (!f->by_micro_batch || (s->micro_batch >= 0 && s->micro_batch == f->micro_batch));
}

/* profile.segments:select(filter): the segments matching every field, in id
 * order; { top = true } is every whole layer of every micro-batch, what
 * full recompute walks (lib.memsim.layer_segments). */
int pol_view_select_segments(lua_State *L)
{
    const vref *r = check_array(L, ENTRY_SEGMENT, "select");
    segment_filter f;
    check_segment_filter(L, 2, &f);
    lua_settop(L, 1);
    lua_createtable(L, 0, 0);
    lua_Integer n = 0;
    for (uint32_t i = 0; i < r->blob->n[ENTRY_SEGMENT]; i++) {
        if (!segment_matches(&r->blob->segments[i], &f))
            continue;
        pol_view_push_entry(L, 1, r, (lua_Integer)i + 1);
        lua_rawseti(L, 2, ++n);
    }
    return 1;
}

/* The filter of profile.ops:select. */
typedef struct op_filter {
    int phase, stream; /* -1: any */
    bool by_layer, by_micro_batch, by_segment;
    int32_t layer, micro_batch, segment;
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

static void check_op_key(lua_State *L, const char *key, int val, op_filter *f)
{
    static const char *const phases[] = {"forward", "backward", "optimizer"};
    static const char *const streams[] = {"compute", "comm"};
    if (strcmp(key, "phase") == 0) {
        f->phase = name_code(L, val, key, phases, 3, "forward, backward or optimizer");
    } else if (strcmp(key, "stream") == 0) {
        f->stream = name_code(L, val, key, streams, 2, "compute or comm");
    } else if (strcmp(key, "layer") == 0) {
        f->by_layer = true;
        f->layer = check_index_field(L, val, key);
    } else if (strcmp(key, "micro_batch") == 0) {
        f->by_micro_batch = true;
        f->micro_batch = check_index_field(L, val, key);
    } else if (strcmp(key, "segment") == 0) {
        f->by_segment = true;
        f->segment = check_index_field(L, val, key);
    } else {
        luaL_error(L, "select: unknown filter field '%s' (expected phase, stream, layer, "
                   "micro_batch, segment)", key);
    }
}

static void check_op_filter(lua_State *L, int idx, op_filter *f)
{
    *f = (op_filter){.phase = -1, .stream = -1};
    if (lua_isnoneornil(L, idx))
        return;
    luaL_checktype(L, idx, LUA_TTABLE);
    lua_pushnil(L);
    while (lua_next(L, idx) != 0) {
        if (lua_type(L, -2) != LUA_TSTRING)
            luaL_error(L, "select: filter keys are field names, got %s",
                       luaL_tolstring(L, -2, NULL));
        check_op_key(L, lua_tostring(L, -2), lua_gettop(L), f);
        lua_pop(L, 1);
    }
}

static bool op_matches(const vop *o, const op_filter *f)
{
    return (f->phase < 0 || o->phase == f->phase) && (f->stream < 0 || o->stream == f->stream) &&
           (!f->by_layer || (o->layer >= 0 && o->layer == f->layer)) &&
           (!f->by_micro_batch || (o->micro_batch >= 0 && o->micro_batch == f->micro_batch)) &&
           (!f->by_segment || (o->segment >= 0 && o->segment == f->segment));
}

/* profile.ops:select(filter): the ops matching every field, in issue order
 * (adaptive_memory's backward time of one layer, without a walk of every op
 * through the view). */
int pol_view_select_ops(lua_State *L)
{
    const vref *r = check_array(L, ENTRY_OP, "select");
    op_filter f;
    check_op_filter(L, 2, &f);
    lua_settop(L, 1);
    lua_createtable(L, 0, 0);
    lua_Integer n = 0;
    for (uint32_t i = 0; i < r->blob->n[ENTRY_OP]; i++) {
        if (!op_matches(&r->blob->ops[i], &f))
            continue;
        pol_view_push_entry(L, 1, r, (lua_Integer)i + 1);
        lua_rawseti(L, 2, ++n);
    }
    return 1;
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

/* profile.ops:backward_starts(): first[mb][layer], the first backward op
 * of each (micro-batch, layer), and mb_first[mb], the first backward op of
 * each micro-batch (lib.memsim.backward_starts).  The tables are filled in
 * the order a walk in Lua would fill them, so pairs() visits them alike. */
int pol_view_backward_starts(lua_State *L)
{
    const vref *r = check_array(L, ENTRY_OP, "backward_starts");
    lua_settop(L, 1);
    lua_createtable(L, 0, 0); /* 2: first */
    lua_createtable(L, 0, 0); /* 3: mb_first */
    for (uint32_t i = 0; i < r->blob->n[ENTRY_OP]; i++) {
        const vop *o = &r->blob->ops[i];
        if (o->phase != MS_PHASE_BACKWARD || o->micro_batch < 0)
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
