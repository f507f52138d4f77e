/* The sandbox for untrusted Lua: see lua_sandbox.h for what it allows. */
#include "lib/base/sandbox.h"

#include <ctype.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <lauxlib.h>
#include <lualib.h>

#define HOOK_EVERY 1000 /* instructions between budget checks */
#define DEFAULT_INSTRUCTIONS 200000000ULL
#define DEFAULT_MEMORY (256u << 20)
#define REQUIRE_CACHE "memsim.sandbox.loaded"

struct ms_sandbox {
    lua_State *L;
    uint64_t max_instructions;
    uint64_t used_instructions;
    size_t max_memory;
    size_t used_memory;
    bool limit_hit;         /* the current error is a budget or cap */
    int depth;              /* nested pcalls share the outermost call's budget */
    char where[256];        /* last position seen by the hook (for heap errors) */
    char *require_dir;
};

/* The heap cap: refuse growth past max_memory.  Lua turns the NULL into a
 * memory error that unwinds the script, which is exactly the stop we want. */
static void *sandbox_alloc(void *ud, void *ptr, size_t osize, size_t nsize)
{
    ms_sandbox *sb = ud;
    if (ptr == NULL)
        osize = 0;
    if (nsize == 0) {
        free(ptr);
        sb->used_memory -= osize;
        return NULL;
    }
    if (nsize > osize && sb->used_memory + (nsize - osize) > sb->max_memory) {
        sb->limit_hit = true;
        return NULL;
    }
    void *p = realloc(ptr, nsize);
    if (p != NULL)
        sb->used_memory = sb->used_memory - osize + nsize;
    return p;
}

static ms_sandbox *sandbox_of(lua_State *L)
{
    void *ud = NULL;
    lua_getallocf(L, &ud);
    return ud;
}

/* The instruction budget.  The hook runs inside the script, so the position
 * it reports is the line that was executing when the budget ran out. */
static void budget_hook(lua_State *L, lua_Debug *ar)
{
    ms_sandbox *sb = sandbox_of(L);
    if (lua_getinfo(L, "Sl", ar) != 0)
        snprintf(sb->where, sizeof sb->where, "%s:%d", ar->short_src, ar->currentline);
    sb->used_instructions += HOOK_EVERY;
    if (sb->used_instructions > sb->max_instructions) {
        sb->limit_hit = true;
        lua_pushfstring(L, "%s: instruction budget of %I exceeded", sb->where,
                        (lua_Integer)sb->max_instructions);
        lua_error(L);
    }
}

static int sandbox_print(lua_State *L)
{
    /* stdout carries reports; script chatter goes to stderr. */
    int n = lua_gettop(L);
    for (int i = 1; i <= n; i++) {
        size_t len;
        const char *s = luaL_tolstring(L, i, &len);
        fprintf(stderr, "%s%.*s", i > 1 ? "\t" : "", (int)(len > 4096 ? 4096 : len), s);
        lua_pop(L, 1);
    }
    fputc('\n', stderr);
    return 0;
}

/* load() with text chunks only: precompiled bytecode can crash the VM. */
static int sandbox_load(lua_State *L)
{
    int n = lua_gettop(L);
    if (n < 3)
        lua_settop(L, 3);
    else
        lua_settop(L, n);
    lua_pushliteral(L, "t");
    lua_replace(L, 3);
    lua_getfield(L, LUA_REGISTRYINDEX, "memsim.raw_load");
    lua_insert(L, 1);
    lua_call(L, lua_gettop(L) - 1, LUA_MULTRET);
    return lua_gettop(L);
}

/* setmetatable without finalizers.  Lua runs a __gc metamethod with hooks
 * switched off (GCTM clears allowhook), so the instruction budget cannot stop
 * one that never returns, and lua_close runs every pending finalizer: a
 * script's __gc could hang memsim at any collection or at exit.  Lua marks an
 * object for finalization only when its metatable has __gc at the moment
 * setmetatable is called (a field added later is ignored, reference manual
 * 2.5.3), so refusing it here is enough. */
static int sandbox_setmetatable(lua_State *L)
{
    lua_pushliteral(L, "__gc");
    if (lua_type(L, 2) == LUA_TTABLE && lua_rawget(L, 2) != LUA_TNIL)
        return luaL_error(L, "setmetatable: a metatable with __gc (a finalizer) is not allowed "
                             "in memsim scripts: finalizers run outside the instruction budget");
    lua_settop(L, 2);
    lua_getfield(L, LUA_REGISTRYINDEX, "memsim.raw_setmetatable");
    lua_insert(L, 1);
    lua_call(L, 2, 1);
    return 1;
}

