/* Words of a shell script expanded as bash expands them (import_shell.h):
 * quotes, parameters and their default forms, arrays, arithmetic; command
 * substitutions are kept as text marked unknown, never run.  Each character
 * keeps the line it was written on, through variables, so that an argument
 * cites where its value was set. */
#include "import_shell.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/base/growable.h"

/* ---- text with a line and flags per character ----------------------------- */

bool sh_text_put(sh_text *t, char c, int line, uint8_t flag)
{
    if (t->n + 1 >= t->cap) {
        size_t cap = base_grown_capacity(t->cap, t->n + 2, 32);
        if (cap == SIZE_MAX || !base_resize_array((void **)&t->s, cap, 1) ||
            !base_resize_array((void **)&t->line, cap, sizeof *t->line) ||
            !base_resize_array((void **)&t->flag, cap, 1))
            return false;
        t->cap = cap;
    }
    t->s[t->n] = c;
    t->line[t->n] = line;
    t->flag[t->n] = flag;
    t->s[++t->n] = '\0';
    return true;
}

bool sh_text_append(sh_text *t, const sh_text *from, uint8_t add_flag)
{
    for (size_t i = 0; i < from->n; i++)
        if (!sh_text_put(t, from->s[i], from->line[i], (uint8_t)(from->flag[i] | add_flag)))
            return false;
    return true;
}

void sh_text_free(sh_text *t)
{
    free(t->s);
    free(t->line);
    free(t->flag);
    memset(t, 0, sizeof *t);
}

/* An allocated string even when empty, so that callers can read t->s. */
static bool ensure_str(sh_text *t)
{
    if (t->s != NULL)
        return true;
    if (!sh_text_put(t, ' ', 0, 0))
        return false;
    t->s[--t->n] = '\0';
    return true;
}

static bool put_str(sh_text *t, const char *s, int line, uint8_t flag)
{
    for (; *s; s++)
        if (!sh_text_put(t, *s, line, flag))
            return false;
    return true;
}

/* ---- variables -------------------------------------------------------------- */

static sh_var *find_var(const sh_env *e, const char *name)
{
    for (size_t i = 0; i < e->n; i++)
        if (strcmp(e->vars[i].name, name) == 0)
            return &e->vars[i];
    return NULL;
}

const sh_var *sh_get(const sh_env *e, const char *name)
{
    return find_var(e, name);
}

static void var_clear(sh_var *v)
{
    for (size_t i = 0; i < v->n; i++)
        sh_text_free(&v->items[i]);
    free(v->items);
    v->items = NULL;
    v->n = 0;
}

void sh_unset(sh_env *e, const char *name)
{
    sh_var *v = find_var(e, name);
    if (v == NULL)
        return;
    var_clear(v);
    free(v->name);
    *v = e->vars[--e->n];
}

static sh_var *new_var(sh_env *e, const char *name)
{
    char *copy = strdup(name);
    if (copy == NULL || !MS_GROW(e->vars, e->n, e->cap, 16)) {
        free(copy);
        return NULL;
    }
    sh_var *v = &e->vars[e->n++];
    memset(v, 0, sizeof *v);
    v->name = copy;
    return v;
}

/* Takes over items[0..n) whether or not it succeeds. */
bool sh_set(sh_env *e, const char *name, sh_text *items, size_t n, bool array, bool append)
{
    sh_var *v = find_var(e, name);
    if (v == NULL)
        v = new_var(e, name);
    bool ok = v != NULL;
    if (ok && append && !array && v->n > 0) {
        ok = sh_text_append(&v->items[0], &items[0], 0);
    } else if (ok) {
        if (!append)
            var_clear(v);
        ok = base_resize_array((void **)&v->items, v->n + n + 1, sizeof *v->items);
        for (size_t i = 0; ok && i < n; i++) {
            v->items[v->n++] = items[i];
            memset(&items[i], 0, sizeof items[i]);
        }
        v->array |= array;
    }
    for (size_t i = 0; i < n; i++)
        sh_text_free(&items[i]);
    return ok;
}

void sh_env_free(sh_env *e)
{
    for (size_t i = 0; i < e->n; i++) {
        var_clear(&e->vars[i]);
        free(e->vars[i].name);
    }
    free(e->vars);
    e->vars = NULL;
    e->n = e->cap = 0;
}

