/* Cooperative host threads: see cohost.h.
 *
 * Each host runs on its own stack as a coroutine, not on a POSIX thread: a
 * 70B pipeline step hands over hundreds of thousands of times (with full
 * launch queues the hosts take turns almost launch by launch), and a thread
 * switch through a mutex and condition variable costs ~100x a coroutine
 * switch.
 *
 * makecontext gives a host its stack and setcontext enters it once per run;
 * every later hand-over is sigsetjmp/siglongjmp without the signal mask.
 * swapcontext would do too, but it saves and restores the mask with a system
 * call on every switch, which measured a fifth of a 70B step's wall time.
 * Under AddressSanitizer, which must be told about stack switches it cannot
 * intercept, the hosts stay on swapcontext. */
#undef _FORTIFY_SOURCE /* its longjmp check rejects a jump to another stack */
#include "cohost.h"

#include <setjmp.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <ucontext.h>

#if defined(__SANITIZE_ADDRESS__)
#define MS_COHOST_SJLJ 0
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define MS_COHOST_SJLJ 0
#endif
#endif
#ifndef MS_COHOST_SJLJ
#define MS_COHOST_SJLJ 1
#endif

#define DRIVER (-1)
#define HOST_STACK (1u << 20) /* executor + mock + engine callbacks */

typedef struct ms_cohost_thread {
    ms_cohost *c;
    int index;
    ucontext_t ctx;
    sigjmp_buf jb;         /* where it parked (after its first entry) */
    void *stack;
    bool entered, finished;
    uint64_t marked_at; /* the epoch it parked in (marked while that epoch lasts) */
    ms_status result;
    ms_backend *real;   /* for the clock the scheduler orders by */
} ms_cohost_thread;

struct ms_cohost {
    int n;
    ms_cohost_thread *threads;
    ucontext_t driver;
    sigjmp_buf driver_jb;
    int current;        /* host running now, or DRIVER */
    bool in_run;
    bool cancelled;     /* parked calls give up instead of retrying */
    ms_cohost_body body;
    ms_cohost_done done;
    void *user;
    ms_cohost_clock clock; /* must not disturb a parked host */
    ms_cohost_moves moves;
    ms_cohost_changes changes;
    /* Marks are cleared all at once, and a turn that moved clears all but
     * one: a new epoch instead of a write to every host (64 stages). */
    uint64_t epoch;
    /* The hosts that may move (not finished, not waiting), a binary
     * min-heap by (clock, index): pick_next's usual answer is its root, not
     * a scan of every host at every hand-over (a tenth of a GPT-1T step). */
    int *ready, *ready_pos; /* ready_pos[i]: i's place, or -1 */
    int n_ready;
};

static bool marked(const ms_cohost *c, const ms_cohost_thread *t)
{
    return t->marked_at == c->epoch;
}

static ms_status park(ms_cohost *c, int host)
{
    if (!c->in_run || c->current != host)
        return MS_EAGAIN; /* called outside a run: nobody to yield to */
    ms_cohost_thread *t = &c->threads[host];
    t->marked_at = c->epoch;
#if MS_COHOST_SJLJ
    if (sigsetjmp(t->jb, 0) == 0)
        siglongjmp(c->driver_jb, 1);
#else
    swapcontext(&t->ctx, &c->driver);
#endif
    return c->cancelled ? MS_ECANCELED : MS_OK;
}

/* Run host t until it parks or finishes. */
static void resume(ms_cohost *c, ms_cohost_thread *t)
{
#if MS_COHOST_SJLJ
    if (sigsetjmp(c->driver_jb, 0) != 0)
        return;
    if (!t->entered) {
        t->entered = true;
        setcontext(&t->ctx);
    }
    siglongjmp(t->jb, 1);
#else
    swapcontext(&c->driver, &t->ctx);
#endif
}

/* makecontext passes int arguments only: the thread pointer goes in halves. */
static void host_entry(unsigned hi, unsigned lo)
{
    ms_cohost_thread *t = (ms_cohost_thread *)(((uintptr_t)hi << 32) | (uintptr_t)lo);
    ms_cohost *c = t->c;
    t->result = c->body(c->user, t->index);
    if (c->done)
        c->done(c->user, t->index);
    t->finished = true;
#if MS_COHOST_SJLJ
    /* Its stack is abandoned here; the next run makes a fresh context. */
    siglongjmp(c->driver_jb, 1);
#endif
    /* Returning ends the context and resumes uc_link: the driver. */
}

