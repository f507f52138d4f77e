/* The scenario an importer writes (import.h): its fields, each with the
 * citation of the argument or key it came from, and the lines of what could
 * not be expressed.  Rendered as a scenario file: fields in the schema's
 * order (the order docs/scenario-format.md lists them), a Lua comment after
 * each naming its source, the notes as comments at the end. */
#include "import.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/base/growable.h"
#include "lib/scenario/scenario_load.h"

/* Citations and notes are one line each: long ones are cut. */
#define LINE_MAX_CHARS 400

typedef struct imp_field {
    int id; /* in scn_schema() */
    char *lua;
    char *cite;
} imp_field;

typedef struct imp_line {
    imp_note_kind kind; /* IMP_COUNT_KINDS: a header line */
    char *text;
} imp_line;

struct imp_doc {
    imp_field *fields;
    size_t n_fields, cap_fields;
    imp_line *lines;
    size_t n_lines, cap_lines;
    ms_status st;
    char why[256];
};

imp_doc *imp_doc_new(void)
{
    return calloc(1, sizeof(imp_doc));
}

void imp_doc_free(imp_doc *doc)
{
    if (doc == NULL)
        return;
    for (size_t i = 0; i < doc->n_fields; i++) {
        free(doc->fields[i].lua);
        free(doc->fields[i].cite);
    }
    for (size_t i = 0; i < doc->n_lines; i++)
        free(doc->lines[i].text);
    free(doc->fields);
    free(doc->lines);
    free(doc);
}

static void fail(imp_doc *doc, ms_status st, const char *why)
{
    if (doc->st != MS_OK)
        return;
    doc->st = st;
    snprintf(doc->why, sizeof doc->why, "%s", why);
}

/* One line of text: control characters become spaces, long text is cut. */
static char *one_line(const char *s)
{
    size_t n = strlen(s);
    bool cut = n > LINE_MAX_CHARS;
    char *out = malloc((cut ? LINE_MAX_CHARS + 3 : n) + 1);
    if (out == NULL)
        return NULL;
    size_t k = cut ? LINE_MAX_CHARS : n;
    for (size_t i = 0; i < k; i++)
        out[i] = (unsigned char)s[i] < 0x20 || s[i] == 0x7f ? ' ' : s[i];
    memcpy(out + k, cut ? "..." : "", cut ? 4 : 1);
    return out;
}

static imp_field *find(const imp_doc *doc, int id)
{
    for (size_t i = 0; i < doc->n_fields; i++)
        if (doc->fields[i].id == id)
            return &doc->fields[i];
    return NULL;
}

void imp_set(imp_doc *doc, const char *path, const char *lua, const char *cite)
{
    if (doc == NULL || doc->st != MS_OK)
        return;
    int id = scn_table_find(scn_schema(), path);
    if (id < 0) {
        fail(doc, MS_EINVAL, path); /* a reader's mistake: no such field */
        return;
    }
    char *l = strdup(lua), *c = one_line(cite ? cite : "");
    imp_field *f = find(doc, id);
    if (l == NULL || c == NULL ||
        (f == NULL && !MS_GROW(doc->fields, doc->n_fields, doc->cap_fields, 16))) {
        free(l);
        free(c);
        fail(doc, MS_ENOMEM, "out of memory");
        return;
    }
    if (f == NULL) {
        f = &doc->fields[doc->n_fields++];
        f->id = id;
    } else {
        free(f->lua);
        free(f->cite);
    }
    f->lua = l;
    f->cite = c;
}

void imp_set_int(imp_doc *doc, const char *path, int64_t v, const char *cite)
{
    char buf[32];
    snprintf(buf, sizeof buf, "%" PRId64, v);
    imp_set(doc, path, buf, cite);
}

void imp_set_bool(imp_doc *doc, const char *path, bool v, const char *cite)
{
    imp_set(doc, path, v ? "true" : "false", cite);
}

void imp_set_num(imp_doc *doc, const char *path, double v, const char *cite)
{
    char buf[48];
    snprintf(buf, sizeof buf, "%.15g", v);
    if (strspn(buf, "-0123456789") == strlen(buf)) /* a float in Lua too */
        strcat(buf, ".0");
    imp_set(doc, path, buf, cite);
}

