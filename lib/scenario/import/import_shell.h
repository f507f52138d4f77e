/* The shell subset memsim import evaluates (private to import_shell.c and
 * import_expand.c): enough of bash to follow how a training script builds
 * its command line, and nothing that runs anything.
 *
 * Followed: assignments (NAME=v, export, declare, NAME+=v), arrays
 * (NAME=(...), NAME+=(...), ${NAME[@]}), $NAME, ${NAME}, ${NAME:-word} and
 * the other default forms, $((arithmetic)), quoting, line continuations,
 * comments, if/elif/else on [ ], [[ ]] and test.  Not run, each said in a
 * note: command substitutions ($(...), `...`), loops, case, functions,
 * sourced files, conditions on files.  Every character keeps the line it was
 * written on, so an argument built from variables cites where its text was
 * set. */
#ifndef MEMSIM_SCENARIO_IMPORT_SHELL_H
#define MEMSIM_SCENARIO_IMPORT_SHELL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "import.h"

/* Per-character flags of expanded text. */
enum {
    SH_SPLIT = 1,   /* from an unquoted expansion: IFS characters split here */
    SH_BREAK = 2,   /* a boundary between array elements: always splits */
    SH_UNKNOWN = 4, /* from a command substitution memsim did not run */
};

/* Text with a line and flags per character. */
typedef struct sh_text {
    char *s;
    int *line;
    uint8_t *flag;
    size_t n, cap;
    bool quoted; /* the word had quotes: an empty result is one empty field */
} sh_text;

typedef struct sh_var {
    char *name;
    sh_text *items; /* a scalar is an array of one */
    size_t n;
    bool array;
} sh_var;

typedef struct sh_env {
    sh_var *vars;
    size_t n, cap;
    const char *file; /* the script's base name, for notes */
    imp_doc *doc;
    bool failed; /* out of memory */
} sh_env;

/* ---- import_expand.c ---------------------------------------------------- */

bool sh_text_put(sh_text *t, char c, int line, uint8_t flag);
bool sh_text_append(sh_text *t, const sh_text *from, uint8_t add_flag);
void sh_text_free(sh_text *t);
const sh_var *sh_get(const sh_env *e, const char *name);
/* Set name to the items (taken over); append adds to what is there. */
bool sh_set(sh_env *e, const char *name, sh_text *items, size_t n, bool array, bool append);
void sh_unset(sh_env *e, const char *name);
void sh_env_free(sh_env *e);
/* Expand the raw word src[0..len) written from line on: quotes removed,
 * parameters, arithmetic and (as unknown text) command substitutions. */
bool sh_expand(sh_env *e, const char *src, size_t len, int line, sh_text *out);
/* Split expanded text into fields (SH_BREAK always, IFS where SH_SPLIT). */
bool sh_split(const sh_text *t, sh_text **fields, size_t *n);
/* Where the raw word starting at src[0] ends (quotes, $(...), ${...}, `...`
 * and an array literal after NAME= are part of it); *lines counts the
 * newlines inside. */
size_t sh_word_end(const char *src, size_t len, int *lines);

#endif
