/* The Chrome trace (Trace Event Format, JSON) of a run: open it in Perfetto
 * or chrome://tracing.  One process per device, one thread per stream, each
 * named by a metadata ("M") event, a complete ("X") event per kernel and
 * copy on device time, and a counter ("C") of the allocator's allocated and
 * reserved bytes on the same clock (report_internal.h), one event per
 * change.  Steps are laid end to end, each as long as its last op. */
#include "memsim/report.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/base/decimal.h"
#include "lib/base/growable.h"
#include "memsim/allocator.h"
#include "report_internal.h"

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

/* Steps restart their clocks at 0; they are laid end to end on one time
 * axis, each as long as its last op (device time).  ends[s] is the offset of
 * step s (so the array has one more entry than steps). */
static ms_status step_offsets(const ms_run_record *rec, int64_t **out, int *n_steps)
{
    int max_step = -1;
    for (size_t i = 0; i < ms_record_n_ops(rec); i++)
        if (ms_record_op(rec, i)->step > max_step)
            max_step = ms_record_op(rec, i)->step;
    for (size_t i = 0; i < ms_record_n_mem(rec); i++)
        if (ms_record_mem(rec, i)->step > max_step)
            max_step = ms_record_mem(rec, i)->step;
    int64_t *off = calloc((size_t)max_step + 2, sizeof *off);
    if (off == NULL)
        return MS_ENOMEM;
    for (size_t i = 0; i < ms_record_n_ops(rec); i++) {
        const ms_op_row *r = ms_record_op(rec, i);
        if (r->step >= 0 && r->start_ns >= 0 && r->end_ns > off[r->step + 1])
            off[r->step + 1] = r->end_ns;
    }
    for (int s = 1; s <= max_step + 1; s++)
        off[s] += off[s - 1];
    *out = off;
    *n_steps = max_step + 1;
    return MS_OK;
}

const char *rep_stream_role(const ms_op_row *r, const ms_program_view *programs, size_t n)
{
    if (r->kind == MS_WK_SWAP_OUT)
        return "swap-out D2H";
    if (r->kind == MS_WK_SWAP_IN)
        return "swap-in H2D";
    if (r->device < 0 || (size_t)r->device >= n || r->op >= programs[r->device].n_ops)
        return "";
    const ms_op *op = &programs[r->device].ops[r->op];
    if (op->stream != MS_SR_COMM)
        return "compute";
    if (op->kernel.comm == MS_COMM_SEND)
        return "p2p send";
    return op->kernel.comm == MS_COMM_RECV ? "p2p recv" : "collectives";
}

typedef struct trace_out {
    FILE *f;
    bool first;
} trace_out;

static void put_event(trace_out *t, const char *text, size_t n)
{
    if (!t->first)
        fputs(",\n", t->f);
    fwrite(text, 1, n, t->f);
    t->first = false;
}

/* Perfetto names a process by its pid and a thread by its tid unless told:
 * devices and streams get their names (and devices their order). */
