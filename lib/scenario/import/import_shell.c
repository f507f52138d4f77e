/* A training script read as bash would run it, far enough to know its
 * training command (import_shell.h): commands are read one at a time,
 * assignments and if/elif/else followed, the first command that runs a
 * Python training script kept with its words' lines.  Nothing is ever run:
 * loops, functions, case, subshells and sourced files are skipped and said
 * to be, and a condition memsim cannot decide is taken as false. */
#include "import_shell.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/base/growable.h"

#define MAX_NESTING 64

const char *const imp_env_names[IMP_ENV_COUNT] = {
    [IMP_ENV_CUDA_ALLOC] = "PYTORCH_CUDA_ALLOC_CONF",
    [IMP_ENV_NPU_ALLOC] = "PYTORCH_NPU_ALLOC_CONF",
    [IMP_ENV_AVOID_RS] = "TORCH_NCCL_AVOID_RECORD_STREAMS",
};

typedef enum sh_op { OP_END = 0, OP_AND, OP_OR, OP_PIPE, OP_EOF, OP_OPEN, OP_CLOSE } sh_op;

typedef struct raw_word {
    size_t off, len;
    int line;
} raw_word;

typedef struct raw_cmd {
    raw_word *w;
    size_t n, cap;
    sh_op term;
    bool func_def; /* NAME ( ) */
} raw_cmd;

/* A tri-state truth: a condition memsim cannot decide is unknown. */
enum { T_FALSE = 0, T_TRUE = 1, T_UNKNOWN = 2 };

typedef struct sh_frame {
    bool parent;  /* the code around the if runs */
    bool in_cond; /* reading the condition (before then) */
    bool taken;   /* a branch ran already */
    bool active;  /* this branch runs */
    int cond;
    sh_op joined; /* how the next condition part joins */
    int line;
} sh_frame;

typedef struct sh_run {
    const char *s;
    size_t len, pos;
    int line;
    char heredoc[64]; /* a here-document's delimiter, skipped at the line's end */
    sh_env env;
    sh_frame frames[MAX_NESTING];
    int depth;
    bool stopped;
    imp_command *found;
    bool have;
} sh_run;

static bool active(const sh_run *r)
{
    return !r->stopped && (r->depth == 0 || r->frames[r->depth - 1].active);
}

/* ---- reading commands ---------------------------------------------------------------- */

static void skip_blanks(sh_run *r)
{
    while (r->pos < r->len) {
        char c = r->s[r->pos];
        if (c == ' ' || c == '\t' || c == '\r')
            r->pos++;
        else if (c == '\\' && r->pos + 1 < r->len && r->s[r->pos + 1] == '\n') {
            r->pos += 2;
            r->line++;
        } else if (c == '#') {
            while (r->pos < r->len && r->s[r->pos] != '\n')
                r->pos++;
        } else
            break;
    }
}

/* After a line with <<WORD: its lines up to WORD are the document's. */
static void skip_heredoc(sh_run *r)
{
    size_t n = strlen(r->heredoc);
    while (r->heredoc[0] && r->pos < r->len) {
        size_t start = r->pos;
        while (r->pos < r->len && r->s[r->pos] != '\n')
            r->pos++;
        const char *l = r->s + start;
        size_t ll = r->pos - start;
        while (ll > 0 && *l == '\t')
            l++, ll--;
        r->pos += r->pos < r->len;
        r->line++;
        if (ll == n && memcmp(l, r->heredoc, n) == 0)
            r->heredoc[0] = '\0';
    }
}

static bool add_word(raw_cmd *c, size_t off, size_t len, int line)
{
    if (!MS_GROW(c->w, c->n, c->cap, 8))
        return false;
    c->w[c->n++] = (raw_word){off, len, line};
    return true;
}

/* A redirection (2>&1, > log, <<EOF, &> x) at r->pos: consumed, its target
 * with it. */
