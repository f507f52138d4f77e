/* Overrides ("model.seq_length=8192", "parallel.sequence_parallel=false",
 * "allocator.conf=expandable_segments:True") written into the scenario's
 * table before it is read, so they go through exactly the checks a value in
 * the file does.  The value is converted by the type of the field it names. */
#include "scenario_load.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static ms_status push_value(lua_State *L, const st_field *f, const char *ov, const char *v,
                            ms_diag *d)
{
    char *end = NULL;
    errno = 0;
    switch (f->type) {
    case ST_INT: {
        long long x = strtoll(v, &end, 10);
        if (*v == '\0' || *end != '\0' || errno != 0)
            break;
        lua_pushinteger(L, (lua_Integer)x);
        return MS_OK;
    }
    case ST_NUM: {
        double x = strtod(v, &end);
        if (*v == '\0' || *end != '\0' || errno != 0 || !isfinite(x))
            break;
        lua_pushnumber(L, x);
        return MS_OK;
    }
    case ST_BOOL:
        if (strcmp(v, "true") != 0 && strcmp(v, "false") != 0)
            break;
        lua_pushboolean(L, strcmp(v, "true") == 0);
        return MS_OK;
    case ST_STR:
        lua_pushstring(L, v);
        return MS_OK;
    case ST_SIZE: {
        /* Digits are bytes, as a number in the file; "512MiB" stays a
         * string for the reader to parse. */
        long long x = strtoll(v, &end, 10);
        if (*v != '\0' && *end == '\0' && errno == 0)
            lua_pushinteger(L, (lua_Integer)x);
        else
            lua_pushstring(L, v);
        return MS_OK;
    }
    case ST_CURVE:
        return ms_diag_set(d, MS_EINVAL, "override '%s': a list of points cannot be given on "
                           "the command line", ov);
    case ST_TREE: {
        /* recompute_config.recompute=false: the scalar forms only. */
        long long x = strtoll(v, &end, 10);
        if (strcmp(v, "true") == 0 || strcmp(v, "false") == 0)
            lua_pushboolean(L, strcmp(v, "true") == 0);
        else if (*v != '\0' && *end == '\0' && errno == 0)
            lua_pushinteger(L, (lua_Integer)x);
        else
            return ms_diag_set(d, MS_EINVAL, "override '%s': the value must be true, false or an "
                               "integer (lists and tables go in the scenario file)", ov);
        return MS_OK;
    }
    }
    return ms_diag_set(d, MS_EINVAL, "override '%s': the value must be %s", ov,
                       scn_table_type_name(f->type));
}

/* Push the table the field lives in, creating its section if absent. */
static ms_status push_target(lua_State *L, int top, const st_field *f, const char *ov,
                             const char *file, ms_diag *d)
{
    if (f->section[0] == '\0') {
        lua_pushvalue(L, top);
        return MS_OK;
    }
    lua_pushstring(L, f->section);
    int t = lua_rawget(L, top);
    if (t == LUA_TTABLE)
        return MS_OK;
    if (t != LUA_TNIL) {
        lua_pop(L, 1);
        return ms_diag_set(d, MS_EINVAL, "override '%s': '%s' in %s is not a table", ov,
                           f->section, file);
    }
    lua_pop(L, 1);
    lua_newtable(L);
    lua_pushstring(L, f->section);
    lua_pushvalue(L, -2);
    lua_rawset(L, top);
    return MS_OK;
}

static ms_status apply_one(lua_State *L, int top, const char *ov, const st_schema *schema,
                           const char *file, ms_diag *d)
{
    const char *eq = strchr(ov, '=');
    char key[128];
    if (eq == NULL || eq == ov || (size_t)(eq - ov) >= sizeof key)
        return ms_diag_set(d, MS_EINVAL, "override '%s': expected KEY=VALUE, e.g. "
                           "model.seq_length=8192", ov);
    memcpy(key, ov, (size_t)(eq - ov));
    key[eq - ov] = '\0';
    int i = scn_table_find(schema, key);
    if (i < 0)
        return ms_diag_set(d, MS_EINVAL, "override '%s': unknown key '%s'", ov, key);
    const st_field *f = &schema->fields[i];
    ms_status st = push_target(L, top, f, ov, file, d);
    if (st != MS_OK)
        return st;
    lua_pushstring(L, f->key);
    st = push_value(L, f, ov, eq + 1, d);
    if (st != MS_OK) {
        lua_pop(L, 2);
        return st;
    }
    lua_rawset(L, -3);
    lua_pop(L, 1);
    return MS_OK;
}

ms_status scn_apply_overrides(lua_State *L, int idx, const char *const *overrides, size_t n,
                              const st_schema *schema, const char *file, ms_diag *d)
{
    int top = lua_absindex(L, idx);
    for (size_t i = 0; i < n; i++) {
        if (overrides[i] == NULL)
            return ms_diag_set(d, MS_EINVAL, "override %zu is NULL", i + 1);
        ms_status st = apply_one(L, top, overrides[i], schema, file, d);
        if (st != MS_OK)
            return st;
    }
    return MS_OK;
}