/* Lua's pattern matcher runs in C, where the instruction hook never fires,
 * and backtracks: each repetition item (*, +, -, ?, %b) multiplies the work
 * by the subject's length (but the last, which never has to give back), and
 * an unanchored search tries every start, so
 * string.find(string.rep("a", 2e5), string.rep("a-", 40) .. "b") would run
 * for ages.  Before a match the worst case is bounded, and a pattern whose
 * worst case exceeds PATTERN_STEPS is refused. */
#define PATTERN_STEPS 100000000.0

static double pattern_worst_case(const char *p, size_t plen, size_t n)
{
    bool anchored = plen > 0 && p[0] == '^';
    int reps = 0;
    for (size_t i = anchored; i < plen; i++) {
        if (p[i] == '%' && i + 1 < plen) {
            if ((p[i + 1] == 'b' && i + 3 < plen) || p[i + 1] == 'f') {
                reps += p[i + 1] == 'b';
                i += p[i + 1] == 'b' ? 3 : 1;
                continue;
            }
            i++;
        } else if (p[i] == '[') {
            size_t j = i + 1 + (i + 1 < plen && p[i + 1] == '^');
            for (j += j < plen && p[j] == ']'; j < plen && p[j] != ']'; j++)
                j += p[j] == '%';
            i = j;
        }
        if (i + 1 < plen && strchr("*+-?", p[i + 1]) != NULL) {
            /* A repetition that ends the pattern never backtracks: once it
             * has expanded, nothing after it can fail. */
            bool last = i + 2 == plen || (i + 3 == plen && p[plen - 1] == '$');
            reps += !last;
            i++;
        }
    }
    double steps = anchored ? 1.0 : (double)n + 1.0;
    for (int k = 0; k < reps && steps <= PATTERN_STEPS; k++)
        steps *= (double)n + 1.0;
    return steps;
}

/* string.find / match / gmatch / gsub, the original as upvalue 1, checked
 * first. */
static int guarded_match(lua_State *L)
{
    size_t n = 0, plen = 0;
    const char *s = lua_tolstring(L, 1, &n);
    const char *p = lua_tolstring(L, 2, &plen);
    /* find(s, p, init, true) is a plain search: no pattern, no backtracking. */
    bool plain = lua_toboolean(L, 4) && lua_tocfunction(L, lua_upvalueindex(2)) != NULL;
    if (s != NULL && p != NULL && !plain) {
        double worst = pattern_worst_case(p, plen, n);
        if (worst > PATTERN_STEPS) {
            char msg[256];
            snprintf(msg, sizeof msg,
                     "pattern '%.60s%s' on a string of %zu bytes could take %.0e steps "
                     "(repetitions backtrack): refused, the limit is %.0e",
                     p, plen > 60 ? "..." : "", n, worst, PATTERN_STEPS);
            return luaL_error(L, "%s", msg);
        }
    }
    lua_pushvalue(L, lua_upvalueindex(1));
    lua_insert(L, 1);
    lua_call(L, lua_gettop(L) - 1, LUA_MULTRET);
    return lua_gettop(L);
}

static void guard_patterns(lua_State *L)
{
    static const char *const names[] = {"find", "match", "gmatch", "gsub"};
    lua_getglobal(L, LUA_STRLIBNAME);
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        lua_getfield(L, -1, names[i]);
        /* Upvalue 2 marks find, whose fourth argument can ask for a plain search. */
        if (i == 0)
            lua_pushcfunction(L, guarded_match);
        else
            lua_pushnil(L);
        lua_pushcclosure(L, guarded_match, 2);
        lua_setfield(L, -2, names[i]);
    }
    lua_pop(L, 1);
}

static bool valid_module_name(const char *name)
{
    if (*name == '\0')
        return false;
    bool need_char = true;
    for (const char *p = name; *p; p++) {
        if (*p == '.') {
            if (need_char)
                return false;
            need_char = true;
        } else if (isalnum((unsigned char)*p) || *p == '_') {
            need_char = false;
        } else {
            return false;
        }
    }
    return !need_char;
}

