/* The `ctx` a plan or on_oom hook receives: decisions go through it.
 *
 * A ctx is a userdata holding its policy and a generation number; it is live
 * only while the policy's current hook call has that generation, so a ctx a
 * script keeps in an upvalue fails cleanly afterwards instead of writing into
 * a plan the executor has moved on from.  Every argument is checked against
 * the program, and errors carry the script's file:line (luaL_error level 1). */
#include "policy_host.h"

#include <stdlib.h>
#include <string.h>

#include <lauxlib.h>

#include "lib/base/growable.h"

#define CTX_TYPE "memsim.policy.ctx"
#define LOG_LINE_MAX 1024          /* bytes of one ctx:log message */
#define LOG_CALL_MAX (64u * 1024u) /* bytes ctx:log may write per hook call */

typedef struct ctx_handle {
    ms_policy *policy;
    uint64_t gen;
} ctx_handle;

static const char *const swap_keys[] = {"kind", "tensor", "out_after", "in_before", "prefetch",
                                        NULL};
static const char *const option_keys[] = {"out_after", "in_before", "prefetch", NULL};
static const char *const recompute_keys[] = {"kind", "segment", NULL};
static const char *const keep_keys[] = {"kind", "tensor", NULL};

/* Room for a decision per tensor and segment several times over: a plan
 * larger than this is a script stuck in a loop, not a policy. */
uint32_t pol_ctx_max_decisions(const ms_program_view *pv)
{
    uint64_t n = 4 * ((uint64_t)pv->n_tensors + pv->n_segments) + 1024;
    return n > UINT32_MAX ? UINT32_MAX : (uint32_t)n;
}

static ms_policy_ctx *live_ctx(lua_State *L, ms_policy **pp)
{
    ctx_handle *h = luaL_checkudata(L, 1, CTX_TYPE);
    ms_policy *p = h->policy;
    if (p->ctx == NULL || p->ctx_gen != h->gen)
        luaL_error(L, "this ctx is no longer valid: a ctx may only be used during the hook "
                      "call it was passed to");
    if (pp != NULL)
        *pp = p;
    return p->ctx;
}

/* The simulator reads the plan while ctx:simulate runs; a hook it re-enters
 * (pool) must not grow the plan under it. */
static ms_policy_ctx *writable_ctx(lua_State *L, const char *method)
{
    ms_policy_ctx *c = live_ctx(L, NULL);
    if (c->simulating)
        luaL_error(L, "ctx:%s: not allowed while ctx:simulate is running", method);
    return c;
}

static void check_keys(lua_State *L, int tbl, const char *const *allowed, const char *what)
{
    lua_pushnil(L);
    while (lua_next(L, tbl) != 0) {
        lua_pop(L, 1);
        bool ok = false;
        if (lua_type(L, -1) == LUA_TSTRING)
            for (size_t i = 0; allowed[i] != NULL && !ok; i++)
                ok = strcmp(lua_tostring(L, -1), allowed[i]) == 0;
        if (!ok) {
            luaL_Buffer b;
            luaL_buffinit(L, &b);
            for (size_t i = 0; allowed[i] != NULL; i++) {
                luaL_addstring(&b, i ? ", " : "");
                luaL_addstring(&b, allowed[i]);
            }
            luaL_pushresult(&b);
            const char *key = lua_type(L, -2) == LUA_TSTRING ? lua_tostring(L, -2) : NULL;
            if (key != NULL)
                luaL_error(L, "%s: unknown field '%s' (expected %s)", what, key,
                           lua_tostring(L, -1));
            luaL_error(L, "%s: unexpected %s key (expected the fields %s)", what,
                       luaL_typename(L, -2), lua_tostring(L, -1));
        }
    }
}

