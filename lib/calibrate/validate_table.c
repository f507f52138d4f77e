/* Reading validation tables (CSV through libcsv).  The columns are named in
 * calibrate.h; every error names the table, the row (1-based among the data
 * rows; the header is row 0) and the column. */
#include "validation.h"

#include <csv.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/base/growable.h"

/* The records of a CSV file as strings. */
typedef struct csv_records {
    char ***rec; /* rec[r][f] */
    size_t *n_fields;
    size_t n, cap;
    char **cur; /* the record being read */
    size_t n_cur, cap_cur;
    bool oom;
} csv_records;

static void on_field(void *s, size_t len, void *user)
{
    csv_records *c = user;
    char *f = malloc(len + 1);
    if (f == NULL || !MS_GROW(c->cur, c->n_cur, c->cap_cur, 8)) {
        free(f);
        c->oom = true;
        return;
    }
    memcpy(f, s, len);
    f[len] = '\0';
    c->cur[c->n_cur++] = f;
}

static void on_record(int term, void *user)
{
    csv_records *c = user;
    (void)term;
    if (c->oom || !MS_GROW(c->rec, c->n, c->cap, 16)) {
        c->oom = true;
        return;
    }
    size_t *nf = realloc(c->n_fields, c->cap * sizeof *nf);
    if (nf == NULL) {
        c->oom = true;
        return;
    }
    c->n_fields = nf;
    c->rec[c->n] = c->cur;
    c->n_fields[c->n++] = c->n_cur;
    c->cur = NULL;
    c->n_cur = c->cap_cur = 0;
}

static void records_free(csv_records *c)
{
    for (size_t r = 0; r < c->n; r++) {
        for (size_t f = 0; f < c->n_fields[r]; f++)
            free(c->rec[r][f]);
        free(c->rec[r]);
    }
    for (size_t f = 0; f < c->n_cur; f++)
        free(c->cur[f]);
    free(c->cur);
    free(c->rec);
    free(c->n_fields);
}

static ms_status read_csv(const char *path, csv_records *c, ms_diag *d)
{
    FILE *f = fopen(path, "rb");
    if (f == NULL)
        return ms_diag_set(d, MS_EIO, "%s: cannot read: %s", path, strerror(errno));
    struct csv_parser p;
    csv_init(&p, CSV_STRICT | CSV_APPEND_NULL | CSV_STRICT_FINI);
    char buf[8192];
    size_t got;
    ms_status st = MS_OK;
    while (st == MS_OK && (got = fread(buf, 1, sizeof buf, f)) > 0)
        if (csv_parse(&p, buf, got, on_field, on_record, c) != got)
            st = ms_diag_set(d, MS_EPARSE, "%s: record %zu: %s", path, c->n + 1,
                             csv_strerror(csv_error(&p)));
    if (st == MS_OK && ferror(f))
        st = ms_diag_set(d, MS_EIO, "%s: read error", path);
    if (st == MS_OK && csv_fini(&p, on_field, on_record, c) != 0)
        st = ms_diag_set(d, MS_EPARSE, "%s: %s", path, csv_strerror(csv_error(&p)));
    csv_free(&p);
    fclose(f);
    if (st == MS_OK && c->oom)
        st = ms_diag_set(d, MS_ENOMEM, "%s: out of memory", path);
    return st;
}

/* ---- columns ----------------------------------------------------------- */

enum {
    COL_ID = 0,
    COL_SOURCE,
    COL_SPLIT,
    COL_SCENARIO,
    COL_POLICY,
    COL_FORMULA,
    COL_NOTES,
    COL_TIME,
    COL_TFLOPS,
    COL_MEM,
    COL_RESERVED
};

static const char *const reserved[COL_RESERVED] = {"id",
                                                   "source",
                                                   "split",
                                                   "scenario",
                                                   "policy",
                                                   "flops_formula",
                                                   "notes",
                                                   "measured_step_time_s",
                                                   "measured_tflops_per_device",
                                                   "measured_peak_memory_gib"};

