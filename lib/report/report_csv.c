/* The CSV reports of a run (schemas: docs/csv-schemas.md) and the console
 * summary.  Column names and order are a stable interface: scripts and the
 * golden files in tests/ depend on them. */
#include "memsim/report.h"

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "memsim/allocator.h"
#include "csv_out.h"
#include "report_internal.h"
#include "report_svg.h"

#define NCOLS(a) ((int)(sizeof(a) / sizeof((a)[0])))

static const char *const summary_cols[] = {
    "scenario",
    "policy",
    "device",
    "devices",
    "steps",
    "capacity_bytes",
    "peak_allocated_bytes",
    "peak_reserved_bytes",
    "peak_active_bytes",
    "reserved_minus_allocated_at_peak_bytes",
    "weights_bytes",
    "grads_bytes",
    "optimizer_state_bytes",
    "peak_activation_bytes",
    "step_time_ms",
    "step_time_mean_ms",
    "step_time_sd_ms",
    "model_tflops_per_device",
    "mfu",
    "model_flops_per_step",
    "oom",
    "oom_step",
    "num_alloc_retries",
    "num_ooms",
    "swapped_bytes_per_step",
    "recomputed_ops_per_step",
    "oom_message",
    "stage",
    "bubble_fraction",
    "overrides",
};

static ms_status summary_row(ms_csv_out *w, const ms_run_summary *s)
{
    ms_status st = MS_OK;
#define S(x) if (st == MS_OK) st = (x)
    S(rep_csv_str(w, s->scenario));
    S(rep_csv_str(w, s->policy));
    S(rep_csv_str(w, s->device));
    S(rep_csv_i64(w, s->devices));
    S(rep_csv_i64(w, s->steps));
    S(rep_csv_u64(w, s->capacity));
    S(rep_csv_u64(w, s->peak_allocated));
    S(rep_csv_u64(w, s->peak_reserved));
    S(rep_csv_u64(w, s->peak_active));
    S(rep_csv_u64(w, s->reserved_minus_allocated_at_peak));
    S(rep_csv_u64(w, s->weights_bytes));
    S(rep_csv_u64(w, s->grads_bytes));
    S(rep_csv_u64(w, s->optimizer_bytes));
    S(rep_csv_u64(w, s->peak_activation_bytes));
    S(rep_csv_f64(w, s->step_time_ms, 3));
    S(rep_csv_f64(w, s->step_time_mean_ms, 3));
    S(rep_csv_f64(w, s->step_time_sd_ms, 3));
    S(rep_csv_f64(w, s->model_tflops, 2));
    S(rep_csv_f64(w, s->mfu, 4));
    S(rep_csv_f64(w, s->model_flops_per_step, 0));
    S(rep_csv_str(w, s->oom ? "true" : "false"));
    S(rep_csv_i64(w, s->oom ? s->oom_step : -1));
    S(rep_csv_i64(w, s->num_alloc_retries));
    S(rep_csv_i64(w, s->num_ooms));
    S(rep_csv_u64(w, s->swapped_bytes));
    S(rep_csv_u64(w, s->recomputed_ops));
    S(rep_csv_str(w, s->oom_message));
    S(rep_csv_i64(w, s->stage));
    S(rep_csv_f64(w, s->bubble_fraction, 4));
    S(rep_csv_str(w, s->overrides));
    S(rep_csv_end_row(w));
#undef S
    return st;
}

ms_status ms_report_write_summary_csv(const char *path, const ms_run_summary *summaries, size_t n,
                                      ms_diag *d)
{
    if (path == NULL || (summaries == NULL && n > 0))
        return MS_EINVAL;
    ms_csv_out w;
    ms_status st = rep_csv_open(&w, path, d);
    if (st != MS_OK)
        return st;
    st = rep_csv_header(&w, summary_cols, NCOLS(summary_cols));
    for (size_t i = 0; i < n && st == MS_OK; i++)
        st = summary_row(&w, &summaries[i]);
    if (st != MS_OK) {
        int err = errno;
        rep_csv_abort(&w);
        return ms_diag_set(d, st, "%s: write failed: %s", path, strerror(err));
    }
    return rep_csv_close(&w, d);
}

static const char *const ops_cols[] = {
    "step", "device", "kind", "op", "name", "phase", "micro_batch", "layer", "tensor", "stream",
    "issue_ns", "start_ns", "end_ns", "duration_ns", "flops", "bytes", "allocated_bytes",
    "reserved_bytes",
};

