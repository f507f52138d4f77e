/* lib/calibrate: timing device work through backend.h (private). */
#ifndef MEMSIM_CAL_BENCH_H
#define MEMSIM_CAL_BENCH_H

#include <stdint.h>

#include "memsim/backend.h"

/* One device, a main stream, a side stream for work that runs beside the
 * timed work, and two events. */
typedef struct cal_bench {
    ms_backend *b;
    ms_stream *s, *side;
    ms_event *e0, *e1;
    int repeats;
    double spacer_flops; /* a GEMM long enough to hide the host's issue time */
    ms_diag *diag;
} cal_bench;

ms_status cal_bench_open(cal_bench *cb, ms_backend *b, int repeats, double spacer_flops,
                         ms_diag *d);
void cal_bench_close(cal_bench *cb);

/* Device ns of one k, the mean of cb->repeats back-to-back launches queued
 * behind a spacer, so the host's launch gaps do not count. */
ms_status cal_time_kernel(cal_bench *cb, const ms_kernel *k, double *ns);
/* The same with `side` (a kernel, or NULL) launched on the side stream first. */
ms_status cal_time_kernel_beside(cal_bench *cb, const ms_kernel *k, const ms_kernel *side,
                                 double *ns);
/* Device ns of one copy of bytes (H2D or D2H) between buffers of the
 * backend, optionally beside a kernel on the side stream. */
ms_status cal_time_copy(cal_bench *cb, ms_copy_kind kind, uint64_t dev, uint64_t host,
                        uint64_t bytes, const ms_kernel *side, double *ns);
/* Host ns of one async launch (the runtime's launch overhead). */
ms_status cal_time_launch(cal_bench *cb, double *ns);

/* Kernels as the workload builds them. */
ms_kernel cal_gemm_kernel(ms_dtype dt, double m, double n, double k);
ms_kernel cal_flash_kernel(ms_dtype dt, double seq, double head_dim, double batch_heads);
ms_kernel cal_stream_kernel(double bytes);
ms_kernel cal_comm_kernel(ms_comm_kind kind, int group, ms_link_kind link, double bytes);

#endif