/* ---- where a raw word ends ---------------------------------------------------- */

static size_t skip_group(const char *s, size_t len, size_t i, char open, char close, int *lines);

/* i at an opening quote (' " `); returns the index after its closing one. */
static size_t skip_quoted(const char *s, size_t len, size_t i, int *lines)
{
    char q = s[i++];
    while (i < len && s[i] != q) {
        if (s[i] == '\n')
            ++*lines;
        if (s[i] == '\\' && q != '\'' && i + 1 < len) {
            *lines += s[i + 1] == '\n';
            i++;
        } else if (s[i] == '$' && q == '"' && i + 1 < len && (s[i + 1] == '(' || s[i + 1] == '{')) {
            i = skip_group(s, len, i + 1, s[i + 1], s[i + 1] == '(' ? ')' : '}', lines);
            continue;
        }
        i++;
    }
    return i < len ? i + 1 : len;
}

/* i at `open`; the index after its matching `close`, quotes, nested groups
 * and comments (# after a blank, to the line's end) skipped. */
static size_t skip_group(const char *s, size_t len, size_t i, char open, char close, int *lines)
{
    int depth = 0;
    while (i < len) {
        char c = s[i];
        if (c == '\'' || c == '"' || c == '`') {
            i = skip_quoted(s, len, i, lines);
            continue;
        }
        if (c == '#' && i > 0 && strchr(" \t\n(", s[i - 1]) != NULL) {
            while (i < len && s[i] != '\n')
                i++;
            continue;
        }
        if (c == '\\' && i + 1 < len)
            *lines += s[++i] == '\n';
        else if (c == '\n')
            ++*lines;
        else if (c == open)
            depth++;
        else if (c == close && --depth == 0)
            return i + 1;
        i++;
    }
    return len;
}

/* "NAME=" or "NAME+=" ends at s[eq] (eq the '='), from the word's start. */
static bool assign_prefix(const char *s, size_t eq)
{
    size_t end = eq > 0 && s[eq - 1] == '+' ? eq - 1 : eq;
    if (end == 0 || !(isalpha((unsigned char)s[0]) || s[0] == '_'))
        return false;
    for (size_t i = 1; i < end; i++)
        if (!(isalnum((unsigned char)s[i]) || s[i] == '_'))
            return false;
    return true;
}

size_t sh_word_end(const char *s, size_t len, int *lines)
{
    size_t i = 0;
    *lines = 0;
    while (i < len) {
        char c = s[i];
        if (c == '\\') {
            *lines += i + 1 < len && s[i + 1] == '\n';
            i += 2;
        } else if (c == '\'' || c == '"' || c == '`') {
            i = skip_quoted(s, len, i, lines);
        } else if (c == '$' && i + 1 < len && (s[i + 1] == '(' || s[i + 1] == '{')) {
            i = skip_group(s, len, i + 1, s[i + 1], s[i + 1] == '(' ? ')' : '}', lines);
        } else if (c == '(' && i > 0 && s[i - 1] == '=' && assign_prefix(s, i - 1)) {
            i = skip_group(s, len, i, '(', ')', lines); /* NAME=( array ) */
        } else if (strchr(" \t\n;&|<>()", c) != NULL) {
            break;
        } else {
            i++;
        }
    }
    return i > len ? len : i;
}

/* ---- arithmetic: $(( )) on integers --------------------------------------------- */

typedef struct arith {
    const char *p;
    const sh_env *e;
    bool ok;
} arith;

static long long arith_sum(arith *a);

static void arith_blank(arith *a)
{
    while (*a->p == ' ' || *a->p == '\t' || *a->p == '\n')
        a->p++;
}

static long long arith_name(arith *a)
{
    char name[128];
    size_t n = 0;
    while ((isalnum((unsigned char)*a->p) || *a->p == '_') && n + 1 < sizeof name)
        name[n++] = *a->p++;
    name[n] = '\0';
    const sh_var *v = sh_get(a->e, name);
    char *end = NULL;
    const char *text = v != NULL && v->n > 0 ? v->items[0].s : NULL;
    long long x = text != NULL ? strtoll(text, &end, 10) : 0; /* unset: 0, as bash */
    if (text != NULL && (*text == '\0' || *end != '\0'))
        a->ok = false;
    return x;
}

