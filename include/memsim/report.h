/* memsim: the run record and the reports made from it.
 *
 * The executor appends to a run record as it goes (one row per op issued,
 * per allocator event, per tensor decision); reports turn a finished record
 * into CSV files through libcsv (schemas in docs/csv-schemas.md: stable
 * column names and order), and a console summary. */
#ifndef MEMSIM_REPORT_H
#define MEMSIM_REPORT_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "memsim/allocator.h"
#include "memsim/status.h"
#include "memsim/workload.h"

#ifdef __cplusplus
extern "C" {
#endif

/* What an issued op row stands for. */
typedef enum ms_work_kind {
    MS_WK_KERNEL = 0,  /* an op of the step program */
    MS_WK_RECOMPUTE,   /* an op re-issued by recompute */
    MS_WK_SWAP_OUT,    /* D2H copy of a swapped tensor */
    MS_WK_SWAP_IN      /* H2D copy back */
} ms_work_kind;

MS_API const char *ms_work_kind_name(ms_work_kind k); /* "kernel", "recompute", ... */

typedef struct ms_op_row {
    int step;
    int device;
    ms_work_kind kind;
    uint32_t op;          /* op id; for swaps, the op it was issued at */
    uint32_t tensor;      /* swaps: the tensor; else UINT32_MAX */
    uint64_t stream_id;
    int64_t issue_ns;     /* host time it was issued */
    int64_t start_ns;     /* device time */
    int64_t end_ns;
    uint64_t bytes;       /* copies: bytes moved; kernels: HBM bytes */
    double flops;
    uint64_t allocated;   /* allocator state after its outputs were allocated */
    uint64_t reserved;
} ms_op_row;

typedef struct ms_mem_row {
    int step;
    int device;
    int64_t time_ns;      /* host time of the allocator event (the allocator runs
                             on the host: its clock); the reports place it on
                             device time too (docs/csv-schemas.md, memory.csv) */
    int action;           /* ms_alloc_action */
    uint64_t addr;
    uint64_t bytes;
    uint64_t allocated;
    uint64_t reserved;
    uint64_t active;
    uint64_t by_kind[MS_TK_COUNT]; /* live requested bytes per tensor kind */
    uint32_t tensor;               /* alloc / free_requested: the tensor; else UINT32_MAX */
    uint64_t stream_id;            /* the allocator event's stream */
} ms_mem_row;

typedef struct ms_tensor_row {
    int step;
    int device;
    uint32_t tensor;
    const char *decision; /* "swap", "recompute", "keep", "pool:NAME" */
    int32_t out_op;
    int32_t in_op;
    uint64_t bytes;
} ms_tensor_row;

/* The allocator's segments, block by block (segments.csv), at a moment of a
 * step: when an allocation failed (what PyTorch users dump a snapshot for:
 * which cached blocks were free but too small or split), or at its end (the
 * cache the next step starts from). */
typedef enum ms_snapshot_when { MS_SNAP_OOM = 0, MS_SNAP_STEP_END } ms_snapshot_when;

MS_API const char *ms_snapshot_when_name(ms_snapshot_when w); /* "oom", "step_end" */

typedef struct ms_segment_row {
    int step;
    int device;
    ms_snapshot_when when;
    ms_block_info block;
} ms_segment_row;

/* One finished run of one policy on one scenario: the figures of the summary. */
typedef struct ms_run_summary {
    char scenario[128];
    char policy[128];
    char device[64];
    int devices;               /* simulated devices (pipeline stages) */
    int steps;
    uint64_t capacity;
    uint64_t peak_allocated;
    uint64_t peak_reserved;
    uint64_t peak_active;
    uint64_t reserved_minus_allocated_at_peak; /* when allocated peaked */
    uint64_t weights_bytes, grads_bytes, optimizer_bytes; /* persistent, per device */
    uint64_t peak_activation_bytes;
    double step_time_ms;       /* last completed step */
    double step_time_mean_ms;  /* over completed steps after the first (GSL) */
    double step_time_sd_ms;
    double model_tflops;       /* model TFLOP/s per device */
    double mfu;                /* model_tflops / peak */
    double model_flops_per_step; /* per device */
    bool oom;
    int oom_step;
    int32_t oom_op;      /* the op whose allocation failed; -1: at setup */
    uint32_t oom_tensor; /* the tensor it could not get; UINT32_MAX: unknown */
    uint64_t oom_bytes;  /* its size */
    char oom_message[MS_DIAG_MAX];
    int64_t num_alloc_retries;
    int64_t num_ooms;
    uint64_t swapped_bytes;    /* D2H bytes per step */
    uint32_t recomputed_ops;   /* per step */
    int stage;                 /* pipeline stage (= device) this row is of */
    /* Pipeline idle share of the step: this stage's compute stream waiting
     * for p2p receives, plus the pipeline's step time before the stage
     * starts and after it is done (0 without a pipeline). */
    double bubble_fraction;
    /* The --set overrides the scenario ran with, "key=value" joined by ';'
     * in the order given ("" for none); set by the caller. */
    char overrides[1024];
} ms_run_summary;

typedef struct ms_run_record ms_run_record;

MS_API ms_status ms_record_create(ms_run_record **out);
MS_API ms_status ms_record_free(ms_run_record *r);
/* Drop the rows of every step, keeping those made before the first (step
 * -1: setup allocations, pool choices) and the memory for the next rows. */
MS_API ms_status ms_record_clear_steps(ms_run_record *r);
/* The same for the steps before `step` only: a record of every step
 * becomes one of its last (ms_run_detail's fallback). */
MS_API ms_status ms_record_clear_steps_before(ms_run_record *r, int step);
/* Fast-forward: the rows of step `from` again, as step `to` (> from). */
MS_API ms_status ms_record_repeat_step(ms_run_record *r, int from, int to);
MS_API ms_status ms_record_add_op(ms_run_record *r, const ms_op_row *row);
MS_API ms_status ms_record_add_mem(ms_run_record *r, const ms_mem_row *row);
MS_API ms_status ms_record_add_tensor(ms_run_record *r, const ms_tensor_row *row);
MS_API ms_status ms_record_add_segment(ms_run_record *r, const ms_segment_row *row);
/* Patch device start/end of an op row once the backend reports it. */
MS_API ms_status ms_record_set_times(ms_run_record *r, size_t row, int64_t start_ns, int64_t end_ns);
/* Row counts, and row i (NULL when out of range); a NULL record has none. */
MS_API size_t ms_record_n_ops(const ms_run_record *r);
MS_API const ms_op_row *ms_record_op(const ms_run_record *r, size_t i);
MS_API size_t ms_record_n_mem(const ms_run_record *r);
MS_API const ms_mem_row *ms_record_mem(const ms_run_record *r, size_t i);
MS_API size_t ms_record_n_tensors(const ms_run_record *r);
MS_API const ms_tensor_row *ms_record_tensor(const ms_run_record *r, size_t i);
MS_API size_t ms_record_n_segments(const ms_run_record *r);
MS_API const ms_segment_row *ms_record_segment(const ms_run_record *r, size_t i);

/* Which clock memory is drawn on (memory.svg, trace.json's memory counter).
 * DEVICE (default): each allocator event when the device first or last
 * touches its block, on the same axis as the kernels; HOST: when the host
 * issued it (the allocator's own clock, ahead of the device). */
typedef enum ms_memory_clock { MS_CLOCK_DEVICE = 0, MS_CLOCK_HOST } ms_memory_clock;

MS_API const char *ms_memory_clock_name(ms_memory_clock c); /* "device", "host" */

typedef struct ms_report_options {
    ms_memory_clock memory_clock;
} ms_report_options;

/* Write summary.csv (one row per summary), and with a record ops.csv,
 * memory.csv, tensors.csv, segments.csv, trace.json, memory.svg and
 * timeline.svg, into dir (created if missing).  Each file is written whole
 * to a temporary name and renamed, and summary.csv goes last, so a failed
 * run never leaves a partial file that looks complete; errors name the file
 * and the cause (errno text).  opt NULL: the defaults.  For a whole run
 * directory that appears at once, write into ms_report_dir_path of a staged
 * directory (below). */
MS_API ms_status ms_report_write_run(const char *dir, const ms_run_summary *summaries,
                                     size_t n_summaries, const ms_run_record *record,
                                     const ms_program_view *programs, size_t n_programs,
                                     const ms_report_options *opt, ms_diag *d);
/* The bytes ms_report_write_run would write from this record for n_devices
 * devices (ops.csv, memory.csv, tensors.csv, segments.csv, trace.json and
 * the two plots), estimated from its row counts before anything is written
 * (lib/report/report_size.c says how the bytes a row were measured); 0
 * for a NULL record. */
MS_API uint64_t ms_report_detail_bytes(const ms_run_record *record, size_t n_devices);
/* ms_report_write_run with the default options. */
MS_API ms_status ms_report_write_csv(const char *dir, const ms_run_summary *summaries, size_t n_summaries,
                              const ms_run_record *record, const ms_program_view *programs,
                              size_t n_programs, ms_diag *d);

/* A run directory written whole or not at all.  ms_report_dir_open makes a
 * staging directory beside final_dir (".NAME.memsim-tmp-PID"); the caller
 * writes into ms_report_dir_path; commit puts it in final_dir's place (an
 * existing final_dir is replaced only then), abort removes it.  Either
 * frees rd.  A staging directory left by a process that died is removed by
 * the next open in the same parent. */
typedef struct ms_report_dir ms_report_dir;

MS_API ms_status ms_report_dir_open(const char *final_dir, ms_report_dir **rd, ms_diag *d);
MS_API const char *ms_report_dir_path(const ms_report_dir *rd);
MS_API ms_status ms_report_dir_commit(ms_report_dir *rd, ms_diag *d);
MS_API ms_status ms_report_dir_abort(ms_report_dir *rd);
/* Remove a directory tree (staging directories; a signal handler's
 * cleanup goes through its own async-signal-safe path). */
MS_API ms_status ms_report_remove_tree(const char *path);

/* The run's allocator history as a PyTorch memory snapshot: the pickle
 * torch.cuda.memory._dump_snapshot() writes (protocol 4), so PyTorch's
 * memory viewer (pytorch.org/memory_viz) opens it and memsim replay reads it
 * back.  Per device, device_traces holds the allocator events of the last
 * step in the record (up to its OOM, if it ran out), with the op and tensor
 * of each allocation as its frame; segments hold the allocator's blocks at
 * that moment; allocator_settings the configuration.  Written whole to a
 * temporary name and renamed. */
typedef struct ms_snapshot_export {
    const char *alloc_conf; /* PYTORCH_CUDA_ALLOC_CONF-style; NULL or "": defaults */
    ms_alloc_flavour flavour;
} ms_snapshot_export;

MS_API ms_status ms_report_write_snapshot(const char *path, const ms_run_record *record,
                                          const ms_program_view *programs, size_t n_programs,
                                          const ms_snapshot_export *opt, ms_diag *d);
MS_API ms_status ms_report_write_summary_csv(const char *path, const ms_run_summary *summaries, size_t n,
                                      ms_diag *d);
/* trace.json: Chrome Trace Event Format (open in Perfetto). */
MS_API ms_status ms_report_write_chrome_trace(const char *path, const ms_run_record *record,
                                       const ms_program_view *programs, size_t n_programs,
                                       ms_diag *d);
/* The console summary. */
MS_API ms_status ms_report_print_summary(FILE *out, const ms_run_summary *s);

#ifdef __cplusplus
}
#endif
#endif