static ms_status ops_row(ms_csv_out *w, const ms_op_row *r, const ms_program_view *p)
{
    const ms_op *op = r->op < p->n_ops ? &p->ops[r->op] : NULL;
    const char *name = op ? op->name : "";
    if (r->kind == MS_WK_SWAP_OUT || r->kind == MS_WK_SWAP_IN)
        name = r->tensor < p->n_tensors ? p->tensors[r->tensor].name : "";
    ms_status st = MS_OK;
#define S(x) if (st == MS_OK) st = (x)
    S(rep_csv_i64(w, r->step));
    S(rep_csv_i64(w, r->device));
    S(rep_csv_str(w, ms_work_kind_name(r->kind)));
    S(rep_csv_u64(w, r->op));
    S(rep_csv_str(w, name));
    S(rep_csv_str(w, op ? ms_phase_name(op->phase) : ""));
    S(rep_csv_i64(w, op ? op->micro_batch : -1));
    S(rep_csv_i64(w, op ? op->layer : -1));
    S(rep_csv_i64(w, r->tensor == UINT32_MAX ? -1 : (int64_t)r->tensor));
    S(rep_csv_u64(w, r->stream_id));
    S(rep_csv_i64(w, r->issue_ns));
    S(rep_csv_i64(w, r->start_ns));
    S(rep_csv_i64(w, r->end_ns));
    S(rep_csv_i64(w, r->start_ns >= 0 ? r->end_ns - r->start_ns : -1));
    S(rep_csv_f64(w, r->flops, 0));
    S(rep_csv_u64(w, r->bytes));
    S(rep_csv_u64(w, r->allocated));
    S(rep_csv_u64(w, r->reserved));
    S(rep_csv_end_row(w));
#undef S
    return st;
}

static const char *const mem_cols[] = {
    "step",
    "device",
    "time_ns",
    "action",
    "addr",
    "bytes",
    "allocated_bytes",
    "reserved_bytes",
    "active_bytes",
    "weight_bytes",
    "grad_bytes",
    "optimizer_state_bytes",
    "activation_bytes",
    "temp_bytes",
    "comm_buffer_bytes",
    "device_time_ns",
    "tensor",
    "stream",
};

static ms_status hex(ms_csv_out *w, uint64_t v)
{
    char buf[24];
    snprintf(buf, sizeof buf, "0x%" PRIx64, v);
    return rep_csv_str(w, buf);
}

static ms_status mem_row(ms_csv_out *w, const ms_mem_row *r, int64_t device_ns)
{
    ms_status st = MS_OK;
#define S(x) if (st == MS_OK) st = (x)
    S(rep_csv_i64(w, r->step));
    S(rep_csv_i64(w, r->device));
    S(rep_csv_i64(w, r->time_ns));
    S(rep_csv_str(w, ms_alloc_action_name((ms_alloc_action)r->action)));
    S(hex(w, r->addr));
    S(rep_csv_u64(w, r->bytes));
    S(rep_csv_u64(w, r->allocated));
    S(rep_csv_u64(w, r->reserved));
    S(rep_csv_u64(w, r->active));
    for (int k = 0; k < MS_TK_COUNT; k++)
        S(rep_csv_u64(w, r->by_kind[k]));
    S(rep_csv_i64(w, device_ns));
    S(rep_csv_i64(w, r->tensor == UINT32_MAX ? -1 : (int64_t)r->tensor));
    S(rep_csv_u64(w, r->stream_id));
    S(rep_csv_end_row(w));
#undef S
    return st;
}

static const char *const tensor_cols[] = {
    "step", "device", "tensor", "name", "kind", "bytes", "decision", "out_op", "in_op",
};

static ms_status tensor_row(ms_csv_out *w, const ms_tensor_row *r, const ms_program_view *p)
{
    const ms_tensor *t = r->tensor < p->n_tensors ? &p->tensors[r->tensor] : NULL;
    ms_status st = MS_OK;
#define S(x) if (st == MS_OK) st = (x)
    S(rep_csv_i64(w, r->step));
    S(rep_csv_i64(w, r->device));
    S(rep_csv_u64(w, r->tensor));
    S(rep_csv_str(w, t ? t->name : ""));
    S(rep_csv_str(w, t ? ms_tensor_kind_name(t->kind) : ""));
    S(rep_csv_u64(w, r->bytes));
    S(rep_csv_str(w, r->decision));
    S(rep_csv_i64(w, r->out_op));
    S(rep_csv_i64(w, r->in_op));
    S(rep_csv_end_row(w));
#undef S
    return st;
}

