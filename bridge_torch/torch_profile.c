/* Reading back the profile CSV that ms_torch_profile_write (memsim_torch's
 * Session.write_profile) writes, through libcsv, into a step's program:
 * what lets `memsim profile-torch` plan on a step measured in PyTorch.
 * The program is rebuilt through the public calls, so a file is held to
 * the same checks as a live recording. */
#include <csv.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "memsim/torch.h"

enum {
    F_ROW,
    F_ID,
    F_NAME,
    F_KIND,
    F_START,
    F_END,
    F_ALLOC,
    F_RES,
    F_BYTES,
    F_PROD,
    F_USES,
    F_DECISION,
    F_COUNT,
    F_MAX = 4096
};

static const char *const columns[F_COUNT] = {"row",      "id",       "name",      "phase_or_kind",
                                             "start_ns", "end_ns",   "allocated", "reserved",
                                             "bytes",    "producer", "uses",      "decision"};

typedef struct reader {
    ms_torch_step *s;
    ms_torch_measure *m;
    ms_diag *d;
    const char *path;
    ms_status st;
    size_t line;
    int nf;
    bool overlong;
    uint32_t n_ops, n_tensors, n_segs;
    char f[F_COUNT][F_MAX];
} reader;

static void fail(reader *r, const char *fmt, const char *a, const char *b)
{
    if (r->st != MS_OK)
        return;
    char what[512];
    snprintf(what, sizeof what, fmt, a, b);
    r->st = ms_diag_set(r->d, MS_EPARSE, "%s: line %zu: %s", r->path, r->line, what);
}

static bool number(reader *r, int field, int64_t lo, long long *out)
{
    const char *s = r->f[field];
    char *end = NULL;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (*s == '\0' || *end != '\0' || errno != 0 || v < lo) {
        fail(r, "field %s: '%s' is not an integer in range", columns[field], s);
        return false;
    }
    *out = v;
    return true;
}

static void read_step(reader *r)
{
    long long id, t, pa, pr, cap;
    if (number(r, F_ID, INT32_MIN, &id) && number(r, F_END, 0, &t) && number(r, F_ALLOC, 0, &pa) &&
        number(r, F_RES, 0, &pr) && number(r, F_BYTES, 0, &cap))
        *r->m = (ms_torch_measure){(int)id, (uint64_t)pa, (uint64_t)pr, (uint64_t)cap, t};
}

static void read_op(reader *r)
{
    long long id, t0, t1, al, re;
    if (!number(r, F_ID, 0, &id) || !number(r, F_START, 0, &t0) || !number(r, F_END, 0, &t1) ||
        !number(r, F_ALLOC, 0, &al) || !number(r, F_RES, 0, &re))
        return;
    if ((uint64_t)id != r->n_ops) {
        fail(r, "field id: op %s out of order (ops are numbered from 0 in file order)%s",
             r->f[F_ID], "");
        return;
    }
    ms_phase ph = strcmp(r->f[F_KIND], "forward") == 0    ? MS_PHASE_FORWARD
                  : strcmp(r->f[F_KIND], "backward") == 0 ? MS_PHASE_BACKWARD
                                                          : MS_PHASE_OPTIMIZER;
    uint32_t op;
    if (ph == MS_PHASE_OPTIMIZER)
        fail(r, "field phase_or_kind: '%s' is neither forward nor backward%s", r->f[F_KIND], "");
    else if (ms_torch_op_add(r->s, r->f[F_NAME], ph, &op) != MS_OK ||
             ms_torch_op_measure(r->s, op, t0, t1, (uint64_t)al, (uint64_t)re) != MS_OK)
        fail(r, "op '%s': invalid (an empty name, or end_ns before start_ns)%s", r->f[F_NAME], "");
    else
        r->n_ops++;
}

/* Space-separated op ids, each given to fn in turn. */
static void each_use(reader *r, void (*fn)(reader *, uint32_t, void *), void *user)
{
    char *save = NULL;
    for (char *tok = strtok_r(r->f[F_USES], " ", &save); tok && r->st == MS_OK;
         tok = strtok_r(NULL, " ", &save)) {
        char *end = NULL;
        errno = 0;
        unsigned long v = strtoul(tok, &end, 10);
        if (*end != '\0' || errno != 0 || tok[0] == '-' || v >= r->n_ops)
            fail(r, "field uses: '%s' is not an op of the file%s", tok, "");
        else
            fn(r, (uint32_t)v, user);
    }
}

static void use_tensor(reader *r, uint32_t op, void *user)
{
    if (ms_torch_tensor_use(r->s, *(uint32_t *)user, op) != MS_OK)
        fail(r, "field uses: op %s comes before the tensor's producer or an earlier use%s",
             r->f[F_USES], "");
}

static void read_tensor(reader *r)
{
    long long id, bytes, prod;
    if (!number(r, F_ID, 0, &id) || !number(r, F_BYTES, 0, &bytes) || !number(r, F_PROD, -1, &prod))
        return;
    int kind = MS_TK_COUNT;
    for (int k = 0; k < MS_TK_COUNT; k++)
        if (strcmp(r->f[F_KIND], ms_tensor_kind_name((ms_tensor_kind)k)) == 0)
            kind = k;
    uint32_t t;
    if ((uint64_t)id != r->n_tensors)
        fail(r, "field id: tensor %s out of order%s", r->f[F_ID], "");
    else if (kind == MS_TK_COUNT)
        fail(r, "field phase_or_kind: unknown tensor kind '%s'%s", r->f[F_KIND], "");
    else if (ms_torch_tensor_add(r->s, r->f[F_NAME], (uint64_t)bytes, (ms_tensor_kind)kind,
                                 (int32_t)prod, &t) != MS_OK)
        fail(r, "field producer: '%s' is not an op of the file%s", r->f[F_PROD], "");
    else {
        r->n_tensors++;
        each_use(r, use_tensor, &t);
    }
}