static long long arith_unit(arith *a)
{
    arith_blank(a);
    if (*a->p == '-' || *a->p == '+') {
        bool neg = *a->p++ == '-';
        long long x = arith_unit(a);
        return neg ? -x : x;
    }
    if (*a->p == '(') {
        a->p++;
        long long x = arith_sum(a);
        arith_blank(a);
        a->ok &= *a->p == ')';
        a->p += *a->p == ')';
        return x;
    }
    if (isdigit((unsigned char)*a->p)) {
        char *end;
        long long x = strtoll(a->p, &end, 10);
        a->p = end;
        return x;
    }
    if (isalpha((unsigned char)*a->p) || *a->p == '_')
        return arith_name(a);
    a->ok = false;
    return 0;
}

static long long arith_product(arith *a)
{
    long long x = arith_unit(a);
    for (arith_blank(a); a->ok && (*a->p == '*' || *a->p == '/' || *a->p == '%'); arith_blank(a)) {
        char op = *a->p++;
        long long y = arith_unit(a);
        if (op != '*' && y == 0)
            a->ok = false;
        else
            x = op == '*' ? x * y : op == '/' ? x / y : x % y;
    }
    return x;
}

static long long arith_sum(arith *a)
{
    long long x = arith_product(a);
    for (arith_blank(a); a->ok && (*a->p == '+' || *a->p == '-'); arith_blank(a)) {
        char op = *a->p++;
        long long y = arith_product(a);
        x = op == '+' ? x + y : x - y;
    }
    return x;
}

/* ---- expansion -------------------------------------------------------------------- */

typedef struct xp {
    sh_env *e;
    sh_text *out;
    bool dq; /* inside double quotes */
    int line;
    bool ok;
} xp;

/* Raw text kept as unknown: a command substitution, an expansion memsim
 * does not do. */
static void put_unknown(xp *x, const char *s, size_t n)
{
    int line = x->line;
    for (size_t i = 0; x->ok && i < n; i++) {
        x->ok = sh_text_put(x->out, s[i], line, SH_UNKNOWN);
        line += s[i] == '\n';
    }
}

static void put_value(xp *x, const sh_text *v, uint8_t flag)
{
    if (x->ok)
        x->ok = sh_text_append(x->out, v, flag);
}

/* The items of a variable, joined: "${A[@]}" breaks between them. */
static void put_items(xp *x, const sh_var *v, const char *idx)
{
    uint8_t split = x->dq ? 0 : SH_SPLIT;
    if (v == NULL || v->n == 0)
        return;
    if (idx == NULL || (idx[0] != '@' && idx[0] != '*')) {
        size_t k = idx ? (size_t)strtoul(idx, NULL, 10) : 0;
        if (k < v->n)
            put_value(x, &v->items[k], split);
        return;
    }
    for (size_t i = 0; x->ok && i < v->n; i++) {
        if (i > 0)
            x->ok = sh_text_put(x->out, ' ', x->line, idx[0] == '@' ? SH_BREAK : split);
        put_value(x, &v->items[i], split);
    }
}

static bool var_null(const sh_var *v)
{
    for (size_t i = 0; v != NULL && i < v->n; i++)
        if (v->items[i].n > 0)
            return false;
    return true;
}

/* ${NAME op word}: op one of - = + ? with or without ':'. */
static void put_param_op(xp *x, const char *name, const char *idx, const char *op, const char *word)
{
    const sh_var *v = sh_get(x->e, name);
    bool colon = op[0] == ':';
    char kind = op[colon];
    bool missing = v == NULL || (colon && var_null(v));
    bool use_word = kind == '+' ? !missing : kind == '?' ? false : missing;
    if (!use_word) {
        if (kind != '+')
            put_items(x, v, idx);
        return;
    }
    sh_text w = {0};
    x->ok = x->ok && sh_expand(x->e, word, strlen(word), x->line, &w);
    if (x->ok && kind == '=') {
        sh_text copy = {0};
        x->ok = sh_text_append(&copy, &w, 0) && sh_set(x->e, name, &copy, 1, false, false);
    }
    put_value(x, &w, x->dq ? 0 : SH_SPLIT);
    sh_text_free(&w);
}

