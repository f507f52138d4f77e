/* The sandbox for untrusted scenario and policy scripts. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <lua.h>

#include "lib/base/sandbox.h"

static char dir[] = "/tmp/memsim-sandbox-XXXXXX";

static const char *write_script(const char *name, const char *text)
{
    static char path[512];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "w");
    ck_assert_ptr_nonnull(f);
    fputs(text, f);
    fclose(f);
    return path;
}

static ms_status run(const char *text, ms_diag *d, const ms_sandbox_limits *lim)
{
    ms_sandbox *sb = NULL;
    ck_assert_int_eq(base_sandbox_create(lim, &sb), MS_OK);
    ck_assert_int_eq(base_sandbox_set_require_dir(sb, dir), MS_OK);
    const char *path = write_script("script.lua", text);
    ms_status st = base_sandbox_dofile(sb, path, 1, d);
    base_sandbox_destroy(sb);
    return st;
}

START_TEST(returns_value)
{
    ms_sandbox *sb = NULL;
    ck_assert_int_eq(base_sandbox_create(NULL, &sb), MS_OK);
    const char *path = write_script("ok.lua", "return { a = 2 ^ 10, s = string.rep('x', 3) }");
    ms_diag d = {0};
    ck_assert_int_eq(base_sandbox_dofile(sb, path, 1, &d), MS_OK);
    lua_State *L;
    base_sandbox_state(sb, &L);
    lua_getfield(L, -1, "a");
    ck_assert_int_eq((int)lua_tonumber(L, -1), 1024);
    lua_getfield(L, -2, "s");
    ck_assert_str_eq(lua_tostring(L, -1), "xxx");
    base_sandbox_destroy(sb);
}
END_TEST

START_TEST(runtime_error_has_position)
{
    ms_diag d = {0};
    ck_assert_int_eq(run("local x = 1\nerror('boom')\n", &d, NULL), MS_ESCRIPT);
    ck_assert_ptr_nonnull(strstr(d.msg, "script.lua:2: boom"));
}
END_TEST

START_TEST(syntax_error_has_position)
{
    ms_diag d = {0};
    ck_assert_int_eq(run("return {\n a = ,\n}\n", &d, NULL), MS_EPARSE);
    ck_assert_ptr_nonnull(strstr(d.msg, "script.lua:2:"));
}
END_TEST

START_TEST(missing_file)
{
    ms_sandbox *sb = NULL;
    ck_assert_int_eq(base_sandbox_create(NULL, &sb), MS_OK);
    ms_diag d = {0};
    ck_assert_int_eq(base_sandbox_dofile(sb, "/nonexistent/x.lua", 1, &d), MS_ENOENT);
    ck_assert_ptr_nonnull(strstr(d.msg, "/nonexistent/x.lua"));
    base_sandbox_destroy(sb);
}
END_TEST

START_TEST(no_escape_hatches)
{
    static const char *const escapes[] = {
        "return os.execute('true')",
        "return io.open('/etc/passwd')",
        "return dofile('/etc/passwd')",
        "return loadfile('/etc/passwd')",
        "return require('os')",
        "return require('../../etc/passwd')",
        "return string.dump(function() end)",
        "return debug.getinfo(1)",
        "return package.loaded",
        /* Lua 5.4 bytecode header: ESC 'Lua' 0x54 */
        "local f, e = load('\\27Lua\\x54\\0'); if not f then error(e) end return f",
    };
    for (size_t i = 0; i < sizeof escapes / sizeof escapes[0]; i++) {
        ms_diag d = {0};
        ms_status st = run(escapes[i], &d, NULL);
        ck_assert_msg(st == MS_ESCRIPT, "escape %zu: status %d (%s)", i, st, d.msg);
        ck_assert_ptr_nonnull(strstr(d.msg, "script.lua:1:"));
    }
}
END_TEST

START_TEST(instruction_budget)
{
    ms_sandbox_limits lim = {.max_instructions = 100000};
    ms_diag d = {0};
    ck_assert_int_eq(run("local i = 0\nwhile true do\n i = i + 1\nend\n", &d, &lim), MS_ELIMIT);
    ck_assert_ptr_nonnull(strstr(d.msg, "instruction budget of 100000 exceeded"));
    ck_assert_ptr_nonnull(strstr(d.msg, "script.lua:"));
}
END_TEST

START_TEST(memory_cap)
{
    ms_sandbox_limits lim = {.max_memory = 4u << 20};
    ms_diag d = {0};
    ck_assert_int_eq(run("local t = {}\nfor i = 1, 1e9 do t[i] = string.rep('y', 1000) .. i end\n",
                         &d, &lim),
                     MS_ELIMIT);
    ck_assert_ptr_nonnull(strstr(d.msg, "memory cap of 4 MiB exceeded"));
    ck_assert_int_eq(run("return string.rep('x', 1 << 30)", &d, &lim), MS_ELIMIT);
}
END_TEST

/* Lua runs finalizers with hooks off, so a __gc that never returns would
 * hang memsim at the next collection or at lua_close: refused. */