static void skip_redirect(sh_run *r)
{
    while (r->pos < r->len && (isdigit((unsigned char)r->s[r->pos]) || r->s[r->pos] == '&'))
        r->pos++;
    bool heredoc = r->pos + 1 < r->len && r->s[r->pos] == '<' && r->s[r->pos + 1] == '<';
    while (r->pos < r->len && strchr("<>|-", r->s[r->pos]) != NULL)
        r->pos++;
    if (r->pos < r->len && r->s[r->pos] == '&') { /* >&2 */
        while (++r->pos < r->len && (isdigit((unsigned char)r->s[r->pos]) || r->s[r->pos] == '-'))
            ;
        return;
    }
    skip_blanks(r);
    int lines = 0;
    size_t end = sh_word_end(r->s + r->pos, r->len - r->pos, &lines);
    if (heredoc) {
        size_t k = 0;
        for (size_t i = 0; i < end && k + 1 < sizeof r->heredoc; i++)
            if (r->s[r->pos + i] != '\'' && r->s[r->pos + i] != '"')
                r->heredoc[k++] = r->s[r->pos + i];
        r->heredoc[k] = '\0';
    }
    r->pos += end;
    r->line += lines;
}

static bool at_redirect(const sh_run *r)
{
    size_t i = r->pos;
    while (i < r->len && isdigit((unsigned char)r->s[i]))
        i++;
    if (i < r->len && (r->s[i] == '<' || r->s[i] == '>'))
        return true;
    return i == r->pos && i + 1 < r->len && r->s[i] == '&' && r->s[i + 1] == '>';
}

static bool raw_is(const sh_run *r, const raw_word *w, const char *text)
{
    return w->len == strlen(text) && memcmp(r->s + w->off, text, w->len) == 0;
}

/* An operator at r->pos ends the command: which one. */
static bool read_operator(sh_run *r, raw_cmd *c)
{
    char c0 = r->s[r->pos], c1 = r->pos + 1 < r->len ? r->s[r->pos + 1] : '\0';
    if (c0 == '\n') {
        r->pos++;
        r->line++;
        skip_heredoc(r);
        c->term = OP_END;
    } else if (c0 == ';') {
        r->pos += 1 + (c1 == ';');
        c->term = OP_END;
    } else if (c0 == '&' || c0 == '|') {
        bool twice = c1 == c0;
        r->pos += 1 + twice;
        c->term = c0 == '&' ? (twice ? OP_AND : OP_END) : (twice ? OP_OR : OP_PIPE);
    } else if (c0 == ')') {
        r->pos++;
        c->term = OP_CLOSE;
    } else if (c0 == '(') {
        r->pos++;
        skip_blanks(r);
        if (c->n == 1 && r->pos < r->len && r->s[r->pos] == ')') { /* NAME() { ... } */
            r->pos++;
            c->func_def = true;
        }
        c->term = OP_OPEN;
    } else {
        return false;
    }
    return true;
}

/* Inside [[ ]], && || < > ( ) are words. */
static size_t bracket_word(const sh_run *r)
{
    size_t n = 0;
    while (r->pos + n < r->len && strchr("&|<>()", r->s[r->pos + n]) != NULL)
        n++;
    return n;
}

/* After a [[ whose ]] has not come yet. */
static bool in_brackets(const sh_run *r, const raw_cmd *c)
{
    for (size_t i = c->n; i-- > 0;) {
        if (raw_is(r, &c->w[i], "]]"))
            return false;
        if (raw_is(r, &c->w[i], "[["))
            return true;
    }
    return false;
}

static bool read_command(sh_run *r, raw_cmd *c)
{
    c->n = 0;
    c->func_def = false;
    c->term = OP_EOF;
    for (;;) {
        skip_blanks(r);
        if (r->pos >= r->len)
            return true;
        bool brackets = in_brackets(r, c);
        size_t op = brackets ? bracket_word(r) : 0;
        if (op == 0 && !brackets && at_redirect(r)) {
            skip_redirect(r);
            continue;
        }
        if (op == 0 && read_operator(r, c))
            return true;
        int lines = 0;
        size_t end = op ? op : sh_word_end(r->s + r->pos, r->len - r->pos, &lines);
        if (end == 0)
            end = 1; /* a stray character: a word of its own */
        if (!add_word(c, r->pos, end, r->line))
            return false;
        r->pos += end;
        r->line += lines;
    }
}