static int sandbox_require(lua_State *L)
{
    ms_sandbox *sb = sandbox_of(L);
    const char *name = luaL_checkstring(L, 1);
    if (!valid_module_name(name))
        return luaL_error(L, "require: invalid module name '%s'", name);
    if (sb->require_dir == NULL)
        return luaL_error(L, "require: no module directory in this sandbox ('%s')", name);
    lua_getfield(L, LUA_REGISTRYINDEX, REQUIRE_CACHE);
    lua_getfield(L, -1, name);
    if (!lua_isnil(L, -1))
        return 1;
    lua_pop(L, 1);
    luaL_Buffer b;
    luaL_buffinit(L, &b);
    luaL_addstring(&b, sb->require_dir);
    luaL_addchar(&b, '/');
    for (const char *p = name; *p; p++)
        luaL_addchar(&b, *p == '.' ? '/' : *p);
    luaL_addstring(&b, ".lua");
    luaL_pushresult(&b);
    const char *path = lua_tostring(L, -1);
    if (luaL_loadfilex(L, path, "t") != LUA_OK)
        return luaL_error(L, "require '%s': %s", name, lua_tostring(L, -1));
    lua_call(L, 0, 1);
    if (lua_isnil(L, -1)) {
        lua_pop(L, 1);
        lua_pushboolean(L, 1);
    }
    lua_pushvalue(L, -1);
    lua_setfield(L, -4, name); /* cache[name] = result */
    return 1;
}

static void open_safe_libs(lua_State *L)
{
    static const luaL_Reg libs[] = {
        {LUA_GNAME, luaopen_base},       {LUA_STRLIBNAME, luaopen_string},
        {LUA_TABLIBNAME, luaopen_table}, {LUA_MATHLIBNAME, luaopen_math},
        {LUA_UTF8LIBNAME, luaopen_utf8}, {LUA_COLIBNAME, luaopen_coroutine},
    };
    for (size_t i = 0; i < sizeof libs / sizeof libs[0]; i++) {
        luaL_requiref(L, libs[i].name, libs[i].func, 1);
        lua_pop(L, 1);
    }
    /* Nothing may read files or make bytecode behind the sandbox's back. */
    static const char *const removed[] = {"dofile", "loadfile"};
    for (size_t i = 0; i < sizeof removed / sizeof removed[0]; i++) {
        lua_pushnil(L);
        lua_setglobal(L, removed[i]);
    }
    lua_getglobal(L, LUA_STRLIBNAME);
    lua_pushnil(L);
    lua_setfield(L, -2, "dump");
    lua_pop(L, 1);
    guard_patterns(L);
    /* The raw load lives only in the registry, out of scripts' reach. */
    lua_getglobal(L, "load");
    lua_setfield(L, LUA_REGISTRYINDEX, "memsim.raw_load");
    lua_pushcfunction(L, sandbox_load);
    lua_setglobal(L, "load");
    lua_getglobal(L, "setmetatable");
    lua_setfield(L, LUA_REGISTRYINDEX, "memsim.raw_setmetatable");
    lua_pushcfunction(L, sandbox_setmetatable);
    lua_setglobal(L, "setmetatable");
    lua_pushcfunction(L, sandbox_print);
    lua_setglobal(L, "print");
    lua_pushcfunction(L, sandbox_require);
    lua_setglobal(L, "require");
    lua_newtable(L);
    lua_setfield(L, LUA_REGISTRYINDEX, REQUIRE_CACHE);
}

/* Lua seeds math.random from the clock and addresses at every start: a
 * script drawing from it would give another report each run.  Same inputs,
 * same results: a fixed seed (a script may still choose its own with
 * math.randomseed). */
static bool seed_random(lua_State *L)
{
    lua_getglobal(L, LUA_MATHLIBNAME);
    lua_getfield(L, -1, "randomseed");
    lua_pushinteger(L, 0);
    bool ok = lua_pcall(L, 1, 0, 0) == LUA_OK;
    lua_settop(L, 0);
    return ok;
}

ms_status base_sandbox_create(const ms_sandbox_limits *lim, ms_sandbox **out)
{
    if (out == NULL)
        return MS_EINVAL;
    *out = NULL;
    ms_sandbox *sb = calloc(1, sizeof *sb);
    if (sb == NULL)
        return MS_ENOMEM;
    sb->max_instructions = lim && lim->max_instructions ? lim->max_instructions
                                                        : DEFAULT_INSTRUCTIONS;
    sb->max_memory = lim && lim->max_memory ? lim->max_memory : DEFAULT_MEMORY;
    sb->L = lua_newstate(sandbox_alloc, sb);
    if (sb->L == NULL) {
        free(sb);
        return MS_ENOMEM;
    }
    open_safe_libs(sb->L);
    if (!seed_random(sb->L)) {
        lua_close(sb->L);
        free(sb);
        return MS_ENOMEM;
    }
    lua_sethook(sb->L, budget_hook, LUA_MASKCOUNT, HOOK_EVERY);
    *out = sb;
    return MS_OK;
}