START_TEST(finalizers_refused)
{
    ms_diag d = {0};
    ck_assert_int_eq(run("setmetatable({}, {__gc = function() while true do end end})\n"
                         "collectgarbage()\nreturn 1",
                         &d, NULL),
                     MS_ESCRIPT);
    ck_assert_ptr_nonnull(strstr(d.msg, "script.lua:1:"));
    ck_assert_ptr_nonnull(strstr(d.msg, "__gc"));
    /* A __gc added after setmetatable never marks the object: no hang. */
    ck_assert_int_eq(run("local mt = {}\nlocal t = setmetatable({}, mt)\n"
                         "mt.__gc = function() while true do end end\nt = nil\n"
                         "collectgarbage()\nreturn 1",
                         &d, NULL),
                     MS_OK);
    /* Ordinary metatables still work. */
    ck_assert_int_eq(run("local t = setmetatable({}, {__index = function() return 7 end})\n"
                         "assert(t.x == 7)\nreturn getmetatable(t) ~= nil",
                         &d, NULL),
                     MS_OK);
}
END_TEST

/* math.random draws the same numbers in every state (Lua would seed it from
 * the clock and addresses). */
START_TEST(random_is_seeded)
{
    double first = 0;
    for (int i = 0; i < 3; i++) {
        ms_sandbox *sb = NULL;
        ck_assert_int_eq(base_sandbox_create(NULL, &sb), MS_OK);
        const char *path = write_script("rand.lua", "return math.random()");
        ms_diag d = {0};
        ck_assert_int_eq(base_sandbox_dofile(sb, path, 1, &d), MS_OK);
        lua_State *L;
        base_sandbox_state(sb, &L);
        double v = lua_tonumber(L, -1);
        if (i == 0)
            first = v;
        ck_assert(v == first);
        base_sandbox_destroy(sb);
    }
}
END_TEST

/* Pattern matching runs in C, out of the hook's reach: a match that could
 * backtrack for ages is refused before it starts; ordinary ones run. */
START_TEST(pattern_bombs_refused)
{
    ms_diag d = {0};
    ck_assert_int_eq(run("local s = string.rep('a', 200000)\n"
                         "return s:find(string.rep('a-', 40) .. 'b')",
                         &d, NULL),
                     MS_ESCRIPT);
    ck_assert_ptr_nonnull(strstr(d.msg, "script.lua:2:"));
    ck_assert_ptr_nonnull(strstr(d.msg, "could take"));
    ck_assert_int_eq(run("return string.gsub(string.rep('a', 100000), 'a-b', '')", &d, NULL),
                     MS_ESCRIPT);
    /* Plain searches, anchored matches, trailing repetitions, short names. */
    ck_assert_int_eq(run("local s = string.rep('a', 1000000) .. 'b'\n"
                         "assert(s:find('ab', 1, true))\n"
                         "assert(select(2, s:gsub('%s+', '')) == 0)\n"
                         "assert(s:match('^a+b$'))\n"
                         "assert(('layers.12.mlp.fc1'):match('^layers%.(%d+)%.(%w+)%.') == '12')\n"
                         "for w in s:sub(1, 100):gmatch('a+') do end\n"
                         "return 1",
                         &d, NULL),
                     MS_OK);
}
END_TEST

START_TEST(require_confined)
{
    write_script("helper.lua", "return { twice = function(x) return 2 * x end }");
    ms_diag d = {0};
    ms_sandbox *sb = NULL;
    ck_assert_int_eq(base_sandbox_create(NULL, &sb), MS_OK);
    ck_assert_int_eq(base_sandbox_set_require_dir(sb, dir), MS_OK);
    const char *path = write_script("main.lua", "return require('helper').twice(21)");
    ck_assert_int_eq(base_sandbox_dofile(sb, path, 1, &d), MS_OK);
    lua_State *L;
    base_sandbox_state(sb, &L);
    ck_assert_int_eq((int)lua_tointeger(L, -1), 42);
    base_sandbox_destroy(sb);
    ck_assert_int_eq(run("return require('nothere')", &d, NULL), MS_ESCRIPT);
    ck_assert_ptr_nonnull(strstr(d.msg, "nothere"));
}
END_TEST

static Suite *sandbox_suite(void)
{
    Suite *s = suite_create("sandbox");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, returns_value);
    tcase_add_test(tc, runtime_error_has_position);
    tcase_add_test(tc, syntax_error_has_position);
    tcase_add_test(tc, missing_file);
    tcase_add_test(tc, no_escape_hatches);
    tcase_add_test(tc, instruction_budget);
    tcase_add_test(tc, memory_cap);
    tcase_add_test(tc, require_confined);
    tcase_add_test(tc, finalizers_refused);
    tcase_add_test(tc, random_is_seeded);
    tcase_add_test(tc, pattern_bombs_refused);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    if (mkdtemp(dir) == NULL)
        return 1;
    SRunner *sr = srunner_create(sandbox_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    if (system(cmd) != 0)
        return 1;
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
