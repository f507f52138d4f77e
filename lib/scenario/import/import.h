/* Importing what a team already runs (private to lib/scenario/): a
 * Megatron-LM or MindSpeed-LLM training script, a MindFormers or NeMo YAML,
 * a Hugging Face config.json, each into a scenario whose every field cites
 * the argument or key it came from (docs/scenario-format.md, "Importing").
 *
 * import.c reads the file and picks the reader by format (a table of
 * readers); each reader fills an imp_doc (import_doc.c), the scenario being
 * written with the citation of each field and what could not be expressed;
 * import_shell.c evaluates a script far enough to know its training
 * command's arguments; import_tree.c reads YAML and JSON through libyaml
 * into a tree that keeps each value's line. */
#ifndef MEMSIM_SCENARIO_IMPORT_H
#define MEMSIM_SCENARIO_IMPORT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "memsim/scenario.h"

/* ---- import_doc.c: the cited scenario -------------------------------- */

typedef struct imp_doc imp_doc;

typedef enum imp_note_kind {
    IMP_NO_EFFECT = 0, /* has no effect on memory or step time in memsim's model */
    IMP_NOT_MODELLED,  /* would change memory or time; memsim cannot say it */
    IMP_COUNT_KINDS
} imp_note_kind;

imp_doc *imp_doc_new(void);
void imp_doc_free(imp_doc *doc);
/* A field ("model.num_layers", "name") set to the Lua expression lua, with
 * the citation of where it came from; a later set replaces an earlier one
 * (argparse keeps the last of a repeated argument).  Failures are kept in
 * the doc (imp_doc_status) so a reader can set many fields and check once. */