/* What the scheduler orders by: each host's clock, and whether its wait
 * still stands (parked in the simulator, not woken by device progress). */
typedef struct host_view {
    int64_t clock;
    bool waiting;
} host_view;

static host_view view_of(const ms_cohost_thread *t)
{
    host_view v = {0, false};
    if (t->real != NULL && t->c->clock != NULL)
        t->c->clock(t->real, &v.clock, &v.waiting);
    return v;
}

/* ---- the hosts that may move, by (clock, index) ---- */

static bool before(const host_view *views, int a, int b)
{
    return views[a].clock < views[b].clock || (views[a].clock == views[b].clock && a < b);
}

static void ready_put(ms_cohost *c, int at, int host)
{
    c->ready[at] = host;
    c->ready_pos[host] = at;
}

static void ready_sift_up(ms_cohost *c, const host_view *views, int at)
{
    int host = c->ready[at];
    while (at > 0 && before(views, host, c->ready[(at - 1) / 2])) {
        ready_put(c, at, c->ready[(at - 1) / 2]);
        at = (at - 1) / 2;
    }
    ready_put(c, at, host);
}

static void ready_sift_down(ms_cohost *c, const host_view *views, int at)
{
    int host = c->ready[at];
    for (int k = 2 * at + 1; k < c->n_ready; k = 2 * at + 1) {
        if (k + 1 < c->n_ready && before(views, c->ready[k + 1], c->ready[k]))
            k++;
        if (!before(views, c->ready[k], host))
            break;
        ready_put(c, at, c->ready[k]);
        at = k;
    }
    ready_put(c, at, host);
}

/* Host i's view or finished flag changed: into, within or out of the heap. */
static void ready_update(ms_cohost *c, const host_view *views, int i)
{
    bool may_move = !c->threads[i].finished && !views[i].waiting;
    int at = c->ready_pos[i];
    if (may_move && at < 0) {
        ready_put(c, c->n_ready++, i);
        ready_sift_up(c, views, c->ready_pos[i]);
    } else if (may_move) {
        ready_sift_up(c, views, at);
        ready_sift_down(c, views, c->ready_pos[i]);
    } else if (at >= 0) {
        c->ready_pos[i] = -1;
        int last = c->ready[--c->n_ready];
        if (last == i)
            return;
        ready_put(c, at, last);
        ready_sift_up(c, views, at);
        ready_sift_down(c, views, c->ready_pos[last]);
    }
}

/* Every host, when a run starts; the list of changes is emptied with it. */
static void look_at_hosts(ms_cohost *c, host_view *views)
{
    c->n_ready = 0;
    for (int i = 0; i < c->n; i++) {
        views[i] = view_of(&c->threads[i]);
        c->ready_pos[i] = -1;
    }
    for (int i = 0; i < c->n; i++)
        ready_update(c, views, i);
    if (c->n > 0 && c->threads[0].real != NULL)
        c->changes(c->threads[0].real, NULL, 0);
}

/* After a turn, only the hosts whose clock or wait changed: the one that
 * ran and, about once a turn, one its device work woke.  With 64 pipeline
 * stages, reading every host at every hand-over was a third of a step. */
static void look_at_changes(ms_cohost *c, host_view *views, int *changed)
{
    size_t k = c->changes(c->threads[0].real, changed, (size_t)c->n);
    if (k > (size_t)c->n) {
        look_at_hosts(c, views);
        return;
    }
    for (size_t i = 0; i < k; i++)
        if (changed[i] >= 0 && changed[i] < c->n) {
            views[changed[i]] = view_of(&c->threads[changed[i]]);
            ready_update(c, views, changed[i]);
        }
}

/* The scans behind the heap's answer (pick_next): hosts not marked, or all. */
typedef enum skip_rule { SKIP_MARKED, SKIP_NONE } skip_rule;

