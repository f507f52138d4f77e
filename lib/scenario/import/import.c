/* memsim import (include/memsim/scenario.h): the file is read, its format
 * told (by name, else by its first bytes), and the reader for that format
 * fills a cited scenario (import_doc.c); the name, --device and --set are
 * the same for every format.  ms_scenario_load calls scn_import_text for a
 * file that is not a scenario, and scn_import_explain to add, to an error
 * about a field, the argument that field came from. */
#include "import.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "lib/scenario/scenario_load.h"

/* Scripts and configs are small; a larger file is not one. */
#define IMPORT_MAX_BYTES (16u << 20)

struct ms_import {
    imp_doc *doc;
    char *scenario, *not_modelled, *no_effect;
    char kind[64];
};

static ms_status read_all(const char *path, char **text, size_t *len, ms_diag *d)
{
    FILE *f = fopen(path, "rb");
    if (f == NULL)
        return ms_diag_set(d, MS_ENOENT, "cannot open %s: %s", path, strerror(errno));
    char *buf = malloc(IMPORT_MAX_BYTES + 1);
    size_t n = buf ? fread(buf, 1, IMPORT_MAX_BYTES + 1, f) : 0;
    bool bad = buf == NULL || ferror(f);
    fclose(f);
    if (bad || n > IMPORT_MAX_BYTES) {
        free(buf);
        return ms_diag_set(d, bad ? MS_EIO : MS_ERANGE,
                           bad ? "%s: cannot read"
                               : "%s: larger than 16 MiB: not a training script or config",
                           path);
    }
    buf[n] = '\0';
    if (strlen(buf) != n) {
        free(buf);
        return ms_diag_set(d, MS_EINVAL, "%s: a NUL byte: not a text file", path);
    }
    *text = buf;
    *len = n;
    return MS_OK;
}

static bool has_suffix(const char *path, const char *suffix)
{
    size_t n = strlen(path), m = strlen(suffix);
    return n > m && strcmp(path + n - m, suffix) == 0;
}

/* A file named otherwise: JSON starts with '{'; a scenario returns a
 * table; a command line has --arguments or runs a .py file; YAML has keys. */
static ms_import_format sniff(const char *t)
{
    const char *p = t + strspn(t, " \t\r\n");
    if (*p == '{')
        return MS_IMPORT_HF;
    if (strncmp(p, "return", 6) == 0 || strstr(t, "\nreturn") != NULL)
        return MS_IMPORT_SCENARIO;
    for (const char *q = strstr(t, "--"); q != NULL; q = strstr(q + 2, "--"))
        if ((q == t || q[-1] == ' ' || q[-1] == '\n' || q[-1] == '\t') && q[2] >= 'a' &&
            q[2] <= 'z')
            return MS_IMPORT_MEGATRON;
    if (strstr(t, ".py") != NULL)
        return MS_IMPORT_MEGATRON;
    return strstr(t, ":\n") != NULL || strstr(t, ": ") != NULL ? MS_IMPORT_YAML
                                                               : MS_IMPORT_SCENARIO;
}

static ms_import_format by_name(const char *path)
{
    static const struct {
        const char *suffix;
        ms_import_format fmt;
    } names[] = {{".lua", MS_IMPORT_SCENARIO},  {".sh", MS_IMPORT_MEGATRON},
                 {".bash", MS_IMPORT_MEGATRON}, {".yaml", MS_IMPORT_YAML},
                 {".yml", MS_IMPORT_YAML},      {".json", MS_IMPORT_HF}};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (has_suffix(path, names[i].suffix))
            return names[i].fmt;
    return MS_IMPORT_AUTO;
}

ms_status ms_import_detect(const char *path, ms_import_format *fmt, ms_diag *d)
{
    if (path == NULL || fmt == NULL)
        return ms_diag_set(d, MS_EINVAL, "ms_import_detect: NULL argument");
    *fmt = by_name(path);
    if (*fmt != MS_IMPORT_AUTO)
        return MS_OK;
    char *text = NULL;
    size_t len = 0;
    ms_status st = read_all(path, &text, &len, d);
    if (st == MS_OK)
        *fmt = sniff(text);
    free(text);
    return st;
}

/* ---- the readers ----------------------------------------------------------- */

