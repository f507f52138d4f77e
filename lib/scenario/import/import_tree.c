/* YAML and JSON (JSON is YAML's flow style) read through libyaml into a
 * tree that keeps each value's line (import.h), for the MindFormers, NeMo
 * and Hugging Face readers.  libyaml resolves aliases (a MindFormers file's
 * *train_dataset) to shared nodes; the tree copies them, within a node
 * budget, so that an alias bomb is an error and not an exhausted machine. */
#include "import.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <yaml.h>

#define TREE_DEPTH 64
#define TREE_NODES 1000000

typedef struct tree_ctx {
    yaml_document_t *doc;
    const char *file;
    size_t budget;
    ms_diag *d;
} tree_ctx;

static ms_status copy_node(tree_ctx *t, yaml_node_t *y, imp_node *out, int depth);

static ms_status copy_scalar(tree_ctx *t, yaml_node_t *y, imp_node *out)
{
    out->type = IMP_SCALAR;
    out->text = strndup((const char *)y->data.scalar.value, y->data.scalar.length);
    out->quoted = y->data.scalar.style != YAML_PLAIN_SCALAR_STYLE;
    if (out->text == NULL)
        return ms_diag_set(t->d, MS_ENOMEM, "%s: out of memory", t->file);
    if (strlen(out->text) != y->data.scalar.length)
        return ms_diag_set(t->d, MS_EINVAL, "%s:%d: a value holds a NUL byte", t->file, out->line);
    return MS_OK;
}

static ms_status copy_map(tree_ctx *t, yaml_node_t *y, imp_node *out, int depth)
{
    size_t n = (size_t)(y->data.mapping.pairs.top - y->data.mapping.pairs.start);
    out->type = IMP_MAP;
    out->items = calloc(n ? n : 1, sizeof *out->items);
    out->keys = calloc(n ? n : 1, sizeof *out->keys);
    if (out->items == NULL || out->keys == NULL)
        return ms_diag_set(t->d, MS_ENOMEM, "%s: out of memory", t->file);
    for (size_t i = 0; i < n; i++, out->n++) {
        yaml_node_pair_t *p = &y->data.mapping.pairs.start[i];
        yaml_node_t *k = yaml_document_get_node(t->doc, p->key);
        if (k == NULL || k->type != YAML_SCALAR_NODE)
            return ms_diag_set(t->d, MS_EINVAL, "%s:%d: expected a key (a name), got a %s", t->file,
                               k ? (int)k->start_mark.line + 1 : out->line,
                               k && k->type == YAML_MAPPING_NODE ? "mapping" : "list");
        out->keys[i] = strndup((const char *)k->data.scalar.value, k->data.scalar.length);
        if (out->keys[i] == NULL)
            return ms_diag_set(t->d, MS_ENOMEM, "%s: out of memory", t->file);
        ms_status st =
            copy_node(t, yaml_document_get_node(t->doc, p->value), &out->items[i], depth + 1);
        if (st != MS_OK) {
            out->n++; /* so that the item is freed */
            return st;
        }
    }
    return MS_OK;
}

static ms_status copy_seq(tree_ctx *t, yaml_node_t *y, imp_node *out, int depth)
{
    size_t n = (size_t)(y->data.sequence.items.top - y->data.sequence.items.start);
    out->type = IMP_SEQ;
    out->items = calloc(n ? n : 1, sizeof *out->items);
    if (out->items == NULL)
        return ms_diag_set(t->d, MS_ENOMEM, "%s: out of memory", t->file);
    for (size_t i = 0; i < n; i++) {
        yaml_node_t *v = yaml_document_get_node(t->doc, y->data.sequence.items.start[i]);
        ms_status st = copy_node(t, v, &out->items[out->n++], depth + 1);
        if (st != MS_OK)
            return st;
    }
    return MS_OK;
}

static ms_status copy_node(tree_ctx *t, yaml_node_t *y, imp_node *out, int depth)
{
    if (y == NULL)
        return ms_diag_set(t->d, MS_EINVAL, "%s: a broken YAML document", t->file);
    out->line = (int)y->start_mark.line + 1;
    if (depth > TREE_DEPTH || t->budget == 0)
        return ms_diag_set(t->d, MS_ERANGE,
                           "%s:%d: nested deeper than %d or more than %d "
                           "values (aliases counted each time they are used)",
                           t->file, out->line, TREE_DEPTH, TREE_NODES);
    t->budget--;
    if (y->type == YAML_SCALAR_NODE)
        return copy_scalar(t, y, out);
    return y->type == YAML_MAPPING_NODE ? copy_map(t, y, out, depth) : copy_seq(t, y, out, depth);
}

static void node_release(imp_node *n)
{
    for (size_t i = 0; i < n->n; i++) {
        node_release(&n->items[i]);
        if (n->keys != NULL)
            free(n->keys[i]);
    }
    free(n->items);
    free(n->keys);
    free(n->text);
}

void imp_tree_free(imp_node *root)
{
    if (root == NULL)
        return;
    node_release(root);
    free(root);
}

static ms_status parse_error(const imp_source *src, const yaml_parser_t *p, ms_diag *d)
{
    if (p->error == YAML_MEMORY_ERROR)
        return ms_diag_set(d, MS_ENOMEM, "%s: out of memory", src->path);
    return ms_diag_set(d, MS_EPARSE, "%s:%d: not valid YAML or JSON: %s%s%s", src->path,
                       (int)p->problem_mark.line + 1, p->problem ? p->problem : "error",
                       p->context ? " " : "", p->context ? p->context : "");
}