static ms_status put_names(trace_out *t, const ms_run_record *rec, const ms_program_view *programs,
                           size_t n_programs)
{
    /* (device, stream) pairs in first-seen order, each named once. */
    typedef struct lane {
        int device;
        uint64_t stream;
    } lane;
    lane *seen = NULL;
    size_t n_seen = 0, cap = 0;
    int max_dev = -1;
    char buf[512];
    for (size_t i = 0; i < ms_record_n_ops(rec); i++) {
        const ms_op_row *r = ms_record_op(rec, i);
        if (r->step < 0 || r->start_ns < 0)
            continue;
        bool known = false;
        for (size_t k = 0; k < n_seen && !known; k++)
            known = seen[k].device == r->device && seen[k].stream == r->stream_id;
        if (known)
            continue;
        if (!MS_GROW(seen, n_seen, cap, 16)) {
            free(seen);
            return MS_ENOMEM;
        }
        seen[n_seen++] = (lane){r->device, r->stream_id};
        int n = snprintf(buf, sizeof buf,
                         "{\"ph\":\"M\",\"pid\":%d,\"tid\":%" PRIu64
                         ",\"name\":\"thread_name\",\"args\":{\"name\":\"stream %" PRIu64 " %s\"}}",
                         r->device, r->stream_id, r->stream_id,
                         rep_stream_role(r, programs, n_programs));
        put_event(t, buf, (size_t)n);
        max_dev = r->device > max_dev ? r->device : max_dev;
    }
    for (size_t i = 0; i < ms_record_n_mem(rec); i++)
        max_dev = ms_record_mem(rec, i)->device > max_dev ? ms_record_mem(rec, i)->device : max_dev;
    free(seen);
    for (int dev = 0; dev <= max_dev; dev++) {
        int n = snprintf(buf, sizeof buf,
                         "{\"ph\":\"M\",\"pid\":%d,\"name\":\"process_name\",\"args\":{"
                         "\"name\":\"device %d",
                         dev, dev);
        if ((size_t)dev < n_programs)
            n += snprintf(buf + n, sizeof buf - (size_t)n, " (pipeline stage %d)",
                          programs[dev].stage);
        n += snprintf(buf + n, sizeof buf - (size_t)n,
                      "\"}},\n{\"ph\":\"M\",\"pid\":%d,\"name\":\"process_sort_index\","
                      "\"args\":{\"sort_index\":%d}}",
                      dev, dev);
        put_event(t, buf, (size_t)n);
    }
    return MS_OK;
}

static void put_ops(trace_out *t, const ms_run_record *rec, const ms_program_view *programs,
                    size_t n_programs, const int64_t *off)
{
    for (size_t i = 0; i < ms_record_n_ops(rec); i++) {
        const ms_op_row *r = ms_record_op(rec, i);
        if (r->start_ns < 0 || r->step < 0)
            continue;
        char buf[256], *b = buf;
        b = put_str(b, t->first ? "{\"ph\":\"X\",\"pid\":" : ",\n{\"ph\":\"X\",\"pid\":");
        t->first = false;
        b = base_put_i64(b, r->device);
        b = base_put_u64(put_str(b, ",\"tid\":"), r->stream_id);
        b = put_us(put_str(b, ",\"ts\":"), r->start_ns + off[r->step]);
        b = put_us(put_str(b, ",\"dur\":"), r->end_ns - r->start_ns);
        b = put_str(put_str(put_str(b, ",\"cat\":\""), ms_work_kind_name(r->kind)), "\",\"name\":");
        fwrite(buf, 1, (size_t)(b - buf), t->f);
        const ms_program_view *p =
            r->device >= 0 && (size_t)r->device < n_programs ? &programs[r->device] : programs;
        put_json_string(t->f, row_name(r, p));
        b = buf;
        b = base_put_i64(put_str(b, ",\"args\":{\"step\":"), r->step);
        b = base_put_u64(put_str(b, ",\"op\":"), r->op);
        b = put_str(base_put_u64(put_str(b, ",\"bytes\":"), r->bytes), "}}");
        fwrite(buf, 1, (size_t)(b - buf), t->f);
    }
}

static void put_counter(trace_out *t, const ms_mem_row *m, int64_t ts, const char *name)
{
    char buf[256], *b = buf;
    b = put_str(b, t->first ? "{\"ph\":\"C\",\"pid\":" : ",\n{\"ph\":\"C\",\"pid\":");
    t->first = false;
    b = base_put_i64(b, m->device);
    b = put_us(put_str(b, ",\"ts\":"), ts);
    b = put_str(put_str(put_str(b, ",\"name\":\""), name), "\",\"args\":{\"allocated\":");
    b = base_put_u64(b, m->allocated);
    b = put_str(base_put_u64(put_str(b, ",\"reserved\":"), m->reserved), "}}");
    fwrite(buf, 1, (size_t)(b - buf), t->f);
}

/* The memory counter of each device: one event per change.  Of several
 * events at one timestamp only the last counts (a counter holds one value
 * at a time), and an event that repeats the value before it is left out. */