/* A Lua string literal: quotes, backslashes and control bytes escaped. */
void imp_set_str(imp_doc *doc, const char *path, const char *v, const char *cite)
{
    size_t n = strlen(v);
    char *q = malloc(4 * n + 3);
    if (q == NULL) {
        fail(doc, MS_ENOMEM, "out of memory");
        return;
    }
    size_t k = 0;
    q[k++] = '"';
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)v[i];
        if (c == '"' || c == '\\')
            q[k++] = '\\';
        if (c < 0x20 || c == 0x7f)
            k += (size_t)sprintf(q + k, "\\%03u", c);
        else
            q[k++] = (char)c;
    }
    q[k++] = '"';
    q[k] = '\0';
    imp_set(doc, path, q, cite);
    free(q);
}

const char *imp_get(const imp_doc *doc, const char *path)
{
    int id = scn_table_find(scn_schema(), path);
    const imp_field *f = id >= 0 ? find(doc, id) : NULL;
    return f ? f->lua : NULL;
}

bool imp_is_field(const char *path)
{
    return scn_table_find(scn_schema(), path) >= 0;
}

const char *imp_cite_of(const imp_doc *doc, const char *path)
{
    int id = scn_table_find(scn_schema(), path);
    const imp_field *f = id >= 0 ? find(doc, id) : NULL;
    return f ? f->cite : NULL;
}

bool imp_get_int(const imp_doc *doc, const char *path, int64_t *v)
{
    const char *s = imp_get(doc, path);
    char *end = NULL;
    if (s == NULL)
        return false;
    long long x = strtoll(s, &end, 10);
    if (*s == '\0' || *end != '\0')
        return false;
    *v = x;
    return true;
}

bool imp_get_bool(const imp_doc *doc, const char *path, bool *v)
{
    const char *s = imp_get(doc, path);
    if (s == NULL || (strcmp(s, "true") != 0 && strcmp(s, "false") != 0))
        return false;
    *v = strcmp(s, "true") == 0;
    return true;
}

static void add_line(imp_doc *doc, imp_note_kind kind, const char *fmt, va_list ap)
{
    if (doc == NULL || doc->st != MS_OK)
        return;
    char buf[1024];
    vsnprintf(buf, sizeof buf, fmt, ap);
    char *t = one_line(buf);
    if (t == NULL || !MS_GROW(doc->lines, doc->n_lines, doc->cap_lines, 16)) {
        free(t);
        fail(doc, MS_ENOMEM, "out of memory");
        return;
    }
    doc->lines[doc->n_lines++] = (imp_line){kind, t};
}

void imp_note(imp_doc *doc, imp_note_kind kind, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    add_line(doc, kind, fmt, ap);
    va_end(ap);
}

void imp_header(imp_doc *doc, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    add_line(doc, IMP_COUNT_KINDS, fmt, ap);
    va_end(ap);
}

size_t imp_note_count(const imp_doc *doc, imp_note_kind kind)
{
    size_t n = 0;
    for (size_t i = 0; i < doc->n_lines; i++)
        n += doc->lines[i].kind == kind;
    return n;
}

ms_status imp_doc_status(const imp_doc *doc, ms_diag *d)
{
    if (doc->st == MS_OK)
        return MS_OK;
    if (doc->st == MS_EINVAL)
        return ms_diag_set(d, MS_EINVAL, "import: no scenario field '%s'", doc->why);
    return ms_diag_set(d, doc->st, "import: %s", doc->why);
}

bool imp_listed(const char *const *list, const char *s)
{
    for (; *list; list++)
        if (strcmp(*list, s) == 0)
            return true;
    return false;
}

const char *imp_cite(char *buf, size_t size, const char *file, int line, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(buf, size, fmt, ap);
    va_end(ap);
    size_t at = n < 0 ? 0 : (size_t)n < size ? (size_t)n : size - 1;
    if (line > 0)
        snprintf(buf + at, size - at, " (%s:%d)", file, line);
    else if (file != NULL)
        snprintf(buf + at, size - at, " (%s)", file);
    return buf;
}

/* ---- rendering ----------------------------------------------------------- */