ms_status base_sandbox_destroy(ms_sandbox *sb)
{
    if (sb == NULL)
        return MS_EINVAL;
    lua_close(sb->L);
    free(sb->require_dir);
    free(sb);
    return MS_OK;
}

ms_status base_sandbox_state(ms_sandbox *sb, lua_State **L)
{
    if (sb == NULL || L == NULL)
        return MS_EINVAL;
    *L = sb->L;
    return MS_OK;
}

ms_status base_sandbox_set_require_dir(ms_sandbox *sb, const char *dir)
{
    if (sb == NULL || dir == NULL)
        return MS_EINVAL;
    char *copy = strdup(dir);
    if (copy == NULL)
        return MS_ENOMEM;
    free(sb->require_dir);
    sb->require_dir = copy;
    return MS_OK;
}

static ms_status error_status(ms_sandbox *sb, int rc, ms_diag *d)
{
    lua_State *L = sb->L;
    const char *msg = lua_type(L, -1) == LUA_TSTRING ? lua_tostring(L, -1) : NULL;
    ms_status st;
    if (sb->limit_hit && rc == LUA_ERRMEM)
        st = ms_diag_set(d, MS_ELIMIT, "%s: memory cap of %zu MiB exceeded", sb->where,
                         sb->max_memory >> 20);
    else if (sb->limit_hit)
        st = ms_diag_set(d, MS_ELIMIT, "%s", msg ? msg : "script limit exceeded");
    else if (rc == LUA_ERRSYNTAX)
        st = ms_diag_set(d, MS_EPARSE, "%s", msg ? msg : "syntax error");
    else if (rc == LUA_ERRFILE)
        st = ms_diag_set(d, MS_ENOENT, "%s", msg ? msg : "cannot open file");
    else if (rc == LUA_ERRMEM)
        st = ms_diag_set(d, MS_ENOMEM, "out of memory in script");
    else if (msg != NULL)
        st = ms_diag_set(d, MS_ESCRIPT, "%s", msg);
    else
        st = ms_diag_set(d, MS_ESCRIPT, "%s: script raised a %s value as its error", sb->where,
                         luaL_typename(L, -1));
    lua_pop(L, 1);
    if (sb->depth == 0)
        sb->limit_hit = false;
    return st;
}

static void start_budget(ms_sandbox *sb)
{
    sb->used_instructions = 0;
    sb->limit_hit = false;
    snprintf(sb->where, sizeof sb->where, "?");
}

/* A call under the outermost call's budget (see base_sandbox_pcall). */
static ms_status run_protected(ms_sandbox *sb, int nargs, int nresults, ms_diag *d)
{
    sb->depth++;
    int rc = lua_pcall(sb->L, nargs, nresults, 0);
    sb->depth--;
    if (rc != LUA_OK)
        return error_status(sb, rc, d);
    return MS_OK;
}

ms_status base_sandbox_pcall(ms_sandbox *sb, int nargs, int nresults, ms_diag *d)
{
    if (sb == NULL || nargs < 0 || lua_gettop(sb->L) < nargs + 1)
        return MS_EINVAL;
    /* A hook that calls back into C which calls Lua again (ctx:simulate ->
     * pool()) must not get a fresh budget, or a loop of such calls would
     * never be stopped. */
    if (sb->depth == 0)
        start_budget(sb);
    return run_protected(sb, nargs, nresults, d);
}

ms_status base_sandbox_dostring(ms_sandbox *sb, const char *name, const char *text, size_t len,
                                int nresults, ms_diag *d)
{
    if (sb == NULL || name == NULL || text == NULL)
        return MS_EINVAL;
    if (sb->depth == 0) {
        start_budget(sb);
        snprintf(sb->where, sizeof sb->where, "%s", name);
    }
    char chunk[4200];
    snprintf(chunk, sizeof chunk, "@%s", name); /* messages say "name:line:" */
    int rc = luaL_loadbufferx(sb->L, text, len, chunk, "t");
    if (rc != LUA_OK)
        return error_status(sb, rc, d);
    return run_protected(sb, 0, nresults, d);
}

ms_status base_sandbox_dofile(ms_sandbox *sb, const char *path, int nresults, ms_diag *d)
{
    if (sb == NULL || path == NULL)
        return MS_EINVAL;
    if (sb->depth == 0) {
        /* Until the hook first runs, a limit hit is placed in the file. */
        start_budget(sb);
        snprintf(sb->where, sizeof sb->where, "%s", path);
    }
    int rc = luaL_loadfilex(sb->L, path, "t");
    if (rc != LUA_OK)
        return error_status(sb, rc, d);
    return run_protected(sb, 0, nresults, d);
}