static bool skipped(const ms_cohost_thread *t, skip_rule rule)
{
    return rule == SKIP_MARKED && marked(t->c, t);
}

static int smallest_clock(const ms_cohost *c, const host_view *views, skip_rule rule)
{
    int best = DRIVER;
    for (int i = 0; i < c->n; i++) {
        const ms_cohost_thread *t = &c->threads[i];
        if (t->finished || skipped(t, rule))
            continue;
        if (best == DRIVER || views[i].clock < views[best].clock)
            best = i;
    }
    return best;
}

/* The host with the smallest clock (ties: lowest index) among those that can
 * move: not parked, or woken by the device since.  Retrying a host whose
 * wait still stands would only park it again, and with four stages at full
 * launch queues that was one hand-over in five.  When every host still
 * waits (a condition changed without a device step, a cancel, or a
 * deadlock to detect), those not retried since someone last moved get a
 * try, then all of them. */
static int pick_next(ms_cohost *c, const host_view *views)
{
    int next = c->n_ready > 0 ? c->ready[0] : DRIVER; /* not waiting */
    if (next == DRIVER)
        next = smallest_clock(c, views, SKIP_MARKED);
    if (next == DRIVER) {
        c->epoch++; /* every mark cleared */
        next = smallest_clock(c, views, SKIP_NONE);
    }
    return next;
}

/* Every host's clock only moves forward, so "some clock differs from
 * before the turn" is "some clock moved during it". */
static uint64_t clock_moves(const ms_cohost *c)
{
    const ms_backend *real = c->threads[0].real;
    return real != NULL ? c->moves(real) : 0;
}

static ms_status start_host(ms_cohost *c, ms_cohost_thread *t)
{
    if (t->stack == NULL && (t->stack = malloc(HOST_STACK)) == NULL)
        return MS_ENOMEM;
    if (getcontext(&t->ctx) != 0)
        return MS_EINTERNAL;
    t->ctx.uc_stack.ss_sp = t->stack;
    t->ctx.uc_stack.ss_size = HOST_STACK;
    t->ctx.uc_link = &c->driver;
    uintptr_t p = (uintptr_t)t;
    makecontext(&t->ctx, (void (*)(void))host_entry, 2, (unsigned)(p >> 32),
                (unsigned)(p & 0xffffffffu));
    return MS_OK;
}

ms_status mock_cohost_run(ms_cohost *c, ms_cohost_body body, ms_cohost_done done, void *user)
{
    if (c == NULL || body == NULL || c->in_run)
        return MS_EINVAL;
    c->body = body;
    c->done = done;
    c->user = user;
    c->in_run = true;
    c->cancelled = false;
    c->current = DRIVER;
    c->epoch++; /* no host marked */
    ms_status st = MS_OK;
    for (int i = 0; i < c->n; i++) {
        ms_cohost_thread *t = &c->threads[i];
        t->finished = t->entered = false;
        t->result = start_host(c, t);
        if (t->result != MS_OK)
            t->finished = true;
    }
    host_view *views = calloc((size_t)c->n, sizeof *views);
    int *changed = calloc((size_t)c->n, sizeof *changed);
    if (views == NULL || changed == NULL) {
        free(views);
        views = NULL;
        st = MS_ENOMEM;
    } else
        look_at_hosts(c, views);
    while (views != NULL) {
        int next = pick_next(c, views);
        if (next == DRIVER)
            break;
        uint64_t moves_before = clock_moves(c);
        c->current = next;
        resume(c, &c->threads[next]);
        c->current = DRIVER;
        /* Only a host that moved (finished, or some clock moved: device work
         * ran or a waiter woke) may have produced what the parked ones wait
         * for.  One that parked again at once changed nothing, and letting it
         * clear the others' marks would have two stuck hosts hand the turn
         * back and forth forever while the one that must move never runs. */
        bool moved = c->threads[next].finished || clock_moves(c) != moves_before;
        if (moved) {
            bool keep = marked(c, &c->threads[next]);
            c->epoch++;
            if (keep)
                c->threads[next].marked_at = c->epoch;
        }
        ready_update(c, views, next); /* it may have finished */
        look_at_changes(c, views, changed);
    }
    free(views);
    free(changed);
    for (int i = 0; i < c->n; i++)
        if (st == MS_OK && c->threads[i].result != MS_OK)
            st = c->threads[i].result;
    c->in_run = false;
    return st;
}