/* Count the words of c that open and close a block. */
static int block_balance(const sh_run *r, const raw_cmd *c, size_t from, const char *const *open,
                         const char *close)
{
    int depth = 0;
    for (size_t i = from; i < c->n; i++) {
        for (const char *const *o = open; *o; o++)
            depth += raw_is(r, &c->w[i], *o);
        depth -= raw_is(r, &c->w[i], close);
    }
    return depth;
}

/* Skip the commands up to the `close` that ends a block (a loop's body up
 * to done, a case up to esac, a function's braces), counting nested ones;
 * depth is how many are open already. */
static bool skip_block(sh_run *r, raw_cmd *c, const char *const *open, const char *close, int depth)
{
    bool opened = depth > 0;
    while ((depth > 0 || !opened) && r->pos < r->len) {
        if (!read_command(r, c))
            return false;
        depth += block_balance(r, c, 0, open, close);
        opened |= depth > 0;
    }
    return true;
}

/* ---- expanding a command ---------------------------------------------------------- */

static char *cmd_text(const sh_run *r, const raw_word *w, size_t n)
{
    size_t from = w[0].off, to = w[n - 1].off + w[n - 1].len;
    return strndup(r->s + from, to - from);
}

/* The fields of raw words (split unless split is false: [[ ]] operands). */
static bool expand_words(sh_env *env, const char *s, const raw_word *w, size_t n, bool split,
                         sh_text **out, size_t *nout)
{
    size_t cap = 0;
    bool ok = true;
    *out = NULL;
    *nout = 0;
    for (size_t i = 0; ok && i < n; i++) {
        sh_text t = {0}, *f = NULL;
        size_t nf = 0;
        ok = sh_expand(env, s + w[i].off, w[i].len, w[i].line, &t);
        if (ok && split)
            ok = sh_split(&t, &f, &nf);
        else if (ok) {
            f = malloc(sizeof *f);
            ok = f != NULL;
            if (ok) {
                f[0] = t;
                memset(&t, 0, sizeof t);
                nf = 1;
            }
        }
        for (size_t k = 0; ok && k < nf; k++) {
            ok = MS_GROW(*out, *nout, cap, 8);
            if (ok) {
                (*out)[(*nout)++] = f[k];
                memset(&f[k], 0, sizeof f[k]);
            }
        }
        for (size_t k = 0; f != NULL && k < nf; k++)
            sh_text_free(&f[k]);
        free(f);
        sh_text_free(&t);
    }
    return ok;
}

static void free_fields(sh_text *f, size_t n)
{
    for (size_t i = 0; i < n; i++)
        sh_text_free(&f[i]);
    free(f);
}

/* ---- conditions ----------------------------------------------------------------- */

static bool any_unknown(const sh_text *f, size_t n)
{
    for (size_t i = 0; i < n; i++)
        for (size_t k = 0; k < f[i].n; k++)
            if (f[i].flag[k] & SH_UNKNOWN)
                return true;
    return false;
}

static int int_cmp(const char *a, const char *op, const char *b)
{
    char *ea, *eb;
    long long x = strtoll(a, &ea, 10), y = strtoll(b, &eb, 10);
    if (*a == '\0' || *b == '\0' || *ea != '\0' || *eb != '\0')
        return T_UNKNOWN;
    int r = strcmp(op, "-eq") == 0   ? x == y
            : strcmp(op, "-ne") == 0 ? x != y
            : strcmp(op, "-lt") == 0 ? x < y
            : strcmp(op, "-le") == 0 ? x <= y
            : strcmp(op, "-gt") == 0 ? x > y
                                     : x >= y;
    return r;
}

