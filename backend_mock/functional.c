/* The mock's functional mode: real bytes in host memory, so a data check
 * (memsim run --verify) runs without hardware.
 *
 * Every device segment and reservation is backed by a mapping of its size
 * (MAP_NORESERVE: only pages written cost host memory); pinned host memory is
 * real host memory and malloc_host returns its address, as cudaHostAlloc and
 * aclrtMallocHost do, while the accounting (and the deterministic address it
 * would have had) stays with the host address space.  Kernels are proxies
 * and touch no data.  A copy moves its bytes when the simulator finishes it,
 * in device time, not when the host issues it: a block overwritten while a
 * swap-out still reads it, or read before the swap-in that fills it has
 * finished, carries the wrong bytes, as it would on a real device.  A copy
 * that touches memory which is not allocated (or not mapped) when it runs is
 * a sticky fault (MS_EHAZARD on every later call), as an illegal address is
 * on CUDA.
 *
 * The bytes are real, so a large run would exhaust the host (the OOM killer
 * ends it without a word): the mode keeps to a budget of host memory, half of
 * what /proc/meminfo says is available when it starts, counting pinned
 * buffers whole and device pages once a copy has written them.  A copy or
 * pinned allocation beyond it is a sticky fault that says so. */
#define _DEFAULT_SOURCE /* MAP_ANONYMOUS, MAP_NORESERVE, madvise */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "lib/base/growable.h"
#include "mock_private.h"
#include "lib/base/units.h"

/* One backed range: a device segment or reservation (addr is its device
 * address) or a pinned host buffer (addr is its host address, fake the
 * address the host address space gave it). */
typedef struct mock_backing {
    uint64_t addr, size;
    uint8_t *bytes;
    uint64_t fake;
    bool reservation;
    uint64_t *written; /* device: a bit per page a copy has written (resident) */
    uint64_t n_written;
} mock_backing;

#define MOCK_PAGE 4096u

typedef struct mock_copy {
    uint64_t dst, src, bytes;
    ms_copy_kind kind;
} mock_copy;

/* The copies a stream has issued and the device has not finished, oldest
 * first (a stream finishes its work in order). */
typedef struct mock_copy_queue {
    mock_copy *v;
    size_t head, n, cap;
} mock_copy_queue;

struct mock_data {
    mock_backing *dev; /* sorted by addr */
    size_t n_dev, cap_dev;
    mock_backing *host; /* sorted by addr (the real one) */
    size_t n_host, cap_host;
    mock_copy_queue *queues; /* by stream id */
    size_t n_queues;
    ms_work_tracer user_fn;
    void *user;
    uint64_t budget, held; /* host bytes the mode may hold, and holds */
    char fault[512];
};

static void *map_bytes(uint64_t size)
{
    void *p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
                   -1, 0);
    return p == MAP_FAILED ? NULL : p;
}

/* Index of the last backing with addr <= a, or -1. */
static ptrdiff_t floor_of(const mock_backing *v, size_t n, uint64_t a)
{
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (v[mid].addr <= a)
            lo = mid + 1;
        else
            hi = mid;
    }
    return (ptrdiff_t)lo - 1;
}

static ms_status insert(mock_backing **v, size_t *n, size_t *cap, mock_backing b)
{
    if (!MS_GROW(*v, *n, *cap, 16))
        return MS_ENOMEM;
    size_t i = (size_t)(floor_of(*v, *n, b.addr) + 1);
    memmove(&(*v)[i + 1], &(*v)[i], (*n - i) * sizeof **v);
    (*v)[i] = b;
    (*n)++;
    return MS_OK;
}

/* Remove the backing that starts at addr into *out; false if none does. */
static bool take(mock_backing *v, size_t *n, uint64_t addr, mock_backing *out)
{
    ptrdiff_t i = floor_of(v, *n, addr);
    if (i < 0 || v[i].addr != addr)
        return false;
    *out = v[i];
    memmove(&v[i], &v[i + 1], (*n - (size_t)i - 1) * sizeof *v);
    (*n)--;
    return true;
}