ms_status mock_cohost_cancel(ms_cohost *c)
{
    if (c == NULL || !c->in_run)
        return MS_EINVAL;
    c->cancelled = true;
    return MS_OK;
}

ms_status mock_cohost_create(int n_hosts, ms_cohost_clock clock, ms_cohost_moves moves,
                             ms_cohost_changes changes, ms_cohost **out)
{
    if (n_hosts < 1 || clock == NULL || moves == NULL || changes == NULL || out == NULL)
        return MS_EINVAL;
    ms_cohost *c = calloc(1, sizeof *c);
    if (c == NULL)
        return MS_ENOMEM;
    c->threads = calloc((size_t)n_hosts, sizeof *c->threads);
    c->ready = calloc((size_t)n_hosts, sizeof *c->ready);
    c->ready_pos = calloc((size_t)n_hosts, sizeof *c->ready_pos);
    if (c->threads == NULL || c->ready == NULL || c->ready_pos == NULL) {
        free(c->threads);
        free(c->ready);
        free(c->ready_pos);
        free(c);
        return MS_ENOMEM;
    }
    c->n = n_hosts;
    c->clock = clock;
    c->moves = moves;
    c->changes = changes;
    for (int i = 0; i < n_hosts; i++) {
        c->threads[i].c = c;
        c->threads[i].index = i;
    }
    *out = c;
    return MS_OK;
}

ms_status mock_cohost_destroy(ms_cohost *c)
{
    if (c == NULL || c->in_run)
        return MS_EINVAL;
    for (int i = 0; i < c->n; i++)
        free(c->threads[i].stack);
    free(c->threads);
    free(c->ready);
    free(c->ready_pos);
    free(c);
    return MS_OK;
}

/* ---- the wrapping backend: forward every call, park on MS_EAGAIN ------ */

typedef struct ms_cohost_proxy {
    ms_cohost *c;
    int host;
    ms_backend *real;
} ms_cohost_proxy;

#define RETRY(w, call)                                                                  \
    do {                                                                                \
        ms_status st_, park_;                                                           \
        while ((st_ = (call)) == MS_EAGAIN)                                             \
            if ((park_ = park((w)->c, (w)->host)) != MS_OK)                             \
                return park_;                                                           \
        return st_;                                                                     \
    } while (0)

#define FWD(name, params, ...)                                                         \
    static ms_status w_##name params                                                   \
    {                                                                                  \
        ms_cohost_proxy *w = inst;                                                      \
        RETRY(w, w->real->ops->name(w->real->inst, __VA_ARGS__));                      \
    }
#define FWD0(name)                                                                     \
    static ms_status w_##name(void *inst)                                              \
    {                                                                                  \
        ms_cohost_proxy *w = inst;                                                      \
        RETRY(w, w->real->ops->name(w->real->inst));                                   \
    }

FWD(mem_get_info, (void *inst, uint64_t *f, uint64_t *t), f, t)
FWD(malloc_device, (void *inst, uint64_t b, uint64_t *a), b, a)
FWD(free_device, (void *inst, uint64_t a), a)
FWD(malloc_host, (void *inst, uint64_t b, uint64_t *a), b, a)
FWD(free_host, (void *inst, uint64_t a), a)
FWD(va_reserve, (void *inst, uint64_t b, uint64_t *a), b, a)
FWD(va_release, (void *inst, uint64_t a), a)
FWD(mem_map, (void *inst, uint64_t a, uint64_t b), a, b)
FWD(mem_unmap, (void *inst, uint64_t a, uint64_t b), a, b)
FWD(stream_create, (void *inst, int p, ms_stream **s), p, s)
FWD(stream_destroy, (void *inst, ms_stream *s), s)
FWD(stream_synchronize, (void *inst, ms_stream *s), s)
FWD(stream_id, (void *inst, const ms_stream *s, uint64_t *id), s, id)
FWD(event_create, (void *inst, ms_event **e), e)
FWD(event_destroy, (void *inst, ms_event *e), e)
FWD(event_record, (void *inst, ms_event *e, ms_stream *s), e, s)
FWD(event_query, (void *inst, ms_event *e, bool *c), e, c)
FWD(event_synchronize, (void *inst, ms_event *e), e)
FWD(stream_wait_event, (void *inst, ms_stream *s, ms_event *e), s, e)
FWD(memcpy_async,
    (void *inst, uint64_t d, uint64_t s, uint64_t b, ms_copy_kind k, ms_stream *st, uint64_t t),
    d, s, b, k, st, t)
