/* Reading an untrusted Lua table against a schema (private to the scenario
 * and device file loaders).
 *
 * A schema is a flat list of leaf fields, each in a section ("" for the top
 * level, "model", "peak_tflops", ...).  The reader walks the table: every key
 * must be a field or a section of the schema (else "unknown key 'a.b'"),
 * every value must have its field's type (else "field 'a.b' must be ...").
 * It uses raw access only, so metatables in a script cannot run code under
 * the reader, and it must run inside a protected call (base_sandbox_pcall): a
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
    ST_CURVE,   /* { {x, y}, ... }: 1..MS_CURVE_MAX points */
    ST_TREE,    /* any value, nested tables too: read into an st_tree for a
                   dedicated reader (recompute_config, swap_config) */
    ST_SIZE     /* a byte count: an integer, or a string with a unit ("512MiB",
                   "2GB") or "unlimited" (0); read into st_value.i */
} st_type;

/* A Lua value copied out of the sandbox.  A table becomes a list (keys
 * exactly 1..n) or a dict (string keys only, sorted bytewise so nothing
 * depends on Lua's table order); anything else in a table is an error. */
typedef enum st_tree_type {
    STT_BOOL = 0, STT_INT, STT_NUM, STT_STR, STT_LIST, STT_DICT
} st_tree_type;

typedef struct st_tree {
    st_tree_type type;
    bool b;
    int64_t i;
    double n;
    char *s;                /* STT_STR */
    uint32_t n_items;       /* STT_LIST, STT_DICT */
    struct st_tree *items;
    char **keys;            /* STT_DICT: keys[k] names items[k] */
} st_tree;

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
    st_tree *tree; /* ST_TREE; freed by scn_table_values_release */
} st_value;

typedef struct st_schema {
    const st_field *fields;
    int n;
} st_schema;

/* Read the table at stack index idx into vals[schema->n].  Errors name
 * `file` and the full key path. */
ms_status scn_table_read(lua_State *L, int idx, const st_schema *schema, st_value *vals,
                         const char *file, ms_diag *d);

/* The field "section.key" (or "key" at the top level) named by path, -1 if
 * none; a path naming a whole section is not a field. */
int scn_table_find(const st_schema *schema, const char *path);
/* The path of field i as users write it: "model.seq_length", "steps". */
void scn_table_path(const st_schema *schema, int i, char *buf, size_t size);
const char *scn_table_type_name(st_type t);

/* A byte count as ST_SIZE spells it: digits with an optional fraction and
 * unit (B, kB/KB, MB, GB, TB: powers of 1000; KiB, MiB, GiB, TiB: of 1024;
 * case-insensitive), or "unlimited" (0).  false when text is none of these
 * or the count is over 2^62. */
bool scn_parse_size(const char *text, int64_t *bytes);

/* Free the trees of vals[0..n) (the array itself stays). */
void scn_table_values_release(st_value *vals, int n);
/* Free what t holds (not t itself). */
void scn_table_tree_release(st_tree *t);
/* "a boolean", "the string \"x\"", "a list", ... for error messages. */
const char *scn_table_tree_describe(const st_tree *t, char *buf, size_t size);

#endif
