/* The machinery the runtime doubles share (runtime_double.h): memory
 * blocks with a capacity, stream threads with their task queues, events
 * stamped with the host clock. */
#ifndef _POSIX_C_SOURCE
#define _POSIX_C_SOURCE 200809L
#endif
#define _DEFAULT_SOURCE /* MAP_ANONYMOUS */
#include "runtime_double.h"

#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

typedef enum { T_COPY, T_FILL, T_RECORD, T_WAIT } rd_task_kind;

struct rd_task {
    rd_task_kind kind;
    char *dst;
    const char *src;
    size_t bytes;
    rd_event *ev;
    uint64_t gen;      /* a record's: the record it completes; a wait's: the one it waits for */
    unsigned delay_us; /* a copy's: rd_set_copy_delay */
    struct rd_task *next;
};

static int64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static void pause_us(unsigned us)
{
    struct timespec ts = {.tv_sec = us / 1000000, .tv_nsec = (long)(us % 1000000) * 1000};
    while (us > 0 && nanosleep(&ts, &ts) != 0)
        ;
}

/* ---- controls ---------------------------------------------------------------- */

void rd_set_jitter(rd_runtime *rt, unsigned max_us, unsigned seed)
{
    pthread_mutex_lock(&rt->mu);
    rt->jitter_us = max_us;
    rt->jitter_seed = seed;
    rt->streams_made = 0;
    pthread_mutex_unlock(&rt->mu);
}

void rd_set_copy_delay(rd_runtime *rt, rd_copy_kind kind, unsigned us)
{
    pthread_mutex_lock(&rt->mu);
    if ((unsigned)kind < RD_COPY_KINDS)
        rt->copy_delay_us[kind] = us;
    pthread_mutex_unlock(&rt->mu);
}

void rd_jitter_from_env(rd_runtime *rt, const char *var)
{
    const char *v = getenv(var);
    if (v == NULL || *v == '\0')
        return;
    char *end = NULL;
    unsigned long us = strtoul(v, &end, 10), seed = 1;
    if (end != NULL && *end == ':')
        seed = strtoul(end + 1, NULL, 10);
    rd_set_jitter(rt, (unsigned)us, (unsigned)seed);
}

/* ---- devices and memory ------------------------------------------------------- */

void rd_configure(rd_runtime *rt, int n_devices, uint64_t hbm_bytes)
{
    rt->n_devices = n_devices < 0 ? 0 : n_devices < RD_MAX_DEVICES ? n_devices : RD_MAX_DEVICES;
    rt->hbm = hbm_bytes;
    rt->count.host_allocs_made = 0;
    rt->count.bytes_h2d = rt->count.bytes_d2h = rt->count.bytes_d2d = 0;
    memset(rt->copy_delay_us, 0, sizeof rt->copy_delay_us);
}

bool rd_device_ok(const rd_runtime *rt, int device)
{
    return device >= 0 && device < rt->n_devices;
}

uint64_t rd_free_bytes(const rd_runtime *rt, int device)
{
    uint64_t used = rt->used[device];
    return used < rt->hbm ? rt->hbm - used : 0;
}

/* Each block is pages of its own: aligned as cudaHostAlloc promises (a
 * page) and beyond what cudaMalloc does (256 bytes), and zero, as fresh
 * pages are, without the double touching them.  Zero rather than left
 * undefined: nothing branches on device bytes but the data check, which
 * fails on bytes the code under test never wrote whatever they hold (a
 * test that skips a recompute makes it read some), and then without
 * valgrind reporting uninitialised memory. */
bool rd_alloc(rd_runtime *rt, void **out, size_t size, int device)
{
    if (device >= 0 && size > rd_free_bytes(rt, device))
        return false;
    rd_block *b = calloc(1, sizeof *b);
    void *p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (b == NULL || p == MAP_FAILED) {
        free(b);
        if (p != MAP_FAILED)
            munmap(p, size);
        return false;
    }
    *b = (rd_block){.p = p, .size = size, .device = device, .next = rt->blocks};
    rt->blocks = b;
    if (device >= 0) {
        rt->used[device] += size;
        rt->count.device_bytes += size;
        rt->count.device_allocs++;
    } else {
        rt->count.host_bytes += size;
        rt->count.host_allocs++;
        rt->count.host_allocs_made++;
    }
    *out = p;
    return true;
}

rd_block *rd_block_holding(const rd_runtime *rt, const void *p, size_t n, int device)
{
    for (rd_block *b = rt->blocks; b != NULL; b = b->next)
        if (b->device == device && (const char *)p >= b->p && n <= b->size &&
            (size_t)((const char *)p - b->p) <= b->size - n)
            return b;
    return NULL;
}