/* An optional integer field: false if nil. */
static bool field_int(lua_State *L, int tbl, const char *key, const char *what, lua_Integer *out)
{
    int type = lua_getfield(L, tbl, key);
    if (type == LUA_TNIL) {
        lua_pop(L, 1);
        return false;
    }
    int ok = 0;
    lua_Integer v = lua_tointegerx(L, -1, &ok);
    if (type != LUA_TNUMBER || !ok)
        luaL_error(L, "%s: '%s' must be an integer id, got %s", what, key,
                   type == LUA_TNUMBER ? "a fractional number" : lua_typename(L, type));
    lua_pop(L, 1);
    *out = v;
    return true;
}

static uint32_t check_tensor(lua_State *L, const ms_policy_ctx *c, lua_Integer id,
                             const char *what)
{
    if (id < 0 || id >= (lua_Integer)c->prog->n_tensors)
        luaL_error(L, "%s: tensor %I does not exist (the program has %d tensors, ids from 0)",
                   what, id, (int)c->prog->n_tensors);
    return (uint32_t)id;
}

static uint32_t check_segment(lua_State *L, const ms_policy_ctx *c, lua_Integer id,
                              const char *what)
{
    if (id < 0 || id >= (lua_Integer)c->prog->n_segments)
        luaL_error(L, "%s: segment %I does not exist (the program has %d segments, ids from 0)",
                   what, id, (int)c->prog->n_segments);
    return (uint32_t)id;
}

static int32_t check_op(lua_State *L, const ms_policy_ctx *c, lua_Integer id, const char *what,
                        const char *field)
{
    if (id < 0 || id >= (lua_Integer)c->prog->n_ops)
        luaL_error(L, "%s: %s = %I is not an op (the program has %d ops, ids from 0)", what,
                   field, id, (int)c->prog->n_ops);
    return (int32_t)id;
}

static void read_swap_options(lua_State *L, const ms_policy_ctx *c, int tbl, ms_decision *dec,
                              const char *what)
{
    lua_Integer v;
    if (field_int(L, tbl, "out_after", what, &v))
        dec->out_after = check_op(L, c, v, what, "out_after");
    if (field_int(L, tbl, "in_before", what, &v))
        dec->in_before = check_op(L, c, v, what, "in_before");
    if (field_int(L, tbl, "prefetch", what, &v)) {
        if (v < 0 || v > (lua_Integer)c->prog->n_ops)
            luaL_error(L, "%s: prefetch = %I is out of range (0..%d ops)", what, v,
                       (int)c->prog->n_ops);
        dec->prefetch = (int32_t)v;
    }
}

/* A swap must have somewhere to leave from and come back to: resolve the
 * executor's defaults (last forward use, first backward use) to check the
 * order, but keep MS_NONE in the decision so the executor owns the rule. */
static void check_swap(lua_State *L, const ms_policy_ctx *c, const ms_decision *dec,
                       const char *what)
{
    const ms_tensor *t = &c->prog->tensors[dec->tensor];
    const char *name = t->name ? t->name : "?";
    if (MS_TENSOR_IS_MAIN_GRAD(t))
        luaL_error(L, "%s: tensor %d ('%s') is a main grad, a view into the contiguous grad "
                      "buffer: copying it out would free nothing", what, (int)dec->tensor, name);
    int32_t out = dec->out_after != MS_NONE ? dec->out_after
                                            : c->dv->last_forward_use[dec->tensor];
    int32_t in = dec->in_before != MS_NONE ? dec->in_before
                                           : c->dv->first_backward_use[dec->tensor];
    /* Made in forward and read only in backward (the loss's softmax): it
     * leaves right after the op that makes it, as the executor does. */
    if (out == MS_NONE && dec->out_after == MS_NONE && !t->persistent)
        out = t->producer;
    if (out == MS_NONE)
        luaL_error(L, "%s: tensor %d ('%s') has no forward use to copy it out after: pass "
                      "out_after", what, (int)dec->tensor, name);
    if (in == MS_NONE)
        luaL_error(L, "%s: tensor %d ('%s') has no backward use to bring it back for: pass "
                      "in_before", what, (int)dec->tensor, name);
    if (t->producer != MS_NONE && out < t->producer)
        luaL_error(L, "%s: out_after = op %d comes before op %d, which produces tensor %d", what,
                   (int)out, (int)t->producer, (int)dec->tensor);
    if (in <= out)
        luaL_error(L, "%s: in_before = op %d must come after out_after = op %d (tensor %d)", what,
                   (int)in, (int)out, (int)dec->tensor);
}