static ms_status put_counters(trace_out *t, const rep_mem_series *ser, const int64_t *off,
                              ms_memory_clock clock)
{
    const char *name = clock == MS_CLOCK_HOST ? "memory (host issue time)" : "memory";
    int max_dev = -1;
    for (size_t i = 0; i < ser->n; i++)
        max_dev = ser->rows[i].device > max_dev ? ser->rows[i].device : max_dev;
    ms_mem_row *last = calloc((size_t)max_dev + 2, sizeof *last);
    bool *any = calloc((size_t)max_dev + 2, sizeof *any);
    if (last == NULL || any == NULL) {
        free(last);
        free(any);
        return MS_ENOMEM;
    }
    for (size_t i = 0; i < ser->n; i++) {
        const ms_mem_row *m = &ser->rows[i];
        if (m->device < 0)
            continue;
        int64_t ts = m->time_ns + off[m->step];
        const ms_mem_row *next = i + 1 < ser->n ? &ser->rows[i + 1] : NULL;
        if (next != NULL && next->device == m->device && next->step == m->step &&
            next->time_ns + off[next->step] == ts)
            continue; /* superseded at the same instant */
        size_t d = (size_t)m->device;
        if (any[d] && last[d].allocated == m->allocated && last[d].reserved == m->reserved)
            continue;
        put_counter(t, m, ts, name);
        last[d] = *m;
        any[d] = true;
    }
    free(last);
    free(any);
    return MS_OK;
}

ms_status rep_write_trace(const char *path, const ms_run_record *rec,
                          const ms_program_view *programs, size_t n_programs,
                          const int64_t *device_times, ms_memory_clock clock, ms_diag *d)
{
    if (path == NULL || rec == NULL || programs == NULL || n_programs == 0 ||
        (clock == MS_CLOCK_DEVICE && device_times == NULL && ms_record_n_mem(rec) > 0))
        return MS_EINVAL;
    int64_t *off = NULL;
    int n_steps = 0;
    rep_mem_series ser = {0};
    ms_status st = step_offsets(rec, &off, &n_steps);
    if (st == MS_OK)
        st = rep_mem_series_build(rec, device_times, clock, -1, &ser);
    if (st != MS_OK) {
        free(off);
        return ms_diag_set(d, st, "%s: %s", path, ms_strerror(st));
    }
    char tmp[4200];
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    FILE *f = fopen(tmp, "w");
    if (f == NULL) {
        int err = errno;
        free(off);
        rep_mem_series_free(&ser);
        return ms_diag_set(d, MS_EIO, "%s: cannot write: %s", tmp, strerror(err));
    }
    fprintf(f,
            "{\"displayTimeUnit\":\"ns\",\"otherData\":{\"generator\":\"memsim\","
            "\"time_axis\":\"device time; steps laid end to end\",\"memory_clock\":\"%s\"},"
            "\"traceEvents\":[\n",
            ms_memory_clock_name(clock));
    trace_out t = {.f = f, .first = true};
    st = put_names(&t, rec, programs, n_programs);
    if (st == MS_OK) {
        put_ops(&t, rec, programs, n_programs, off);
        st = put_counters(&t, &ser, off, clock);
    }
    fputs("\n]}\n", f);
    free(off);
    rep_mem_series_free(&ser);
    if (st != MS_OK) {
        fclose(f);
        remove(tmp);
        return ms_diag_set(d, st, "%s: %s", path, ms_strerror(st));
    }
    return rep_file_commit(f, tmp, path, d);
}

ms_status ms_report_write_chrome_trace(const char *path, const ms_run_record *rec,
                                       const ms_program_view *programs, size_t n_programs,
                                       ms_diag *d)
{
    if (path == NULL || rec == NULL || programs == NULL || n_programs == 0)
        return MS_EINVAL;
    int64_t *times = NULL;
    if (rep_mem_device_times(rec, programs, n_programs, &times) != MS_OK)
        return ms_diag_set(d, MS_ENOMEM, "%s: out of memory", path);
    ms_status st = rep_write_trace(path, rec, programs, n_programs, times, MS_CLOCK_DEVICE, d);
    free(times);
    return st;
}