static int test_simple(const sh_text *f, size_t n)
{
    if (n == 0)
        return T_FALSE;
    if (strcmp(f[0].s, "!") == 0) {
        int v = test_simple(f + 1, n - 1);
        return v == T_UNKNOWN ? v : !v;
    }
    if (n == 1)
        return f[0].n > 0;
    if (n == 2 && strcmp(f[0].s, "-z") == 0)
        return f[1].n == 0;
    if (n == 2 && strcmp(f[0].s, "-n") == 0)
        return f[1].n > 0;
    if (n != 3)
        return T_UNKNOWN; /* file tests and the like */
    const char *op = f[1].s;
    if (strcmp(op, "=") == 0 || strcmp(op, "==") == 0 || strcmp(op, "!=") == 0) {
        if (strpbrk(f[2].s, "*?[") != NULL && strcmp(f[0].s, f[2].s) != 0)
            return T_UNKNOWN; /* a pattern */
        return (strcmp(f[0].s, f[2].s) == 0) == (op[0] != '!');
    }
    static const char *const ints[] = {"-eq", "-ne", "-lt", "-le", "-gt", "-ge"};
    for (size_t i = 0; i < 6; i++)
        if (strcmp(op, ints[i]) == 0)
            return int_cmp(f[0].s, op, f[2].s);
    return T_UNKNOWN;
}

static int and3(int a, int b)
{
    return a == T_FALSE || b == T_FALSE ? T_FALSE : a == T_TRUE && b == T_TRUE ? T_TRUE : T_UNKNOWN;
}

static int or3(int a, int b)
{
    return a == T_TRUE || b == T_TRUE ? T_TRUE : a == T_FALSE && b == T_FALSE ? T_FALSE : T_UNKNOWN;
}

/* A test expression with -a/-o/&&/|| between simple tests, left to right. */
static int test_expr(const sh_text *f, size_t n)
{
    if (any_unknown(f, n))
        return T_UNKNOWN;
    for (size_t i = n; i-- > 0;) {
        const char *s = f[i].s;
        bool is_and = strcmp(s, "-a") == 0 || strcmp(s, "&&") == 0;
        if (is_and || strcmp(s, "-o") == 0 || strcmp(s, "||") == 0) {
            int a = test_expr(f, i), b = test_simple(f + i + 1, n - i - 1);
            return is_and ? and3(a, b) : or3(a, b);
        }
    }
    return test_simple(f, n);
}

static int eval_condition(sh_run *r, const raw_word *w, size_t n)
{
    bool neg = n > 0 && raw_is(r, &w[0], "!");
    w += neg;
    n -= neg;
    if (n == 0)
        return T_UNKNOWN;
    bool dbl = raw_is(r, &w[0], "[[");
    bool sgl = raw_is(r, &w[0], "[") || raw_is(r, &w[0], "test");
    int v = raw_is(r, &w[0], "true") ? T_TRUE : raw_is(r, &w[0], "false") ? T_FALSE : T_UNKNOWN;
    if (dbl || sgl) {
        size_t m = n - 1 - (n > 1 && (raw_is(r, &w[n - 1], "]") || raw_is(r, &w[n - 1], "]]")));
        sh_text *f = NULL;
        size_t nf = 0;
        v = expand_words(&r->env, r->s, w + 1, m, !dbl, &f, &nf) ? test_expr(f, nf) : T_UNKNOWN;
        free_fields(f, nf);
    }
    return neg && v != T_UNKNOWN ? !v : v;
}

/* ---- commands ---------------------------------------------------------------------- */

/* NAME=value or NAME+=value: the length of NAME, 0 if not an assignment. */
static size_t assignment(const sh_run *r, const raw_word *w, bool *append)
{
    const char *s = r->s + w->off;
    size_t i = 0;
    if (w->len == 0 || !(isalpha((unsigned char)s[0]) || s[0] == '_'))
        return 0;
    while (i < w->len && (isalnum((unsigned char)s[i]) || s[i] == '_'))
        i++;
    *append = i + 1 < w->len && s[i] == '+' && s[i + 1] == '=';
    return i < w->len && (s[i] == '=' || *append) ? i : 0;
}

/* The elements of an array literal's inside, each expanded and split. */
static bool array_items(sh_run *r, const char *s, size_t len, int line, sh_text **items, size_t *n)
{
    sh_run sub = {.s = s, .len = len, .line = line}; /* read only: the variables are r's */
    raw_cmd c = {0};
    bool ok = true;
    size_t cap = 0;
    *items = NULL;
    *n = 0;
    while (ok && sub.pos < sub.len) {
        ok = read_command(&sub, &c);
        sh_text *f = NULL;
        size_t nf = 0;
        ok = ok && expand_words(&r->env, s, c.w, c.n, true, &f, &nf);
        for (size_t k = 0; ok && k < nf; k++) {
            ok = MS_GROW(*items, *n, cap, 8);
            if (ok) {
                (*items)[(*n)++] = f[k];
                memset(&f[k], 0, sizeof f[k]);
            }
        }
        free_fields(f, nf);
    }
    free(c.w);
    return ok;
}