typedef struct span {
    uint32_t first, last;
    bool any;
} span;

static void widen(reader *r, uint32_t op, void *user)
{
    (void)r;
    span *sp = user;
    sp->first = sp->any && sp->first < op ? sp->first : op;
    sp->last = sp->any && sp->last > op ? sp->last : op;
    sp->any = true;
}

static void read_segment(reader *r)
{
    long long id;
    span sp = {0};
    uint32_t g;
    if (!number(r, F_ID, 0, &id))
        return;
    if ((uint64_t)id != r->n_segs) {
        fail(r, "field id: segment %s out of order%s", r->f[F_ID], "");
        return;
    }
    each_use(r, widen, &sp);
    if (r->st == MS_OK && !sp.any)
        fail(r, "field uses: a segment needs its first and last op%s%s", "", "");
    else if (r->st == MS_OK &&
             ms_torch_segment_add(r->s, r->f[F_NAME], sp.first, sp.last, &g) != MS_OK)
        fail(r, "segment '%s': its ops must all be forward ops%s", r->f[F_NAME], "");
    else
        r->n_segs++;
}

static void on_field(void *data, size_t len, void *user)
{
    reader *r = user;
    if (r->nf < F_COUNT) {
        if (len >= F_MAX)
            r->overlong = true;
        size_t n = len < F_MAX ? len : F_MAX - 1;
        memcpy(r->f[r->nf], data ? data : "", n);
        r->f[r->nf][n] = '\0';
    }
    r->nf++;
}

static void on_record(int c, void *user)
{
    (void)c;
    reader *r = user;
    r->line++;
    int nf = r->nf;
    r->nf = 0;
    if (r->st != MS_OK || (nf == 1 && r->f[F_ROW][0] == '\0'))
        return;
    if (nf != F_COUNT) {
        char n[16];
        snprintf(n, sizeof n, "%d", nf);
        fail(r, "%s fields, expected 12 (row,id,name,...,uses,decision)%s", n, "");
        return;
    }
    if (r->overlong)
        fail(r, "a field is longer than 4095 bytes%s%s", "", "");
    else if (r->line == 1 && strcmp(r->f[F_ROW], "row") == 0)
        return;
    else if (strcmp(r->f[F_ROW], "step") == 0)
        read_step(r);
    else if (strcmp(r->f[F_ROW], "op") == 0)
        read_op(r);
    else if (strcmp(r->f[F_ROW], "tensor") == 0)
        read_tensor(r);
    else if (strcmp(r->f[F_ROW], "segment") == 0)
        read_segment(r);
    else
        fail(r, "field row: '%s' is none of step, op, tensor, segment%s", r->f[F_ROW], "");
}

ms_status ms_torch_profile_read(ms_torch_step *s, const char *path, ms_torch_measure *m, ms_diag *d)
{
    if (s == NULL || path == NULL || m == NULL)
        return ms_diag_set(d, MS_EINVAL, "ms_torch_profile_read: NULL argument");
    FILE *f = fopen(path, "rb");
    if (f == NULL)
        return ms_diag_set(d, MS_EIO, "%s: cannot read: %s", path, strerror(errno));
    reader *r = calloc(1, sizeof *r);
    struct csv_parser p;
    if (r == NULL || csv_init(&p, CSV_STRICT | CSV_STRICT_FINI | CSV_APPEND_NULL) != 0) {
        free(r);
        fclose(f);
        return ms_diag_set(d, MS_ENOMEM, "out of host memory");
    }
    *r = (reader){.s = s, .m = m, .d = d, .path = path, .st = ms_torch_step_reset(s)};
    *m = (ms_torch_measure){0};
    char buf[65536];
    size_t n;
    while (r->st == MS_OK && (n = fread(buf, 1, sizeof buf, f)) > 0) {
        size_t used = csv_parse(&p, buf, n, on_field, on_record, r);
        /* A row's own error, met before the parser's, is the one to tell. */
        if (r->st == MS_OK && used != n)
            r->st = ms_diag_set(d, MS_EPARSE, "%s: line %zu: %s", path, r->line + 1,
                                csv_strerror(csv_error(&p)));
    }
    if (r->st == MS_OK && ferror(f))
        r->st = ms_diag_set(d, MS_EIO, "%s: read error", path);
    if (r->st == MS_OK && csv_fini(&p, on_field, on_record, r) != 0)
        r->st = ms_diag_set(d, MS_EPARSE, "%s: line %zu: %s", path, r->line + 1,
                            csv_strerror(csv_error(&p)));
    if (r->st == MS_OK && r->n_ops == 0)
        r->st = ms_diag_set(d, MS_EPARSE, "%s: no op rows: not a memsim_torch profile", path);
    ms_status st = r->st;
    csv_free(&p);
    fclose(f);
    free(r);
    return st;
}
