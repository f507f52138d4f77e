/* CSV output through libcsv: see csv_out.h for the file discipline. */
#include "csv_out.h"
#include "report_internal.h"
#include "lib/base/decimal.h"

#include <csv.h>
#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#define CSV_BUFFER (1u << 20)

ms_status rep_csv_open(ms_csv_out *w, const char *path, ms_diag *d)
{
    if (w == NULL || path == NULL)
        return MS_EINVAL;
    memset(w, 0, sizeof *w);
    if (strlen(path) >= sizeof w->path)
        return ms_diag_set(d, MS_EINVAL, "%s: path too long", path);
    snprintf(w->path, sizeof w->path, "%s", path);
    snprintf(w->tmp, sizeof w->tmp, "%s.tmp", path);
    w->f = fopen(w->tmp, "w");
    if (w->f == NULL)
        return ms_diag_set(d, MS_EIO, "%s: cannot write: %s", w->tmp, strerror(errno));
    /* Without a buffer it works, only slower. */
    if ((w->buf = malloc(CSV_BUFFER)) != NULL && setvbuf(w->f, w->buf, _IOFBF, CSV_BUFFER) != 0) {
        free(w->buf);
        w->buf = NULL;
    }
    return MS_OK;
}

static void put_field(ms_csv_out *w, const char *s, size_t n)
{
    if (w->col++ > 0)
        putc(',', w->f);
    fwrite(s, 1, n, w->f);
}

static bool plain_token(const char *s)
{
    if (*s == '\0')
        return false;
    for (const char *p = s; *p; p++) {
        char c = *p;
        bool ok = (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
                  c == '.' || c == '_' || c == '-' || c == '+' || c == ':' || c == '/';
        if (!ok)
            return false;
    }
    return true;
}

ms_status rep_csv_str(ms_csv_out *w, const char *s)
{
    if (w == NULL || w->f == NULL)
        return MS_EINVAL;
    if (s == NULL)
        s = "";
    if (w->col++ > 0)
        fputc(',', w->f);
    if (*s == '\0')
        return MS_OK;
    if (plain_token(s)) {
        fputs(s, w->f);
        return MS_OK;
    }
    return csv_fwrite(w->f, s, strlen(s)) == 0 ? MS_OK : MS_EIO;
}

/* Integers are most of a detail report's bytes: formatted here, not by
 * printf, and never quoted. */
ms_status rep_csv_u64(ms_csv_out *w, uint64_t v)
{
    if (w == NULL || w->f == NULL)
        return MS_EINVAL;
    char buf[24];
    put_field(w, buf, (size_t)(base_put_u64(buf, v) - buf));
    return MS_OK;
}

ms_status rep_csv_i64(ms_csv_out *w, int64_t v)
{
    if (w == NULL || w->f == NULL)
        return MS_EINVAL;
    char buf[24];
    put_field(w, buf, (size_t)(base_put_i64(buf, v) - buf));
    return MS_OK;
}

ms_status rep_csv_f64(ms_csv_out *w, double v, int decimals)
{
    char buf[64];
    snprintf(buf, sizeof buf, "%.*f", decimals, v);
    return rep_csv_str(w, buf);
}

ms_status rep_csv_header(ms_csv_out *w, const char *const *names, int n)
{
    ms_status st = MS_OK;
    for (int i = 0; i < n && st == MS_OK; i++)
        st = rep_csv_str(w, names[i]);
    return st == MS_OK ? rep_csv_end_row(w) : st;
}

ms_status rep_csv_end_row(ms_csv_out *w)
{
    if (w == NULL || w->f == NULL)
        return MS_EINVAL;
    fputc('\n', w->f);
    w->col = 0;
    return MS_OK;
}

ms_status rep_file_commit(FILE *f, const char *tmp, const char *path, ms_diag *d)
{
    /* A failed buffered write leaves its errno behind (nothing between it
     * and here sets errno on success). */
    int err = 0;
    if (fflush(f) != 0)
        err = errno;
    else if (ferror(f))
        err = errno != 0 ? errno : EIO;
    if (fclose(f) != 0 && err == 0)
        err = errno;
    if (err != 0) {
        remove(tmp);
        return ms_diag_set(d, MS_EIO, "%s: write failed: %s", path, strerror(err));
    }
    if (rename(tmp, path) != 0) {
        err = errno;
        remove(tmp);
        return ms_diag_set(d, MS_EIO, "%s: cannot rename %s into place: %s", path, tmp,
                           strerror(err));
    }
    return MS_OK;
}

ms_status rep_csv_close(ms_csv_out *w, ms_diag *d)
{
    if (w == NULL || w->f == NULL)
        return MS_EINVAL;
    FILE *f = w->f;
    w->f = NULL;
    ms_status st = rep_file_commit(f, w->tmp, w->path, d);
    free(w->buf); /* after fclose: it was the stream's buffer */
    w->buf = NULL;
    return st;
}

ms_status rep_csv_abort(ms_csv_out *w)
{
    if (w == NULL)
        return MS_EINVAL;
    if (w->f != NULL) {
        fclose(w->f);
        w->f = NULL;
        remove(w->tmp);
    }
    free(w->buf);
    w->buf = NULL;
    return MS_OK;
}