static const char *const segment_cols[] = {
    "step", "device", "when", "segment_addr", "segment_size", "segment_type", "expandable",
    "pool", "addr", "size", "requested", "state", "stream",
};

/* Names as in PyTorch's memory snapshot (segment_type, block state). */
static ms_status segment_row(ms_csv_out *w, const ms_segment_row *r)
{
    const ms_block_info *b = &r->block;
    const char *state = b->allocated      ? "active_allocated"
                        : b->pending_free ? "active_pending_free"
                                          : "inactive";
    ms_status st = MS_OK;
#define S(x) if (st == MS_OK) st = (x)
    S(rep_csv_i64(w, r->step));
    S(rep_csv_i64(w, r->device));
    S(rep_csv_str(w, ms_snapshot_when_name(r->when)));
    S(hex(w, b->segment_addr));
    S(rep_csv_u64(w, b->segment_size));
    S(rep_csv_str(w, b->small ? "small" : "large"));
    S(rep_csv_str(w, b->expandable ? "true" : "false"));
    S(rep_csv_i64(w, b->pool));
    S(hex(w, b->addr));
    S(rep_csv_u64(w, b->size));
    S(rep_csv_u64(w, b->allocated || b->pending_free ? b->requested : 0));
    S(rep_csv_str(w, state));
    S(rep_csv_u64(w, b->stream_id));
    S(rep_csv_end_row(w));
#undef S
    return st;
}

typedef enum { TABLE_OPS, TABLE_MEM, TABLE_TENSORS, TABLE_SEGMENTS } table_kind;

/* Rows name ops and tensors of their own device's program. */
static const ms_program_view *program_of(const ms_program_view *programs, size_t n, int device)
{
    return device >= 0 && (size_t)device < n ? &programs[device] : &programs[0];
}

static ms_status write_table(const char *dir, const char *file, table_kind kind,
                             const ms_run_record *rec, const ms_program_view *programs,
                             size_t n_programs, const int64_t *device_times, ms_diag *d)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, file);
    ms_csv_out w;
    ms_status st = rep_csv_open(&w, path, d);
    if (st != MS_OK)
        return st;
    size_t n = 0;
    if (kind == TABLE_OPS) {
        st = rep_csv_header(&w, ops_cols, NCOLS(ops_cols));
        n = ms_record_n_ops(rec);
        for (size_t i = 0; i < n && st == MS_OK; i++) {
            const ms_op_row *r;
            r = ms_record_op(rec, i);
            st = ops_row(&w, r, program_of(programs, n_programs, r->device));
        }
    } else if (kind == TABLE_MEM) {
        st = rep_csv_header(&w, mem_cols, NCOLS(mem_cols));
        n = ms_record_n_mem(rec);
        for (size_t i = 0; i < n && st == MS_OK; i++) {
            const ms_mem_row *r;
            r = ms_record_mem(rec, i);
            st = mem_row(&w, r, device_times != NULL ? device_times[i] : -1);
        }
    } else if (kind == TABLE_SEGMENTS) {
        st = rep_csv_header(&w, segment_cols, NCOLS(segment_cols));
        n = ms_record_n_segments(rec);
        for (size_t i = 0; i < n && st == MS_OK; i++) {
            const ms_segment_row *r;
            r = ms_record_segment(rec, i);
            st = segment_row(&w, r);
        }
    } else {
        st = rep_csv_header(&w, tensor_cols, NCOLS(tensor_cols));
        n = ms_record_n_tensors(rec);
        for (size_t i = 0; i < n && st == MS_OK; i++) {
            const ms_tensor_row *r;
            r = ms_record_tensor(rec, i);
            st = tensor_row(&w, r, program_of(programs, n_programs, r->device));
        }
    }
    if (st != MS_OK) {
        int err = errno;
        rep_csv_abort(&w);
        return ms_diag_set(d, st, "%s: write failed: %s", path, strerror(err));
    }
    return rep_csv_close(&w, d);
}

const char *ms_memory_clock_name(ms_memory_clock c)
{
    return c == MS_CLOCK_HOST ? "host" : c == MS_CLOCK_DEVICE ? "device" : "?";
}