static ms_status read_tree_format(const imp_source *src, imp_doc *doc, ms_diag *d)
{
    imp_node *root = NULL;
    ms_status st = imp_tree_parse(src, &root, d);
    if (st != MS_OK)
        return st;
    const imp_node *model = imp_tree_get(root, "model");
    bool nemo = imp_tree_get(root, "trainer") != NULL && model != NULL &&
                imp_tree_get(model, "num_layers") != NULL;
    if (src->opt->format == MS_IMPORT_HF || has_suffix(src->path, ".json")) {
        snprintf(src->kind, src->kind_size, "a Hugging Face model config");
        st = imp_read_hf(src, root, doc, d);
    } else if (nemo) {
        snprintf(src->kind, src->kind_size, "a NeMo training configuration");
        st = imp_read_nemo(src, root, doc, d);
    } else {
        snprintf(src->kind, src->kind_size, "a MindFormers configuration");
        st = imp_read_mindformers(src, root, doc, d);
    }
    imp_tree_free(root);
    return st;
}

/* KEY=VALUE into the field, as the loader's overrides type it. */
static ms_status apply_set(imp_doc *doc, const char *kv, ms_diag *d)
{
    const char *eq = strchr(kv, '=');
    char key[128], cite[700];
    if (eq == NULL || eq == kv || (size_t)(eq - kv) >= sizeof key)
        return ms_diag_set(d, MS_EINVAL,
                           "override '%s': expected KEY=VALUE, e.g. "
                           "model.seq_length=8192",
                           kv);
    snprintf(key, sizeof key, "%.*s", (int)(eq - kv), kv);
    int id = scn_table_find(scn_schema(), key);
    if (id < 0)
        return ms_diag_set(d, MS_EINVAL, "override '%s': unknown key '%s'", kv, key);
    snprintf(cite, sizeof cite, "--set %s", kv);
    const char *v = eq + 1;
    char *end = NULL;
    st_type t = scn_schema()->fields[id].type;
    bool number = *v != '\0' && (strtod(v, &end), *end == '\0');
    if (t == ST_BOOL && (strcmp(v, "true") == 0 || strcmp(v, "false") == 0))
        imp_set(doc, key, v, cite);
    else if ((t == ST_INT || t == ST_NUM || t == ST_SIZE || t == ST_TREE) && number)
        imp_set(doc, key, v, cite);
    else if (t == ST_STR || t == ST_SIZE)
        imp_set_str(doc, key, v, cite);
    else
        return ms_diag_set(d, MS_EINVAL, "override '%s': the value must be %s", kv,
                           scn_table_type_name(t));
    return MS_OK;
}

static void base_name(const char *path, char *out, size_t size)
{
    const char *b = strrchr(path, '/');
    b = b ? b + 1 : path;
    size_t n = strcspn(b, ".");
    snprintf(out, size, "%.*s", (int)(n ? n : strlen(b)), b);
}

/* --set before the reader (so that what it derives sees them) and after
 * (so that they win over what it read). */
static ms_status apply_sets(const imp_source *src, imp_doc *doc, ms_diag *d)
{
    ms_status st = MS_OK;
    for (size_t i = 0; st == MS_OK && i < src->opt->n_sets; i++)
        st = apply_set(doc, src->opt->sets[i], d);
    return st;
}

static ms_status common_fields(const imp_source *src, imp_doc *doc, ms_diag *d)
{
    char name[128];
    base_name(src->path, name, sizeof name);
    imp_set_str(doc, "name", name, "the file's name");
    if (src->opt->device != NULL)
        imp_set_str(doc, "device", src->opt->device, "--device");
    return apply_sets(src, doc, d);
}

static ms_status render(ms_import *im, ms_diag *d)
{
    imp_header(im->doc, "Each field cites the argument or key it came from; what could not be "
                        "expressed is listed at the end.");
    ms_status st = imp_render(im->doc, &im->scenario, d);
    if (st == MS_OK)
        st = imp_render_notes(im->doc, IMP_NOT_MODELLED, "", &im->not_modelled, d);
    if (st == MS_OK)
        st = imp_render_notes(im->doc, IMP_NO_EFFECT, "", &im->no_effect, d);
    return st;
}