/* ${...}: s is what is between the braces. */
/* The NAME and [INDEX] a ${...} starts with; the rest, or NULL when it is
 * not one memsim reads. */
static const char *param_name(const char *p, char *name, size_t nsize, char *idx, size_t isize)
{
    size_t n = 0;
    while ((isalnum((unsigned char)p[n]) || p[n] == '_') && n + 1 < nsize)
        n++;
    memcpy(name, p, n);
    name[n] = '\0';
    p += n;
    idx[0] = '\0';
    if (*p != '[')
        return p;
    const char *close = strchr(p, ']');
    size_t m = close ? (size_t)(close - p - 1) : 0;
    if (close == NULL || m >= isize)
        return NULL;
    memcpy(idx, p + 1, m);
    idx[m] = '\0';
    return close + 1;
}

/* ${#NAME}, ${#NAME[@]}: a length. */
static void put_length(xp *x, const sh_var *v, const char *idx)
{
    char num[32];
    bool all = idx[0] == '@' || idx[0] == '*';
    snprintf(num, sizeof num, "%zu", v == NULL ? 0 : all ? v->n : v->n ? v->items[0].n : 0);
    x->ok = x->ok && put_str(x->out, num, x->line, 0);
}

/* ${...}: s is what is between the braces. */
static void put_param(xp *x, const char *s)
{
    char name[128], idx[64];
    bool length = s[0] == '#' && s[1] != '\0';
    const char *p = param_name(s + length, name, sizeof name, idx, sizeof idx);
    if (p == NULL) {
        put_unknown(x, s, strlen(s));
    } else if (length) {
        put_length(x, sh_get(x->e, name), idx);
    } else if (*p == '\0') {
        put_items(x, sh_get(x->e, name), idx[0] ? idx : NULL);
    } else if (strchr("-=+?", p[*p == ':']) != NULL && (*p != ':' || p[1] != '\0')) {
        char op[3] = {p[0], p[0] == ':' ? p[1] : '\0', '\0'};
        put_param_op(x, name, idx[0] ? idx : NULL, op, p + strlen(op));
    } else {
        put_unknown(x, s, strlen(s)); /* ${V%...}, ${V/...}: not done */
    }
}

static size_t put_arith(xp *x, const char *s, size_t i, size_t end)
{
    sh_text body = {0};
    size_t from = i + 3, to = end >= 2 ? end - 2 : from; /* between (( and )) */
    x->ok = x->ok && sh_expand(x->e, s + from, to > from ? to - from : 0, x->line, &body);
    arith a = {body.s ? body.s : "", x->e, true};
    long long v = x->ok ? arith_sum(&a) : 0;
    arith_blank(&a);
    if (x->ok && a.ok && *a.p == '\0') {
        char num[32];
        snprintf(num, sizeof num, "%lld", v);
        x->ok = put_str(x->out, num, x->line, 0);
    } else if (x->ok) {
        put_unknown(x, s + i, end - i);
    }
    sh_text_free(&body);
    return end;
}

/* $( ), $(( )), ${ } at s[i]: the index after the group. */
static size_t put_group(xp *x, const char *s, size_t len, size_t i)
{
    int lines = 0;
    char c = s[i + 1];
    size_t end = skip_group(s, len, i + 1, c, c == '(' ? ')' : '}', &lines);
    if (c == '(' && i + 2 < len && s[i + 2] == '(') {
        put_arith(x, s, i, end);
    } else if (c == '(') {
        put_unknown(x, s + i, end - i);
    } else {
        char *body = strndup(s + i + 2, end > i + 3 ? end - i - 3 : 0);
        x->ok = x->ok && body != NULL;
        if (x->ok)
            put_param(x, body);
        free(body);
    }
    x->line += lines;
    return end;
}