static ms_status write_details(const char *dir, uint64_t capacity, const ms_run_record *record,
                               const ms_program_view *programs, size_t n_programs,
                               const ms_report_options *opt, ms_diag *d)
{
    int64_t *times = NULL;
    ms_status st = rep_mem_device_times(record, programs, n_programs, &times);
    if (st != MS_OK)
        return ms_diag_set(d, st, "%s: placing memory events on the device clock: %s", dir,
                           ms_strerror(st));
    st = write_table(dir, "ops.csv", TABLE_OPS, record, programs, n_programs, NULL, d);
    if (st == MS_OK)
        st = write_table(dir, "memory.csv", TABLE_MEM, record, programs, n_programs, times, d);
    if (st == MS_OK)
        st = write_table(dir, "tensors.csv", TABLE_TENSORS, record, programs, n_programs, NULL, d);
    if (st == MS_OK)
        st =
            write_table(dir, "segments.csv", TABLE_SEGMENTS, record, programs, n_programs, NULL, d);
    char path[4096];
    snprintf(path, sizeof path, "%s/trace.json", dir);
    if (st == MS_OK)
        st = rep_write_trace(path, record, programs, n_programs, times, opt->memory_clock, d);
    rep_svg_options so = {
        .capacity = capacity, .memory_clock = opt->memory_clock, .device_times = times};
    if (st == MS_OK)
        st = rep_write_svg_opts(dir, record, programs, n_programs, &so, d);
    free(times);
    return st;
}

ms_status ms_report_write_run(const char *dir, const ms_run_summary *summaries, size_t n_summaries,
                              const ms_run_record *record, const ms_program_view *programs,
                              size_t n_programs, const ms_report_options *opt, ms_diag *d)
{
    if (dir == NULL || summaries == NULL || n_summaries == 0 ||
        (record != NULL && (programs == NULL || n_programs == 0)))
        return MS_EINVAL;
    ms_report_options defaults = {.memory_clock = MS_CLOCK_DEVICE};
    if (opt == NULL)
        opt = &defaults;
    ms_status st = rep_make_dirs(dir, d);
    if (st == MS_OK && record != NULL)
        st = write_details(dir, summaries[0].capacity, record, programs, n_programs, opt, d);
    /* The summary goes last: its presence says the others are complete. */
    if (st == MS_OK) {
        char path[4096];
        snprintf(path, sizeof path, "%s/summary.csv", dir);
        st = ms_report_write_summary_csv(path, summaries, n_summaries, d);
    }
    return st;
}

ms_status ms_report_write_csv(const char *dir, const ms_run_summary *summaries, size_t n_summaries,
                              const ms_run_record *record, const ms_program_view *programs,
                              size_t n_programs, ms_diag *d)
{
    return ms_report_write_run(dir, summaries, n_summaries, record, programs, n_programs, NULL, d);
}

static double gib(uint64_t b)
{
    return (double)b / (1024.0 * 1024.0 * 1024.0);
}

ms_status ms_report_print_summary(FILE *out, const ms_run_summary *s)
{
    if (out == NULL || s == NULL)
        return MS_EINVAL;
    fprintf(out, "scenario        %s (policy %s) on %d x %s\n", s->scenario, s->policy, s->devices,
            s->device);
    fprintf(out, "peak allocated  %.2f GiB of %.2f GiB\n", gib(s->peak_allocated), gib(s->capacity));
    fprintf(out, "peak reserved   %.2f GiB (reserved - allocated at peak: %.2f GiB)\n",
            gib(s->peak_reserved), gib(s->reserved_minus_allocated_at_peak));
    fprintf(out, "persistent      weights %.2f GiB, grads %.2f GiB, optimizer %.2f GiB\n",
            gib(s->weights_bytes), gib(s->grads_bytes), gib(s->optimizer_bytes));
    fprintf(out, "activations     %.2f GiB at peak\n", gib(s->peak_activation_bytes));
    if (s->step_time_ms > 0) {
        fprintf(out, "step time       %.3f ms (mean %.3f, sd %.3f over %d steps)\n",
                s->step_time_ms, s->step_time_mean_ms, s->step_time_sd_ms, s->steps);
        fprintf(out, "model TFLOP/s   %.2f per device, MFU %.1f%%\n", s->model_tflops,
                100.0 * s->mfu);
    }
    if (s->swapped_bytes || s->recomputed_ops)
        fprintf(out, "decisions       %.2f GiB swapped, %u ops recomputed per step\n",
                gib(s->swapped_bytes), s->recomputed_ops);
    if (s->devices > 1)
        fprintf(out, "pipeline        stage %d of %d, bubble %.1f%% of the step\n", s->stage,
                s->devices, 100.0 * s->bubble_fraction);
    if (s->oom)
        fprintf(out, "OOM             at step %d: %s\n", s->oom_step, s->oom_message);
    else
        fprintf(out, "OOM             no\n");
    return MS_OK;
}