static void add_decision(lua_State *L, ms_policy_ctx *c, const ms_decision *dec,
                         const char *what)
{
    if (c->plan->n >= c->max_decisions)
        luaL_error(L, "%s: too many decisions (limit %d for this program)", what,
                   (int)c->max_decisions);
    if (ms_plan_add(c->plan, dec) != MS_OK)
        luaL_error(L, "%s: out of memory", what);
}

/* The script line of the call: the nearest Lua frame (a call made
 * through pcall has the C function pcall at level 1). */
static void script_position(lua_State *L, char *here, size_t n)
{
    snprintf(here, n, "?");
    lua_Debug ar;
    for (int level = 1; lua_getstack(L, level, &ar); level++)
        if (lua_getinfo(L, "Sl", &ar) && ar.currentline > 0) {
            snprintf(here, n, "%s:%d", ar.short_src, ar.currentline);
            return;
        }
}

/* A tensor has one way off the device and back: a second swap of it would
 * leave the executor two copies out and two in to choose from, so it is an
 * error that names both calls. */
static void check_not_swapped(lua_State *L, const ms_policy_ctx *c, uint32_t tensor,
                              const char *here, const char *what)
{
    if (c->swap_call == NULL || c->swap_call[tensor] == 0)
        return;
    const ms_tensor *t = &c->prog->tensors[tensor];
    char msg[512];
    snprintf(msg, sizeof msg,
             "%s: tensor %d ('%s') swapped twice: first at %s, again at %s (a tensor is swapped "
             "at most once per %s() call)",
             what, (int)tensor, t->name ? t->name : "?", c->swap_where[c->swap_call[tensor] - 1],
             here, c->hook);
    luaL_error(L, "%s", msg);
}

static void note_swap_at(lua_State *L, ms_policy_ctx *c, uint32_t tensor, const char *here)
{
    if (c->swap_call == NULL && (c->swap_call = calloc(c->prog->n_tensors ? c->prog->n_tensors : 1,
                                                       sizeof *c->swap_call)) == NULL)
        luaL_error(L, "out of memory noting a swap");
    if (!MS_GROW(c->swap_where, c->n_swap_where, c->cap_swap_where, 64))
        luaL_error(L, "out of memory noting a swap");
    snprintf(c->swap_where[c->n_swap_where], sizeof c->swap_where[0], "%s", here);
    c->swap_call[tensor] = ++c->n_swap_where;
}

static int ctx_swap(lua_State *L)
{
    ms_policy_ctx *c = writable_ctx(L, "swap");
    ms_decision dec = {.kind = MS_DEC_SWAP, .out_after = MS_NONE, .in_before = MS_NONE,
                       .prefetch = 1};
    dec.tensor = check_tensor(L, c, luaL_checkinteger(L, 2), "ctx:swap");
    if (!lua_isnoneornil(L, 3)) {
        luaL_checktype(L, 3, LUA_TTABLE);
        check_keys(L, 3, option_keys, "ctx:swap");
        read_swap_options(L, c, 3, &dec, "ctx:swap");
    }
    check_swap(L, c, &dec, "ctx:swap");
    char here[96];
    script_position(L, here, sizeof here);
    check_not_swapped(L, c, dec.tensor, here, "ctx:swap");
    note_swap_at(L, c, dec.tensor, here);
    add_decision(L, c, &dec, "ctx:swap");
    return 0;
}

