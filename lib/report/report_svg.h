/* memsim: the SVG plots of a run (private to lib/report/; DESIGN.md "reports").
 *
 * memory.svg: one panel per device (pipeline stage) of the last step in the
 * record: stacked areas of the live requested bytes by tensor kind, lines
 * for the allocator's allocated and reserved bytes (and the device capacity
 * when known), over device time since the step start (each allocator event
 * where the device first or last touches its block, report_internal.h), or
 * over host issue time when asked.
 * timeline.svg: one lane per (device, stream, kind of work) of the same
 * step: the device time each stream spends on kernels, recompute, swap-out
 * and swap-in, a kind per lane so that none hides behind another.
 *
 * Each time axis (timeline, and memory on the device clock: 0 .. the step's
 * last op end; memory on the host clock: 0 .. its last memory event) is cut
 * into MS_SVG_PLOT_W one-pixel columns, so the files stay small however many
 * rows the record holds: memory keeps, per column, the row with the largest
 * requested total (the stack shows that moment) and the largest allocated
 * and reserved bytes, so a peak is never averaged away; a timeline column is
 * drawn as soon as any work touches it, in four shades by how much of it is
 * busy.  Every axis says its clock.  Output is byte-identical for the same
 * record. */
#ifndef MEMSIM_CORE_REPORT_SVG_H
#define MEMSIM_CORE_REPORT_SVG_H

#include <stddef.h>
#include <stdint.h>

#include "memsim/report.h"
#include "memsim/workload.h"

/* Layout, in SVG user units (pixels).  Plot x of time t is
 * MS_SVG_LEFT + t / t_max * MS_SVG_PLOT_W.  Memory panel i has its plot area
 * from y = MS_SVG_TOP + i * MS_SVG_PANEL_H + MS_SVG_PANEL_HEAD down
 * MS_SVG_PLOT_H; bytes b sit at plot bottom - b / y_axis_max * MS_SVG_PLOT_H,
 * y_axis_max being the largest value over all panels (and the capacity)
 * rounded up to a whole tick (1, 2 or 5 x 10^k GiB, about 5 ticks).  Timeline
 * lane l sits at y = MS_SVG_TOP + 8 + l * (MS_SVG_LANE_H + MS_SVG_LANE_GAP)
 * + 10 per change of device above it.  Coordinates print as "%.1f"
 * (x of a column as an integer). */
#define MS_SVG_LEFT 200
#define MS_SVG_PLOT_W 1000
#define MS_SVG_RIGHT 90
#define MS_SVG_TOP 64
#define MS_SVG_PANEL_HEAD 40
#define MS_SVG_PLOT_H 220
#define MS_SVG_PANEL_H 290
#define MS_SVG_LANE_H 18
#define MS_SVG_LANE_GAP 4

/* Write DIR/memory.svg and DIR/timeline.svg from the run record (DIR must
 * exist; each file is written to NAME.tmp and renamed when whole).  The
 * programs (indexed by device) give each panel its pipeline stage and each
 * lane the role of its stream (compute, collectives, p2p send/recv, swap);
 * a device without a program gets neither.
 * An empty record (no row of step >= 0) gives valid SVGs that say so.
 * MS_EINVAL for NULL arguments, MS_EIO (path and cause in d) when a file
 * cannot be written, MS_ENOMEM. */
typedef struct rep_svg_options {
    /* The device capacity (bytes; 0: unknown, no line), drawn as a
     * horizontal line on every memory panel and included in the y range;
     * not in the record: ms_run_summary.capacity holds it. */
    uint64_t capacity;
    ms_memory_clock memory_clock; /* default: device */
    const int64_t *device_times;  /* rep_mem_device_times; NULL: computed here */
} rep_svg_options;

ms_status rep_write_svg_opts(const char *dir, const ms_run_record *record,
                             const ms_program_view *programs, size_t n_programs,
                             const rep_svg_options *opt, ms_diag *d);
/* The defaults: device clock, no capacity line. */
ms_status rep_write_svg(const char *dir, const ms_run_record *record,
                        const ms_program_view *programs, size_t n_programs, ms_diag *d);

#endif