static bool assign(sh_run *r, const raw_word *w)
{
    bool append = false;
    size_t name_len = assignment(r, w, &append);
    char *name = strndup(r->s + w->off, name_len);
    size_t at = name_len + 1 + append;
    const char *v = r->s + w->off + at;
    size_t vlen = w->len - at;
    bool ok = name != NULL;
    if (ok && vlen >= 2 && v[0] == '(' && v[vlen - 1] == ')') {
        sh_text *items = NULL;
        size_t n = 0;
        ok = array_items(r, v + 1, vlen - 2, w->line, &items, &n) &&
             sh_set(&r->env, name, items, n, true, append);
        free(items);
    } else if (ok) {
        sh_text t = {0};
        ok =
            sh_expand(&r->env, v, vlen, w->line, &t) && sh_set(&r->env, name, &t, 1, false, append);
    }
    free(name);
    return ok;
}

static const char *base_of(const char *s)
{
    const char *b = strrchr(s, '/');
    return b ? b + 1 : s;
}

static bool ends_with(const char *s, const char *tail)
{
    size_t n = strlen(s), m = strlen(tail);
    return n >= m && strcmp(s + n - m, tail) == 0;
}

/* A command that trains: a launcher running a Python file, a Python file
 * named like a training entry point, or a bare list of --arguments. */
static bool is_training(const sh_text *f, size_t n)
{
    static const char *const launchers[] = {"torchrun",  "python",     "python3",
                                            "deepspeed", "accelerate", NULL};
    static const char *const entries[] = {"pretrain", "train", "posttrain",
                                          "finetune", "sft",   NULL};
    if (n > 0 && strncmp(f[0].s, "--", 2) == 0)
        return true;
    for (size_t k = 0; k < n; k++) {
        if (!ends_with(f[k].s, ".py"))
            continue;
        for (const char *const *l = launchers; *l; l++)
            if (strcmp(base_of(f[0].s), *l) == 0)
                return true;
        for (const char *const *e = entries; *e; e++)
            if (strncmp(base_of(f[k].s), *e, strlen(*e)) == 0)
                return true;
    }
    return false;
}

static bool keep_command(sh_run *r, sh_text *f, size_t n, int line)
{
    imp_command *c = r->found;
    c->words = calloc(n ? n : 1, sizeof *c->words);
    if (c->words == NULL)
        return false;
    c->line = line;
    for (size_t i = 0; i < n; i++, c->n++) {
        c->words[i].text = f[i].s;
        c->words[i].line = f[i].n > 0 ? f[i].line[0] : line;
        c->words[i].unknown = any_unknown(&f[i], 1);
        f[i].s = NULL;
    }
    for (int k = 0; k < IMP_ENV_COUNT; k++) {
        const sh_var *v = sh_get(&r->env, imp_env_names[k]);
        if (v == NULL || v->n == 0)
            continue;
        c->env[k].text = strdup(v->items[0].s);
        c->env[k].line = v->items[0].n > 0 ? v->items[0].line[0] : line;
        if (c->env[k].text == NULL)
            return false;
    }
    r->have = true;
    return true;
}

static void note_line(sh_run *r, int line, const char *what, const raw_word *w, size_t n)
{
    char *text = n > 0 ? cmd_text(r, w, n) : NULL;
    imp_note(r->env.doc, IMP_NOT_MODELLED, "line %d: %s%s%s%s", line, what, text ? " ('" : "",
             text ? text : "", text ? "')" : "");
    free(text);
}

/* export/declare/local/readonly NAME=value ...: the assignments. */
static bool declare(sh_run *r, const raw_word *w, size_t n)
{
    bool append, ok = true;
    for (size_t i = 1; ok && i < n; i++)
        if (assignment(r, &w[i], &append) > 0)
            ok = assign(r, &w[i]);
    return ok;
}