static int ctx_recompute(lua_State *L)
{
    ms_policy_ctx *c = writable_ctx(L, "recompute");
    ms_decision dec = {.kind = MS_DEC_RECOMPUTE, .out_after = MS_NONE, .in_before = MS_NONE};
    dec.segment = check_segment(L, c, luaL_checkinteger(L, 2), "ctx:recompute");
    add_decision(L, c, &dec, "ctx:recompute");
    return 0;
}

static int ctx_keep(lua_State *L)
{
    ms_policy_ctx *c = writable_ctx(L, "keep");
    ms_decision dec = {.kind = MS_DEC_KEEP, .out_after = MS_NONE, .in_before = MS_NONE};
    dec.tensor = check_tensor(L, c, luaL_checkinteger(L, 2), "ctx:keep");
    add_decision(L, c, &dec, "ctx:keep");
    return 0;
}

static int ctx_stable(lua_State *L)
{
    ms_policy_ctx *c = writable_ctx(L, "stable");
    c->plan->stable = true;
    return 0;
}

/* The policy takes over the scenario's declared recompute and swap
 * settings (profile.declared): they are not appended to its plan, so it may
 * keep some (by deciding them again) and drop the others. */
static int ctx_replace_declared(lua_State *L)
{
    ms_policy_ctx *c = writable_ctx(L, "replace_declared");
    if (strcmp(c->hook, "plan") != 0)
        return luaL_error(L, "ctx:replace_declared is for plan(), not %s()", c->hook);
    c->replace_declared = true;
    return 0;
}

/* One entry of a candidate plan: the table at idx. */
static void read_decision(lua_State *L, ms_policy_ctx *c, int idx, ms_decision *dec,
                          const char *what)
{
    *dec = (ms_decision){.out_after = MS_NONE, .in_before = MS_NONE, .prefetch = 1};
    if (lua_getfield(L, idx, "kind") != LUA_TSTRING)
        luaL_error(L, "%s: 'kind' must be \"swap\", \"recompute\" or \"keep\"", what);
    const char *kind = lua_tostring(L, -1);
    lua_Integer v = 0;
    if (strcmp(kind, "swap") == 0 || strcmp(kind, "keep") == 0) {
        dec->kind = kind[0] == 's' ? MS_DEC_SWAP : MS_DEC_KEEP;
        dec->prefetch = dec->kind == MS_DEC_SWAP; /* as ctx:swap and ctx:keep make them */
        check_keys(L, idx, dec->kind == MS_DEC_SWAP ? swap_keys : keep_keys, what);
        if (!field_int(L, idx, "tensor", what, &v))
            luaL_error(L, "%s: a %s decision needs 'tensor'", what, kind);
        dec->tensor = check_tensor(L, c, v, what);
        if (dec->kind == MS_DEC_SWAP) {
            read_swap_options(L, c, idx, dec, what);
            check_swap(L, c, dec, what);
        }
    } else if (strcmp(kind, "recompute") == 0) {
        dec->kind = MS_DEC_RECOMPUTE;
        dec->prefetch = 0;
        check_keys(L, idx, recompute_keys, what);
        if (!field_int(L, idx, "segment", what, &v))
            luaL_error(L, "%s: a recompute decision needs 'segment'", what);
        dec->segment = check_segment(L, c, v, what);
    } else {
        luaL_error(L, "%s: unknown kind '%s' (expected swap, recompute or keep)", what, kind);
    }
    lua_pop(L, 1);
}

typedef struct swap_entry {
    uint32_t tensor;
    uint32_t index; /* 1-based, as the script numbers its candidate */
} swap_entry;

static int cmp_swap_entry(const void *a, const void *b)
{
    const swap_entry *x = a, *y = b;
    if (x->tensor != y->tensor)
        return x->tensor < y->tensor ? -1 : 1;
    return x->index < y->index ? -1 : x->index > y->index;
}

