/* The Lua view of a profile around the program: the derived facts of a
 * program, the top-level profile table, the device, decisions, the on_oom
 * request and the tensor pool() receives.  These are small, so they are
 * plain tables, sealed (read-only through a proxy); the large program part
 * is policy_view.c. */
#include "policy_host.h"

#include <stdlib.h>
#include <string.h>

#include <gsl/gsl_interp.h>
#include <lauxlib.h>

/* The bandwidth figure shown for a host link: the rate of a 64 MiB copy,
 * the size of a typical swapped activation block (docs/policy-api.md). */
#define LINK_PROBE_BYTES (64.0 * 1024 * 1024)

static const char *const decision_names[] = {"swap", "recompute", "keep"};

#define NAME_OF(table, v) \
    ((unsigned)(v) < sizeof(table) / sizeof((table)[0]) ? (table)[(unsigned)(v)] : "unknown")

/* ---- sealed tables ---- */

/* The data of a sealed proxy lives in its metatable's __index; the
 * metatable itself is hidden behind __metatable, so a script can reach the
 * data only through reads. */
static void sealed_data(lua_State *L, int idx)
{
    if (!lua_getmetatable(L, idx)) {
        lua_pushnil(L);
        return;
    }
    lua_pushliteral(L, "__index");
    lua_rawget(L, -2);
    lua_remove(L, -2);
}

static int sealed_newindex(lua_State *L)
{
    return luaL_error(L, "profile tables are read-only (assignment to field '%s')",
                      luaL_tolstring(L, 2, NULL));
}

static int sealed_len(lua_State *L)
{
    sealed_data(L, 1);
    lua_pushinteger(L, (lua_Integer)lua_rawlen(L, -1));
    return 1;
}

/* Iterator of sealed_pairs: upvalues data, sorted keys, position. */
static int sealed_next(lua_State *L)
{
    lua_Integer pos = lua_tointeger(L, lua_upvalueindex(3)) + 1;
    lua_Integer n = (lua_Integer)lua_rawlen(L, lua_upvalueindex(1));
    lua_pushinteger(L, pos);
    lua_replace(L, lua_upvalueindex(3));
    if (pos <= n)
        lua_pushinteger(L, pos);
    else if (lua_rawgeti(L, lua_upvalueindex(2), pos - n) == LUA_TNIL)
        return 0;
    lua_pushvalue(L, -1);
    lua_rawget(L, lua_upvalueindex(1));
    return 2;
}

/* pairs() over a sealed table: the array part in order, then the other keys
 * sorted, so a policy that iterates a record gets the same order every run
 * (Lua's own next() order depends on a per-state hash seed). */
static int sealed_pairs(lua_State *L)
{
    sealed_data(L, 1);
    int data = lua_gettop(L);
    lua_Integer n = (lua_Integer)lua_rawlen(L, data);
    lua_newtable(L);
    int keys = data + 1;
    lua_Integer nk = 0;
    lua_pushnil(L);
    while (lua_next(L, data) != 0) {
        lua_pop(L, 1);
        if (lua_isinteger(L, -1) && lua_tointeger(L, -1) >= 1 && lua_tointeger(L, -1) <= n)
            continue;
        /* Insertion sort: records have a couple of dozen keys. */
        lua_Integer j = nk++;
        while (j > 0) {
            lua_rawgeti(L, keys, j);
            bool later = lua_type(L, -1) == LUA_TSTRING && lua_type(L, -2) == LUA_TSTRING &&
                         strcmp(lua_tostring(L, -1), lua_tostring(L, -2)) > 0;
            if (!later) {
                lua_pop(L, 1);
                break;
            }
            lua_rawseti(L, keys, j + 1);
            j--;
        }
        lua_pushvalue(L, -1);
        lua_rawseti(L, keys, j + 1);
    }
    lua_pushinteger(L, 0);
    lua_pushcclosure(L, sealed_next, 3);
    lua_pushnil(L);
    lua_pushnil(L);
    return 3;
}

/* Replace the table on top of the stack with an empty proxy whose reads go
 * to the table and whose writes raise an error. */
static void seal(lua_State *L)
{
    int data = lua_gettop(L);
    lua_createtable(L, 0, 5);
    lua_pushvalue(L, data);
    lua_setfield(L, -2, "__index");
    lua_pushcfunction(L, sealed_newindex);
    lua_setfield(L, -2, "__newindex");
    lua_pushcfunction(L, sealed_len);
    lua_setfield(L, -2, "__len");
    lua_pushcfunction(L, sealed_pairs);
    lua_setfield(L, -2, "__pairs");
    lua_pushliteral(L, "read-only");
    lua_setfield(L, -2, "__metatable");
    lua_createtable(L, 0, 0);
    lua_insert(L, -2);
    lua_setmetatable(L, -2);
    lua_replace(L, data);
}