typedef struct table_ctx {
    const char *path;
    int table;
    int col[COL_RESERVED]; /* index of each reserved column, -1 if absent */
    char **header;
    size_t n_cols;
    ms_diag *d;
} table_ctx;

static ms_status map_header(table_ctx *t)
{
    for (int i = 0; i < COL_RESERVED; i++)
        t->col[i] = -1;
    for (size_t c = 0; c < t->n_cols; c++) {
        for (int i = 0; i < COL_RESERVED; i++)
            if (strcmp(t->header[c], reserved[i]) == 0) {
                if (t->col[i] >= 0)
                    return ms_diag_set(t->d, MS_EPARSE,
                                       "%s: row 0 (the header): column '%s' "
                                       "appears twice",
                                       t->path, reserved[i]);
                t->col[i] = (int)c;
            }
        if (t->header[c][0] == '\0')
            return ms_diag_set(t->d, MS_EPARSE, "%s: row 0 (the header): column %zu has no name",
                               t->path, c + 1);
    }
    static const int required[] = {COL_ID, COL_SOURCE, COL_SPLIT, COL_SCENARIO};
    for (size_t i = 0; i < sizeof required / sizeof required[0]; i++)
        if (t->col[required[i]] < 0)
            return ms_diag_set(t->d, MS_EPARSE, "%s: row 0 (the header): missing column '%s'",
                               t->path, reserved[required[i]]);
    if (t->col[COL_TIME] < 0 && t->col[COL_TFLOPS] < 0 && t->col[COL_MEM] < 0)
        return ms_diag_set(t->d, MS_EPARSE,
                           "%s: row 0 (the header): missing column "
                           "'measured_step_time_s' (or 'measured_tflops_per_device', "
                           "'measured_peak_memory_gib')",
                           t->path);
    return MS_OK;
}

static bool is_reserved(const table_ctx *t, size_t c)
{
    for (int i = 0; i < COL_RESERVED; i++)
        if (t->col[i] == (int)c)
            return true;
    return false;
}

static const char *cell(const table_ctx *t, char **rec, int which)
{
    return t->col[which] >= 0 ? rec[t->col[which]] : "";
}

/* A measured figure: empty (not measured) or a number > 0. */
static ms_status measured(const table_ctx *t, char **rec, int which, int row, double *out)
{
    const char *s = cell(t, rec, which);
    *out = 0;
    if (s[0] == '\0')
        return MS_OK;
    char *end = NULL;
    errno = 0;
    double v = strtod(s, &end);
    if (*end != '\0' || errno != 0 || !isfinite(v))
        return ms_diag_set(t->d, MS_EPARSE, "%s: row %d, column '%s': '%s' is not a number",
                           t->path, row, reserved[which], s);
    if (!(v > 0))
        return ms_diag_set(t->d, MS_ERANGE,
                           "%s: row %d, column '%s': a measured value must "
                           "be > 0 (got %s)",
                           t->path, row, reserved[which], s);
    *out = v;
    return MS_OK;
}

static ms_status copy_text(const table_ctx *t, int row, int which, const char *s, char *out,
                           size_t size)
{
    if (strlen(s) >= size)
        return ms_diag_set(t->d, MS_ERANGE, "%s: row %d, column '%s': longer than %zu bytes",
                           t->path, row, reserved[which], size - 1);
    memcpy(out, s, strlen(s) + 1);
    return MS_OK;
}

