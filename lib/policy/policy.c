/* The Lua policy host: load a policy into a sandbox and call its hooks.
 *
 * Every touch of the Lua API runs inside a protected call through the
 * sandbox (a heap cap turns any allocation into a possible error, and an
 * unprotected error would abort the process), so each entry point pushes a
 * C "host_*" function and its argument block and lets the sandbox run it
 * under the instruction budget.  The hook itself is called from there with
 * lua_call, so its errors keep their file:line. */
#include "policy_host.h"

#include "lib/base/growable.h"

#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include <lauxlib.h>

#define DEFAULT_INSTRUCTIONS 200000000ULL /* per hook call (docs/policy-api.md) */
#define DEFAULT_MEMORY ((size_t)256 << 20)

static const char *const hook_names[MS_HOOK_COUNT] = {"plan", "pool", "on_oom"};

/* ---- load ---- */

static bool is_bare_name(const char *s)
{
    size_t n = strlen(s);
    return strchr(s, '/') == NULL && !(n >= 4 && strcmp(s + n - 4, ".lua") == 0);
}

static ms_status resolve_path(const char *path, const char *lib_dir, char *out, size_t n,
                              ms_diag *d)
{
    if (!is_bare_name(path)) {
        if ((size_t)snprintf(out, n, "%s", path) >= n)
            return ms_diag_set(d, MS_ERANGE, "policy path too long: %s", path);
        return MS_OK;
    }
    if (lib_dir == NULL)
        return ms_diag_set(d, MS_ENOENT, "policy '%s': a shipped policy name needs the policy "
                           "directory (none given)", path);
    if (path[0] == '\0' || strspn(path, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                                        "0123456789_") != strlen(path))
        return ms_diag_set(d, MS_EINVAL, "policy name '%s': expected letters, digits and '_' "
                           "(or a path to a .lua file)", path);
    if ((size_t)snprintf(out, n, "%s/%s.lua", lib_dir, path) >= n)
        return ms_diag_set(d, MS_ERANGE, "policy path too long: %s/%s.lua", lib_dir, path);
    return MS_OK;
}

static void base_name(const char *path, char *out, size_t n)
{
    const char *slash = strrchr(path, '/');
    const char *b = slash ? slash + 1 : path;
    size_t len = strlen(b);
    if (len >= 4 && strcmp(b + len - 4, ".lua") == 0)
        len -= 4;
    snprintf(out, n, "%.*s", (int)len, b);
}

static ms_policy *host_policy(lua_State *L)
{
    return lua_touserdata(L, 1);
}

/* First thing in a fresh state: the ctx type, and string.format kept aside
 * for ctx:log before any script can replace it. */
static int host_setup(lua_State *L)
{
    ms_policy *p = host_policy(L);
    pol_ctx_register(L);
    pol_view_register(L);
    lua_getglobal(L, "string");
    lua_getfield(L, -1, "format");
    p->format_ref = luaL_ref(L, LUA_REGISTRYINDEX);
    return 0;
}

/* Raise "policy 'PATH': <message>" (lua_pushfstring formats). */
static int fail(lua_State *L, const ms_policy *p, const char *fmt, ...)
{
    va_list ap;
    lua_pushfstring(L, "policy '%s': ", p->path);
    va_start(ap, fmt);
    lua_pushvfstring(L, fmt, ap);
    va_end(ap);
    lua_concat(L, 2);
    return lua_error(L);
}