/* MemAvailable of /proc/meminfo (else the free pages); 0 if neither. */
static uint64_t host_available_bytes(void)
{
    FILE *f = fopen("/proc/meminfo", "r");
    char line[256];
    unsigned long long kib = 0;
    bool found = false;
    while (f != NULL && !found && fgets(line, sizeof line, f) != NULL)
        found = sscanf(line, "MemAvailable: %llu kB", &kib) == 1;
    if (f != NULL)
        fclose(f);
    if (found)
        return (uint64_t)kib * 1024;
    long pages = sysconf(_SC_AVPHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    return pages > 0 && page > 0 ? (uint64_t)pages * (uint64_t)page : 0;
}


/* Hold `more` host bytes, or fault (sticky) saying the budget is spent. */
static bool hold(ms_mock *m, uint64_t more, const char *what)
{
    mock_data *d = m->data;
    if (more <= d->budget && d->held <= d->budget - more) {
        d->held += more;
        return true;
    }
    if (d->fault[0] == '\0')
        snprintf(d->fault, sizeof d->fault,
                 "device %d: the functional mock (--verify) keeps device and pinned bytes in "
                 "host memory and %s would take it to %.2f GiB, beyond its budget of %.2f GiB "
                 "(half the host's available memory when the run began): verify a smaller run "
                 "(fewer layers, a shorter sequence or micro-batch)",
                 m->device, what, base_gib(d->held + more), base_gib(d->budget));
    return false;
}

ms_status mock_data_set_host_budget(ms_backend *b, uint64_t bytes)
{
    ms_mock *m = mock_instance(b);
    if (m == NULL || m->data == NULL)
        return MS_EINVAL;
    m->data->budget = bytes;
    return MS_OK;
}

ms_status mock_enable_data(ms_backend *b)
{
    ms_mock *m = mock_instance(b);
    if (m == NULL)
        return MS_EINVAL;
    if (m->data != NULL)
        return MS_OK;
    uint64_t used = 0;
    sim_dev_hbm_usage(m->dev, &used, NULL, NULL);
    if (used != 0 || m->host_used != 0 || m->n_resv != 0 || m->streams != NULL)
        return MS_EINVAL; /* bytes of what exists already would be missing */
    m->data = calloc(1, sizeof *m->data);
    if (m->data == NULL)
        return MS_ENOMEM;
    uint64_t avail = host_available_bytes();
    m->data->budget = avail > 0 ? avail / 2 : UINT64_MAX;
    b->carries_data = true;
    return sim_dev_set_tracer(m->dev, mock_data_tracer, m);
}

void mock_data_free(ms_mock *m)
{
    mock_data *d = m->data;
    if (d == NULL)
        return;
    for (size_t i = 0; i < d->n_dev; i++) {
        munmap(d->dev[i].bytes, d->dev[i].size);
        free(d->dev[i].written);
    }
    for (size_t i = 0; i < d->n_host; i++)
        free(d->host[i].bytes);
    for (size_t i = 0; i < d->n_queues; i++)
        free(d->queues[i].v);
    free(d->dev);
    free(d->host);
    free(d->queues);
    free(d);
    m->data = NULL;
}

ms_status mock_data_fault(const ms_mock *m)
{
    return m->data != NULL && m->data->fault[0] != '\0' ? MS_EHAZARD : MS_OK;
}

const char *mock_data_fault_text(const ms_mock *m)
{
    return m->data != NULL ? m->data->fault : "";
}

const char *mock_data_fault_message(const ms_backend *b)
{
    const ms_mock *m = mock_instance(b);
    return m != NULL ? mock_data_fault_text(m) : "";
}

/* ---- memory ------------------------------------------------------------ */

ms_status mock_data_device_added(ms_mock *m, uint64_t addr, uint64_t size, bool reservation)
{
    mock_data *d = m->data;
    uint8_t *bytes = map_bytes(size);
    uint64_t words = ((size + MOCK_PAGE - 1) / MOCK_PAGE + 63) / 64;
    uint64_t *written = calloc(words, sizeof *written);
    if (bytes == NULL || written == NULL) {
        if (bytes != NULL)
            munmap(bytes, size);
        free(written);
        return MS_ENOMEM;
    }
    mock_backing b = {
        .addr = addr, .size = size, .bytes = bytes, .reservation = reservation, .written = written};
    ms_status st = insert(&d->dev, &d->n_dev, &d->cap_dev, b);
    if (st != MS_OK) {
        munmap(bytes, size);
        free(written);
    }
    return st;
}

void mock_data_device_removed(ms_mock *m, uint64_t addr)
{
    mock_backing b;
    if (take(m->data->dev, &m->data->n_dev, addr, &b)) {
        munmap(b.bytes, b.size);
        free(b.written);
        m->data->held -= b.n_written * MOCK_PAGE;
    }
}

/* Mark pages [first, end) of b written (set) or given back (clear); the
 * number whose state changed. */
static uint64_t mark_pages(mock_backing *b, uint64_t first, uint64_t end, bool set)
{
    uint64_t changed = 0;
    for (uint64_t p = first; p < end; p++) {
        uint64_t bit = 1ull << (p % 64), *w = &b->written[p / 64];
        if (((*w & bit) != 0) != set) {
            *w ^= bit;
            changed++;
        }
    }
    return changed;
}

/* Unmapped pages of a reservation lose their contents (the physical pages
 * go back), as cuMemUnmap's do. */
void mock_data_device_unmapped(ms_mock *m, uint64_t addr, uint64_t size)
{
    mock_data *d = m->data;
    ptrdiff_t i = floor_of(d->dev, d->n_dev, addr);
    if (i < 0 || addr - d->dev[i].addr >= d->dev[i].size)
        return;
    uint64_t off = addr - d->dev[i].addr;
    if (size > d->dev[i].size - off)
        size = d->dev[i].size - off;
    /* Whole pages go back to the system; the ragged ends are zeroed. */
    uint64_t page = 4096, first = (off + page - 1) / page * page, end = (off + size) / page * page;
    if (first >= end) {
        memset(d->dev[i].bytes + off, 0, size);
        return;
    }
    memset(d->dev[i].bytes + off, 0, first - off);
    madvise(d->dev[i].bytes + first, end - first, MADV_DONTNEED);
    uint64_t freed = mark_pages(&d->dev[i], first / page, end / page, false);
    d->dev[i].n_written -= freed;
    d->held -= freed * MOCK_PAGE;
    memset(d->dev[i].bytes + end, 0, off + size - end);
}

ms_status mock_data_host_added(ms_mock *m, uint64_t fake, uint64_t size, uint64_t *addr)
{
    mock_data *d = m->data;
    if (!hold(m, size, "a pinned buffer of that size"))
        return MS_EHAZARD;
    uint8_t *bytes = calloc(1, size);
    if (bytes == NULL) {
        d->held -= size;
        return MS_ENOMEM;
    }
    mock_backing b = {
        .addr = (uint64_t)(uintptr_t)bytes, .size = size, .bytes = bytes, .fake = fake};
    ms_status st = insert(&d->host, &d->n_host, &d->cap_host, b);
    if (st != MS_OK) {
        free(bytes);
        d->held -= size;
        return st;
    }
    *addr = b.addr;
    return MS_OK;
}

ms_status mock_data_host_removed(ms_mock *m, uint64_t addr, uint64_t *fake)
{
    mock_backing b;
    if (!take(m->data->host, &m->data->n_host, addr, &b))
        return MS_EINVAL;
    free(b.bytes);
    m->data->held -= b.size;
    *fake = b.fake;
    return MS_OK;
}

/* ---- copies ------------------------------------------------------------ */

ms_status mock_data_copy_issued(ms_mock *m, uint64_t stream_id, uint64_t dst, uint64_t src,
                                uint64_t bytes, ms_copy_kind kind)
{
    mock_data *d = m->data;
    if (stream_id >= d->n_queues) {
        size_t n = (size_t)stream_id + 1;
        mock_copy_queue *q = realloc(d->queues, n * sizeof *q);
        if (q == NULL)
            return MS_ENOMEM;
        memset(q + d->n_queues, 0, (n - d->n_queues) * sizeof *q);
        d->queues = q;
        d->n_queues = n;
    }
    mock_copy_queue *q = &d->queues[stream_id];
    if (q->head > 0 && q->head == q->n) {
        q->head = 0; /* drained: start again at the front */
        q->n = 0;
    }
    if (!MS_GROW(q->v, q->n, q->cap, 16))
        return MS_ENOMEM;
    q->v[q->n++] = (mock_copy){.dst = dst, .src = src, .bytes = bytes, .kind = kind};
    return MS_OK;
}

void mock_data_copy_withdrawn(ms_mock *m, uint64_t stream_id)
{
    mock_copy_queue *q = &m->data->queues[stream_id];
    if (q->n > q->head)
        q->n--;
}

/* The bytes at [addr, addr + bytes) of device memory, or NULL when they are
 * not all inside one allocated segment (or one mapped range of a
 * reservation). */
static uint8_t *device_bytes(ms_mock *m, uint64_t addr, uint64_t bytes)
{
    mock_data *d = m->data;
    ptrdiff_t i = floor_of(d->dev, d->n_dev, addr);
    if (i < 0)
        return NULL;
    const mock_backing *b = &d->dev[i];
    if (addr - b->addr >= b->size || bytes > b->size - (addr - b->addr))
        return NULL;
    if (b->reservation) {
        for (size_t r = 0; r < m->n_resv; r++) {
            if (m->resv[r].range.addr != b->addr)
                continue;
            const ms_range_set *mapped = &m->resv[r].mapped;
            ptrdiff_t k = base_range_set_floor(mapped, addr);
            if (k < 0 || addr - mapped->v[k].addr >= mapped->v[k].size ||
                bytes > mapped->v[k].size - (addr - mapped->v[k].addr))
                return NULL;
        }
    }
    return b->bytes + (addr - b->addr);
}

static uint8_t *host_bytes(ms_mock *m, uint64_t addr, uint64_t bytes)
{
    mock_data *d = m->data;
    ptrdiff_t i = floor_of(d->host, d->n_host, addr);
    if (i < 0)
        return NULL;
    const mock_backing *b = &d->host[i];
    if (addr - b->addr >= b->size || bytes > b->size - (addr - b->addr))
        return NULL;
    return b->bytes + (addr - b->addr);
}

/* The device pages [addr, addr + bytes) a copy writes become resident:
 * count the new ones against the budget.  false: over it (a fault). */
static bool hold_written(ms_mock *m, uint64_t addr, uint64_t bytes)
{
    mock_data *d = m->data;
    mock_backing *b = &d->dev[floor_of(d->dev, d->n_dev, addr)];
    uint64_t off = addr - b->addr, first = off / MOCK_PAGE;
    uint64_t end = (off + bytes + MOCK_PAGE - 1) / MOCK_PAGE, fresh = 0;
    for (uint64_t p = first; p < end; p++)
        fresh += (b->written[p / 64] >> (p % 64) & 1) == 0;
    char what[96];
    snprintf(what, sizeof what, "a copy of %llu bytes", (unsigned long long)bytes);
    if (fresh > 0 && !hold(m, fresh * MOCK_PAGE, what))
        return false;
    b->n_written += mark_pages(b, first, end, true);
    return true;
}

static void apply_copy(ms_mock *m, const mock_copy *c, uint64_t stream_id)
{
    bool dst_dev = c->kind != MS_COPY_D2H, src_dev = c->kind != MS_COPY_H2D;
    uint8_t *dst = dst_dev ? device_bytes(m, c->dst, c->bytes) : host_bytes(m, c->dst, c->bytes);
    uint8_t *src = src_dev ? device_bytes(m, c->src, c->bytes) : host_bytes(m, c->src, c->bytes);
    if (dst != NULL && src != NULL) {
        if (!dst_dev || hold_written(m, c->dst, c->bytes))
            memmove(dst, src, c->bytes);
        return;
    }
    if (m->data->fault[0] == '\0')
        snprintf(m->data->fault, sizeof m->data->fault,
                 "device %d: a copy of %llu bytes on stream %llu from 0x%llx to 0x%llx ran when "
                 "its %s was not allocated %s memory",
                 m->device, (unsigned long long)c->bytes, (unsigned long long)stream_id,
                 (unsigned long long)c->src, (unsigned long long)c->dst,
                 src == NULL ? "source" : "destination",
                 (src == NULL ? src_dev : dst_dev) ? "device" : "pinned host");
}

void mock_data_tracer(void *user, const ms_work_record *rec)
{
    ms_mock *m = user;
    mock_data *d = m->data;
    if (rec->is_copy && rec->stream_id < d->n_queues) {
        mock_copy_queue *q = &d->queues[rec->stream_id];
        if (q->head < q->n)
            apply_copy(m, &q->v[q->head++], rec->stream_id);
    }
    if (d->user_fn != NULL)
        d->user_fn(d->user, rec);
}

void mock_data_set_tracer(ms_mock *m, ms_work_tracer fn, void *user)
{
    m->data->user_fn = fn;
    m->data->user = fn != NULL ? user : NULL;
}