/* ---- field setters (table on top of the stack) ---- */

static void set_int(lua_State *L, const char *k, lua_Integer v)
{
    lua_pushinteger(L, v);
    lua_setfield(L, -2, k);
}

static void set_num(lua_State *L, const char *k, double v)
{
    lua_pushnumber(L, v);
    lua_setfield(L, -2, k);
}

static void set_bool(lua_State *L, const char *k, bool v)
{
    lua_pushboolean(L, v);
    lua_setfield(L, -2, k);
}

static void set_str(lua_State *L, const char *k, const char *v)
{
    if (v == NULL)
        return;
    lua_pushstring(L, v);
    lua_setfield(L, -2, k);
}

/* MS_NONE (and any negative id) is nil in Lua: the field is absent. */
static void set_opt(lua_State *L, const char *k, int32_t v)
{
    if (v >= 0)
        set_int(L, k, v);
}

/* An id list is a plain table, as in the program view: the hook's own. */
static void set_ids(lua_State *L, const char *k, const uint32_t *ids, uint32_t n)
{
    lua_createtable(L, (int)n, 0);
    for (uint32_t i = 0; i < n; i++) {
        lua_pushinteger(L, ids[i]);
        lua_rawseti(L, -2, (lua_Integer)i + 1);
    }
    lua_setfield(L, -2, k);
}

/* ---- the tensor of pool() ---- */

/* The tensor pool() receives: its own fields only (the per-phase uses need
 * the program, which pool() is not given). */
void pol_push_tensor(lua_State *L, const ms_tensor *t)
{
    lua_createtable(L, 0, 20);
    set_int(L, "id", t->id);
    set_str(L, "name", t->name);
    set_int(L, "bytes", (lua_Integer)t->bytes);
    set_str(L, "dtype", ms_dtype_name(t->dtype));
    set_str(L, "kind", ms_tensor_kind_name(t->kind));
    set_opt(L, "producer", t->producer);
    set_bool(L, "persistent", t->persistent);
    set_bool(L, "saved", t->saved_for_backward);
    set_opt(L, "layer", t->layer);
    set_opt(L, "micro_batch", t->micro_batch);
    set_ids(L, "uses", t->uses, t->n_uses);
    if (t->n_uses > 0 && t->uses != NULL) {
        set_int(L, "first_use", t->uses[0]);
        set_int(L, "last_use", t->uses[t->n_uses - 1]);
    }
    seal(L);
}

/* ---- device ---- */

/* A link curve at x, interpolated as sim/ does (Steffen, never overshooting;
 * clamped to its end points).  Returns false for an empty or unusable curve. */
static bool curve_at(const ms_curve *c, double x, double *y)
{
    if (c->n <= 0 || c->n > MS_CURVE_MAX)
        return false;
    for (int i = 1; i < c->n; i++)
        if (!(c->x[i] > c->x[i - 1]))
            return false; /* GSL would abort on unsorted x */
    if (c->n == 1 || x <= c->x[0]) {
        *y = c->y[0];
        return true;
    }
    if (x >= c->x[c->n - 1]) {
        *y = c->y[c->n - 1];
        return true;
    }
    const gsl_interp_type *type = c->n >= 3 ? gsl_interp_steffen : gsl_interp_linear;
    gsl_interp *in = gsl_interp_alloc(type, (size_t)c->n);
    if (in == NULL)
        return false;
    bool ok = gsl_interp_init(in, c->x, c->y, (size_t)c->n) == 0 &&
              gsl_interp_eval_e(in, c->x, c->y, x, NULL, y) == 0;
    gsl_interp_free(in);
    return ok;
}

