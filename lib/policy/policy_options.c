/* A policy's options beside its hooks: the allocator it brings and whether
 * it rescues an out-of-memory inside a step (docs/policy-api.md, "The policy
 * file").  Read once at load, inside the load's protected call. */
#include "policy_host.h"

#include <string.h>

#include <lauxlib.h>

#include "memsim/allocator.h"

static int option_error(lua_State *L, const ms_policy *p, const char *msg)
{
    return luaL_error(L, "policy '%s': %s", p->path, msg);
}

static void read_flavour(lua_State *L, ms_policy *p, int tbl)
{
    int type = lua_getfield(L, tbl, "flavour");
    if (type != LUA_TNIL) {
        ms_alloc_flavour f;
        if (type != LUA_TSTRING || ms_alloc_flavour_parse(lua_tostring(L, -1), &f) != MS_OK)
            option_error(L, p,
                         "allocator.flavour must be \"cuda\", \"npu\", \"mindspeed\" or "
                         "\"mindspore\"");
        snprintf(p->allocator.flavour, sizeof p->allocator.flavour, "%s", ms_alloc_flavour_name(f));
    }
    lua_pop(L, 1);
}

static void read_fraction(lua_State *L, ms_policy *p, int tbl)
{
    int type = lua_getfield(L, tbl, "memory_fraction");
    if (type != LUA_TNIL) {
        double v = lua_tonumber(L, -1);
        if (type != LUA_TNUMBER || !(v > 0.0 && v <= 1.0))
            option_error(L, p,
                         "allocator.memory_fraction must be a number in (0, 1] "
                         "(torch_npu.npu.set_per_process_memory_fraction)");
        p->allocator.memory_fraction = v;
    }
    lua_pop(L, 1);
}

static void check_allocator_keys(lua_State *L, ms_policy *p, int tbl)
{
    lua_pushnil(L);
    while (lua_next(L, tbl) != 0) {
        lua_pop(L, 1);
        const char *k = lua_type(L, -1) == LUA_TSTRING ? lua_tostring(L, -1) : NULL;
        if (k == NULL || (strcmp(k, "flavour") != 0 && strcmp(k, "memory_fraction") != 0)) {
            lua_pop(L, 1);
            option_error(L, p, "allocator: unknown field (expected flavour, memory_fraction)");
        }
    }
}

static void read_allocator(lua_State *L, ms_policy *p, int module)
{
    int type = lua_getfield(L, module, "allocator");
    if (type == LUA_TNIL) {
        lua_pop(L, 1);
        return;
    }
    if (type != LUA_TTABLE)
        option_error(L, p, "'allocator' must be a table { flavour = ..., memory_fraction = ... }");
    int tbl = lua_gettop(L);
    check_allocator_keys(L, p, tbl);
    read_flavour(L, p, tbl);
    read_fraction(L, p, tbl);
    lua_pop(L, 1);
}

void pol_read_options(lua_State *L, ms_policy *p, int module)
{
    read_allocator(L, p, module);
    int type = lua_getfield(L, module, "oom_rescue");
    if (type != LUA_TNIL && type != LUA_TBOOLEAN)
        option_error(L, p, "'oom_rescue' must be a boolean");
    p->oom_rescue = lua_toboolean(L, -1);
    lua_pop(L, 1);
}

const ms_policy_allocator *ms_policy_allocator_get(const ms_policy *p)
{
    return p != NULL ? &p->allocator : NULL;
}

bool ms_policy_rescues_oom(const ms_policy *p)
{
    return p != NULL && p->oom_rescue;
}
