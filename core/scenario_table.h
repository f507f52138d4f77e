/* Reading an untrusted Lua table against a schema (private to the scenario
 * and device file loaders).
 *
 * A schema is a flat list of leaf fields, each in a section ("" for the top
 * level, "model", "peak_tflops", ...).  The reader walks the table: every key
 * must be a field or a section of the schema (else "unknown key 'a.b'"),
 * every value must have its field's type (else "field 'a.b' must be ...").
 * It uses raw access only, so metatables in a script cannot run code under
 * the reader, and it must run inside a protected call (ms_sandbox_pcall): a
 * memory error raised by the Lua API then unwinds to that call. */
#ifndef MEMSIM_SCENARIO_TABLE_H
#define MEMSIM_SCENARIO_TABLE_H

#include <stdbool.h>
#include <stdint.h>

#include <lua.h>

#include "memsim/device.h"
#include "memsim/status.h"

#define ST_STR_MAX 512

typedef enum st_type {
    ST_INT = 0, /* an integer (3 or 3.0) */
    ST_NUM,     /* a finite number */
    ST_BOOL,
    ST_STR,
    ST_CURVE    /* { {x, y}, ... }: 1..MS_CURVE_MAX points */
} st_type;

typedef struct st_field {
    const char *section; /* "" for the top level */
    const char *key;
    st_type type;
} st_field;

typedef struct st_value {
    bool set;
    int64_t i;
    double n;
    bool b;
    char s[ST_STR_MAX];
    ms_curve c;
} st_value;

typedef struct st_schema {
    const st_field *fields;
    int n;
} st_schema;

/* Read the table at stack index idx into vals[schema->n].  Errors name
 * `file` and the full key path. */
ms_status st_read(lua_State *L, int idx, const st_schema *schema, st_value *vals,
                  const char *file, ms_diag *d);

/* The field "section.key" (or "key" at the top level) named by path, -1 if
 * none; a path naming a whole section is not a field. */
int st_find(const st_schema *schema, const char *path);
/* The path of field i as users write it: "model.seq_length", "steps". */
void st_path(const st_schema *schema, int i, char *buf, size_t size);
const char *st_type_name(st_type t);

#endif