/* The candidate's swaps, each tensor at most once (see check_not_swapped). */
static void check_candidate_swaps(lua_State *L, const ms_plan *cand, const char *method)
{
    uint32_t n = 0;
    for (uint32_t i = 0; i < cand->n; i++)
        n += cand->items[i].kind == MS_DEC_SWAP;
    if (n < 2)
        return;
    /* A userdata, so the buffer is collected if the error below unwinds. */
    swap_entry *e = lua_newuserdatauv(L, n * sizeof *e, 0);
    n = 0;
    for (uint32_t i = 0; i < cand->n; i++)
        if (cand->items[i].kind == MS_DEC_SWAP)
            e[n++] = (swap_entry){cand->items[i].tensor, i + 1};
    qsort(e, n, sizeof *e, cmp_swap_entry);
    for (uint32_t i = 1; i < n; i++)
        if (e[i].tensor == e[i - 1].tensor)
            luaL_error(L, "%s: decisions %d and %d both swap tensor %d: a plan may swap a tensor "
                       "once", method, (int)e[i - 1].index, (int)e[i].index, (int)e[i].tensor);
    lua_pop(L, 1);
}

static void read_candidate(lua_State *L, ms_policy_ctx *c, int arr, const char *method)
{
    ms_plan_clear(&c->scratch);
    lua_Integer n = luaL_len(L, arr);
    for (lua_Integer i = 1; i <= n; i++) {
        char what[64];
        snprintf(what, sizeof what, "%s: decision %d", method, (int)i);
        int type = lua_geti(L, arr, i);
        if (type != LUA_TTABLE)
            luaL_error(L, "%s is a %s, expected a table", what, lua_typename(L, type));
        ms_decision dec;
        read_decision(L, c, lua_gettop(L), &dec, what);
        lua_pop(L, 1);
        if (c->scratch.n >= c->max_decisions)
            luaL_error(L, "%s: too many decisions (limit %d)", what, (int)c->max_decisions);
        if (ms_plan_add(&c->scratch, &dec) != MS_OK)
            luaL_error(L, "%s: out of memory", method);
    }
    check_candidate_swaps(L, &c->scratch, method);
}

/* ---- packed plans: ctx:pack, ctx:apply ---- */

#define PACKED_TYPE "memsim.policy.plan"

/* ctx:pack's value: a checked decision list as C structs, 24 bytes a
 * decision in the policy's heap (so counted against its memory cap), with no
 * Lua table and no profile view kept alive by it.  A policy that keeps
 * several plans across steps (memsim_optimal's fallbacks) holds these. */
typedef struct packed_plan {
    uint32_t n;
    ms_decision items[];
} packed_plan;

/* A packed decision, checked again against this call's program: a plan
 * packed for another step's program may not fit this one. */
static void check_packed(lua_State *L, const ms_policy_ctx *c, const ms_decision *dec,
                         const char *what)
{
    if (dec->kind == MS_DEC_RECOMPUTE) {
        check_segment(L, c, dec->segment, what);
        return;
    }
    check_tensor(L, c, dec->tensor, what);
    if (dec->kind != MS_DEC_SWAP)
        return;
    if (dec->out_after != MS_NONE)
        check_op(L, c, dec->out_after, what, "out_after");
    if (dec->in_before != MS_NONE)
        check_op(L, c, dec->in_before, what, "in_before");
    if (dec->prefetch > (int32_t)c->prog->n_ops)
        luaL_error(L, "%s: prefetch = %d is out of range (0..%d ops)", what, (int)dec->prefetch,
                   (int)c->prog->n_ops);
    check_swap(L, c, dec, what);
}

/* The plan argument at idx, a decision list or a packed plan, into
 * c->scratch. */