static bool builtin(sh_run *r, const raw_word *w, size_t n, const char *name)
{
    static const char *const decl[] = {"export", "declare", "typeset", "local", "readonly", NULL};
    for (const char *const *d = decl; *d; d++)
        if (strcmp(name, *d) == 0)
            return declare(r, w, n);
    if (strcmp(name, "unset") == 0) {
        for (size_t i = 1; i < n; i++) {
            char *v = strndup(r->s + w[i].off, w[i].len);
            if (v != NULL && v[0] != '-')
                sh_unset(&r->env, v);
            free(v);
        }
    } else if (strcmp(name, "exit") == 0) {
        note_line(r, w[0].line, "the script exits here; what follows was not read", NULL, 0);
        r->stopped = true;
    } else if (strcmp(name, "source") == 0 || strcmp(name, ".") == 0) {
        note_line(r, w[0].line, "a sourced file is not read", w, n);
    }
    return true;
}

static bool simple(sh_run *r, const raw_word *w, size_t n)
{
    bool append, ok = true;
    size_t k = 0;
    while (ok && k < n && assignment(r, &w[k], &append) > 0)
        ok = assign(r, &w[k++]);
    if (!ok || k == n)
        return ok;
    sh_text *f = NULL;
    size_t nf = 0;
    ok = expand_words(&r->env, r->s, w + k, n - k, true, &f, &nf);
    if (ok && nf > 0 && !builtin(r, w + k, n - k, f[0].s))
        ok = false;
    if (ok && nf > 0 && is_training(f, nf)) {
        if (r->have)
            note_line(r, w[k].line, "another training command, not imported", w + k, 1);
        else
            ok = keep_command(r, f, nf, w[k].line);
    }
    free_fields(f, nf);
    return ok;
}

/* ---- control flow ----------------------------------------------------------------- */

static void cond_part(sh_run *r, const raw_word *w, size_t n, sh_op term)
{
    sh_frame *fr = &r->frames[r->depth - 1];
    int v = fr->parent ? eval_condition(r, w, n) : T_FALSE;
    if (v == T_UNKNOWN && fr->parent)
        note_line(r, w[0].line, "a condition memsim cannot decide, taken as false", w, n);
    fr->cond = fr->cond < 0           ? v
               : fr->joined == OP_AND ? and3(fr->cond, v)
               : fr->joined == OP_OR  ? or3(fr->cond, v)
                                      : v;
    fr->joined = term;
}

static bool process(sh_run *r, raw_cmd *c, size_t from);

/* if/then/elif/else/fi; returns false if w[0] is none of them. */
static bool flow(sh_run *r, raw_cmd *c, size_t from, bool *ok)
{
    const raw_word *w = &c->w[from];
    sh_frame *top = r->depth > 0 ? &r->frames[r->depth - 1] : NULL;
    if (raw_is(r, w, "if")) {
        if (r->depth == MAX_NESTING) {
            *ok = false;
            return true;
        }
        bool parent = active(r);
        r->frames[r->depth++] =
            (sh_frame){.parent = parent, .in_cond = true, .cond = -1, .line = w->line};
    } else if (top && raw_is(r, w, "then")) {
        top->in_cond = false;
        top->active = top->parent && !top->taken && top->cond == T_TRUE;
        top->taken |= top->active;
    } else if (top && raw_is(r, w, "elif")) {
        top->in_cond = true;
        top->active = false;
        top->cond = -1;
    } else if (top && raw_is(r, w, "else")) {
        top->active = top->parent && !top->taken;
        top->taken = true;
    } else if (top && raw_is(r, w, "fi")) {
        r->depth--;
    } else {
        return false;
    }
    *ok = process(r, c, from + 1);
    return true;
}