rd_block **rd_block_at(rd_runtime *rt, const void *p, int device)
{
    for (rd_block **pp = &rt->blocks; *pp != NULL; pp = &(*pp)->next)
        if ((*pp)->p == p &&
            (device == RD_ANY_DEVICE ? (*pp)->device >= 0 : (*pp)->device == device))
            return pp;
    return NULL;
}

rd_block **rd_block_of(rd_runtime *rt, int device)
{
    for (rd_block **pp = &rt->blocks; *pp != NULL; pp = &(*pp)->next)
        if ((*pp)->device == device)
            return pp;
    return NULL;
}

size_t rd_free(rd_runtime *rt, rd_block **link)
{
    rd_block *b = *link;
    size_t size = b->size;
    if (b->device >= 0) {
        rt->used[b->device] -= size;
        rt->count.device_bytes -= size;
        rt->count.device_allocs--;
    } else {
        rt->count.host_bytes -= size;
        rt->count.host_allocs--;
    }
    *link = b->next;
    munmap(b->p, size);
    free(b);
    return size;
}

/* ---- streams ------------------------------------------------------------------- */

/* The last queued task that named ev is done with it (lock held). */
static void event_release(rd_event *ev)
{
    if (--ev->pending == 0 && ev->destroyed)
        free(ev);
}

static void run_event_task(rd_runtime *rt, rd_task *t)
{
    pthread_mutex_lock(&rt->mu);
    if (t->kind == T_RECORD && t->gen > t->ev->done) {
        t->ev->done = t->gen;
        t->ev->done_ns = now_ns();
    }
    while (t->kind == T_WAIT && t->ev->done < t->gen)
        pthread_cond_wait(&rt->cv, &rt->mu);
    event_release(t->ev);
    pthread_mutex_unlock(&rt->mu);
}

static void run_task(rd_runtime *rt, rd_task *t)
{
    switch (t->kind) {
    case T_COPY:
        pause_us(t->delay_us);
        memmove(t->dst, t->src, t->bytes);
        break;
    case T_FILL: memset(t->dst, 0, t->bytes); break;
    case T_RECORD:
    case T_WAIT: run_event_task(rt, t); break;
    }
}

/* A random pause of up to max_us before a task (rd_set_jitter), so that
 * work on different streams interleaves in orders a loaded machine shows
 * only now and then. */
static void jitter(rd_stream *s, unsigned max_us)
{
    if (max_us > 0)
        pause_us((unsigned)rand_r(&s->seed) % (max_us + 1));
}

/* Run s's tasks in order, the lock let go while one runs. */
static void *stream_thread(void *arg)
{
    rd_stream *s = arg;
    rd_runtime *rt = s->rt;
    pthread_mutex_lock(&rt->mu);
    for (;;) {
        while (s->head == NULL && !s->quit)
            pthread_cond_wait(&rt->cv, &rt->mu);
        if (s->head == NULL)
            break;
        rd_task *t = s->head;
        s->busy = true;
        unsigned max_us = rt->jitter_us;
        pthread_mutex_unlock(&rt->mu);
        jitter(s, max_us);
        run_task(rt, t);
        pthread_mutex_lock(&rt->mu);
        s->head = t->next;
        if (s->head == NULL)
            s->tail = NULL;
        s->busy = false;
        free(t);
        pthread_cond_broadcast(&rt->cv);
    }
    pthread_mutex_unlock(&rt->mu);
    return NULL;
}

/* Queue a copy of t on s. */
static bool enqueue(rd_runtime *rt, rd_stream *s, rd_task t)
{
    rd_task *q = malloc(sizeof *q);
    if (q == NULL)
        return false;
    *q = t;
    q->next = NULL;
    if (q->ev != NULL)
        q->ev->pending++;
    if (s->tail != NULL)
        s->tail->next = q;
    else
        s->head = q;
    s->tail = q;
    pthread_cond_broadcast(&rt->cv);
    return true;
}

bool rd_stream_start(rd_runtime *rt, rd_stream *s, int device)
{
    s->rt = rt;
    s->device = device;
    s->seed = rt->jitter_seed * 2654435761u + ++rt->streams_made;
    if (pthread_create(&s->thread, NULL, stream_thread, s) != 0)
        return false;
    s->next = rt->streams;
    rt->streams = s;
    rt->count.streams++;
    return true;
}

static bool idle(const rd_stream *s)
{
    return s->head == NULL && !s->busy;
}

void rd_stream_sync(rd_runtime *rt, rd_stream *s)
{
    while (!idle(s))
        pthread_cond_wait(&rt->cv, &rt->mu);
}

void rd_stream_stop(rd_runtime *rt, rd_stream *s)
{
    for (rd_stream **pp = &rt->streams; *pp != NULL; pp = &(*pp)->next)
        if (*pp == s) {
            *pp = s->next;
            rt->count.streams--;
            break;
        }
    rd_stream_sync(rt, s);
    s->quit = true;
    pthread_cond_broadcast(&rt->cv);
    pthread_mutex_unlock(&rt->mu);
    pthread_join(s->thread, NULL);
    pthread_mutex_lock(&rt->mu);
}