FWD(launch, (void *inst, const ms_kernel *k, ms_stream *s, uint64_t t), k, s, t)
FWD0(device_synchronize)
FWD(now, (void *inst, int64_t *ns), ns)
FWD(set_tracer, (void *inst, ms_work_tracer fn, void *user), fn, user)

/* Elapsed time answers MS_EAGAIN for "not yet", which is not a park. */
static ms_status w_event_elapsed_ns(void *inst, ms_event *a, ms_event *b, int64_t *ns)
{
    ms_cohost_proxy *w = inst;
    return w->real->ops->event_elapsed_ns(w->real->inst, a, b, ns);
}

static const char *w_last_error(void *inst)
{
    ms_cohost_proxy *w = inst;
    const ms_backend_ops *ops = w->real->ops;
    return ops->last_error != NULL ? ops->last_error(w->real->inst) : "";
}

static ms_status w_event_state(void *inst, const ms_event *e, ms_state_sig *sig)
{
    ms_cohost_proxy *w = inst;
    const ms_backend_ops *ops = w->real->ops;
    return ops->event_state != NULL ? ops->event_state(w->real->inst, e, sig) : MS_EUNSUPPORTED;
}

static ms_status w_matmul_dtype(void *inst, const ms_kernel *k, ms_dtype *runs_as)
{
    ms_cohost_proxy *w = inst;
    return ms_backend_matmul_dtype(w->real, k, runs_as);
}

static ms_status w_destroy(void *inst)
{
    free(inst); /* the real backend belongs to the caller */
    return MS_OK;
}

static const ms_backend_ops wrap_ops = {
    .name = "cohost",
    .destroy = w_destroy,
    .mem_get_info = w_mem_get_info,
    .malloc_device = w_malloc_device,
    .free_device = w_free_device,
    .malloc_host = w_malloc_host,
    .free_host = w_free_host,
    .va_reserve = w_va_reserve,
    .va_release = w_va_release,
    .mem_map = w_mem_map,
    .mem_unmap = w_mem_unmap,
    .stream_create = w_stream_create,
    .stream_destroy = w_stream_destroy,
    .stream_synchronize = w_stream_synchronize,
    .stream_id = w_stream_id,
    .event_create = w_event_create,
    .event_destroy = w_event_destroy,
    .event_record = w_event_record,
    .event_query = w_event_query,
    .event_synchronize = w_event_synchronize,
    .event_elapsed_ns = w_event_elapsed_ns,
    .stream_wait_event = w_stream_wait_event,
    .memcpy_async = w_memcpy_async,
    .launch = w_launch,
    .device_synchronize = w_device_synchronize,
    .now = w_now,
    .set_tracer = w_set_tracer,
    .last_error = w_last_error,
    .event_state = w_event_state,
    .matmul_dtype = w_matmul_dtype,
};

ms_status mock_cohost_wrap(ms_cohost *c, int host, ms_backend *real, ms_backend **wrapped)
{
    if (c == NULL || host < 0 || host >= c->n || real == NULL || wrapped == NULL)
        return MS_EINVAL;
    ms_cohost_proxy *w = calloc(1, sizeof *w);
    ms_backend *b = calloc(1, sizeof *b);
    if (w == NULL || b == NULL) {
        free(w);
        free(b);
        return MS_ENOMEM;
    }
    *w = (ms_cohost_proxy){.c = c, .host = host, .real = real};
    *b = (ms_backend){
        .ops = &wrap_ops, .inst = w, .device = real->device, .carries_data = real->carries_data};
    c->threads[host].real = real;
    *wrapped = b;
    return MS_OK;
}