void imp_set(imp_doc *doc, const char *path, const char *lua, const char *cite);
void imp_set_int(imp_doc *doc, const char *path, int64_t v, const char *cite);
void imp_set_bool(imp_doc *doc, const char *path, bool v, const char *cite);
void imp_set_num(imp_doc *doc, const char *path, double v, const char *cite);
void imp_set_str(imp_doc *doc, const char *path, const char *v, const char *cite);
/* The Lua text of a field, NULL when unset. */
const char *imp_get(const imp_doc *doc, const char *path);
bool imp_get_int(const imp_doc *doc, const char *path, int64_t *v);
bool imp_get_bool(const imp_doc *doc, const char *path, bool *v);
/* Whether path is a field of a scenario. */
bool imp_is_field(const char *path);
/* The citation of a field, NULL when unset. */
const char *imp_cite_of(const imp_doc *doc, const char *path);
/* A line of what was not expressed, and a header line above the table. */
void imp_note(imp_doc *doc, imp_note_kind kind, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
void imp_header(imp_doc *doc, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* MS_OK, or the first failure (out of memory, a path not in the schema). */
ms_status imp_doc_status(const imp_doc *doc, ms_diag *d);
/* The scenario file's text (malloc'd), fields in the schema's order. */
ms_status imp_render(const imp_doc *doc, char **text, ms_diag *d);
/* The notes of one kind, one per line, each prefixed (malloc'd; "" if none). */
ms_status imp_render_notes(const imp_doc *doc, imp_note_kind kind, const char *prefix, char **text,
                           ms_diag *d);
size_t imp_note_count(const imp_doc *doc, imp_note_kind kind);

/* Whether s is one of the NULL-terminated list. */
bool imp_listed(const char *const *list, const char *s);

/* A citation: "what (file:line)" written into buf. */
const char *imp_cite(char *buf, size_t size, const char *file, int line, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));

/* ---- what every reader gets ---------------------------------------------- */

typedef struct imp_source {
    const char *path; /* as given */
    const char *base; /* the file's name without folders */
    const char *text; /* its bytes, NUL-terminated */
    size_t len;
    const ms_import_options *opt;
    char *kind; /* what the file was read as ("a NeMo training configuration") */
    size_t kind_size;
} imp_source;

/* ---- import_megatron.c: Megatron-LM's arguments ------------------------- */

typedef struct imp_megatron imp_megatron;

/* The framework a set of arguments comes from, for the defaults it implies
 * (the device, MindSpeed's allocator). */
typedef enum imp_flavour { IMP_MEGATRON = 0, IMP_MINDSPEED, IMP_NEMO } imp_flavour;

imp_megatron *imp_megatron_new(imp_doc *doc, imp_flavour flavour);
void imp_megatron_free(imp_megatron *mg);
/* One argument: name as Megatron's dest ("num_layers", from --num-layers),
 * value NULL for a flag given alone (or "true"/"false" from a YAML), the
 * citation of where it was given. */
void imp_megatron_arg(imp_megatron *mg, const char *name, const char *value, const char *cite);
/* A launcher's count (torchrun --nproc_per_node x --nnodes; NeMo's
 * trainer.devices x num_nodes): the world size. */
void imp_megatron_world(imp_megatron *mg, int64_t devices, const char *cite);
/* Everything derived once all arguments are in: Megatron's defaults for
 * what was not given, the padded vocabulary's tokenizer, the device. */
void imp_megatron_finish(imp_megatron *mg);
/* MS_OK, or the first argument memsim could not read, named with its file
 * and line. */
ms_status imp_megatron_status(const imp_megatron *mg, ms_diag *d);

/* ---- import_shell.c: the training command of a script ------------------- */

/* One word of the command, after the script's expansions and splitting. */
typedef struct imp_word {
    char *text;
    int line;     /* where its first character was written */
    bool unknown; /* holds a $(...) or `...` memsim did not run */
} imp_word;

/* The environment variables a scenario has a field for, as the script had
 * set them when its training command ran. */
enum { IMP_ENV_CUDA_ALLOC = 0, IMP_ENV_NPU_ALLOC, IMP_ENV_AVOID_RS, IMP_ENV_COUNT };
extern const char *const imp_env_names[IMP_ENV_COUNT];

typedef struct imp_command {
    imp_word *words;
    size_t n;
    int line;                    /* the line the command starts on */
    imp_word env[IMP_ENV_COUNT]; /* text NULL: not set */
} imp_command;

/* Evaluate the script src far enough to find its training command: the
 * first command that runs a Python file (torchrun, python, deepspeed ...)
 * or is a bare list of --arguments.  What the script does that memsim does
 * not follow (loops, command substitutions, conditions it cannot decide)
 * becomes a note in doc. */
ms_status imp_shell_command(const imp_source *src, imp_doc *doc, imp_command *out, ms_diag *d);
void imp_command_free(imp_command *c);

/* ---- import_tree.c: YAML and JSON with their lines ----------------------- */

typedef enum imp_node_type { IMP_SCALAR = 0, IMP_MAP, IMP_SEQ } imp_node_type;

typedef struct imp_node {
    imp_node_type type;
    char *text;  /* IMP_SCALAR: the scalar as written */
    bool quoted; /* a quoted scalar: a string, never a number */
    int line;    /* 1-based */
    size_t n;    /* IMP_MAP: pairs; IMP_SEQ: items */
    char **keys; /* IMP_MAP */
    struct imp_node *items;
} imp_node;

/* Parse YAML (JSON is YAML) into a tree; aliases are resolved (a MindFormers
 * file's *train_dataset); errors name file, line and what was expected. */
ms_status imp_tree_parse(const imp_source *src, imp_node **root, ms_diag *d);
void imp_tree_free(imp_node *root);
/* The node at a dotted path below n ("parallel_config.model_parallel"), or
 * NULL. */
const imp_node *imp_tree_get(const imp_node *n, const char *path);
/* A scalar as an integer, number or boolean (YAML 1.1 / JSON spellings). */
bool imp_scalar_int(const imp_node *n, int64_t *v);
bool imp_scalar_num(const imp_node *n, double *v);
bool imp_scalar_bool(const imp_node *n, bool *v);
/* n as a Lua expression (tables for maps and sequences), for the settings
 * MindFormers and a scenario share (recompute_config, swap_config). */
ms_status imp_tree_lua(const imp_node *n, char **lua, ms_diag *d);

/* ---- the readers ---------------------------------------------------------- */

ms_status imp_read_megatron(const imp_source *src, imp_doc *doc, ms_diag *d);
ms_status imp_read_mindformers(const imp_source *src, const imp_node *root, imp_doc *doc,
                               ms_diag *d);
ms_status imp_read_nemo(const imp_source *src, const imp_node *root, imp_doc *doc, ms_diag *d);
ms_status imp_read_hf(const imp_source *src, const imp_node *root, imp_doc *doc, ms_diag *d);

#endif