static void push_device(lua_State *L, const ms_device_spec *dev)
{
    double h2d = 0, d2h = 0;
    bool have_h2d = curve_at(&dev->h2d_bw, LINK_PROBE_BYTES, &h2d);
    bool have_d2h = curve_at(&dev->d2h_bw, LINK_PROBE_BYTES, &d2h);
    lua_createtable(L, 0, 10);
    set_str(L, "name", dev->name);
    set_int(L, "hbm_bytes", (lua_Integer)dev->hbm_bytes);
    set_num(L, "hbm_bw", dev->hbm_bw);
    set_int(L, "host_pinned_bytes", (lua_Integer)dev->host_pinned_bytes);
    if (have_h2d)
        set_num(L, "h2d_bw", h2d);
    if (have_d2h)
        set_num(L, "d2h_bw", d2h);
    set_num(L, "host_link_latency", dev->host_link_latency_ns);
    lua_createtable(L, 0, MS_DTYPE_COUNT);
    for (int t = 0; t < MS_DTYPE_COUNT; t++)
        if (dev->peak_flops[t] > 0)
            set_num(L, ms_dtype_name((ms_dtype)t), dev->peak_flops[t]);
    seal(L);
    lua_setfield(L, -2, "peak_flops");
    seal(L);
}

/* ---- decisions, profile, request ---- */

static void push_decision(lua_State *L, const ms_decision *dec)
{
    lua_createtable(L, 0, 6);
    set_str(L, "kind", NAME_OF(decision_names, dec->kind));
    if (dec->kind == MS_DEC_RECOMPUTE) {
        set_int(L, "segment", dec->segment);
    } else {
        set_int(L, "tensor", dec->tensor);
    }
    if (dec->kind == MS_DEC_SWAP) {
        set_opt(L, "out_after", dec->out_after);
        set_opt(L, "in_before", dec->in_before);
        set_int(L, "prefetch", dec->prefetch);
    }
    seal(L);
}

/* A list of decisions; with_stable adds the plan's `stable` flag. */
static void push_plan(lua_State *L, const ms_plan *plan, bool with_stable)
{
    lua_createtable(L, (int)plan->n, 1);
    for (uint32_t i = 0; i < plan->n; i++) {
        push_decision(L, &plan->items[i]);
        lua_rawseti(L, -2, (lua_Integer)i + 1);
    }
    if (with_stable)
        set_bool(L, "stable", plan->stable);
    seal(L);
}

/* The in-step OOM rescues of the last step (SmartSwap's forced swaps). */
static void push_rescued(lua_State *L, const ms_rescue_stats *r)
{
    lua_createtable(L, 0, 3);
    set_int(L, "count", r->count);
    set_int(L, "bytes", (lua_Integer)r->bytes);
    set_int(L, "peak_request", (lua_Integer)r->peak_request);
    seal(L);
}

void pol_push_profile(lua_State *L, int view_idx, const ms_profile *prof)
{
    luaL_checkstack(L, 6, "building the profile");
    lua_createtable(L, 0, 20);
    set_int(L, "step", prof->step);
    set_bool(L, "measured", prof->measured);
    set_int(L, "stage", prof->program.stage);
    set_num(L, "model_flops", prof->program.model_flops);
    set_int(L, "capacity", (lua_Integer)prof->capacity);
    if (prof->measured) {
        set_int(L, "peak_allocated", (lua_Integer)prof->peak_allocated);
        set_int(L, "peak_reserved", (lua_Integer)prof->peak_reserved);
        set_int(L, "peak_active", (lua_Integer)prof->peak_active);
        set_int(L, "step_time", prof->step_time_ns);
        push_rescued(L, &prof->rescued);
        lua_setfield(L, -2, "rescued");
    }
    if (prof->allocator != NULL)
        set_str(L, "allocator", prof->allocator);
    set_bool(L, "oom", prof->oom);
    if (prof->oom)
        set_opt(L, "oom_op", prof->oom_op);
    if (prof->device != NULL) {
        push_device(L, prof->device);
        lua_setfield(L, -2, "device");
    }
    if (prof->current != NULL) {
        push_plan(L, prof->current, true);
        lua_setfield(L, -2, "current");
    }
    if (prof->declared != NULL) {
        push_plan(L, prof->declared, false);
        lua_setfield(L, -2, "declared");
    }
    static const char *const parts[] = {"ops", "tensors", "segments", "program_id"};
    for (size_t i = 0; i < 4; i++) {
        lua_getfield(L, view_idx, parts[i]);
        lua_setfield(L, -2, parts[i]);
    }
    seal(L);
}

void pol_push_request(lua_State *L, const ms_oom_request *req)
{
    lua_createtable(L, 0, 6);
    set_int(L, "bytes", (lua_Integer)req->bytes);
    set_int(L, "tensor", req->tensor);
    set_int(L, "op", req->op);
    set_int(L, "allocated", (lua_Integer)req->allocated);
    set_int(L, "reserved", (lua_Integer)req->reserved);
    set_int(L, "capacity", (lua_Integer)req->capacity);
}
