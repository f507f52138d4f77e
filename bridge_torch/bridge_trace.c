/* The allocator's events as the CSV trace `memsim replay` reads
 * (lib/replay, docs/replay.md "CSV traces"):
 *
 *   action,addr,size,stream,time_us[,device_free]
 *
 * alloc and free_requested/free_completed carry the requested size,
 * segment_alloc/segment_free the segment's, oom the rounded request with
 * the device's free bytes (as PyTorch's snapshot records an oom).  Every
 * field is a number or an action name, so no field needs CSV quoting.
 * Times are microseconds of the host's monotonic clock since the trace
 * opened. */
#include <errno.h>
#include <string.h>
#include <time.h>

#include "bridge_torch/bridge.h"

static int64_t monotonic_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

ms_status bridge_trace_open(bridge_trace *t, const char *path, ms_diag *d)
{
    if (t == NULL || path == NULL)
        return ms_diag_set(d, MS_EINVAL, "bridge_trace_open: NULL argument");
    *t = (bridge_trace){0};
    t->f = fopen(path, "w");
    if (t->f == NULL)
        return ms_diag_set(d, MS_EIO, "%s: cannot write the allocator trace: %s", path,
                           strerror(errno));
    t->t0_ns = monotonic_ns();
    if (fputs("action,addr,size,stream,time_us,device_free\n", t->f) == EOF)
        t->write_failed = true;
    return MS_OK;
}

void bridge_trace_event(void *trace, const ms_alloc_event *ev)
{
    bridge_trace *t = trace;
    if (t == NULL || t->f == NULL || ev == NULL)
        return;
    long long us = (long long)((monotonic_ns() - t->t0_ns) / 1000);
    int n;
    if (ev->action == MS_AA_OOM)
        n = fprintf(t->f, "oom,,%llu,%llu,%lld,%llu\n", (unsigned long long)ev->size,
                    (unsigned long long)ev->stream_id, us, (unsigned long long)ev->addr);
    else
        n = fprintf(t->f, "%s,0x%llx,%llu,%llu,%lld,\n", ms_alloc_action_name(ev->action),
                    (unsigned long long)ev->addr, (unsigned long long)ev->size,
                    (unsigned long long)ev->stream_id, us);
    if (n < 0)
        t->write_failed = true;
}

ms_status bridge_trace_close(bridge_trace *t, const char *path, ms_diag *d)
{
    if (t == NULL || t->f == NULL)
        return MS_OK;
    bool failed = t->write_failed;
    failed = fclose(t->f) != 0 || failed;
    t->f = NULL;
    if (failed)
        return ms_diag_set(d, MS_EIO, "%s: write error: the allocator trace is incomplete",
                           path ? path : "trace");
    return MS_OK;
}