static ms_status row_text(const table_ctx *t, char **rec, int row, val_row *r)
{
    const char *split = cell(t, rec, COL_SPLIT);
    if (strcmp(split, "train") != 0 && strcmp(split, "test") != 0)
        return ms_diag_set(t->d, MS_EPARSE,
                           "%s: row %d, column 'split': expected train or "
                           "test (got '%s')",
                           t->path, row, split);
    r->train = strcmp(split, "train") == 0;
    static const int required[] = {COL_ID, COL_SOURCE, COL_SCENARIO};
    for (size_t i = 0; i < sizeof required / sizeof required[0]; i++)
        if (cell(t, rec, required[i])[0] == '\0')
            return ms_diag_set(t->d, MS_EPARSE, "%s: row %d, column '%s': empty", t->path, row,
                               reserved[required[i]]);
    ms_status st = copy_text(t, row, COL_ID, cell(t, rec, COL_ID), r->id, sizeof r->id);
    if (st == MS_OK)
        st = copy_text(t, row, COL_SOURCE, cell(t, rec, COL_SOURCE), r->source, sizeof r->source);
    if (st == MS_OK)
        st = copy_text(t, row, COL_POLICY, cell(t, rec, COL_POLICY), r->policy, sizeof r->policy);
    if (st != MS_OK)
        return st;
    /* The scenario, relative to the table. */
    const char *scn = cell(t, rec, COL_SCENARIO), *slash = strrchr(t->path, '/');
    int n = scn[0] == '/' || slash == NULL ? snprintf(r->scenario, sizeof r->scenario, "%s", scn)
                                           : snprintf(r->scenario, sizeof r->scenario, "%.*s/%s",
                                                      (int)(slash - t->path), t->path, scn);
    if (n < 0 || (size_t)n >= sizeof r->scenario)
        return ms_diag_set(t->d, MS_ERANGE, "%s: row %d, column 'scenario': path too long", t->path,
                           row);
    return MS_OK;
}

static ms_status row_measured(const table_ctx *t, char **rec, int row, val_row *r)
{
    ms_status st = measured(t, rec, COL_TIME, row, &r->meas_time_s);
    if (st == MS_OK)
        st = measured(t, rec, COL_TFLOPS, row, &r->meas_tflops);
    if (st == MS_OK)
        st = measured(t, rec, COL_MEM, row, &r->meas_mem_gib);
    if (st != MS_OK)
        return st;
    if (r->meas_time_s == 0 && r->meas_tflops == 0 && r->meas_mem_gib == 0)
        return ms_diag_set(t->d, MS_EPARSE,
                           "%s: row %d, column '%s': no measured value on this "
                           "row",
                           t->path, row, reserved[t->col[COL_TIME] >= 0 ? COL_TIME : COL_TFLOPS]);
    const char *f = cell(t, rec, COL_FORMULA);
    if (strcmp(f, "model") == 0)
        r->formula = VAL_FLOPS_MODEL;
    else if (strcmp(f, "megatron_sc21") == 0)
        r->formula = VAL_FLOPS_MEGATRON_SC21;
    else if (f[0] != '\0' || r->meas_tflops > 0)
        return ms_diag_set(t->d, MS_EPARSE,
                           "%s: row %d, column 'flops_formula': expected model "
                           "or megatron_sc21 (got '%s')",
                           t->path, row, f);
    return MS_OK;
}

/* The scenario-field columns as --set overrides. */
static ms_status row_sets(const table_ctx *t, char **rec, val_row *r)
{
    r->sets = calloc(t->n_cols, sizeof *r->sets);
    r->set_columns = calloc(t->n_cols, sizeof *r->set_columns);
    if (r->sets == NULL || r->set_columns == NULL)
        return MS_ENOMEM;
    for (size_t c = 0; c < t->n_cols; c++) {
        if (is_reserved(t, c) || rec[c][0] == '\0')
            continue;
        size_t len = strlen(t->header[c]) + strlen(rec[c]) + 2;
        char *s = malloc(len), *col = strdup(t->header[c]);
        if (s == NULL || col == NULL) {
            free(s);
            free(col);
            return MS_ENOMEM;
        }
        snprintf(s, len, "%s=%s", t->header[c], rec[c]);
        r->sets[r->n_sets] = s;
        r->set_columns[r->n_sets++] = col;
    }
    return MS_OK;
}