static int by_schema(const void *a, const void *b)
{
    const imp_field *x = a, *y = b;
    return (x->id > y->id) - (x->id < y->id);
}

static void put_field(FILE *f, const imp_field *fl, const char *indent)
{
    const st_field *sf = &scn_schema()->fields[fl->id];
    fprintf(f, "%s%s = %s,", indent, sf->key, fl->lua);
    if (fl->cite[0])
        fprintf(f, "  -- %s", fl->cite);
    fputc('\n', f);
}

/* The fields sorted by schema order: top-level ones first, then each
 * section in a table of its own (the schema keeps sections contiguous). */
static void put_fields(FILE *f, imp_field *sorted, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (scn_schema()->fields[sorted[i].id].section[0] == '\0')
            put_field(f, &sorted[i], "  ");
    const char *open = NULL;
    for (size_t i = 0; i < n; i++) {
        const char *sec = scn_schema()->fields[sorted[i].id].section;
        if (sec[0] == '\0')
            continue;
        if (open == NULL || strcmp(open, sec) != 0) {
            fprintf(f, "%s  %s = {\n", open ? "  },\n" : "", sec);
            open = sec;
        }
        put_field(f, &sorted[i], "    ");
    }
    if (open != NULL)
        fprintf(f, "  },\n");
}

static void put_notes(FILE *f, const imp_doc *doc)
{
    static const char *const titles[IMP_COUNT_KINDS] = {
        [IMP_NO_EFFECT] = "Not expressed: no effect on memory or step time in memsim's model",
        [IMP_NOT_MODELLED] = "Not expressed: would change memory or step time; memsim does not "
                             "model it",
    };
    for (int k = IMP_COUNT_KINDS - 1; k >= 0; k--) {
        if (imp_note_count(doc, (imp_note_kind)k) == 0)
            continue;
        fprintf(f, "--\n-- %s:\n", titles[k]);
        for (size_t i = 0; i < doc->n_lines; i++)
            if (doc->lines[i].kind == (imp_note_kind)k)
                fprintf(f, "--   %s\n", doc->lines[i].text);
    }
}

/* Close f (open_memstream sets *buf at the close) and hand its text over. */
static ms_status finish_text(FILE *f, char **text, char **buf, ms_diag *d)
{
    bool bad = ferror(f) != 0;
    bad |= fclose(f) != 0;
    if (bad) {
        free(*buf);
        return ms_diag_set(d, MS_ENOMEM, "import: out of memory writing the scenario");
    }
    *text = *buf;
    return MS_OK;
}

ms_status imp_render(const imp_doc *doc, char **text, ms_diag *d)
{
    ms_status st = imp_doc_status(doc, d);
    if (st != MS_OK)
        return st;
    imp_field *sorted = malloc((doc->n_fields + 1) * sizeof *sorted);
    char *buf = NULL;
    size_t len = 0;
    FILE *f = sorted ? open_memstream(&buf, &len) : NULL;
    if (f == NULL) {
        free(sorted);
        return ms_diag_set(d, MS_ENOMEM, "import: out of memory writing the scenario");
    }
    memcpy(sorted, doc->fields, doc->n_fields * sizeof *sorted);
    qsort(sorted, doc->n_fields, sizeof *sorted, by_schema);
    for (size_t i = 0; i < doc->n_lines; i++)
        if (doc->lines[i].kind == IMP_COUNT_KINDS)
            fprintf(f, "-- %s\n", doc->lines[i].text);
    fprintf(f, "return {\n");
    put_fields(f, sorted, doc->n_fields);
    fprintf(f, "}\n");
    put_notes(f, doc);
    free(sorted);
    return finish_text(f, text, &buf, d);
}

ms_status imp_render_notes(const imp_doc *doc, imp_note_kind kind, const char *prefix, char **text,
                           ms_diag *d)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    if (f == NULL)
        return ms_diag_set(d, MS_ENOMEM, "import: out of memory");
    for (size_t i = 0; i < doc->n_lines; i++)
        if (doc->lines[i].kind == kind)
            fprintf(f, "%s%s\n", prefix, doc->lines[i].text);
    return finish_text(f, text, &buf, d);
}
