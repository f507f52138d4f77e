/* The Chrome trace (Trace Event Format, JSON) of a run: open it in Perfetto
 * or chrome://tracing.  One process per device, one thread per stream,
 * a complete ("X") event per kernel and copy, and counters ("C") for the
 * allocator's allocated and reserved bytes. */
#include "memsim/report.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "lib/base/decimal.h"
#include "memsim/allocator.h"

/* JSON string escaping: names come from scenario files and policies. */
static void put_json_string(FILE *f, const char *s)
{
    fputc('"', f);
    for (const unsigned char *p = (const unsigned char *)s; p && *p; p++) {
        if (*p == '"' || *p == '\\')
            fprintf(f, "\\%c", *p);
        else if (*p < 0x20)
            fprintf(f, "\\u%04x", *p);
        else
            fputc(*p, f);
    }
    fputc('"', f);
}

/* Numbers are most of a trace's bytes: written without printf (decimal.h).  A time
 * in integer nanoseconds becomes microseconds with three decimals, the
 * same text "%.3f" gives for x / 1e3, without going through a double. */
static char *put_us(char *p, int64_t ns)
{
    uint64_t mag = ns < 0 ? 0 - (uint64_t)ns : (uint64_t)ns;
    if (ns < 0)
        *p++ = '-';
    p = base_put_u64(p, mag / 1000);
    unsigned frac = (unsigned)(mag % 1000);
    *p++ = '.';
    *p++ = (char)('0' + frac / 100);
    *p++ = (char)('0' + frac / 10 % 10);
    *p++ = (char)('0' + frac % 10);
    return p;
}

static char *put_str(char *p, const char *s)
{
    size_t n = strlen(s);
    memcpy(p, s, n);
    return p + n;
}

static const char *row_name(const ms_op_row *r, const ms_program_view *p)
{
    if (r->kind == MS_WK_SWAP_OUT || r->kind == MS_WK_SWAP_IN)
        return r->tensor < p->n_tensors ? p->tensors[r->tensor].name : "copy";
    return r->op < p->n_ops ? p->ops[r->op].name : "op";
}

/* Steps restart their clocks at 0; lay them end to end on one time axis. */
static int64_t step_offset(const int64_t *ends, int step)
{
    int64_t off = 0;
    for (int s = 0; s < step; s++)
        off += ends[s];
    return off;
}

#define MAX_STEPS 1024

ms_status ms_report_write_chrome_trace(const char *path, const ms_run_record *rec,
                                       const ms_program_view *programs, size_t n_programs,
                                       ms_diag *d)
{
    if (path == NULL || rec == NULL || programs == NULL || n_programs == 0)
        return MS_EINVAL;
    size_t n_ops = 0, n_mem = 0;
    n_ops = ms_record_n_ops(rec);
    n_mem = ms_record_n_mem(rec);
    int64_t ends[MAX_STEPS] = {0};
    for (size_t i = 0; i < n_ops; i++) {
        const ms_op_row *r;
        r = ms_record_op(rec, i);
        if (r->step >= 0 && r->step < MAX_STEPS && r->end_ns > ends[r->step])
            ends[r->step] = r->end_ns;
    }
    char tmp[4200];
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    FILE *f = fopen(tmp, "w");
    if (f == NULL)
        return ms_diag_set(d, MS_EIO, "%s: cannot write: %s", tmp, strerror(errno));
    fputs("{\"displayTimeUnit\":\"ns\",\"traceEvents\":[\n", f);
    bool first = true;
    for (size_t i = 0; i < n_ops; i++) {
        const ms_op_row *r;
        r = ms_record_op(rec, i);
        if (r->start_ns < 0 || r->step < 0 || r->step >= MAX_STEPS)
            continue;
        int64_t off = step_offset(ends, r->step);
        char buf[256], *b = buf;
        b = put_str(b, first ? "{\"ph\":\"X\",\"pid\":" : ",\n{\"ph\":\"X\",\"pid\":");
        b = base_put_i64(b, r->device);
        b = base_put_u64(put_str(b, ",\"tid\":"), r->stream_id);
        b = put_us(put_str(b, ",\"ts\":"), r->start_ns + off);
        b = put_us(put_str(b, ",\"dur\":"), r->end_ns - r->start_ns);
        b = put_str(put_str(put_str(b, ",\"cat\":\""), ms_work_kind_name(r->kind)), "\",\"name\":");
        fwrite(buf, 1, (size_t)(b - buf), f);
        const ms_program_view *p =
            r->device >= 0 && (size_t)r->device < n_programs ? &programs[r->device] : programs;
        put_json_string(f, row_name(r, p));
        b = buf;
        b = base_put_i64(put_str(b, ",\"args\":{\"step\":"), r->step);
        b = base_put_u64(put_str(b, ",\"op\":"), r->op);
        b = put_str(base_put_u64(put_str(b, ",\"bytes\":"), r->bytes), "}}");
        fwrite(buf, 1, (size_t)(b - buf), f);
        first = false;
    }
    for (size_t i = 0; i < n_mem; i++) {
        const ms_mem_row *m;
        m = ms_record_mem(rec, i);
        if (m->step < 0 || m->step >= MAX_STEPS)
            continue;
        int64_t off = step_offset(ends, m->step);
        char buf[256], *b = buf;
        b = put_str(b, first ? "{\"ph\":\"C\",\"pid\":" : ",\n{\"ph\":\"C\",\"pid\":");
        b = base_put_i64(b, m->device);
        b = put_us(put_str(b, ",\"ts\":"), m->time_ns + off);
        b = base_put_u64(put_str(b, ",\"name\":\"memory\",\"args\":{\"allocated\":"), m->allocated);
        b = put_str(base_put_u64(put_str(b, ",\"reserved\":"), m->reserved), "}}");
        fwrite(buf, 1, (size_t)(b - buf), f);
        first = false;
    }
    fputs("\n]}\n", f);
    bool bad = ferror(f) != 0;
    bad |= fclose(f) != 0;
    if (bad || rename(tmp, path) != 0) {
        remove(tmp);
        return ms_diag_set(d, MS_EIO, "%s: write failed", path);
    }
    return MS_OK;
}
