/* The Chrome trace (Trace Event Format, JSON) of a run: open it in Perfetto
 * or chrome://tracing.  One process per device, one thread per stream,
 * a complete ("X") event per kernel and copy, and counters ("C") for the
 * allocator's allocated and reserved bytes. */
#include "memsim/report.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

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
    ms_record_n_ops(rec, &n_ops);
    ms_record_n_mem(rec, &n_mem);
    int64_t ends[MAX_STEPS] = {0};
    for (size_t i = 0; i < n_ops; i++) {
        const ms_op_row *r;
        ms_record_op(rec, i, &r);
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
        ms_record_op(rec, i, &r);
        if (r->start_ns < 0 || r->step < 0 || r->step >= MAX_STEPS)
            continue;
        int64_t off = step_offset(ends, r->step);
        fprintf(f, "%s{\"ph\":\"X\",\"pid\":%d,\"tid\":%" PRIu64 ",\"ts\":%.3f,\"dur\":%.3f,"
                   "\"cat\":\"%s\",\"name\":",
                first ? "" : ",\n", r->device, r->stream_id, (double)(r->start_ns + off) / 1e3,
                (double)(r->end_ns - r->start_ns) / 1e3, ms_work_kind_name(r->kind));
        const ms_program_view *p =
            r->device >= 0 && (size_t)r->device < n_programs ? &programs[r->device] : programs;
        put_json_string(f, row_name(r, p));
        fprintf(f, ",\"args\":{\"step\":%d,\"op\":%u,\"bytes\":%" PRIu64 "}}", r->step, r->op,
                r->bytes);
        first = false;
    }
    for (size_t i = 0; i < n_mem; i++) {
        const ms_mem_row *m;
        ms_record_mem(rec, i, &m);
        if (m->step < 0 || m->step >= MAX_STEPS)
            continue;
        int64_t off = step_offset(ends, m->step);
        fprintf(f, "%s{\"ph\":\"C\",\"pid\":%d,\"ts\":%.3f,\"name\":\"memory\",\"args\":"
                   "{\"allocated\":%" PRIu64 ",\"reserved\":%" PRIu64 "}}",
                first ? "" : ",\n", m->device, (double)(m->time_ns + off) / 1e3, m->allocated,
                m->reserved);
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