/* The loaded document's top mapping into a new tree. */
static ms_status copy_document(const imp_source *src, yaml_document_t *doc, imp_node **root,
                               ms_diag *d)
{
    yaml_node_t *top = yaml_document_get_root_node(doc);
    if (top == NULL || top->type != YAML_MAPPING_NODE)
        return ms_diag_set(d, MS_EINVAL,
                           "%s: expected a mapping of keys at the top (a config), "
                           "got %s",
                           src->path, top == NULL ? "an empty file" : "a single value or a list");
    imp_node *n = calloc(1, sizeof *n);
    tree_ctx t = {doc, src->path, TREE_NODES, d};
    ms_status st = n == NULL ? ms_diag_set(d, MS_ENOMEM, "%s: out of memory", src->path)
                             : copy_node(&t, top, n, 0);
    if (st != MS_OK)
        imp_tree_free(n);
    else
        *root = n;
    return st;
}

ms_status imp_tree_parse(const imp_source *src, imp_node **root, ms_diag *d)
{
    yaml_parser_t parser;
    yaml_document_t doc;
    *root = NULL;
    if (!yaml_parser_initialize(&parser))
        return ms_diag_set(d, MS_ENOMEM, "%s: out of memory", src->path);
    yaml_parser_set_input_string(&parser, (const unsigned char *)src->text, src->len);
    ms_status st;
    if (!yaml_parser_load(&parser, &doc)) {
        st = parse_error(src, &parser, d);
    } else {
        st = copy_document(src, &doc, root, d);
        yaml_document_delete(&doc);
    }
    yaml_parser_delete(&parser);
    return st;
}

const imp_node *imp_tree_get(const imp_node *n, const char *path)
{
    char key[128];
    while (n != NULL && *path) {
        size_t len = strcspn(path, ".");
        if (n->type != IMP_MAP || len >= sizeof key)
            return NULL;
        memcpy(key, path, len);
        key[len] = '\0';
        const imp_node *next = NULL;
        for (size_t i = 0; i < n->n && next == NULL; i++)
            if (strcmp(n->keys[i], key) == 0)
                next = &n->items[i];
        n = next;
        path += len + (path[len] == '.');
    }
    return n;
}

bool imp_scalar_int(const imp_node *n, int64_t *v)
{
    char *end = NULL;
    if (n == NULL || n->type != IMP_SCALAR || n->quoted || n->text[0] == '\0')
        return false;
    errno = 0;
    long long x = strtoll(n->text, &end, 10);
    if (*end != '\0' || errno != 0)
        return false;
    *v = x;
    return true;
}

bool imp_scalar_num(const imp_node *n, double *v)
{
    char *end = NULL;
    if (n == NULL || n->type != IMP_SCALAR || n->quoted || n->text[0] == '\0')
        return false;
    double x = strtod(n->text, &end);
    if (*end != '\0' || !isfinite(x))
        return false;
    *v = x;
    return true;
}

bool imp_scalar_bool(const imp_node *n, bool *v)
{
    static const char *const yes[] = {"true", "yes", "on"}, *const no[] = {"false", "no", "off"};
    if (n == NULL || n->type != IMP_SCALAR || n->quoted)
        return false;
    for (size_t i = 0; i < 3; i++)
        if (strcasecmp(n->text, yes[i]) == 0 || strcasecmp(n->text, no[i]) == 0) {
            *v = strcasecmp(n->text, yes[i]) == 0;
            return true;
        }
    return false;
}

static bool null_scalar(const imp_node *n)
{
    return n->type == IMP_SCALAR && !n->quoted &&
           (n->text[0] == '\0' || strcmp(n->text, "~") == 0 || strcasecmp(n->text, "null") == 0);
}

static void lua_string(FILE *f, const char *s)
{
    fputc('"', f);
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\')
            fputc('\\', f);
        if (c < 0x20 || c == 0x7f)
            fprintf(f, "\\%03u", c);
        else
            fputc(c, f);
    }
    fputc('"', f);
}

static bool write_lua(FILE *f, const imp_node *n)
{
    bool b;
    double x;
    if (n->type == IMP_SCALAR) {
        if (null_scalar(n))
            return false;
        if (imp_scalar_bool(n, &b))
            fputs(b ? "true" : "false", f);
        else if (imp_scalar_num(n, &x))
            fputs(n->text, f);
        else
            lua_string(f, n->text);
        return true;
    }
    fputc('{', f);
    for (size_t i = 0; i < n->n; i++) {
        fputs(i ? ", " : " ", f);
        if (n->type == IMP_MAP) {
            fputc('[', f);
            lua_string(f, n->keys[i]);
            fputs("] = ", f);
        }
        if (!write_lua(f, &n->items[i]))
            return false;
    }
    fputs(n->n ? " }" : "}", f);
    return true;
}

ms_status imp_tree_lua(const imp_node *n, char **lua, ms_diag *d)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    if (f == NULL)
        return ms_diag_set(d, MS_ENOMEM, "out of memory");
    bool ok = write_lua(f, n);
    bool bad = ferror(f) != 0;
    bad |= fclose(f) != 0;
    if (!ok || bad) {
        free(buf);
        return bad ? ms_diag_set(d, MS_ENOMEM, "out of memory")
                   : ms_diag_set(d, MS_EINVAL, "line %d: a null value where memsim needs one",
                                 n->line);
    }
    *lua = buf;
    return MS_OK;
}