static bool skip_compound(sh_run *r, raw_cmd *c, size_t from, bool *ok)
{
    static const char *const loops[] = {"for", "while", "until", "select", NULL};
    static const char *const cases[] = {"case", NULL};
    static const char *const braces[] = {"{", NULL};
    const raw_word *w = &c->w[from];
    int line = w->line;
    bool was_active = active(r);
    const char *what;
    if (raw_is(r, w, "for") || raw_is(r, w, "while") || raw_is(r, w, "until") ||
        raw_is(r, w, "select")) {
        what = "a loop is not run";
        *ok = skip_block(r, c, loops, "done", 1 + block_balance(r, c, from + 1, loops, "done"));
    } else if (raw_is(r, w, "case")) {
        what = "a case statement is not run";
        *ok = skip_block(r, c, cases, "esac", 1 + block_balance(r, c, from + 1, cases, "esac"));
    } else if (raw_is(r, w, "function") || c->func_def) {
        what = "a function is not run";
        *ok = skip_block(r, c, braces, "}", block_balance(r, c, from, braces, "}"));
    } else {
        return false;
    }
    if (was_active)
        note_line(r, line, what, NULL, 0);
    return true;
}

static bool process(sh_run *r, raw_cmd *c, size_t from)
{
    bool ok = true;
    if (from >= c->n)
        return true;
    if (flow(r, c, from, &ok) || skip_compound(r, c, from, &ok))
        return ok;
    const raw_word *w = &c->w[from];
    size_t n = c->n - from;
    if (r->depth > 0 && r->frames[r->depth - 1].in_cond) {
        cond_part(r, w, n, c->term);
        return true;
    }
    if (raw_is(r, w, "{") || raw_is(r, w, "}"))
        return process(r, c, from + 1);
    return active(r) ? simple(r, w, n) : true;
}

static bool run_script(sh_run *r)
{
    raw_cmd c = {0};
    bool ok = true;
    while (ok && r->pos < r->len && !r->stopped) {
        ok = read_command(r, &c);
        if (ok && c.n == 0 && c.term == OP_OPEN) {
            static const char *const paren[] = {"(", NULL};
            if (active(r))
                note_line(r, r->line, "a subshell is not run", NULL, 0);
            ok = skip_block(r, &c, paren, ")", 1);
        } else if (ok && c.n > 0) {
            ok = process(r, &c, 0);
        }
    }
    free(c.w);
    return ok;
}

void imp_command_free(imp_command *c)
{
    for (size_t i = 0; c != NULL && i < c->n; i++)
        free(c->words[i].text);
    if (c != NULL) {
        for (int k = 0; k < IMP_ENV_COUNT; k++)
            free(c->env[k].text);
        free(c->words);
        memset(c, 0, sizeof *c);
    }
}

/* NAME=VALUE pairs from the command line: the environment the script
 * starts with (memsim import --env). */
static bool seed_env(sh_run *r, const ms_import_options *opt)
{
    for (size_t i = 0; opt != NULL && i < opt->n_env; i++) {
        const char *eq = strchr(opt->env[i], '=');
        if (eq == NULL || eq == opt->env[i])
            continue;
        char *name = strndup(opt->env[i], (size_t)(eq - opt->env[i]));
        sh_text t = {0};
        bool ok = name != NULL && sh_text_put(&t, ' ', 0, 0);
        if (ok) {
            t.n = 0;
            for (const char *p = eq + 1; ok && *p; p++)
                ok = sh_text_put(&t, *p, 0, 0);
            t.s[t.n] = '\0';
        }
        ok = ok && sh_set(&r->env, name, &t, 1, false, false);
        free(name);
        if (!ok)
            return false;
    }
    return true;
}

ms_status imp_shell_command(const imp_source *src, imp_doc *doc, imp_command *out, ms_diag *d)
{
    memset(out, 0, sizeof *out);
    sh_run r = {.s = src->text, .len = src->len, .line = 1, .found = out};
    r.env.file = src->base;
    r.env.doc = doc;
    bool ok = seed_env(&r, src->opt) && run_script(&r);
    sh_env_free(&r.env);
    if (!ok) {
        imp_command_free(out);
        return ms_diag_set(d, MS_ENOMEM, "%s: out of memory reading the script", src->path);
    }
    if (!r.have)
        return ms_diag_set(d, MS_EINVAL,
                           "%s: no training command found: expected a line that "
                           "runs a training script (torchrun ... pretrain_gpt.py --num-layers "
                           "...) or a list of Megatron arguments (--num-layers 32 ...)",
                           src->path);
    return MS_OK;
}