bool rd_stream_live(const rd_runtime *rt, const void *s)
{
    for (const rd_stream *x = rt->streams; x != NULL; x = x->next)
        if ((const void *)x == s)
            return true;
    return false;
}

rd_stream *rd_stream_of(const rd_runtime *rt, int device)
{
    for (rd_stream *s = rt->streams; s != NULL; s = s->next)
        if (s->device == device)
            return s;
    return NULL;
}

/* A live stream of device (any: RD_ANY_DEVICE) with work left, or NULL. */
static rd_stream *busy_stream(const rd_runtime *rt, int device)
{
    for (rd_stream *s = rt->streams; s != NULL; s = s->next)
        if ((device == RD_ANY_DEVICE || s->device == device) && !idle(s))
            return s;
    return NULL;
}

/* The scan starts again after each wait: the list may change meanwhile. */
void rd_device_sync(rd_runtime *rt, int device)
{
    rd_stream *s;
    while ((s = busy_stream(rt, device)) != NULL)
        rd_stream_sync(rt, s);
}

bool rd_copy_sides_live(const rd_runtime *rt, const void *dst, const void *src, size_t bytes,
                        rd_copy_kind kind, int device)
{
    int dst_dev = kind == RD_D2H || kind == RD_H2H ? RD_HOST : device;
    int src_dev = kind == RD_H2D || kind == RD_H2H ? RD_HOST : device;
    return rd_block_holding(rt, dst, bytes, dst_dev) != NULL &&
           rd_block_holding(rt, src, bytes, src_dev) != NULL;
}

static uint64_t *copied(rd_counts *c, rd_copy_kind kind)
{
    return kind == RD_H2D ? &c->bytes_h2d : kind == RD_D2H ? &c->bytes_d2h : &c->bytes_d2d;
}

bool rd_enqueue_copy(rd_runtime *rt, rd_stream *s, void *dst, const void *src, size_t bytes,
                     rd_copy_kind kind)
{
    rd_task t = {.kind = T_COPY,
                 .dst = dst,
                 .src = src,
                 .bytes = bytes,
                 .delay_us = (unsigned)kind < RD_COPY_KINDS ? rt->copy_delay_us[kind] : 0};
    if (!enqueue(rt, s, t))
        return false;
    *copied(&rt->count, kind) += bytes;
    return true;
}

bool rd_enqueue_fill(rd_runtime *rt, rd_stream *s, void *dst, size_t bytes)
{
    return enqueue(rt, s, (rd_task){.kind = T_FILL, .dst = dst, .bytes = bytes});
}

bool rd_enqueue_record(rd_runtime *rt, rd_stream *s, rd_event *ev)
{
    if (!enqueue(rt, s, (rd_task){.kind = T_RECORD, .ev = ev, .gen = ev->issued + 1}))
        return false;
    ev->issued++;
    return true;
}

bool rd_enqueue_wait(rd_runtime *rt, rd_stream *s, rd_event *ev)
{
    return enqueue(rt, s, (rd_task){.kind = T_WAIT, .ev = ev, .gen = ev->issued});
}

/* ---- events -------------------------------------------------------------------- */

rd_event *rd_event_create(rd_runtime *rt, int device)
{
    rd_event *e = calloc(1, sizeof *e);
    if (e == NULL)
        return NULL;
    e->device = device;
    e->next = rt->events;
    rt->events = e;
    rt->count.events++;
    return e;
}

void rd_event_destroy(rd_runtime *rt, rd_event *ev)
{
    for (rd_event **pp = &rt->events; *pp != NULL; pp = &(*pp)->next)
        if (*pp == ev) {
            *pp = ev->next;
            rt->count.events--;
            break;
        }
    ev->destroyed = true;
    if (ev->pending == 0)
        free(ev);
}

bool rd_event_live(const rd_runtime *rt, const void *ev)
{
    for (const rd_event *x = rt->events; x != NULL; x = x->next)
        if ((const void *)x == ev)
            return true;
    return false;
}

rd_event *rd_event_of(const rd_runtime *rt, int device)
{
    for (rd_event *e = rt->events; e != NULL; e = e->next)
        if (e->device == device)
            return e;
    return NULL;
}

bool rd_event_complete(const rd_event *ev)
{
    return ev->done >= ev->issued;
}

void rd_event_sync(rd_runtime *rt, rd_event *ev)
{
    uint64_t target = ev->issued;
    while (ev->done < target)
        pthread_cond_wait(&rt->cv, &rt->mu);
}

bool rd_elapsed_ms(const rd_event *a, const rd_event *b, float *ms)
{
    if (!rd_event_complete(a) || !rd_event_complete(b))
        return false;
    *ms = (float)((double)(b->done_ns - a->done_ns) / 1e6);
    return true;
}