static bool valid_pool_name(const char *s, size_t len)
{
    if (len == 0 || len >= sizeof(((ms_pool_decl *)0)->name))
        return false;
    if (!(s[0] == '_' || (s[0] >= 'A' && s[0] <= 'Z') || (s[0] >= 'a' && s[0] <= 'z')))
        return false;
    return strspn(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_") == len;
}

static bool read_pool_flag(lua_State *L, ms_policy *p, int opts, const char *pool,
                           const char *flag)
{
    int type = lua_getfield(L, opts, flag);
    if (type != LUA_TNIL && type != LUA_TBOOLEAN)
        fail(L, p, "pools.%s.%s must be a boolean", pool, flag);
    bool v = lua_toboolean(L, -1);
    lua_pop(L, 1);
    return v;
}

/* The declaration of `name`; the options table is on top of the stack. */
static void read_pool(lua_State *L, ms_policy *p, const char *name, size_t len, ms_pool_decl *decl)
{
    if (!valid_pool_name(name, len) || strcmp(name, "default") == 0)
        fail(L, p, "pools: '%s' is not a usable pool name (letters, digits, '_', at most 63, "
                   "not \"default\")", name);
    if (!lua_istable(L, -1))
        fail(L, p, "pools.%s must be a table of options, got a %s", name, luaL_typename(L, -1));
    int opts = lua_gettop(L);
    int unknown = 0;
    const char *example = NULL;
    lua_pushnil(L);
    while (lua_next(L, opts) != 0) {
        lua_pop(L, 1);
        const char *key = lua_type(L, -1) == LUA_TSTRING ? lua_tostring(L, -1) : NULL;
        if (key != NULL && (strcmp(key, "exact_segments") == 0 || strcmp(key, "lendable") == 0))
            continue;
        unknown++;
        /* The smallest unknown name, whatever order next() gives. */
        if (key != NULL && (example == NULL || strcmp(key, example) < 0))
            example = key;
    }
    if (unknown > 0)
        fail(L, p, "pools.%s: %d unknown option%s%s%s%s (expected exact_segments, lendable)", name,
             unknown, unknown > 1 ? "s" : "", example ? " such as '" : " (not strings)",
             example ? example : "", example ? "'" : "");
    memcpy(decl->name, name, len + 1);
    decl->exact_segments = read_pool_flag(L, p, opts, name, "exact_segments");
    decl->lendable = read_pool_flag(L, p, opts, name, "lendable");
}

typedef struct pool_key {
    const char *s;
    size_t len;
} pool_key;

static int compare_keys(const void *a, const void *b)
{
    const pool_key *x = a, *y = b;
    size_t n = x->len < y->len ? x->len : y->len;
    int c = memcmp(x->s, y->s, n);
    return c != 0 ? c : (x->len > y->len) - (x->len < y->len);
}

/* Declarations read in name order, so which one is checked first (and so
 * which error a policy with several bad ones gets) never follows next()'s
 * order, which depends on Lua's per-state hash seed and on addresses; the
 * executor creates pools in this order too. */
static void read_pools(lua_State *L, ms_policy *p, int module)
{
    int type = lua_getfield(L, module, "pools");
    if (type == LUA_TNIL) {
        lua_pop(L, 1);
        return;
    }
    if (type != LUA_TTABLE)
        fail(L, p, "'pools' is a %s, expected a table of pool declarations",
             lua_typename(L, type));
    int pools = lua_gettop(L);
    uint32_t n = 0, bad = 0;
    lua_pushnil(L);
    while (lua_next(L, pools) != 0) {
        lua_pop(L, 1);
        if (lua_type(L, -1) == LUA_TSTRING)
            n++;
        else
            bad++;
    }
    if (bad > 0)
        fail(L, p, "pools: keys must be pool names (strings); %d key%s not", (int)bad,
             bad > 1 ? "s are" : " is");
    /* A userdata, so the buffer is collected if a check below fails. */
    pool_key *keys = lua_newuserdatauv(L, (n ? n : 1) * sizeof *keys, 0);
    uint32_t k = 0;
    lua_pushnil(L);
    while (lua_next(L, pools) != 0) {
        lua_pop(L, 1);
        /* Anchored as keys of `pools`, which nothing changes meanwhile. */
        if (k < n) {
            keys[k].s = lua_tolstring(L, -1, &keys[k].len);
            k++;
        }
    }
    qsort(keys, n, sizeof *keys, compare_keys);
    p->pools = calloc(n ? n : 1, sizeof *p->pools);
    if (p->pools == NULL)
        luaL_error(L, "out of memory");
    for (uint32_t i = 0; i < n; i++) {
        lua_pushlstring(L, keys[i].s, keys[i].len);
        lua_rawget(L, pools);
        read_pool(L, p, keys[i].s, keys[i].len, &p->pools[p->n_pools++]);
        lua_pop(L, 1);
    }
    lua_pop(L, 2);
}

static void read_hooks(lua_State *L, ms_policy *p, int module)
{
    int found = 0;
    for (int h = 0; h < MS_HOOK_COUNT; h++) {
        int type = lua_getfield(L, module, hook_names[h]);
        if (type == LUA_TNIL) {
            lua_pop(L, 1);
            continue;
        }
        if (type != LUA_TFUNCTION)
            fail(L, p, "hook '%s' is a %s, expected a function", hook_names[h],
                 lua_typename(L, type));
        lua_Debug ar;
        lua_pushvalue(L, -1);
        lua_getinfo(L, ">S", &ar);
        snprintf(p->hook_where[h], sizeof p->hook_where[h], "%s:%d", ar.short_src,
                 ar.linedefined);
        p->hook_ref[h] = luaL_ref(L, LUA_REGISTRYINDEX);
        found++;
    }
    if (found == 0)
        fail(L, p, "defines none of the hooks plan, pool, on_oom (at least one is needed)");
}

static void read_name(lua_State *L, ms_policy *p, int module)
{
    int type = lua_getfield(L, module, "name");
    if (type == LUA_TSTRING) {
        size_t len;
        const char *s = lua_tolstring(L, -1, &len);
        if (len == 0 || len >= sizeof p->name)
            fail(L, p, "'name' must be 1 to %d characters", (int)sizeof p->name - 1);
        memcpy(p->name, s, len + 1);
    } else if (type != LUA_TNIL) {
        fail(L, p, "'name' is a %s, expected a string", lua_typename(L, type));
    }
    lua_pop(L, 1);
}

/* Arguments: the policy, the chunk's result. */
static int host_check_module(lua_State *L)
{
    ms_policy *p = host_policy(L);
    if (!lua_istable(L, 2)) {
        const char *what = lua_isnil(L, 2) ? "nothing (nil)" : lua_pushfstring(L, "a %s",
                                                                             luaL_typename(L, 2));
        lua_pushfstring(L, "policy '%s' returned %s, expected a table of hooks", p->path, what);
        return lua_error(L);
    }
    read_name(L, p, 2);
    read_pools(L, p, 2);
    pol_read_options(L, p, 2);
    read_hooks(L, p, 2);
    return 0;
}

static ms_status load_into(ms_policy *p, const char *lib_dir, const ms_policy_limits *lim,
                           ms_diag *d)
{
    ms_sandbox_limits sl = {
        .max_instructions = lim && lim->max_instructions ? lim->max_instructions
                                                         : DEFAULT_INSTRUCTIONS,
        .max_memory = lim && lim->max_memory ? lim->max_memory : DEFAULT_MEMORY,
    };
    ms_status st = base_sandbox_create(&sl, &p->sb);
    if (st != MS_OK)
        return ms_diag_set(d, st, "policy '%s': cannot create its Lua state", p->path);
    base_sandbox_state(p->sb, &p->L);
    if (lib_dir != NULL && (st = base_sandbox_set_require_dir(p->sb, lib_dir)) != MS_OK)
        return ms_diag_set(d, st, "policy '%s': out of memory", p->path);
    lua_pushcfunction(p->L, host_setup);
    lua_pushlightuserdata(p->L, p);
    if ((st = base_sandbox_pcall(p->sb, 1, 0, d)) != MS_OK)
        return st;
    if ((st = base_sandbox_dofile(p->sb, p->path, 1, d)) != MS_OK) {
        if (st == MS_ENOENT)
            ms_diag_prefix(d, "policy: ");
        return st;
    }
    lua_pushcfunction(p->L, host_check_module);
    lua_insert(p->L, -2);
    lua_pushlightuserdata(p->L, p);
    lua_insert(p->L, -2);
    return base_sandbox_pcall(p->sb, 2, 0, d);
}

ms_status ms_policy_load(const char *path, const char *lib_dir, const ms_policy_limits *lim,
                         ms_policy **out, ms_diag *d)
{
    if (path == NULL || out == NULL)
        return ms_diag_set(d, MS_EINVAL, "ms_policy_load: NULL path or out");
    *out = NULL;
    ms_policy *p = calloc(1, sizeof *p);
    if (p == NULL)
        return ms_diag_set(d, MS_ENOMEM, "out of memory loading policy '%s'", path);
    for (int h = 0; h < MS_HOOK_COUNT; h++)
        p->hook_ref[h] = LUA_NOREF;
    p->format_ref = LUA_NOREF;
    p->log = stderr;
    ms_status st = resolve_path(path, lib_dir, p->path, sizeof p->path, d);
    if (st == MS_OK)
        st = load_into(p, lib_dir, lim, d);
    if (st != MS_OK) {
        ms_policy_free(p);
        return st;
    }
    if (p->name[0] == '\0')
        base_name(p->path, p->name, sizeof p->name);
    *out = p;
    return MS_OK;
}

static void programs_retire(ms_policy *p);

ms_status ms_policy_free(ms_policy *p)
{
    if (p == NULL)
        return MS_EINVAL;
    programs_retire(p); /* before the state closes: a finalizer may read a view */
    if (p->sb != NULL)
        base_sandbox_destroy(p->sb);
    for (uint32_t i = 0; i < p->n_progs; i++)
        free(p->progs[i]);
    free(p->pools);
    free(p->progs);
    free(p);
    return MS_OK;
}

const char *ms_policy_name(const ms_policy *p)
{
    return p != NULL ? p->name : NULL;
}

const ms_pool_decl *ms_policy_pools(const ms_policy *p, uint32_t *n)
{
    if (n != NULL)
        *n = p != NULL ? p->n_pools : 0;
    return p != NULL ? p->pools : NULL;
}

ms_status ms_policy_set_log(ms_policy *p, FILE *stream)
{
    if (p == NULL)
        return MS_EINVAL;
    p->log = stream;
    return MS_OK;
}

/* ---- calls ---- */

/* Run the host function below nargs arguments.  The outermost call goes
 * through the sandbox (fresh budget, status mapping); a call nested inside a
 * hook (pool() re-entered from ctx:simulate) must not reset the budget of the
 * hook around it, so it uses a plain pcall and the outer budget keeps running. */
static ms_status call_protected(ms_policy *p, int nargs, int nresults, ms_diag *d)
{
    ms_status st;
    p->depth++;
    if (p->depth == 1) {
        st = base_sandbox_pcall(p->sb, nargs, nresults, d);
    } else {
        int rc = lua_pcall(p->L, nargs, nresults, 0);
        st = MS_OK;
        if (rc != LUA_OK) {
            const char *msg = lua_type(p->L, -1) == LUA_TSTRING ? lua_tostring(p->L, -1) : NULL;
            bool limit = rc == LUA_ERRMEM || (msg && strstr(msg, "instruction budget"));
            st = ms_diag_set(d, limit ? MS_ELIMIT : MS_ESCRIPT, "%s",
                             msg ? msg : "script error (not a string)");
            lua_pop(p->L, 1);
        }
    }
    p->depth--;
    return st;
}

static bool same_program(const ms_program_view *a, const ms_program_view *b)
{
    return a->ops == b->ops && a->n_ops == b->n_ops && a->tensors == b->tensors &&
           a->n_tensors == b->n_tensors && a->segments == b->segments &&
           a->n_segments == b->n_segments && a->revision == b->revision;
}

/* pol_program: the facts and the view follow the program. */
static ms_status program_open(pol_program *g, const ms_program_view *pv, ms_diag *d)
{
    g->view = *pv;
    g->view_ref = LUA_NOREF;
    g->box = NULL;
    g->dv = pv->facts;
    if (g->dv == NULL) {
        ms_status st = ms_program_facts_derive(pv, &g->own_facts, d);
        if (st != MS_OK)
            return st;
        g->dv = &g->own_facts;
    }
    g->retired = false;
    return MS_OK;
}

static void program_retire(ms_policy *p, pol_program *g)
{
    if (g->retired)
        return;
    g->retired = true;
    pol_view_retire(g->box);
    g->box = NULL;
    if (g->view_ref != LUA_NOREF)
        luaL_unref(p->L, LUA_REGISTRYINDEX, g->view_ref);
    g->view_ref = LUA_NOREF;
    ms_program_facts_free(&g->own_facts);
    g->dv = NULL;
}

static void programs_retire(ms_policy *p)
{
    for (uint32_t i = 0; i < p->n_progs; i++)
        program_retire(p, p->progs[i]);
}

static pol_program *program_new(ms_policy *p, ms_diag *d)
{
    pol_program *g = MS_GROW(p->progs, p->n_progs, p->cap_progs, 8) ? calloc(1, sizeof *g) : NULL;
    if (g == NULL) {
        ms_diag_set(d, MS_ENOMEM, "policy: out of memory noting a program");
        return NULL;
    }
    g->retired = true; /* until opened */
    g->id = ++p->programs_met;
    p->progs[p->n_progs++] = g;
    return g;
}

/* Forget the programs whose owner refilled their arrays (a revision other
 * than 0 that retired): revisions only grow, so such a program never comes
 * back, and its view, if a script still holds it, answers from its own copy
 * (pol_view_retire).  A builder's program (revision 0) that retired may come
 * back with its arrays and takes its number again. */
static void programs_forget_refilled(ms_policy *p, const pol_program *keep)
{
    uint32_t kept = 0;
    for (uint32_t i = 0; i < p->n_progs; i++) {
        pol_program *k = p->progs[i];
        if (k->retired && k->view.revision != 0 && k != keep)
            free(k);
        else
            p->progs[kept++] = k;
    }
    p->n_progs = kept;
}

/* Make pv the program of the call: the one met before (same arrays, counts
 * and revision) or a new one.  Another program retires when pv may have
 * taken its arrays: pv reuses them, or its owner refills its arrays (a
 * revision other than 0; workload.h), which a new program says it did. */
static ms_status ensure_program(ms_policy *p, const ms_program_view *pv, ms_diag *d)
{
    if (p->cur != NULL && !p->cur->retired && same_program(&p->cur->view, pv))
        return MS_OK;
    pol_program *g = NULL;
    for (uint32_t i = 0; i < p->n_progs; i++) {
        pol_program *k = p->progs[i];
        if (same_program(&k->view, pv))
            g = k;
        else if (k->view.revision != 0 || (pv->ops != NULL && k->view.ops == pv->ops))
            program_retire(p, k);
    }
    p->cur = NULL;
    programs_forget_refilled(p, g);
    if (g == NULL && (g = program_new(p, d)) == NULL)
        return MS_ENOMEM;
    if (g->retired) {
        ms_status st = program_open(g, pv, d);
        if (st != MS_OK)
            return st;
    }
    p->cur = g;
    return MS_OK;
}

/* Push the program's view, making it on first use. */
static void push_view(lua_State *L, ms_policy *p)
{
    pol_program *g = p->cur;
    if (g->view_ref == LUA_NOREF) {
        g->box = pol_push_program(L, g);
        lua_pushinteger(L, g->id);
        lua_setfield(L, -2, "program_id");
        lua_pushvalue(L, -1);
        g->view_ref = luaL_ref(L, LUA_REGISTRYINDEX);
        return;
    }
    lua_rawgeti(L, LUA_REGISTRYINDEX, g->view_ref);
}

typedef struct hook_call {
    ms_policy *p;
    const ms_profile *prof;
    const ms_oom_request *req;
    const ms_tensor *tensor;
    char *buf;
    size_t n;
} hook_call;

/* plan(profile, ctx) or on_oom(request, ctx, profile). */
static int host_decide(lua_State *L)
{
    hook_call *hc = lua_touserdata(L, 1);
    ms_policy *p = hc->p;
    push_view(L, p);
    int view = lua_gettop(L);
    pol_update_measured(L, p->cur->box, hc->prof);
    int hook = hc->req ? MS_HOOK_ON_OOM : MS_HOOK_PLAN;
    lua_rawgeti(L, LUA_REGISTRYINDEX, p->hook_ref[hook]);
    if (hc->req != NULL) {
        pol_push_request(L, hc->req);
        pol_ctx_push(L, p);
        pol_push_profile(L, view, hc->prof);
        lua_call(L, 3, 0);
    } else {
        pol_push_profile(L, view, hc->prof);
        pol_ctx_push(L, p);
        lua_call(L, 2, 0);
    }
    return 0;
}

static ms_status check_profile(const ms_policy *p, const ms_profile *prof, ms_diag *d)
{
    if (prof->measured && prof->program.n_ops > 0 && prof->ops == NULL)
        return ms_diag_set(d, MS_EINVAL, "policy '%s': a measured profile without op figures",
                           p->name);
    return MS_OK;
}

/* The scenario's own decisions follow the policy's: the executor's
 * precedence (keep over recompute over swap) decides between them. */
static ms_status add_declared(const ms_profile *prof, ms_plan *plan, ms_diag *d)
{
    ms_status st = MS_OK;
    for (uint32_t i = 0; prof->declared != NULL && st == MS_OK && i < prof->declared->n; i++)
        st = ms_plan_add(plan, &prof->declared->items[i]);
    if (st != MS_OK)
        ms_diag_set(d, st, "adding the scenario's declared decisions: %s", ms_strerror(st));
    return st;
}

static ms_status run_decide(ms_policy *p, const char *hook, const ms_profile *prof,
                            const ms_oom_request *req, ms_simulate_fn sim, void *sim_user,
                            ms_plan *plan, ms_diag *d)
{
    if (p->ctx != NULL || p->depth > 0)
        return ms_diag_set(d, MS_EINVAL, "policy '%s': %s() called while another of its hooks "
                           "is running", p->name, hook);
    ms_status st = check_profile(p, prof, d);
    if (st == MS_OK)
        st = ensure_program(p, &prof->program, d);
    if (st != MS_OK)
        return st;
    ms_policy_ctx c = {
        .hook = hook, .prog = &p->cur->view, .dv = p->cur->dv, .plan = plan,
        .max_decisions = pol_ctx_max_decisions(&p->cur->view),
        .sim = sim, .sim_user = sim_user, .declared = prof->declared,
    };
    ms_plan_init(&c.scratch);
    ms_plan_init(&c.sim_plan);
    hook_call hc = {.p = p, .prof = prof, .req = req};
    p->ctx = &c;
    p->ctx_gen++;
    lua_pushcfunction(p->L, host_decide);
    lua_pushlightuserdata(p->L, &hc);
    st = call_protected(p, 1, 0, d);
    p->ctx = NULL;
    free(c.swap_call);
    free(c.swap_where);
    ms_plan_free(&c.scratch);
    ms_plan_free(&c.sim_plan);
    if (st != MS_OK)
        ms_diag_prefix(d, "policy '%s' %s(): ", p->name, hook);
    else if (req == NULL && !c.replace_declared)
        st = add_declared(prof, plan, d);
    return st;
}

ms_status ms_policy_plan(ms_policy *p, const ms_profile *prof, ms_simulate_fn sim, void *sim_user,
                         ms_plan *plan, ms_diag *d)
{
    if (p == NULL || prof == NULL || plan == NULL)
        return ms_diag_set(d, MS_EINVAL, "ms_policy_plan: NULL argument");
    if (p->ctx != NULL || p->depth > 0)
        return ms_diag_set(d, MS_EINVAL, "policy '%s': plan() called while another of its "
                           "hooks is running", p->name);
    ms_plan_clear(plan);
    if (p->hook_ref[MS_HOOK_PLAN] == LUA_NOREF)
        return add_declared(prof, plan, d);
    ms_status st = run_decide(p, "plan", prof, NULL, sim, sim_user, plan, d);
    if (st != MS_OK)
        ms_plan_clear(plan);
    return st;
}

ms_status ms_policy_on_oom(ms_policy *p, const ms_oom_request *req, const ms_profile *prof,
                           ms_plan *plan, bool *handled, ms_diag *d)
{
    if (p == NULL || req == NULL || prof == NULL || plan == NULL || handled == NULL)
        return ms_diag_set(d, MS_EINVAL, "ms_policy_on_oom: NULL argument");
    *handled = false;
    if (p->hook_ref[MS_HOOK_ON_OOM] == LUA_NOREF)
        return MS_OK;
    uint32_t before = plan->n;
    ms_status st = run_decide(p, "on_oom", prof, req, NULL, NULL, plan, d);
    if (st != MS_OK) {
        plan->n = before < plan->n ? before : plan->n; /* drop a half-made answer */
        return st;
    }
    *handled = plan->n > before;
    return MS_OK;
}

/* ---- pool ---- */

static bool declared_pool(const ms_policy *p, const char *name)
{
    if (strcmp(name, "default") == 0)
        return true;
    for (uint32_t i = 0; i < p->n_pools; i++)
        if (strcmp(p->pools[i].name, name) == 0)
            return true;
    return false;
}

static void push_declared(lua_State *L, const ms_policy *p)
{
    luaL_Buffer b;
    luaL_buffinit(L, &b);
    luaL_addstring(&b, "\"default\"");
    for (uint32_t i = 0; i < p->n_pools; i++) {
        luaL_addstring(&b, ", ");
        luaL_addstring(&b, p->pools[i].name);
    }
    luaL_pushresult(&b);
}

static int host_pool(lua_State *L)
{
    hook_call *hc = lua_touserdata(L, 1);
    ms_policy *p = hc->p;
    lua_rawgeti(L, LUA_REGISTRYINDEX, p->hook_ref[MS_HOOK_POOL]);
    pol_push_tensor(L, hc->tensor);
    lua_call(L, 1, 1);
    const char *where = p->hook_where[MS_HOOK_POOL];
    if (lua_isnil(L, -1)) {
        snprintf(hc->buf, hc->n, "default");
        return 0;
    }
    if (lua_type(L, -1) != LUA_TSTRING)
        return luaL_error(L, "%s: pool() returned a %s for tensor %d, expected a pool name or "
                             "nil", where, luaL_typename(L, -1), (int)hc->tensor->id);
    size_t len;
    const char *name = lua_tolstring(L, -1, &len);
    if (strlen(name) != len || !declared_pool(p, name)) {
        push_declared(L, p);
        return luaL_error(L, "%s: pool() returned '%s' for tensor %d, which is neither "
                             "\"default\" nor a pool declared in `pools` (declared: %s)",
                          where, name, (int)hc->tensor->id, lua_tostring(L, -1));
    }
    if (len >= hc->n)
        return luaL_error(L, "%s: pool name '%s' does not fit the caller's %d-byte buffer", where,
                          name, (int)hc->n);
    memcpy(hc->buf, name, len + 1);
    return 0;
}

ms_status ms_policy_pool(ms_policy *p, const ms_tensor *t, char *buf, size_t n, ms_diag *d)
{
    if (p == NULL || t == NULL || buf == NULL || n == 0)
        return ms_diag_set(d, MS_EINVAL, "ms_policy_pool: NULL argument or empty buffer");
    if (p->hook_ref[MS_HOOK_POOL] == LUA_NOREF) {
        if (n < sizeof "default")
            return ms_diag_set(d, MS_ERANGE, "ms_policy_pool: buffer of %zu bytes too small", n);
        memcpy(buf, "default", sizeof "default");
        return MS_OK;
    }
    buf[0] = '\0';
    hook_call hc = {.p = p, .tensor = t, .buf = buf, .n = n};
    lua_pushcfunction(p->L, host_pool);
    lua_pushlightuserdata(p->L, &hc);
    ms_status st = call_protected(p, 1, 0, d);
    if (st != MS_OK) {
        buf[0] = '\0';
        ms_diag_prefix(d, "policy '%s' pool(): ", p->name);
    }
    return st;
}