static void read_plan_arg(lua_State *L, ms_policy_ctx *c, int idx, const char *method)
{
    const packed_plan *pp = luaL_testudata(L, idx, PACKED_TYPE);
    if (pp == NULL) {
        if (lua_type(L, idx) != LUA_TTABLE)
            luaL_error(L, "%s: expected a list of decisions or a packed plan (ctx:pack), got %s",
                       method, luaL_typename(L, idx));
        read_candidate(L, c, idx, method);
        return;
    }
    ms_plan_clear(&c->scratch);
    for (uint32_t i = 0; i < pp->n; i++) {
        char what[64];
        snprintf(what, sizeof what, "%s: decision %d", method, (int)i + 1);
        check_packed(L, c, &pp->items[i], what);
        if (ms_plan_add(&c->scratch, &pp->items[i]) != MS_OK)
            luaL_error(L, "%s: out of memory", method);
    }
}

static int ctx_pack(lua_State *L)
{
    ms_policy_ctx *c = writable_ctx(L, "pack");
    read_plan_arg(L, c, 2, "ctx:pack");
    uint32_t n = c->scratch.n;
    packed_plan *pp = lua_newuserdatauv(L, sizeof *pp + (size_t)n * sizeof pp->items[0], 0);
    pp->n = n;
    if (n > 0)
        memcpy(pp->items, c->scratch.items, (size_t)n * sizeof pp->items[0]);
    luaL_setmetatable(L, PACKED_TYPE);
    return 1;
}

/* ctx:apply(plan): every decision of a list or packed plan, in order, as if
 * made by ctx:swap, ctx:recompute and ctx:keep at this line; checked whole
 * before the first is added. */
static int ctx_apply(lua_State *L)
{
    ms_policy_ctx *c = writable_ctx(L, "apply");
    read_plan_arg(L, c, 2, "ctx:apply");
    const ms_plan *in = &c->scratch;
    if (c->plan->n + (uint64_t)in->n > c->max_decisions)
        luaL_error(L, "ctx:apply: too many decisions (limit %d for this program)",
                   (int)c->max_decisions);
    char here[96];
    script_position(L, here, sizeof here);
    for (uint32_t i = 0; i < in->n; i++)
        if (in->items[i].kind == MS_DEC_SWAP)
            check_not_swapped(L, c, in->items[i].tensor, here, "ctx:apply");
    for (uint32_t i = 0; i < in->n; i++) {
        if (in->items[i].kind == MS_DEC_SWAP)
            note_swap_at(L, c, in->items[i].tensor, here);
        add_decision(L, c, &in->items[i], "ctx:apply");
    }
    return 0;
}

static int packed_len(lua_State *L)
{
    const packed_plan *pp = luaL_checkudata(L, 1, PACKED_TYPE);
    lua_pushinteger(L, pp->n);
    return 1;
}

static int packed_tostring(lua_State *L)
{
    const packed_plan *pp = luaL_checkudata(L, 1, PACKED_TYPE);
    lua_pushfstring(L, "memsim plan (%d decisions)", (int)pp->n);
    return 1;
}

static void set_field_int(lua_State *L, const char *k, lua_Integer v)
{
    lua_pushinteger(L, v);
    lua_setfield(L, -2, k);
}

/* What the step would run with this candidate: the scenario's declared
 * decisions follow it, as they follow the plan, unless the policy replaced
 * them. */
static const ms_plan *with_declared(lua_State *L, ms_policy_ctx *c, const ms_plan *cand)
{
    if (c->replace_declared || c->declared == NULL || c->declared->n == 0)
        return cand;
    ms_plan_clear(&c->sim_plan);
    ms_status st = MS_OK;
    for (uint32_t i = 0; st == MS_OK && i < cand->n; i++)
        st = ms_plan_add(&c->sim_plan, &cand->items[i]);
    for (uint32_t i = 0; st == MS_OK && i < c->declared->n; i++)
        st = ms_plan_add(&c->sim_plan, &c->declared->items[i]);
    if (st != MS_OK)
        luaL_error(L, "ctx:simulate: %s", ms_strerror(st));
    return &c->sim_plan;
}