/* Load the row's scenario; a failure names the column that caused it. */
static ms_status row_scenario(const table_ctx *t, val_row *r)
{
    ms_diag sd = {0};
    ms_status st =
        ms_scenario_load(r->scenario, (const char *const *)r->sets, r->n_sets, &r->sc, &sd);
    if (st == MS_OK)
        return MS_OK;
    for (size_t i = 0; i < r->n_sets; i++) {
        const ms_scenario *one = NULL;
        ms_diag od = {0};
        if (ms_scenario_load(r->scenario, (const char *const *)&r->sets[i], 1, &one, &od) ==
            MS_OK) {
            ms_scenario_free(one);
            continue;
        }
        bool unknown = strstr(od.msg, "unknown key") != NULL;
        return ms_diag_set(t->d, st, "%s: row %d (%s), column '%s': %s (%s)", t->path, r->row,
                           r->id, r->set_columns[i],
                           unknown ? "unknown scenario field" : "bad scenario value", od.msg);
    }
    return ms_diag_set(t->d, st, "%s: row %d (%s), column 'scenario': %s", t->path, r->row, r->id,
                       sd.msg);
}

static ms_status load_row(table_ctx *t, char **rec, size_t n_fields, int row, val_row *r)
{
    memset(r, 0, sizeof *r);
    r->table = t->table;
    r->row = row;
    if (n_fields != t->n_cols)
        return ms_diag_set(t->d, MS_EPARSE, "%s: row %d: %zu fields, the header has %zu", t->path,
                           row, n_fields, t->n_cols);
    ms_status st = row_text(t, rec, row, r);
    if (st == MS_OK)
        st = row_measured(t, rec, row, r);
    if (st == MS_OK && (st = row_sets(t, rec, r)) == MS_ENOMEM)
        ms_diag_set(t->d, st, "%s: out of memory", t->path);
    if (st == MS_OK)
        st = row_scenario(t, r);
    return st;
}

static bool blank(char **rec, size_t n)
{
    return n == 0 || (n == 1 && rec[0][0] == '\0');
}

ms_status val_table_load(struct ms_validation *v, const char *path, ms_diag *d)
{
    csv_records c = {0};
    ms_status st = read_csv(path, &c, d);
    if (st == MS_OK && c.n == 0)
        st = ms_diag_set(d, MS_EPARSE, "%s: empty table (expected a header row)", path);
    table_ctx t = {.path = path, .table = (int)v->n_tables - 1, .d = d};
    if (st == MS_OK) {
        t.header = c.rec[0];
        t.n_cols = c.n_fields[0];
        st = map_header(&t);
    }
    val_row *grown = st == MS_OK ? realloc(v->rows, (v->n_rows + c.n) * sizeof *v->rows) : NULL;
    if (st == MS_OK && grown == NULL)
        st = ms_diag_set(d, MS_ENOMEM, "%s: out of memory", path);
    if (grown != NULL)
        v->rows = grown;
    int row = 0;
    for (size_t i = 1; st == MS_OK && i < c.n; i++) {
        if (blank(c.rec[i], c.n_fields[i]))
            continue;
        st = load_row(&t, c.rec[i], c.n_fields[i], ++row, &v->rows[v->n_rows]);
        v->n_rows++; /* freed with the others, even half-loaded */
    }
    if (st == MS_OK && row == 0)
        st = ms_diag_set(d, MS_EPARSE, "%s: no data rows", path);
    records_free(&c);
    return st;
}

void val_rows_free(struct ms_validation *v)
{
    for (size_t i = 0; i < v->n_rows; i++) {
        val_row *r = &v->rows[i];
        for (size_t k = 0; k < r->n_sets; k++) {
            free(r->sets[k]);
            free(r->set_columns[k]);
        }
        free(r->sets);
        free(r->set_columns);
        if (r->sc != NULL)
            ms_scenario_free(r->sc);
    }
    free(v->rows);
    v->rows = NULL;
    v->n_rows = 0;
}
