/* memsim: a Lua state for untrusted scripts (scenario files, policies).
 *
 * Scenario files and policies are downloaded and shared, so they run with
 * only the pure libraries (base without file loading, string without dump,
 * table, math, utf8, coroutine), text chunks only (no bytecode), no
 * finalizers (setmetatable refuses a __gc: Lua runs them with hooks off, out of
 * the budget's reach), a require
 * confined to one directory, an instruction budget per call and a heap cap.
 * Every failure comes back as an ms_status with "file:line: message". */
#ifndef MEMSIM_LUA_SANDBOX_H
#define MEMSIM_LUA_SANDBOX_H

#include <stddef.h>
#include <stdint.h>

#include <lua.h>

#include "memsim/status.h"

typedef struct ms_sandbox ms_sandbox;

typedef struct ms_sandbox_limits {
    uint64_t max_instructions; /* per dofile/pcall; 0: 200 million */
    size_t max_memory;         /* Lua heap bytes; 0: 256 MiB */
} ms_sandbox_limits;

ms_status base_sandbox_create(const ms_sandbox_limits *lim, ms_sandbox **out);
ms_status base_sandbox_destroy(ms_sandbox *sb);
ms_status base_sandbox_state(ms_sandbox *sb, lua_State **L);
/* require(name) loads only dir/name.lua, name = [A-Za-z0-9_]+ joined by '.'
 * (a dot becomes '/'); text only; results cached per sandbox. */
ms_status base_sandbox_set_require_dir(ms_sandbox *sb, const char *dir);
/* Load and run a text chunk, leaving nresults values on the stack.
 * MS_ENOENT (cannot open), MS_EPARSE (syntax), MS_ESCRIPT (runtime error),
 * MS_ELIMIT (instruction budget or heap cap). */
ms_status base_sandbox_dofile(ms_sandbox *sb, const char *path, int nresults, ms_diag *d);
/* The same for a text chunk held in memory; errors name it `name`. */
ms_status base_sandbox_dostring(ms_sandbox *sb, const char *name, const char *text, size_t len,
                                int nresults, ms_diag *d);
/* Call the function below nargs arguments on the stack, under a fresh
 * instruction budget; on error nothing is left on the stack. */
ms_status base_sandbox_pcall(ms_sandbox *sb, int nargs, int nresults, ms_diag *d);

#endif