/* An integer option of ctx:simulate from lo to hi, or dflt when absent. */
static lua_Integer simulate_int_option(lua_State *L, int arg, const char *key, lua_Integer lo,
                                       lua_Integer hi, lua_Integer dflt, const char *expected)
{
    int type = lua_getfield(L, arg, key);
    int isnum = 0;
    lua_Integer v = lua_tointegerx(L, -1, &isnum);
    if (type != LUA_TNIL && (!isnum || v < lo || v > hi))
        luaL_error(L, "ctx:simulate: options.%s must be %s", key, expected);
    lua_pop(L, 1);
    return type == LUA_TNIL ? dflt : v;
}

/* A misspelt option would silently simulate something else. */
static void simulate_known_options(lua_State *L, int arg)
{
    lua_pushnil(L);
    while (lua_next(L, arg) != 0) {
        lua_pop(L, 1);
        if (lua_type(L, -1) != LUA_TSTRING)
            luaL_error(L, "ctx:simulate: options has a key of type %s (expected steps, capacity)",
                       luaL_typename(L, -1));
        const char *k = lua_tostring(L, -1);
        if (strcmp(k, "steps") != 0 && strcmp(k, "capacity") != 0)
            luaL_error(L, "ctx:simulate: unknown option '%s' (expected steps, capacity)", k);
    }
}

/* ctx:simulate's options: { steps = n, capacity = bytes }. */
static ms_sim_options simulate_options(lua_State *L, int arg)
{
    ms_sim_options o = {.steps = 1, .capacity = 0};
    if (lua_isnoneornil(L, arg))
        return o;
    luaL_checktype(L, arg, LUA_TTABLE);
    simulate_known_options(L, arg);
    char expected[64];
    snprintf(expected, sizeof expected, "an integer from 1 to %d", MS_SIM_MAX_STEPS);
    o.steps = (int)simulate_int_option(L, arg, "steps", 1, MS_SIM_MAX_STEPS, 1, expected);
    o.capacity = (uint64_t)simulate_int_option(L, arg, "capacity", 1,
                                               (lua_Integer)MS_SIM_MAX_CAPACITY, 0,
                                               "bytes, an integer from 1 to 2^43 (8 TiB)");
    return o;
}

/* {peak_allocated, peak_reserved, step_time, oom}: a result, or one step. */
static void push_sim_figures(lua_State *L, uint64_t allocated, uint64_t reserved, int64_t time_ns,
                             bool oom)
{
    lua_createtable(L, 0, 5);
    set_field_int(L, "peak_allocated", (lua_Integer)allocated);
    set_field_int(L, "peak_reserved", (lua_Integer)reserved);
    set_field_int(L, "step_time", time_ns);
    lua_pushboolean(L, oom);
    lua_setfield(L, -2, "oom");
}

/* result.steps: each step run, so the first of a two-step simulation
 * answers the one-step question without simulating it again. */
static void push_sim_steps(lua_State *L, const ms_sim_result *res)
{
    int n = res->n_steps < 0 ? 0 : res->n_steps;
    n = n > MS_SIM_MAX_STEPS ? MS_SIM_MAX_STEPS : n;
    lua_createtable(L, n, 0);
    for (int i = 0; i < n; i++) {
        const ms_sim_step *s = &res->step[i];
        push_sim_figures(L, s->peak_allocated, s->peak_reserved, s->step_time_ns, s->oom);
        lua_rawseti(L, -2, i + 1);
    }
    lua_setfield(L, -2, "steps");
}

