/* memsim: what the writers of lib/report/ share (private to lib/report/).
 *
 * The clocks.  The allocator runs on the host, so a memory row carries the
 * host time of its event (ms_mem_row.time_ns); kernels and copies carry
 * device times.  The host runs ahead of the device (DESIGN.md, backend.h),
 * by up to a whole step, so memory plotted on host time shows a peak before
 * the kernel that causes it.  The reports therefore place every allocator
 * event on the device clock as well: an allocation at the start of the first
 * work issued after it (the kernel or copy that writes the block), a free at
 * the end of the last work issued before it that touches its tensor (the
 * kernel that last reads it, the swap-out copy that reads it out), failing
 * that at the end of the last work issued before it.  Segment events follow
 * the allocation or free they serve. */
#ifndef MEMSIM_REPORT_INTERNAL_H
#define MEMSIM_REPORT_INTERNAL_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "memsim/report.h"
#include "memsim/workload.h"

/* Per device, the state the kept memory rows start from once
 * ms_record_clear_steps dropped earlier steps; NULL when none was dropped. */
const ms_mem_row *rep_record_carry(const ms_run_record *r, int device);

/* The device time of every memory row (indexed as in the record), relative
 * to its step's start as op rows are; -1 where the row's step and device
 * have no work that ran.  *out is malloc'd (NULL for a record without
 * memory rows).  MS_EINVAL, MS_ENOMEM. */
ms_status rep_mem_device_times(const ms_run_record *rec, const ms_program_view *programs,
                               size_t n_programs, int64_t **out);

/* The memory rows as a clock sees them, grouped by (step, device) in that
 * order, each group in time order.  On the host clock: the rows as recorded.
 * On the device clock: each event at its device time (rows of unknown time
 * left out), with allocated, reserved, active and the per-kind bytes summed
 * again in device-time order from the state before the step, so every row
 * is the memory held at that device time.  step >= 0: that step only. */
typedef struct rep_mem_series {
    ms_mem_row *rows;
    size_t n;
} rep_mem_series;

ms_status rep_mem_series_build(const ms_run_record *rec, const int64_t *device_times,
                               ms_memory_clock clock, int step, rep_mem_series *out);
void rep_mem_series_free(rep_mem_series *s);

/* What a stream carries, from one of its rows: "compute", "collectives",
 * "p2p send", "p2p recv", "swap-out D2H", "swap-in H2D", or "". */
const char *rep_stream_role(const ms_op_row *r, const ms_program_view *programs, size_t n);

/* trace.json (ms_report_write_chrome_trace) with memory on the given clock;
 * device_times from rep_mem_device_times (needed for the device clock). */
ms_status rep_write_trace(const char *path, const ms_run_record *rec,
                          const ms_program_view *programs, size_t n_programs,
                          const int64_t *device_times, ms_memory_clock clock, ms_diag *d);

/* mkdir -p. */
ms_status rep_make_dirs(const char *dir, ms_diag *d);

/* Close a file written to tmp (fflush, fclose) and rename it to path; on
 * any failure remove tmp and say which file and why (errno text). */
ms_status rep_file_commit(FILE *f, const char *tmp, const char *path, ms_diag *d);

#endif