static ms_status import_text(const char *path, const char *text, size_t len,
                             const ms_import_options *opt, ms_import *im, ms_diag *d)
{
    imp_source src = {path,
                      strrchr(path, '/') ? strrchr(path, '/') + 1 : path,
                      text,
                      len,
                      opt,
                      im->kind,
                      sizeof im->kind};
    ms_import_format fmt = opt->format != MS_IMPORT_AUTO ? opt->format : by_name(path);
    if (fmt == MS_IMPORT_AUTO)
        fmt = sniff(text);
    imp_header(im->doc, "Imported by memsim import from %s.", path);
    ms_status st = apply_sets(&src, im->doc, d);
    if (st != MS_OK) {
    } else if (fmt == MS_IMPORT_SCENARIO) {
        st = ms_diag_set(d, MS_EINVAL,
                         "%s: a scenario file already (memsim run takes it as it "
                         "is)",
                         path);
    } else if (fmt == MS_IMPORT_MEGATRON) {
        st = imp_read_megatron(&src, im->doc, d);
    } else {
        st = read_tree_format(&src, im->doc, d);
    }
    if (st == MS_OK)
        st = common_fields(&src, im->doc, d);
    return st == MS_OK ? render(im, d) : st;
}

ms_status ms_import_read(const char *path, const ms_import_options *opt, ms_import **out,
                         ms_diag *d)
{
    static const ms_import_options none = {0};
    if (out != NULL)
        *out = NULL;
    if (path == NULL || out == NULL ||
        (opt && ((opt->n_env && !opt->env) || (opt->n_sets && !opt->sets))))
        return ms_diag_set(d, MS_EINVAL, "ms_import_read: NULL argument");
    ms_import *im = calloc(1, sizeof *im);
    char *text = NULL;
    size_t len = 0;
    ms_status st = im == NULL || (im->doc = imp_doc_new()) == NULL
                       ? ms_diag_set(d, MS_ENOMEM, "out of memory importing %s", path)
                       : read_all(path, &text, &len, d);
    if (st == MS_OK)
        st = import_text(path, text, len, opt ? opt : &none, im, d);
    free(text);
    if (st != MS_OK) {
        ms_import_free(im);
        return st;
    }
    *out = im;
    return MS_OK;
}

const char *ms_import_scenario(const ms_import *im)
{
    return im ? im->scenario : NULL;
}

const char *ms_import_not_modelled(const ms_import *im)
{
    return im ? im->not_modelled : NULL;
}

const char *ms_import_no_effect(const ms_import *im)
{
    return im ? im->no_effect : NULL;
}

const char *ms_import_kind(const ms_import *im)
{
    return im ? im->kind : NULL;
}

ms_status ms_import_free(ms_import *im)
{
    if (im == NULL)
        return MS_EINVAL;
    imp_doc_free(im->doc);
    free(im->scenario);
    free(im->not_modelled);
    free(im->no_effect);
    free(im);
    return MS_OK;
}

/* ---- for ms_scenario_load ------------------------------------------------------ */

ms_status scn_import_text(const char *path, const char *const *sets, size_t n_sets, ms_import **im,
                          ms_diag *d)
{
    ms_import_format fmt;
    *im = NULL;
    ms_status st = ms_import_detect(path, &fmt, d);
    if (st != MS_OK || fmt == MS_IMPORT_SCENARIO)
        return st == MS_ENOENT ? MS_OK : st; /* the Lua loader says it cannot open it */
    ms_import_options opt = {.sets = sets, .n_sets = n_sets};
    return ms_import_read(path, &opt, im, d);
}

/* "... 'model.num_layers' ..." about an imported field: say where it came
 * from. */
void scn_import_explain(const ms_import *im, ms_diag *d)
{
    char path[128], add[MS_DIAG_MAX];
    size_t at = 0;
    add[0] = '\0';
    for (int i = 0; im != NULL && d != NULL && i < scn_schema()->n; i++) {
        scn_table_path(scn_schema(), i, path, sizeof path);
        const char *cite = imp_cite_of(im->doc, path);
        char quoted[140], before[140];
        snprintf(quoted, sizeof quoted, "'%s'", path);
        snprintf(before, sizeof before, "%s (", path);
        if (cite == NULL || at >= sizeof add ||
            (strstr(d->msg, quoted) == NULL && strstr(d->msg, before) == NULL))
            continue;
        at +=
            (size_t)snprintf(add + at, sizeof add - at, "%s%s from %s", at ? "; " : "", path, cite);
    }
    if (at > 0 && strlen(d->msg) + at + 4 < sizeof d->msg)
        snprintf(d->msg + strlen(d->msg), sizeof d->msg - strlen(d->msg), " (%s)", add);
}