static int ctx_simulate(lua_State *L)
{
    ms_policy_ctx *c = writable_ctx(L, "simulate");
    if (c->sim == NULL)
        return luaL_error(L, "ctx:simulate: no simulator is available to %s()", c->hook);
    const ms_plan *cand = c->plan;
    if (!lua_isnoneornil(L, 2)) {
        read_plan_arg(L, c, 2, "ctx:simulate");
        cand = &c->scratch;
    }
    ms_sim_options opt = simulate_options(L, 3);
    cand = with_declared(L, c, cand);
    ms_sim_result res = {0};
    ms_diag d = {0};
    c->simulating = true;
    ms_status st = c->sim(c->sim_user, cand, &opt, &res, &d);
    c->simulating = false;
    if (st != MS_OK)
        return luaL_error(L, "ctx:simulate: %s", d.msg[0] ? d.msg : ms_strerror(st));
    push_sim_figures(L, res.peak_allocated, res.peak_reserved, res.step_time_ns, res.oom);
    push_sim_steps(L, &res);
    return 1;
}

/* string.format as captured before the policy ran (a script may replace the
 * global); a format error is re-raised at the script's line. */
static const char *format_message(lua_State *L, ms_policy *p, size_t *len)
{
    int n = lua_gettop(L);
    if (n < 2) {
        *len = 0;
        return "";
    }
    lua_rawgeti(L, LUA_REGISTRYINDEX, p->format_ref);
    for (int i = 2; i <= n; i++)
        lua_pushvalue(L, i);
    if (lua_pcall(L, n - 1, 1, 0) != LUA_OK)
        luaL_error(L, "ctx:log: %s", luaL_tolstring(L, -1, NULL));
    return luaL_tolstring(L, -1, len);
}

static int ctx_log(lua_State *L)
{
    ms_policy *p;
    ms_policy_ctx *c = live_ctx(L, &p);
    size_t len;
    const char *msg = format_message(L, p, &len);
    if (p->log == NULL || c->log_capped)
        return 0;
    if (len > LOG_LINE_MAX)
        len = LOG_LINE_MAX;
    if (c->logged + len > LOG_CALL_MAX) {
        fprintf(p->log, "[policy %s] (log limit of %u bytes per hook call reached; further "
                        "messages dropped)\n", p->name, LOG_CALL_MAX);
        c->log_capped = true;
        return 0;
    }
    c->logged += len;
    fprintf(p->log, "[policy %s] %.*s\n", p->name, (int)len, msg);
    return 0;
}

static int ctx_tostring(lua_State *L)
{
    ctx_handle *h = luaL_checkudata(L, 1, CTX_TYPE);
    bool live = h->policy->ctx != NULL && h->policy->ctx_gen == h->gen;
    lua_pushfstring(L, "memsim ctx (%s)", live ? h->policy->ctx->hook : "expired");
    return 1;
}

void pol_ctx_register(lua_State *L)
{
    static const luaL_Reg methods[] = {
        {"swap", ctx_swap},         {"recompute", ctx_recompute}, {"keep", ctx_keep},
        {"stable", ctx_stable},     {"simulate", ctx_simulate},   {"log", ctx_log},
        {"replace_declared", ctx_replace_declared},
        {"pack", ctx_pack},         {"apply", ctx_apply},         {NULL, NULL},
    };
    luaL_newmetatable(L, CTX_TYPE);
    luaL_newlib(L, methods);
    lua_setfield(L, -2, "__index");
    lua_pushcfunction(L, ctx_tostring);
    lua_setfield(L, -2, "__tostring");
    lua_pushliteral(L, "ctx");
    lua_setfield(L, -2, "__metatable");
    lua_pop(L, 1);
    luaL_newmetatable(L, PACKED_TYPE);
    lua_pushcfunction(L, packed_len);
    lua_setfield(L, -2, "__len");
    lua_pushcfunction(L, packed_tostring);
    lua_setfield(L, -2, "__tostring");
    lua_pushliteral(L, "plan");
    lua_setfield(L, -2, "__metatable");
    lua_pop(L, 1);
}

void pol_ctx_push(lua_State *L, ms_policy *p)
{
    ctx_handle *h = lua_newuserdatauv(L, sizeof *h, 0);
    h->policy = p;
    h->gen = p->ctx_gen;
    luaL_setmetatable(L, CTX_TYPE);
}