/* s[i] is '$'; returns the index after what it expands. */
static size_t put_dollar(xp *x, const char *s, size_t len, size_t i)
{
    char c = i + 1 < len ? s[i + 1] : '\0';
    if (c == '(' || c == '{')
        return put_group(x, s, len, i);
    size_t n = 0;
    while (i + 1 + n < len && (isalnum((unsigned char)s[i + 1 + n]) || s[i + 1 + n] == '_') &&
           !(n == 0 && isdigit((unsigned char)s[i + 1])))
        n++;
    if (n > 0) {
        char *name = strndup(s + i + 1, n);
        x->ok = x->ok && name != NULL;
        if (x->ok)
            put_items(x, sh_get(x->e, name), NULL);
        free(name);
        return i + 1 + n;
    }
    if (isdigit((unsigned char)c) || (c != '\0' && strchr("@*#?!-$", c) != NULL)) {
        /* No positional arguments: $1 is empty, $# is 0; $0 the script. */
        const char *v = c == '0' ? x->e->file : c == '#' || c == '?' ? "0" : "";
        x->ok = x->ok && put_str(x->out, v, x->line, x->dq ? 0 : SH_SPLIT);
        return i + 2;
    }
    x->ok = x->ok && sh_text_put(x->out, '$', x->line, 0);
    return i + 1;
}

static size_t put_backslash(xp *x, const char *s, size_t len, size_t i)
{
    char c = i + 1 < len ? s[i + 1] : '\0';
    if (c == '\n') { /* a line continuation */
        x->line++;
        return i + 2;
    }
    if (x->dq && (c == '\0' || strchr("$`\"\\", c) == NULL)) {
        x->ok = x->ok && sh_text_put(x->out, '\\', x->line, 0);
        return i + 1;
    }
    if (c != '\0')
        x->ok = x->ok && sh_text_put(x->out, c, x->line, 0);
    return i + 2;
}

static size_t put_single(xp *x, const char *s, size_t len, size_t i)
{
    x->out->quoted = true;
    for (i++; i < len && s[i] != '\'' && x->ok; i++) {
        x->ok = sh_text_put(x->out, s[i], x->line, 0);
        x->line += s[i] == '\n';
    }
    return i + 1;
}

bool sh_expand(sh_env *e, const char *s, size_t len, int line, sh_text *out)
{
    xp x = {e, out, false, line, true};
    size_t i = 0;
    while (x.ok && i < len) {
        char c = s[i];
        if (c == '\\') {
            i = put_backslash(&x, s, len, i);
        } else if (c == '\'' && !x.dq) {
            i = put_single(&x, s, len, i);
        } else if (c == '"') {
            x.dq = !x.dq;
            out->quoted = true;
            i++;
        } else if (c == '$') {
            i = put_dollar(&x, s, len, i);
        } else if (c == '`') {
            int lines = 0;
            size_t end = skip_quoted(s, len, i, &lines);
            put_unknown(&x, s + i, end - i);
            x.line += lines;
            i = end;
        } else {
            x.ok = sh_text_put(out, c, x.line, 0);
            x.line += c == '\n';
            i++;
        }
    }
    return x.ok && ensure_str(out);
}

/* ---- field splitting -------------------------------------------------------------- */

static bool separator(const sh_text *t, size_t i)
{
    char c = t->s[i];
    return (t->flag[i] & SH_BREAK) ||
           ((t->flag[i] & SH_SPLIT) && (c == ' ' || c == '\t' || c == '\n'));
}

bool sh_split(const sh_text *t, sh_text **fields, size_t *n)
{
    size_t cap = 0;
    bool open = false, ok = true;
    *fields = NULL;
    *n = 0;
    for (size_t i = 0; ok && i < t->n; i++) {
        if (separator(t, i)) {
            open = false;
            continue;
        }
        if (!open) {
            ok = MS_GROW(*fields, *n, cap, 8);
            if (ok)
                memset(&(*fields)[(*n)++], 0, sizeof **fields);
            open = ok;
        }
        ok = ok && sh_text_put(&(*fields)[*n - 1], t->s[i], t->line[i], t->flag[i]);
    }
    if (ok && *n == 0 && t->quoted && t->n == 0) { /* "" is one empty field */
        ok = MS_GROW(*fields, *n, cap, 1);
        if (ok) {
            memset(&(*fields)[0], 0, sizeof **fields);
            *n = 1;
            ok = ensure_str(&(*fields)[0]);
        }
    }
    return ok;
}
