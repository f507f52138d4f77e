/* The executor: issues a step program through a backend, as a framework's
 * host thread would, and applies a policy's decisions (see exec.h). */
#include "memsim/exec.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "exec_actions.h"
#include "exec_spans.h"
#include "exec_verify.h"
#include "lib/base/growable.h"

/* Streams the executor drives.  Swaps get their own streams so copies overlap
 * compute, as SmartSwap and MindFormers' swap do.  Pipeline p2p gets one
 * stream per direction and neighbour: Megatron posts its sends and receives
 * together (batch_isend_irecv), so a receive still waiting for one neighbour
 * never holds up a send to the other; one FIFO for all of them deadlocks
 * 1F1B from three stages on. */
enum {
    ST_COMPUTE = 0,
    ST_COMM,
    ST_SWAP_OUT,
    ST_SWAP_IN,
    ST_SEND_NEXT,
    ST_SEND_PREV,
    ST_RECV_NEXT,
    ST_RECV_PREV,
    /* The data-parallel gradient reduction (collectives on persistent
     * tensors only): ProcessGroupNCCL/HCCL gives each process group its own
     * stream, so a bucket's reduction never holds up the tensor-parallel
     * collectives issued after it. */
    ST_GRAD_COMM,
    ST_COUNT
};

typedef enum ms_tstate { TS_ABSENT = 0, TS_ON_DEVICE, TS_ON_HOST, TS_DROPPED } ms_tstate;

static const char *const tstate_names[] = {"absent", "on device", "on host", "dropped"};

typedef struct ms_tensor_rt {
    uint8_t state;
    uint8_t ready_stream;   /* stream whose work produces its current contents */
    uint8_t alloc_stream;   /* stream its block was allocated on */
    uint16_t waited;        /* streams that already waited on ready_ev (bit mask) */
    uint16_t used_streams;  /* other streams that touched the block (bit mask) */
    uint8_t ready_recorded;
    uint8_t cross_stream;   /* some use is on another stream than the producer's */
    uint8_t replay_temp;    /* allocated by a recompute replay, not needed after it */
    uint8_t check_due;      /* verify: 1 + generation its next use checks; 0: none */
    uint8_t rescued;        /* on host because an OOM rescue swapped it out */
    uint8_t held;           /* on host, its device block not yet released (MindSpore) */
    uint8_t release_pending; /* its host buffers waiting in host_release */
    int pool;
    uint64_t addr;
    uint64_t host_addr;
    ms_event *ready_ev;
    ms_event *aux_ev;
} ms_tensor_rt;

typedef struct ms_inflight_copy {
    uint64_t addr;
    uint64_t bytes;
    ms_event *done;
} ms_inflight_copy;

/* A host buffer whose swap-in was issued: free once the H2D copy is done
 * (the tensor's ready event, recorded right after it), as PyTorch's caching
 * host allocator reuses a pinned block once the events of its uses passed.
 * Keeping one buffer per swapped tensor instead would need the whole step's
 * swapped bytes in host memory at once. */
typedef struct ms_host_release {
    uint64_t host_addr;
    uint32_t tensor;
} ms_host_release;

struct ms_exec {
    ms_exec_config cfg;
    const ms_program_view *p;
    const ms_program_facts *facts; /* the builder's, or own_facts for a view made by hand */
    ms_program_facts own_facts;
    ms_stream *streams[ST_COUNT];
    uint64_t stream_ids[ST_COUNT];
    ms_tensor_rt *rt;
    ms_schedule sched;
    /* The plan sched was built from: a step with the same plan (every
     * steady step) reuses it, since the schedule is a function of the
     * program, the plan and release_after_copy alone. */
    ms_plan sched_plan;
    bool sched_valid;
    /* Rows of the current step (the tracer patches their device times). */
    ms_op_row *rows;
    size_t n_rows, cap_rows;
    int step;
    int64_t step_start;
    int32_t *kernel_row;     /* op id -> its row this step, or -1 */
    /* Per op, derived once from the program: the stream it runs on (a
     * collective's was found by reading its tensors at every issue), and
     * whether a p2p receive produced one of its inputs (the step's
     * pipeline-wait sum asks the receives of those ops alone, where it read
     * every input's producer at random: about 2% of perf's samples of the
     * shipped llama2-70B). */
    uint8_t *op_stream;
    uint8_t *recv_fed;
    ms_op_profile *profile;  /* caller's buffer during a step */
    /* Memory accounting seen through the allocator observer. */
    ms_tensor_kind cur_kind;
    uint32_t cur_tensor; /* the tensor being allocated or freed */
    uint64_t by_kind[MS_TK_COUNT];
    uint64_t peak_alloc_seen;
    uint64_t gap_at_peak;
    uint64_t peak_activation;
    /* Copies that may still read a device block. */
    ms_inflight_copy *inflight;
    size_t inflight_head, n_inflight, cap_inflight; /* live: [head, n), oldest first */
    exec_spans inflight_spans;                      /* the live ones by address */
    ms_host_release *host_release;
    size_t n_host_release, cap_host_release;
    bool release_reordered; /* a listed buffer's tensor re-recorded its ready event */
    ms_event *comm_done;     /* re-recorded after every collective */
    ms_event *free_events[64];
    size_t n_free_events;
    bool in_forward; /* inside a micro-batch's forward through the layers */
    int32_t fwd_micro_batch, fwd_layer;
    ms_status record_status; /* a memory row the allocator observer could not keep */
    exec_verifier *verifier; /* the data check (cfg.verify), or NULL */
    uint64_t verified_before, verified_bytes_before; /* its counts when the step began */
    ms_rescue_stats rescued; /* this step's OOM rescues */
    bool rescuing;           /* a rescue is swapping out: no nested rescue */
    uint32_t oom_tensor;
    uint64_t swapped_bytes;
    uint32_t recomputed_ops;
    ms_diag *diag; /* where the current step reports (set per step) */
};

/* What the backend says of its last failure ("" if nothing). */
static const char *be_why(const ms_exec *e)
{
    const ms_backend *b = e->cfg.backend;
    const char *why = b->ops->last_error != NULL ? b->ops->last_error(b->inst) : NULL;
    return why != NULL ? why : "";
}

static ms_status be_call_failed(ms_exec *e, ms_status st, const char *what)
{
    const char *why = be_why(e);
    return ms_diag_set(e->diag, st, "backend %s failed: %s%s%s", what, ms_strerror(st),
                       why[0] ? ": " : "", why);
}

#define BE(e, call, ...) ((e)->cfg.backend->ops->call((e)->cfg.backend->inst, __VA_ARGS__))

static int64_t host_now(ms_exec *e)
{
    int64_t t = 0;
    e->cfg.backend->ops->now(e->cfg.backend->inst, &t);
    return t;
}

/* ---- the run record as the step goes -------------------------------- */

static ms_status add_row(ms_exec *e, const ms_op_row *row, size_t *index)
{
    if (!MS_GROW(e->rows, e->n_rows, e->cap_rows, 4096))
        return MS_ENOMEM;
    e->rows[e->n_rows] = *row;
    *index = e->n_rows++;
    return MS_OK;
}

static void on_work_done(void *user, const ms_work_record *rec)
{
    ms_exec *e = user;
    if (rec->tag >= e->n_rows)
        return; /* work of an earlier, aborted step */
    e->rows[rec->tag].start_ns = rec->start_ns;
    e->rows[rec->tag].end_ns = rec->end_ns;
}

static void on_alloc_event(void *user, const ms_alloc_event *ev)
{
    ms_exec *e = user;
    if (ev->action == MS_AA_ALLOC)
        e->by_kind[e->cur_kind] += ev->size;
    else if (ev->action == MS_AA_FREE_REQUESTED && e->by_kind[e->cur_kind] >= ev->size)
        e->by_kind[e->cur_kind] -= ev->size;
    if (e->by_kind[MS_TK_ACTIVATION] > e->peak_activation)
        e->peak_activation = e->by_kind[MS_TK_ACTIVATION];
    uint64_t allocated = ev->allocated;
    uint64_t reserved = ev->reserved;
    /* The gap between reserved and allocated when allocated peaks is the
     * fragmentation that decides OOMs (MindSpeed's "reserved - allocated"). */
    if (allocated > e->peak_alloc_seen) {
        e->peak_alloc_seen = allocated;
        e->gap_at_peak = reserved - allocated;
    }
    if (e->cfg.record == NULL)
        return;
    ms_mem_row row = {
        .step = e->step,
        .device = e->cfg.backend->device,
        .time_ns = host_now(e) - e->step_start,
        .action = (int)ev->action,
        .addr = ev->addr,
        .bytes = ev->size,
        .allocated = allocated,
        .reserved = reserved,
        .active = ev->active,
        .tensor = ev->action == MS_AA_ALLOC || ev->action == MS_AA_FREE_REQUESTED ? e->cur_tensor
                                                                                  : UINT32_MAX,
        .stream_id = ev->stream_id,
    };
    memcpy(row.by_kind, e->by_kind, sizeof row.by_kind);
    /* The observer cannot fail the allocation; the step reports it. */
    ms_status st = ms_record_add_mem(e->cfg.record, &row);
    if (st != MS_OK && e->record_status == MS_OK)
        e->record_status = st;
}

/* ---- events ---------------------------------------------------------- */

static ms_status get_event(ms_exec *e, ms_event **ev)
{
    if (*ev != NULL)
        return MS_OK;
    return BE(e, event_create, ev);
}

static ms_status record_ready(ms_exec *e, uint32_t t, int stream)
{
    ms_tensor_rt *r = &e->rt[t];
    ms_status st = get_event(e, &r->ready_ev);
    if (st == MS_OK)
        st = BE(e, event_record, r->ready_ev, e->streams[stream]);
    if (st != MS_OK)
        return be_call_failed(e, st, "event_record");
    r->ready_stream = (uint8_t)stream;
    r->ready_recorded = 1;
    if (r->release_pending)
        e->release_reordered = true;
    r->waited = (uint16_t)(1u << stream);
    return MS_OK;
}

/* Nothing to wait for on `stream`: no producer event, or waited for already. */
static bool ready_seen(const ms_tensor_rt *r, int stream)
{
    return !r->ready_recorded || (r->waited & (1u << stream));
}

static ms_status wait_ready(ms_exec *e, uint32_t t, int stream)
{
    ms_tensor_rt *r = &e->rt[t];
    if (ready_seen(r, stream))
        return MS_OK;
    ms_status st = BE(e, stream_wait_event, e->streams[stream], r->ready_ev);
    if (st != MS_OK)
        return be_call_failed(e, st, "stream_wait_event");
    r->waited |= (uint16_t)(1u << stream);
    return MS_OK;
}

/* ---- allocation ------------------------------------------------------ */

/* The oldest copy's event has passed: forget the copy, keep the event for
 * the next one. */
static void drop_oldest_copy(ms_exec *e)
{
    const ms_inflight_copy *c = &e->inflight[e->inflight_head++];
    ms_event *done = c->done;
    exec_spans_remove(&e->inflight_spans, c->addr, done);
    if (e->n_free_events < sizeof e->free_events / sizeof e->free_events[0])
        e->free_events[e->n_free_events++] = done;
    else
        BE(e, event_destroy, done);
    if (e->inflight_head == e->n_inflight)
        e->inflight_head = e->n_inflight = 0;
}

/* Forget the copies that are done.  Every swap-out copy runs on the one
 * swap-out stream and records its event right after, and a stream's events
 * complete in the order recorded (CUDA and ACL streams alike), so the done
 * copies are the oldest ones: asking from the oldest until one is still
 * running finds them all with one question more than there are.  Asking
 * every copy at every allocation, as before, made the swap-heavy plans of
 * a policy search cost 3-7 times a recompute plan (bench/README). */
static ms_status reap_copies(ms_exec *e)
{
    while (e->inflight_head < e->n_inflight) {
        bool done = false;
        ms_status st = BE(e, event_query, e->inflight[e->inflight_head].done, &done);
        if (st != MS_OK)
            return be_call_failed(e, st, "event_query");
        if (!done)
            break;
        drop_oldest_copy(e);
    }
    return MS_OK;
}

/* A block handed out while a swap-out copy still reads it is a hazard.  A
 * copy over the block is asked itself, so the check does not rest on the
 * order above; the address index finds those copies without a look at the
 * others. */
static ms_status check_not_inflight(ms_exec *e, uint32_t t, uint64_t addr, uint64_t bytes)
{
    ms_status st = reap_copies(e);
    const exec_spans *sp = &e->inflight_spans;
    for (size_t i = exec_spans_from(sp, addr); st == MS_OK && i < sp->n; i++) {
        const exec_span *c = &sp->v[i];
        if (c->addr >= addr + bytes)
            break;
        if (c->addr + c->bytes <= addr)
            continue;
        bool done = false;
        if ((st = BE(e, event_query, (ms_event *)c->key, &done)) != MS_OK)
            return be_call_failed(e, st, "event_query");
        if (!done)
            return ms_diag_set(e->diag, MS_EHAZARD,
                               "hazard: tensor %u (%s) got block 0x%" PRIx64 " (+%" PRIu64
                               ") while a swap-out copy still reads 0x%" PRIx64 " (+%" PRIu64 ")",
                               t, e->p->tensors[t].name, addr, bytes, c->addr, c->bytes);
    }
    return st;
}

/* Room for one more copy at the end, moving the live ones to the front
 * before growing. */
static bool copy_slot(ms_exec *e)
{
    if (e->n_inflight == e->cap_inflight && e->inflight_head > 0) {
        e->n_inflight -= e->inflight_head;
        memmove(e->inflight, e->inflight + e->inflight_head, e->n_inflight * sizeof *e->inflight);
        e->inflight_head = 0;
    }
    return MS_GROW(e->inflight, e->n_inflight, e->cap_inflight, 64);
}

static ms_status rescue_swap_out(ms_exec *e, uint32_t t, uint64_t request, uint32_t at_op,
                                 bool *freed);

/* A block of `bytes` for tensor t (its own size, or the grad buffer's). */
static ms_status tensor_alloc_bytes(ms_exec *e, uint32_t t, uint64_t bytes, int stream,
                                    uint32_t at_op)
{
    const ms_tensor *tn = &e->p->tensors[t];
    ms_tensor_rt *r = &e->rt[t];
    e->cur_kind = tn->kind;
    e->cur_tensor = t;
    /* Cleared, not zeroed: a kilobyte memset per allocation was 6% of the
     * executor's own instructions, and only the message's end is read. */
    ms_diag ad;
    ms_diag_clear(&ad);
    ms_status st = ms_alloc_malloc(e->cfg.alloc, bytes, e->streams[stream], r->pool, &r->addr,
                                   &ad);
    /* SmartSwap's allocator hook: swap an idle tensor out and try again. */
    bool freed = true;
    while (st == MS_ENOMEM && e->cfg.rescue_oom && !e->rescuing && freed) {
        ms_diag_clear(&ad);
        if ((st = rescue_swap_out(e, t, bytes, at_op, &freed)) != MS_OK)
            return st;
        e->cur_kind = tn->kind;
        st = ms_alloc_malloc(e->cfg.alloc, bytes, e->streams[stream], r->pool, &r->addr, &ad);
        if (!freed && st == MS_ENOMEM)
            break;
    }
    if (st == MS_ENOMEM) {
        e->oom_tensor = t;
        return ms_diag_set(e->diag, MS_ENOMEM, "%s", ad.msg);
    }
    if (st != MS_OK)
        return ms_diag_set(e->diag, st, "allocating tensor %u (%s) at op %u: %s", t, tn->name,
                           at_op, ad.msg[0] ? ad.msg : ms_strerror(st));
    r->state = TS_ON_DEVICE;
    r->alloc_stream = (uint8_t)stream;
    r->used_streams = 0;
    r->ready_recorded = 0;
    r->ready_stream = (uint8_t)stream;
    return check_not_inflight(e, t, r->addr, bytes);
}

static ms_status tensor_alloc(ms_exec *e, uint32_t t, int stream, uint32_t at_op)
{
    uint64_t bytes = e->p->tensors[t].bytes;
    return tensor_alloc_bytes(e, t, bytes ? bytes : 1, stream, at_op);
}

static ms_status tensor_free(ms_exec *e, uint32_t t)
{
    ms_tensor_rt *r = &e->rt[t];
    if (r->state != TS_ON_DEVICE)
        return MS_OK; /* already gone: freed by an abort, or never made */
    /* A block another stream used may only be reused once that stream's work
     * is done: PyTorch's record_stream. */
    for (int s = 0; s < ST_COUNT; s++) {
        if (s == r->alloc_stream || !(r->used_streams & (1u << s)))
            continue;
        if (s == ST_COMM && e->cfg.avoid_record_streams)
            continue; /* compute already waited for the collective */
        ms_status st = ms_alloc_record_stream(e->cfg.alloc, r->addr, e->streams[s]);
        if (st != MS_OK)
            return ms_diag_set(e->diag, st, "record_stream of tensor %u failed", t);
    }
    e->cur_kind = e->p->tensors[t].kind;
    e->cur_tensor = t;
    ms_status st = ms_alloc_free(e->cfg.alloc, r->addr);
    if (st != MS_OK)
        return ms_diag_set(e->diag, st, "freeing tensor %u (%s) failed: %s", t,
                           e->p->tensors[t].name, ms_strerror(st));
    r->state = TS_ABSENT;
    r->replay_temp = 0;
    r->check_due = 0;
    return MS_OK;
}

/* ---- the data check (verify) ------------------------------------------ */

/* The production a pattern stands for: the producer's, or a recompute's
 * (so the forward bytes left in a block never pass for the re-made ones). */
enum { GEN_FORWARD = 0, GEN_RECOMPUTE = 1 };

static ms_status host_buffer(ms_exec *e, uint64_t bytes, uint64_t *addr);

static uint64_t verify_seed(const ms_exec *e, uint32_t t, int generation)
{
    return exec_verify_seed(e->cfg.backend->device, e->step, t, generation);
}

/* A tensor that will be swapped gets its pattern through its own swap
 * buffer (allocated now instead of at the swap-out); one re-made by a
 * recompute through a staging buffer, and its next use checks it. */
static ms_status verify_fill_outputs(ms_exec *e, const ms_op *op, int stream, bool replay)
{
    for (uint32_t i = 0; e->verifier != NULL && i < op->n_outputs; i++) {
        uint32_t t = op->outputs[i];
        const ms_tensor *tn = &e->p->tensors[t];
        const ms_tensor_plan *tp = &e->sched.tensors[t];
        ms_tensor_rt *r = &e->rt[t];
        bool swap = !replay && tp->swap, remade = replay && tp->dropped;
        if (tn->persistent || tn->bytes == 0 || r->state != TS_ON_DEVICE || !(swap || remade))
            continue;
        ms_status st = MS_OK;
        if (swap && r->host_addr == 0 && (st = host_buffer(e, tn->bytes, &r->host_addr)) != MS_OK)
            return ms_diag_set(e->diag, st, "verify: no pinned host memory for tensor %u (%s)", t,
                               tn->name);
        int gen = remade ? GEN_RECOMPUTE : GEN_FORWARD;
        if ((st = exec_verify_fill(e->verifier, e->streams[stream], r->addr, tn->bytes,
                                   verify_seed(e, t, gen), swap ? r->host_addr : 0, e->diag)) !=
            MS_OK)
            return st;
        if (remade)
            r->check_due = 1 + GEN_RECOMPUTE;
    }
    return MS_OK;
}

static ms_status verify_check(ms_exec *e, const ms_op *op, uint32_t t, int stream)
{
    ms_tensor_rt *r = &e->rt[t];
    const ms_tensor *tn = &e->p->tensors[t];
    int gen = r->check_due - 1;
    r->check_due = 0;
    exec_check_subject what = {.tensor = t,
                               .tensor_name = tn->name,
                               .op = op->id,
                               .op_name = op->name,
                               .since = gen == GEN_RECOMPUTE ? "its recompute" : "its swap-in"};
    return exec_verify_check(e->verifier, e->streams[stream], r->addr, tn->bytes,
                             verify_seed(e, t, gen), &what, e->diag);
}

/* ---- issuing ops ----------------------------------------------------- */

static ms_status check_readable(ms_exec *e, uint32_t op, uint32_t t)
{
    ms_tensor_rt *r = &e->rt[t];
    if (r->state == TS_ON_DEVICE)
        return MS_OK;
    return ms_diag_set(e->diag, MS_EHAZARD,
                       "hazard: op %u (%s) reads tensor %u (%s) while it is %s", op,
                       e->p->ops[op].name, t, e->p->tensors[t].name, tstate_names[r->state]);
}

static ms_status swap_in(ms_exec *e, uint32_t t, uint32_t at_op);

/* Most inputs are on the device, their producer waited for on this stream
 * already and no check due: nothing to do but note the stream (3.9 M
 * inputs a step of the shipped llama2-70B, each through three calls before). */
static bool input_ready(const ms_tensor_rt *r, int stream)
{
    return r->state == TS_ON_DEVICE && !r->check_due && ready_seen(r, stream);
}

/* The rest: an input still to arrive, come back, be waited for or checked. */
static ms_status prepare_input(ms_exec *e, const ms_op *op, uint32_t t, int stream)
{
    const ms_tensor *tn = &e->p->tensors[t];
    /* Data-loader inputs exist before the step but are not persistent:
     * they arrive just before their first use. */
    if (tn->producer == MS_NONE && !tn->persistent && e->rt[t].state == TS_ABSENT) {
        ms_status st = tensor_alloc(e, t, ST_COMPUTE, op->id);
        if (st != MS_OK)
            return st;
    }
    /* A tensor an OOM rescue sent to the host comes back on demand. */
    if (e->rt[t].state == TS_ON_HOST && e->rt[t].rescued) {
        ms_status st = swap_in(e, t, op->id);
        if (st != MS_OK)
            return st;
        e->rt[t].rescued = 0;
    }
    ms_status st = check_readable(e, op->id, t);
    if (st == MS_OK)
        st = wait_ready(e, t, stream);
    if (st == MS_OK && e->rt[t].check_due)
        st = verify_check(e, op, t, stream);
    return st;
}

static ms_status prepare_inputs(ms_exec *e, const ms_op *op, int stream)
{
    for (uint32_t i = 0; i < op->n_inputs; i++) {
        uint32_t t = op->inputs[i];
        if (!input_ready(&e->rt[t], stream)) {
            ms_status st = prepare_input(e, op, t, stream);
            if (st != MS_OK)
                return st;
        }
        if (stream != e->rt[t].alloc_stream)
            e->rt[t].used_streams |= (uint16_t)(1u << stream);
    }
    return MS_OK;
}

/* Outputs are allocated on the framework's current stream, the compute
 * stream, even for collectives: that is where torch.empty puts them before
 * ProcessGroupNCCL/HCCL hands them to its own stream. */
static ms_status alloc_outputs(ms_exec *e, const ms_op *op, bool replay)
{
    for (uint32_t i = 0; i < op->n_outputs; i++) {
        uint32_t t = op->outputs[i];
        const ms_tensor *tn = &e->p->tensors[t];
        if (tn->persistent)
            continue; /* written in place: weights, grads, optimizer state */
        if (e->rt[t].state == TS_ON_DEVICE)
            continue; /* a replay re-makes only what recompute dropped */
        ms_status st = tensor_alloc(e, t, ST_COMPUTE, op->id);
        if (st != MS_OK)
            return st;
        e->rt[t].replay_temp =
            replay && !(e->sched.tensors[t].dropped && e->sched.tensors[t].segment != MS_NONE);
    }
    return MS_OK;
}

/* work.wait() of a synchronous collective: the compute stream continues only
 * after it, so its buffers may be freed in compute-stream order.  Collectives
 * on persistent tensors only (the DP gradient reduction) stay asynchronous. */
static bool touches_step_tensors(const ms_exec *e, const ms_op *op)
{
    for (uint32_t i = 0; i < op->n_inputs + op->n_outputs; i++) {
        uint32_t t = i < op->n_inputs ? op->inputs[i] : op->outputs[i - op->n_inputs];
        if (!e->p->tensors[t].persistent)
            return true;
    }
    return false;
}

static ms_status wait_for_collective(ms_exec *e, const ms_op *op)
{
    if (!touches_step_tensors(e, op))
        return MS_OK;
    ms_status st = get_event(e, &e->comm_done);
    if (st == MS_OK)
        st = BE(e, event_record, e->comm_done, e->streams[ST_COMM]);
    if (st == MS_OK)
        st = BE(e, stream_wait_event, e->streams[ST_COMPUTE], e->comm_done);
    if (st != MS_OK)
        return be_call_failed(e, st, "waiting for a collective");
    for (uint32_t i = 0; i < op->n_outputs; i++)
        e->rt[op->outputs[i]].waited |= (uint16_t)(1u << ST_COMPUTE);
    return MS_OK;
}

static bool is_p2p(const ms_op *op)
{
    return op->kernel.comm == MS_COMM_SEND || op->kernel.comm == MS_COMM_RECV;
}

static int derive_stream(const ms_exec *e, const ms_op *op)
{
    if (op->stream != MS_SR_COMM)
        return ST_COMPUTE;
    if (!is_p2p(op))
        return touches_step_tensors(e, op) ? ST_COMM : ST_GRAD_COMM;
    int p = e->cfg.pipeline_size > 0 ? e->cfg.pipeline_size : 1;
    bool next = op->kernel.peer == (e->cfg.backend->device + 1) % p;
    if (op->kernel.comm == MS_COMM_SEND)
        return next ? ST_SEND_NEXT : ST_SEND_PREV;
    return next ? ST_RECV_NEXT : ST_RECV_PREV;
}

static int stream_of(const ms_exec *e, const ms_op *op)
{
    return e->op_stream[op - e->p->ops];
}

/* The forward as MindSpeed's memory recorder sees it: one micro-batch's
 * pass through the transformer layers (it wraps ParallelTransformer.forward),
 * each a forward of its own.  Short-lived tensors may borrow idle long-lived
 * blocks outside it, and the allocator's lifetime rules follow it (memory
 * fragmentation, seeds 001/004). */
static void note_phase(ms_exec *e, const ms_op *op)
{
    bool fwd = op->phase == MS_PHASE_FORWARD && op->layer != MS_NONE;
    bool next =
        fwd && e->in_forward && (op->micro_batch != e->fwd_micro_batch || op->layer < e->fwd_layer);
    if (next)
        ms_alloc_set_forward(e->cfg.alloc, false);
    if (next || fwd != e->in_forward)
        ms_alloc_set_forward(e->cfg.alloc, fwd);
    e->in_forward = fwd;
    e->fwd_micro_batch = op->micro_batch;
    e->fwd_layer = op->layer;
}

static ms_status issue_op(ms_exec *e, uint32_t id, bool replay)
{
    const ms_op *op = &e->p->ops[id];
    int stream = stream_of(e, op);
    if (!replay)
        note_phase(e, op);
    ms_status st = prepare_inputs(e, op, stream);
    if (st == MS_OK)
        st = alloc_outputs(e, op, replay);
    if (st == MS_OK && stream != ST_COMPUTE)
        for (uint32_t i = 0; i < op->n_outputs; i++)
            if (!e->p->tensors[op->outputs[i]].persistent)
                e->rt[op->outputs[i]].used_streams |= (uint16_t)(1u << stream);
    if (st != MS_OK)
        return st;
    ms_alloc_totals now = ms_alloc_current(e->cfg.alloc);
    ms_op_row row = {
        .step = e->step,
        .device = e->cfg.backend->device,
        .kind = replay ? MS_WK_RECOMPUTE : MS_WK_KERNEL,
        .op = id,
        .tensor = UINT32_MAX,
        .stream_id = e->stream_ids[stream],
        .issue_ns = host_now(e) - e->step_start,
        .start_ns = -1,
        .end_ns = -1,
        .bytes = (uint64_t)op->kernel.bytes,
        .flops = op->kernel.flops,
        .allocated = now.allocated,
        .reserved = now.reserved,
    };
    size_t ri;
    if ((st = add_row(e, &row, &ri)) != MS_OK)
        return st;
    if (!replay) {
        e->kernel_row[id] = (int32_t)ri;
        e->profile[id].allocated = row.allocated;
        e->profile[id].reserved = row.reserved;
        e->profile[id].active = now.active;
    } else {
        e->recomputed_ops++;
    }
    st = BE(e, launch, &op->kernel, e->streams[stream], (uint64_t)ri);
    if (st != MS_OK)
        return be_call_failed(e, st, "launch");
    if ((st = verify_fill_outputs(e, op, stream, replay)) != MS_OK)
        return st;
    for (uint32_t i = 0; i < op->n_outputs; i++) {
        uint32_t t = op->outputs[i];
        if (e->rt[t].cross_stream || e->sched.tensors[t].swap)
            if ((st = record_ready(e, t, stream)) != MS_OK)
                return st;
    }
    if (stream == ST_COMM && e->cfg.avoid_record_streams)
        return wait_for_collective(e, op);
    return MS_OK;
}

/* ---- decisions ------------------------------------------------------- */

/* Copy tensor t between device and host on `stream` (ST_SWAP_OUT: D2H,
 * ST_SWAP_IN: H2D), ordered after the work issued so far on `after` and
 * after t's producer, with its row in the record. */
static ms_status issue_swap_copy(ms_exec *e, uint32_t t, uint32_t at_op, int after, int stream)
{
    ms_tensor_rt *r = &e->rt[t];
    const ms_tensor *tn = &e->p->tensors[t];
    bool out = stream == ST_SWAP_OUT;
    ms_status st = MS_OK;
    bool unordered = out && e->cfg.fault == MS_FAULT_SWAP_OUT_UNORDERED;
    if (!unordered && ((st = get_event(e, &r->aux_ev)) != MS_OK ||
                       (st = BE(e, event_record, r->aux_ev, e->streams[after])) != MS_OK ||
                       (st = BE(e, stream_wait_event, e->streams[stream], r->aux_ev)) != MS_OK))
        return be_call_failed(e, st, out ? "event for swap-out" : "event for swap-in");
    if (!unordered && (st = wait_ready(e, t, stream)) != MS_OK)
        return st;
    ms_op_row row = {.step = e->step, .device = e->cfg.backend->device,
                     .kind = out ? MS_WK_SWAP_OUT : MS_WK_SWAP_IN, .op = at_op, .tensor = t,
                     .stream_id = e->stream_ids[stream],
                     .issue_ns = host_now(e) - e->step_start, .start_ns = -1, .end_ns = -1,
                     .bytes = tn->bytes};
    size_t ri;
    if ((st = add_row(e, &row, &ri)) != MS_OK)
        return st;
    st = BE(e, memcpy_async, out ? r->host_addr : r->addr, out ? r->addr : r->host_addr,
            tn->bytes, out ? MS_COPY_D2H : MS_COPY_H2D, e->streams[stream], (uint64_t)ri);
    if (st != MS_OK)
        return be_call_failed(e, st, out ? "memcpy_async D2H" : "memcpy_async H2D");
    /* Once out, the tensor's contents are the host buffer the D2H writes:
     * its swap-in waits for this, not for the producer. */
    return out ? record_ready(e, t, ST_SWAP_OUT) : MS_OK;
}

static ms_status host_buffer_freed(ms_exec *e, const ms_host_release *h)
{
    e->rt[h->tensor].release_pending--;
    return BE(e, free_host, h->host_addr);
}

/* The buffers are listed in the order their swap-ins were issued, all on
 * the one swap-in stream, whose events complete in the order recorded (CUDA
 * and ACL streams alike): the done ones are a prefix, and asking past the
 * first still running (each a backend call) would only hear "no".  With the
 * host a micro-batch ahead of the device, asking every listed buffer at
 * every swap-out was a fifth of a swap-heavy step's instructions
 * (bench/README.md). */
static ms_status release_done_prefix(ms_exec *e)
{
    size_t i = 0;
    ms_status st = MS_OK;
    for (; i < e->n_host_release; i++) {
        bool done = false;
        st = BE(e, event_query, e->rt[e->host_release[i].tensor].ready_ev, &done);
        if (st != MS_OK || !done || (st = host_buffer_freed(e, &e->host_release[i])) != MS_OK)
            break;
    }
    e->n_host_release -= i;
    if (i > 0) /* host_release may be NULL when nothing was ever listed */
        memmove(e->host_release, e->host_release + i,
                e->n_host_release * sizeof *e->host_release);
    return st == MS_OK ? MS_OK : be_call_failed(e, st, "releasing a swap's host buffer");
}

/* Free the host buffers whose swap-in copies are done; with `wait`, wait
 * for every one (the host is out of pinned memory).  Once a listed tensor
 * re-recorded its ready event (swapped again, or re-made), the order above
 * no longer holds and every buffer is asked, until the list is empty. */
static ms_status release_host_buffers(ms_exec *e, bool wait)
{
    if (!wait && !e->release_reordered)
        return release_done_prefix(e);
    size_t k = 0;
    ms_status st = MS_OK;
    for (size_t i = 0; i < e->n_host_release; i++) {
        ms_host_release *h = &e->host_release[i];
        ms_event *ev = e->rt[h->tensor].ready_ev;
        bool done = false;
        if (st == MS_OK)
            st = wait ? BE(e, event_synchronize, ev) : BE(e, event_query, ev, &done);
        if (st == MS_OK && (wait || done))
            st = host_buffer_freed(e, h);
        else
            e->host_release[k++] = *h;
        if (st != MS_OK)
            return be_call_failed(e, st, "releasing a swap's host buffer");
    }
    e->n_host_release = k;
    e->release_reordered = e->release_reordered && k > 0;
    return MS_OK;
}

static ms_status host_buffer(ms_exec *e, uint64_t bytes, uint64_t *addr)
{
    ms_status st = release_host_buffers(e, false);
    if (st == MS_OK && (st = BE(e, malloc_host, bytes, addr)) == MS_ENOMEM &&
        e->n_host_release > 0 && (st = release_host_buffers(e, true)) == MS_OK)
        st = BE(e, malloc_host, bytes, addr);
    return st;
}

static ms_status swap_out(ms_exec *e, uint32_t t, uint32_t at_op)
{
    ms_tensor_rt *r = &e->rt[t];
    const ms_tensor *tn = &e->p->tensors[t];
    if (r->state == TS_ON_HOST && r->rescued) {
        r->rescued = 0; /* already out: the plan's swap-in brings it back */
        return MS_OK;
    }
    ms_status st = check_readable(e, at_op, t);
    if (st != MS_OK)
        return st;
    if (r->host_addr == 0 && (st = host_buffer(e, tn->bytes, &r->host_addr)) != MS_OK)
        return ms_diag_set(e->diag, st,
                           "pinned host memory for swapping tensor %u (%s, %" PRIu64
                           " bytes) is exhausted%s%s",
                           t, tn->name, tn->bytes, be_why(e)[0] ? ": " : "", be_why(e));
    /* The copy starts once the op it follows has run on its stream. */
    if ((st = issue_swap_copy(e, t, at_op, stream_of(e, &e->p->ops[at_op]), ST_SWAP_OUT)) != MS_OK)
        return st;
    e->swapped_bytes += tn->bytes;
    /* Remember the copy so a block reused under it is caught as a hazard. */
    if (!copy_slot(e))
        return MS_ENOMEM;
    ms_event *done = e->n_free_events ? e->free_events[--e->n_free_events] : NULL;
    if ((st = get_event(e, &done)) != MS_OK ||
        (st = BE(e, event_record, done, e->streams[ST_SWAP_OUT])) != MS_OK)
        return be_call_failed(e, st, "event for swap-out completion");
    if (!exec_spans_add(&e->inflight_spans, r->addr, tn->bytes, done))
        return MS_ENOMEM;
    e->inflight[e->n_inflight++] = (ms_inflight_copy){r->addr, tn->bytes, done};
    if (e->cfg.fault != MS_FAULT_SWAP_OUT_UNRECORDED)
        r->used_streams |= (uint16_t)(1u << ST_SWAP_OUT);
    if (e->cfg.release_after_copy) {
        r->state = TS_ON_HOST; /* the block waits for MS_ACT_RELEASE */
        r->held = 1;
        return MS_OK;
    }
    if ((st = tensor_free(e, t)) != MS_OK)
        return st;
    r->state = TS_ON_HOST;
    return MS_OK;
}

/* MindSpore's release of a swapped-out block: the host waits for the copy
 * out if it is still running, then the block is free for the next request,
 * with no event left to poll. */
static ms_status release_held(ms_exec *e, uint32_t t)
{
    ms_tensor_rt *r = &e->rt[t];
    if (!r->held)
        return MS_OK;
    for (size_t i = e->inflight_head; i < e->n_inflight; i++)
        if (e->inflight[i].addr == r->addr) {
            ms_status st = BE(e, event_synchronize, e->inflight[i].done);
            if (st != MS_OK)
                return be_call_failed(e, st, "event_synchronize of a swap-out");
        }
    r->used_streams &= (uint16_t) ~(1u << ST_SWAP_OUT);
    r->held = 0;
    r->state = TS_ON_DEVICE;
    ms_status st = tensor_free(e, t);
    r->state = TS_ON_HOST;
    return st;
}

/* The tensor an OOM rescue swaps out, as SmartSwap's allocator hook picks
 * an idle block: the smallest that holds the request, else the largest.  A
 * step tensor on device that the op being issued does not touch, not one a
 * recompute will drop. */
static bool rescue_candidate(const ms_exec *e, uint32_t t, uint32_t asking, uint32_t at_op)
{
    const ms_tensor_rt *r = &e->rt[t];
    if (t == asking || r->state != TS_ON_DEVICE || r->replay_temp || e->p->tensors[t].persistent ||
        e->sched.tensors[t].dropped)
        return false;
    const ms_op *op = &e->p->ops[at_op];
    for (uint32_t i = 0; i < op->n_inputs; i++)
        if (op->inputs[i] == t)
            return false;
    for (uint32_t i = 0; i < op->n_outputs; i++)
        if (op->outputs[i] == t)
            return false;
    return true;
}

static int64_t rescue_victim(const ms_exec *e, uint32_t asking, uint64_t request, uint32_t at_op)
{
    int64_t fit = -1, largest = -1;
    for (uint32_t t = 0; t < e->p->n_tensors; t++) {
        if (!rescue_candidate(e, t, asking, at_op))
            continue;
        uint64_t b = e->p->tensors[t].bytes;
        if (b >= request && (fit < 0 || b < e->p->tensors[fit].bytes))
            fit = t;
        if (largest < 0 || b > e->p->tensors[largest].bytes)
            largest = t;
    }
    return fit >= 0 ? fit : largest;
}

/* Copy the victim out and wait for it (the rescue is synchronous), then
 * give its block back so the failed allocation can be tried again. */
static ms_status rescue_copy_out(ms_exec *e, uint32_t v, uint32_t at_op)
{
    ms_tensor_rt *r = &e->rt[v];
    const ms_tensor *tn = &e->p->tensors[v];
    ms_status st = MS_OK;
    if (r->host_addr == 0 && (st = host_buffer(e, tn->bytes, &r->host_addr)) != MS_OK)
        return ms_diag_set(e->diag, st,
                           "pinned host memory for rescuing tensor %u (%s, %" PRIu64
                           " bytes) is exhausted",
                           v, tn->name, tn->bytes);
    if ((st = issue_swap_copy(e, v, at_op, ST_COMPUTE, ST_SWAP_OUT)) != MS_OK)
        return st;
    ms_event *done = NULL;
    if ((st = get_event(e, &done)) == MS_OK &&
        (st = BE(e, event_record, done, e->streams[ST_SWAP_OUT])) == MS_OK)
        st = BE(e, event_synchronize, done);
    if (done != NULL)
        BE(e, event_destroy, done);
    if (st != MS_OK)
        return be_call_failed(e, st, "synchronous swap-out of an OOM rescue");
    if ((st = tensor_free(e, v)) != MS_OK)
        return st;
    r->state = TS_ON_HOST;
    r->rescued = 1;
    e->rescued.count++;
    e->rescued.bytes += tn->bytes;
    /* The bytes a rescue copies out are swapped bytes like a plan's. */
    e->swapped_bytes += tn->bytes;
    return MS_OK;
}

static ms_status rescue_swap_out(ms_exec *e, uint32_t t, uint64_t request, uint32_t at_op,
                                 bool *freed)
{
    *freed = false;
    int64_t v = rescue_victim(e, t, request, at_op);
    if (v < 0)
        return MS_OK;
    if (request > e->rescued.peak_request)
        e->rescued.peak_request = request;
    e->rescuing = true;
    ms_status st = rescue_copy_out(e, (uint32_t)v, at_op);
    e->rescuing = false;
    *freed = st == MS_OK;
    return st;
}

static ms_status swap_in(ms_exec *e, uint32_t t, uint32_t at_op)
{
    ms_tensor_rt *r = &e->rt[t];
    const ms_tensor *tn = &e->p->tensors[t];
    if (r->state != TS_ON_HOST)
        return ms_diag_set(e->diag, MS_EHAZARD,
                           "hazard: swap-in of tensor %u (%s) before op %u, but it is %s", t,
                           tn->name, at_op, tstate_names[r->state]);
    /* The H2D reads the host buffer the swap-out's D2H writes, on another
     * stream: without this wait a slow swap-out stream lets the H2D read the
     * buffer first, and the D2H land after the buffer was handed to the next
     * swap (tensor_alloc forgets the ready event, so wait first). */
    ms_status st = wait_ready(e, t, ST_SWAP_IN);
    if (st == MS_OK)
        st = tensor_alloc(e, t, ST_COMPUTE, at_op);
    if (st != MS_OK)
        return st;
    /* The H2D must not overwrite the block before compute is done with its
     * previous owner: order the swap-in stream after compute's current work. */
    if ((st = issue_swap_copy(e, t, at_op, ST_COMPUTE, ST_SWAP_IN)) != MS_OK ||
        (st = record_ready(e, t, ST_SWAP_IN)) != MS_OK)
        return st;
    if (e->verifier != NULL && tn->bytes > 0)
        r->check_due = 1 + GEN_FORWARD;
    if (!MS_GROW(e->host_release, e->n_host_release, e->cap_host_release, 64))
        return MS_ENOMEM;
    e->host_release[e->n_host_release++] = (ms_host_release){r->host_addr, t};
    r->release_pending++;
    r->host_addr = 0;
    return MS_OK;
}

/* MS_FAULT_RECOMPUTE_SKIPPED: the dropped tensors come back as blocks, but
 * nothing writes them. */
static ms_status recompute_skipped(ms_exec *e, const ms_segment *seg)
{
    for (uint32_t o = seg->first_op; o <= seg->last_op; o++) {
        const ms_op *op = &e->p->ops[o];
        for (uint32_t i = 0; i < op->n_outputs; i++) {
            uint32_t t = op->outputs[i];
            if (!e->sched.tensors[t].dropped || e->rt[t].state == TS_ON_DEVICE)
                continue;
            ms_status st = tensor_alloc(e, t, ST_COMPUTE, o);
            if (st != MS_OK)
                return st;
            if (e->verifier != NULL && e->p->tensors[t].bytes > 0)
                e->rt[t].check_due = 1 + GEN_RECOMPUTE;
        }
    }
    return MS_OK;
}

static ms_status recompute(ms_exec *e, uint32_t seg_id)
{
    const ms_segment *seg = &e->p->segments[seg_id];
    if (e->cfg.fault == MS_FAULT_RECOMPUTE_SKIPPED)
        return recompute_skipped(e, seg);
    for (uint32_t o = seg->first_op; o <= seg->last_op; o++) {
        ms_status st = issue_op(e, o, true);
        if (st != MS_OK)
            return st;
        /* Replay temporaries die at their last use inside the replay. */
        const ms_op *op = &e->p->ops[o];
        for (uint32_t i = 0; i < op->n_inputs + op->n_outputs; i++) {
            uint32_t t = i < op->n_inputs ? op->inputs[i] : op->outputs[i - op->n_inputs];
            if (!e->rt[t].replay_temp)
                continue;
            const ms_tensor *tn = &e->p->tensors[t];
            uint32_t last = (uint32_t)tn->producer;
            for (uint32_t u = 0; u < tn->n_uses; u++)
                if (tn->uses[u] <= seg->last_op && tn->uses[u] > last)
                    last = tn->uses[u];
            if (last <= o && (st = tensor_free(e, t)) != MS_OK)
                return st;
        }
    }
    return MS_OK;
}

static ms_status run_action(ms_exec *e, const ms_action *a)
{
    switch ((ms_act_kind)a->kind) {
    case MS_ACT_FREE: {
        ms_status st = tensor_free(e, a->arg);
        const ms_tensor_plan *tp = &e->sched.tensors[a->arg];
        if (st == MS_OK && tp->dropped && e->rt[a->arg].state == TS_ABSENT &&
            (int32_t)a->op < e->sched.seg_at[tp->segment])
            e->rt[a->arg].state = TS_DROPPED;
        return st;
    }
    case MS_ACT_SWAP_OUT:
        return swap_out(e, a->arg, a->op);
    case MS_ACT_SWAP_IN:
        return swap_in(e, a->arg, a->op);
    case MS_ACT_RELEASE: return release_held(e, a->arg);
    case MS_ACT_RECOMPUTE:
        return recompute(e, a->arg);
    }
    return MS_EINTERNAL;
}

/* ---- life cycle ------------------------------------------------------ */

/* Runs of tensors share a pool ("default" for every one where the policy
 * has no pool hook): the last name found answers without a search, which
 * was 1% of a 70B policy search (53 000 tensors a simulation). */
typedef struct pool_memo {
    char name[64];
    int pool;
} pool_memo;

static ms_status find_pool(ms_exec *e, pool_memo *m, const char *name, uint32_t t, ms_diag *d)
{
    int *pool = &e->rt[t].pool;
    if (m->name[0] != '\0' && strcmp(name, m->name) == 0) {
        *pool = m->pool;
        return MS_OK;
    }
    if (ms_alloc_pool_find(e->cfg.alloc, name, pool) != MS_OK)
        return ms_diag_set(d, MS_EINVAL, "policy chose pool '%s' for tensor %u, which it did "
                           "not declare", name, t);
    snprintf(m->name, sizeof m->name, "%s", name);
    m->pool = *pool;
    return MS_OK;
}

static ms_status resolve_pools(ms_exec *e, ms_diag *d)
{
    ms_policy *pol = e->cfg.policy;
    if (pol == NULL)
        return MS_OK;
    uint32_t n = 0;
    const ms_pool_decl *decls = ms_policy_pools(pol, &n);
    ms_status st = MS_OK;
    for (uint32_t i = 0; st == MS_OK && i < n; i++) {
        ms_pool_options opt = {.exact_segments = decls[i].exact_segments,
                               .lendable = decls[i].lendable};
        int id;
        st = ms_alloc_pool_create(e->cfg.alloc, decls[i].name, &opt, &id);
        if (st != MS_OK)
            return ms_diag_set(d, st, "creating pool '%s' failed", decls[i].name);
    }
    char name[64];
    pool_memo memo = {.name = ""};
    for (uint32_t t = 0; st == MS_OK && t < e->p->n_tensors; t++) {
        st = ms_policy_pool(pol, &e->p->tensors[t], name, sizeof name, d);
        if (st == MS_OK)
            st = find_pool(e, &memo, name, t, d);
        if (st == MS_OK && e->rt[t].pool != 0 && e->cfg.record != NULL) {
            ms_tensor_row tr = {.step = -1, .device = e->cfg.backend->device, .tensor = t,
                                .decision = "pool", .out_op = e->rt[t].pool, .in_op = MS_NONE,
                                .bytes = e->p->tensors[t].bytes};
            st = ms_record_add_tensor(e->cfg.record, &tr);
        }
    }
    return st;
}

static void derive_op_streams(ms_exec *e)
{
    for (uint32_t i = 0; i < e->p->n_ops; i++)
        e->op_stream[i] = (uint8_t)derive_stream(e, &e->p->ops[i]);
}

static void mark_cross_stream(ms_exec *e)
{
    for (uint32_t t = 0; t < e->p->n_tensors; t++) {
        const ms_tensor *tn = &e->p->tensors[t];
        int home = tn->producer == MS_NONE ? ST_COMPUTE : e->op_stream[tn->producer];
        for (uint32_t u = 0; u < tn->n_uses; u++)
            if (e->op_stream[tn->uses[u]] != home)
                e->rt[t].cross_stream = 1;
    }
}

static bool received(const ms_exec *e, uint32_t t)
{
    int32_t prod = e->p->tensors[t].producer;
    return prod != MS_NONE && e->p->ops[prod].kernel.comm == MS_COMM_RECV;
}

/* Two passes in array order: which tensors a receive made (producers come
 * in tensor order, so their reads run forward), then which ops read one,
 * one byte a tensor.  Asking every input's producer as recv_done does would
 * read 64-byte tensors and 184-byte ops at random, once per input of the
 * program. */
static ms_status mark_recv_fed(ms_exec *e)
{
    const ms_program_view *p = e->p;
    uint8_t *came = calloc(p->n_tensors ? p->n_tensors : 1, 1);
    if (came == NULL)
        return MS_ENOMEM;
    for (uint32_t t = 0; t < p->n_tensors; t++)
        came[t] = received(e, t);
    for (uint32_t i = 0; i < p->n_ops; i++)
        for (uint32_t k = 0; k < p->ops[i].n_inputs; k++)
            e->recv_fed[i] |= came[p->ops[i].inputs[k]];
    free(came);
    return MS_OK;
}

/* Main grads are views into one contiguous buffer, as Megatron's DDP keeps
 * them (_ParamAndGradBuffer allocates grad_data = torch.zeros(numel) when it
 * wraps the model; each param's main_grad is a slice): the allocator sees
 * one block of every main grad's bytes, not one rounded block per weight.
 * Megatron makes one buffer per model chunk and per dense/expert params;
 * a stage's program has them all in one, the same bytes (docs/allocator.md).
 * The buffer is the first main grad's allocation, in that grad's pool. */
static void place_in_buffer(ms_exec *e, uint32_t first, uint64_t base)
{
    uint64_t off = 0;
    for (uint32_t t = first; t < e->p->n_tensors; t++) {
        if (!MS_TENSOR_IS_MAIN_GRAD(&e->p->tensors[t]))
            continue;
        ms_tensor_rt *r = &e->rt[t];
        r->addr = base + off;
        r->state = TS_ON_DEVICE;
        r->alloc_stream = r->ready_stream = ST_COMPUTE;
        off += e->p->tensors[t].bytes;
    }
}

static ms_status alloc_grad_buffer(ms_exec *e, uint32_t first)
{
    uint64_t total = 0;
    for (uint32_t t = first; t < e->p->n_tensors; t++)
        if (MS_TENSOR_IS_MAIN_GRAD(&e->p->tensors[t]))
            total += e->p->tensors[t].bytes;
    ms_status st = tensor_alloc_bytes(e, first, total ? total : 1, ST_COMPUTE, 0);
    if (st == MS_OK)
        place_in_buffer(e, first, e->rt[first].addr);
    return st;
}

static ms_status alloc_persistent(ms_exec *e, bool *setup_oom)
{
    bool buffered = false;
    for (uint32_t t = 0; t < e->p->n_tensors; t++) {
        const ms_tensor *tn = &e->p->tensors[t];
        if (!tn->persistent || (buffered && MS_TENSOR_IS_MAIN_GRAD(tn)))
            continue;
        ms_status st;
        if (MS_TENSOR_IS_MAIN_GRAD(tn)) {
            st = alloc_grad_buffer(e, t);
            buffered = true;
        } else {
            st = tensor_alloc(e, t, ST_COMPUTE, 0);
        }
        if (st == MS_ENOMEM) {
            *setup_oom = true;
            return MS_OK;
        }
        if (st != MS_OK)
            return st;
    }
    return MS_OK;
}

ms_status ms_exec_create(const ms_exec_config *cfg, ms_exec **out, bool *setup_oom, ms_diag *d)
{
    if (cfg == NULL || out == NULL || setup_oom == NULL || cfg->program == NULL ||
        cfg->backend == NULL || cfg->alloc == NULL)
        return MS_EINVAL;
    *out = NULL;
    *setup_oom = false;
    if (cfg->verify && !cfg->backend->carries_data)
        return ms_diag_set(d, MS_EUNSUPPORTED,
                           "verify needs a backend that carries data (the "
                           "mock opened functional, or a real device); '%s' does not",
                           cfg->backend->ops->name);
    ms_exec *e = calloc(1, sizeof *e);
    if (e == NULL)
        return MS_ENOMEM;
    e->cfg = *cfg;
    e->p = cfg->program;
    e->diag = d;
    e->rt = calloc(e->p->n_tensors ? e->p->n_tensors : 1, sizeof *e->rt);
    e->kernel_row = calloc(e->p->n_ops ? e->p->n_ops : 1, sizeof *e->kernel_row);
    e->op_stream = calloc(e->p->n_ops ? e->p->n_ops : 1, sizeof *e->op_stream);
    e->recv_fed = calloc(e->p->n_ops ? e->p->n_ops : 1, sizeof *e->recv_fed);
    ms_status st = (e->rt && e->kernel_row && e->op_stream && e->recv_fed) ? MS_OK : MS_ENOMEM;
    e->facts = e->p->facts;
    if (st == MS_OK && e->facts == NULL &&
        (st = ms_program_facts_derive(e->p, &e->own_facts, d)) == MS_OK)
        e->facts = &e->own_facts;
    /* Swaps run on lower-priority streams so compute is never starved. */
    static const int priority[ST_COUNT] = {0, 0, 1, 1, 0, 0, 0, 0, 0};
    for (int s = 0; st == MS_OK && s < ST_COUNT; s++) {
        st = BE(e, stream_create, priority[s], &e->streams[s]);
        if (st == MS_OK)
            st = BE(e, stream_id, e->streams[s], &e->stream_ids[s]);
    }
    if (st == MS_OK && cfg->verify)
        st = exec_verify_create(e->cfg.backend, &e->verifier);
    if (st == MS_OK)
        st = BE(e, set_tracer, on_work_done, e);
    if (st == MS_OK)
        st = ms_alloc_set_observer(e->cfg.alloc, on_alloc_event, e);
    if (st == MS_OK) {
        derive_op_streams(e);
        mark_cross_stream(e);
        st = mark_recv_fed(e);
    }
    if (cfg->quiet_setup)
        e->cfg.record = NULL;
    if (st == MS_OK)
        st = resolve_pools(e, d);
    if (st == MS_OK)
        st = alloc_persistent(e, setup_oom);
    e->cfg.record = cfg->record;
    if (st != MS_OK) {
        if (d != NULL && d->msg[0] == '\0')
            ms_diag_set(d, st, "creating the executor failed: %s", ms_strerror(st));
        ms_exec_destroy(e);
        return st;
    }
    *out = e;
    return MS_OK;
}

static void release_step_tensors(ms_exec *e)
{
    for (uint32_t t = 0; t < e->p->n_tensors; t++) {
        if (e->p->tensors[t].persistent)
            continue;
        release_held(e, t);
        if (e->rt[t].state == TS_ON_DEVICE)
            tensor_free(e, t);
        e->rt[t].state = TS_ABSENT;
        e->rt[t].check_due = 0;
        e->rt[t].rescued = 0;
    }
}

ms_status ms_exec_destroy(ms_exec *e)
{
    if (e == NULL)
        return MS_EINVAL;
    /* Tearing down is no part of any step: its frees stay out of the record
     * (they would show as the last step's memory dropping to nothing). */
    e->cfg.record = NULL;
    e->cfg.backend->ops->device_synchronize(e->cfg.backend->inst);
    exec_verify_destroy(e->verifier);
    if (e->rt != NULL) {
        /* The first main grad on device holds the grad buffer; the others
         * are views into it (place_in_buffer). */
        bool buffer_freed = false;
        for (uint32_t t = 0; t < e->p->n_tensors; t++) {
            ms_tensor_rt *r = &e->rt[t];
            bool view = MS_TENSOR_IS_MAIN_GRAD(&e->p->tensors[t]) && buffer_freed;
            if ((r->state == TS_ON_DEVICE || r->held) && !view) {
                ms_alloc_free(e->cfg.alloc, r->addr);
                buffer_freed |= MS_TENSOR_IS_MAIN_GRAD(&e->p->tensors[t]);
            }
            if (r->host_addr)
                BE(e, free_host, r->host_addr);
            if (r->ready_ev)
                BE(e, event_destroy, r->ready_ev);
            if (r->aux_ev)
                BE(e, event_destroy, r->aux_ev);
        }
    }
    for (size_t i = e->inflight_head; i < e->n_inflight; i++)
        BE(e, event_destroy, e->inflight[i].done);
    for (size_t i = 0; i < e->n_host_release; i++)
        BE(e, free_host, e->host_release[i].host_addr);
    for (size_t i = 0; i < e->n_free_events; i++)
        BE(e, event_destroy, e->free_events[i]);
    if (e->comm_done)
        BE(e, event_destroy, e->comm_done);
    ms_alloc_set_observer(e->cfg.alloc, NULL, NULL);
    e->cfg.backend->ops->set_tracer(e->cfg.backend->inst, NULL, NULL);
    for (int s = 0; s < ST_COUNT; s++)
        if (e->streams[s])
            BE(e, stream_destroy, e->streams[s]);
    exec_schedule_free(&e->sched);
    ms_plan_free(&e->sched_plan);
    ms_program_facts_free(&e->own_facts);
    free(e->rt);
    free(e->kernel_row);
    free(e->op_stream);
    free(e->recv_fed);
    free(e->rows);
    free(e->inflight);
    exec_spans_free(&e->inflight_spans);
    free(e->host_release);
    free(e);
    return MS_OK;
}

/* Megatron's batch_p2p_sync (unconditional in 2021-2022): _communicate posts a
 * run of sends and receives with batch_isend_irecv and then calls
 * torch.cuda.synchronize(), so the host issues nothing more until the whole
 * device, transfers included, is idle.  A run is the p2p ops issued back to
 * back (send_forward_recv_backward and the like); the wait comes before
 * op i, the first after the run, so the transfers of one run overlap each
 * other and nothing else. */
static ms_status sync_after_p2p(ms_exec *e, uint32_t i)
{
    const ms_op *ops = e->p->ops;
    if (!e->cfg.batch_p2p_sync || i == 0 || !is_p2p(&ops[i - 1]) || is_p2p(&ops[i]))
        return MS_OK;
    ms_status st = e->cfg.backend->ops->device_synchronize(e->cfg.backend->inst);
    return st == MS_OK ? MS_OK : be_call_failed(e, st, "device_synchronize after p2p");
}

/* Each first touch of a program's arrays in a step is a cache miss (perf on
 * the shipped llama2-70B put two thirds of issue_op's time on four such loads),
 * so the ops ahead are fetched in three stages, each reading only what the
 * stage before fetched: the op eight ahead, the tensor lists of the op four
 * ahead, and the tensors of the op two ahead. */
static void prefetch_ops_ahead(const ms_exec *e, uint32_t i)
{
    const ms_op *ops = e->p->ops;
    uint32_t n = e->p->n_ops;
    if (i + 8 < n)
        for (size_t at = 0; at < sizeof *ops; at += 64)
            __builtin_prefetch((const char *)&ops[i + 8] + at);
    if (i + 4 < n) {
        __builtin_prefetch(ops[i + 4].inputs);
        __builtin_prefetch(ops[i + 4].outputs);
    }
    if (i + 2 >= n)
        return;
    const ms_op *op = &ops[i + 2];
    for (uint32_t k = 0; k < op->n_outputs; k++) {
        uint32_t t = op->outputs[k];
        __builtin_prefetch(&e->p->tensors[t]);
        __builtin_prefetch(&e->rt[t]);
        __builtin_prefetch(&e->sched.tensors[t]);
    }
    for (uint32_t k = 0; k < op->n_inputs; k++)
        __builtin_prefetch(&e->rt[op->inputs[k]]);
}

static ms_status issue_step(ms_exec *e)
{
    const ms_action *a = e->sched.acts, *end = e->sched.acts + e->sched.n;
    for (uint32_t i = 0; i < e->p->n_ops; i++) {
        prefetch_ops_ahead(e, i);
        ms_status sync = sync_after_p2p(e, i);
        if (sync != MS_OK)
            return sync;
        for (; a < end && a->op == i && a->when == MS_ACT_BEFORE; a++) {
            ms_status st = run_action(e, a);
            if (st != MS_OK)
                return st;
        }
        ms_status st = issue_op(e, i, false);
        if (st != MS_OK)
            return st;
        for (; a < end && a->op == i; a++)
            if ((st = run_action(e, a)) != MS_OK)
                return st;
    }
    return MS_OK;
}

ms_status ms_exec_partial_peaks(const ms_exec *e, ms_step_result *res)
{
    if (e == NULL || res == NULL)
        return MS_EINVAL;
    ms_alloc_stats s = ms_alloc_get_stats(e->cfg.alloc);
    res->peak_allocated = (uint64_t)s.allocated_bytes[MS_STAT_ALL].peak;
    res->peak_reserved = (uint64_t)s.reserved_bytes[MS_STAT_ALL].peak;
    res->peak_active = (uint64_t)s.active_bytes[MS_STAT_ALL].peak;
    res->reserved_minus_allocated_at_peak = e->gap_at_peak;
    res->peak_activation_bytes = e->peak_activation;
    return MS_OK;
}

/* The latest completion of a p2p receive that produced an input of op, or
 * -1 (device time, as the rows hold it before finish_step shifts them). */
static int64_t recv_done(const ms_exec *e, uint32_t op)
{
    const ms_op *o = &e->p->ops[op];
    int64_t done = -1;
    if (!e->recv_fed[op])
        return done;
    for (uint32_t i = 0; i < o->n_inputs; i++) {
        if (!received(e, o->inputs[i]))
            continue;
        int32_t r = e->kernel_row[e->p->tensors[o->inputs[i]].producer];
        if (r >= 0 && e->rows[r].end_ns > done)
            done = e->rows[r].end_ns;
    }
    return done;
}

static bool row_is_p2p(const ms_exec *e, const ms_op_row *r)
{
    return r->kind == MS_WK_KERNEL && is_p2p(&e->p->ops[r->op]);
}

/* Compute-stream idle time spent waiting for pipeline transfers: gaps the
 * receive of a kernel's input kept open and, with batch_p2p_sync, the whole
 * gap before the first kernel issued after a p2p run, which the host could
 * only launch once the device was idle and the transfers done.  Idle time
 * with any other cause (the host issuing late, copies, the step's end) is
 * not the pipeline's. */
static int64_t pipeline_wait(const ms_exec *e)
{
    int64_t wait = 0, idle_since = e->step_start;
    bool after_sync = false;
    for (size_t i = 0; i < e->n_rows; i++) {
        const ms_op_row *r = &e->rows[i];
        if (e->cfg.batch_p2p_sync && row_is_p2p(e, r))
            after_sync = true;
        if (r->stream_id != e->stream_ids[ST_COMPUTE] || r->start_ns < 0)
            continue;
        if (r->start_ns > idle_since && r->kind == MS_WK_KERNEL) {
            int64_t done = after_sync ? r->start_ns : recv_done(e, r->op);
            if (done > idle_since)
                wait += (done < r->start_ns ? done : r->start_ns) - idle_since;
        }
        after_sync = false;
        if (r->end_ns > idle_since)
            idle_since = r->end_ns;
    }
    return wait;
}

static ms_status finish_step(ms_exec *e, ms_op_profile *profile, ms_step_result *res)
{
    ms_status st = e->cfg.backend->ops->device_synchronize(e->cfg.backend->inst);
    if (st != MS_OK)
        return be_call_failed(e, st, "device_synchronize");
    if ((st = reap_copies(e)) != MS_OK)
        return st;
    if (e->verifier != NULL) {
        if ((st = exec_verify_settle(e->verifier, true, e->diag)) != MS_OK)
            return st;
        res->verified_tensors = exec_verify_checked(e->verifier, &res->verified_bytes);
        res->verified_tensors -= e->verified_before;
        res->verified_bytes -= e->verified_bytes_before;
    }
    res->start_ns = e->step_start;
    res->end_ns = host_now(e);
    res->step_time_ns = res->end_ns - e->step_start;
    /* Compute-stream kernels never overlap each other, so busy time is
     * their sum; the rest of the step is the stage's bubble. */
    for (size_t i = 0; i < e->n_rows; i++)
        if (e->rows[i].stream_id == e->stream_ids[ST_COMPUTE] && e->rows[i].start_ns >= 0)
            res->compute_busy_ns += e->rows[i].end_ns - e->rows[i].start_ns;
    res->pipeline_wait_ns = pipeline_wait(e);
    ms_exec_partial_peaks(e, res);
    res->swapped_bytes = e->swapped_bytes;
    res->recomputed_ops = e->recomputed_ops;
    res->rescued = e->rescued;
    for (uint32_t i = 0; i < e->p->n_ops; i++) {
        int32_t r = e->kernel_row[i];
        profile[i].start_ns = r >= 0 ? e->rows[r].start_ns - e->step_start : -1;
        profile[i].end_ns = r >= 0 ? e->rows[r].end_ns - e->step_start : -1;
    }
    for (size_t i = 0; e->cfg.record != NULL && i < e->n_rows; i++) {
        ms_op_row row = e->rows[i];
        if (row.start_ns >= 0) {
            row.start_ns -= e->step_start;
            row.end_ns -= e->step_start;
        }
        if ((st = ms_record_add_op(e->cfg.record, &row)) != MS_OK)
            return st;
    }
    return MS_OK;
}

static ms_status record_decisions(ms_exec *e)
{
    static const char *const names[] = {"swap", "recompute", "keep", "swap_ignored"};
    for (uint32_t t = 0; e->cfg.record && t < e->p->n_tensors; t++) {
        const ms_tensor_plan *tp = &e->sched.tensors[t];
        int which = tp->swap ? 0 : tp->dropped ? 1 : tp->kept ? 2 : tp->swap_ignored ? 3 : -1;
        if (which < 0)
            continue;
        ms_tensor_row row = {.step = e->step, .device = e->cfg.backend->device, .tensor = t,
                             .decision = names[which],
                             .out_op = tp->swap ? tp->out_after : MS_NONE,
                             .in_op = tp->swap ? tp->in_at : MS_NONE,
                             .bytes = e->p->tensors[t].bytes};
        if (tp->dropped)
            row.out_op = tp->segment;
        ms_status st = ms_record_add_tensor(e->cfg.record, &row);
        if (st != MS_OK)
            return st;
    }
    return MS_OK;
}

typedef struct segment_visit {
    ms_exec *e;
    ms_snapshot_when when;
    ms_status st;
} segment_visit;

static void add_segment_row(void *user, const ms_block_info *b)
{
    segment_visit *v = user;
    ms_segment_row row = {.step = v->e->step, .device = v->e->cfg.backend->device,
                          .when = v->when, .block = *b};
    if (v->st == MS_OK)
        v->st = ms_record_add_segment(v->e->cfg.record, &row);
}

/* The allocator's blocks into the record (segments.csv). */
static ms_status record_segments(ms_exec *e, ms_snapshot_when when)
{
    if (e->cfg.record == NULL)
        return MS_OK;
    segment_visit v = {e, when, MS_OK};
    ms_status st = ms_alloc_visit_blocks(e->cfg.alloc, add_segment_row, &v);
    return st != MS_OK ? st : v.st;
}

/* ---- the state between steps (fast-forward) -------------------------- */

/* What the backend says of an event: recorded, complete (a real device
 * cannot say: MS_EUNSUPPORTED). */
static ms_status event_state(const ms_exec *e, const ms_event *ev, ms_state_sig *sig)
{
    const ms_backend *b = e->cfg.backend;
    if (b->ops->event_state == NULL)
        return MS_EUNSUPPORTED;
    return b->ops->event_state(b->inst, ev, sig);
}

static ms_status write_event(const ms_exec *e, const ms_event *ev, ms_state_sig *sig)
{
    ms_state_sig_u64(sig, ev != NULL);
    return ev != NULL ? event_state(e, ev, sig) : MS_OK;
}

/* A tensor's runtime state outlives the step: a persistent tensor's
 * producer event and the streams that already waited on it decide the next
 * step's waits; a step tensor's flags, until it is allocated again.  Its
 * address is read only while it holds a block (tensor_alloc writes it
 * before anything else reads it): a freed tensor's stale one is no state.
 * Each field goes at a fixed offset at its own width (35 bytes where 16
 * words were: the signature of a 1.5 M-op program is a quarter of a GB
 * less), then the backend's state of each event the flags say it has:
 * one record for one state, as the words were. */
static ms_status write_tensor(const ms_exec *e, const ms_tensor_rt *r, ms_state_sig *sig)
{
    bool holds_block = r->state == TS_ON_DEVICE || r->held;
    const uint64_t addr = holds_block ? r->addr : 0;
    const int32_t pool = r->pool;
    uint8_t rec[35] = {r->state,        r->ready_stream, r->alloc_stream, r->ready_recorded,
                       r->cross_stream, r->replay_temp,  r->check_due,    r->rescued,
                       r->held,         r->ready_ev != NULL, r->aux_ev != NULL};
    memcpy(rec + 11, &r->waited, 2);
    memcpy(rec + 13, &r->used_streams, 2);
    memcpy(rec + 15, &pool, 4);
    memcpy(rec + 19, &addr, 8);
    memcpy(rec + 27, &r->host_addr, 8);
    ms_status st = ms_state_sig_put(sig, rec, sizeof rec);
    if (st == MS_OK && r->ready_ev != NULL)
        st = event_state(e, r->ready_ev, sig);
    return st == MS_OK && r->aux_ev != NULL ? event_state(e, r->aux_ev, sig) : st;
}

static ms_status write_copies(const ms_exec *e, ms_state_sig *sig)
{
    ms_state_sig_u64(sig, e->n_inflight - e->inflight_head);
    ms_status st = MS_OK;
    for (size_t i = e->inflight_head; st == MS_OK && i < e->n_inflight; i++) {
        ms_state_sig_u64(sig, e->inflight[i].addr);
        ms_state_sig_u64(sig, e->inflight[i].bytes);
        st = write_event(e, e->inflight[i].done, sig);
    }
    ms_state_sig_u64(sig, e->n_host_release);
    for (size_t i = 0; i < e->n_host_release; i++) {
        ms_state_sig_u64(sig, e->host_release[i].host_addr);
        ms_state_sig_u64(sig, e->host_release[i].tensor);
    }
    return st;
}

ms_status ms_exec_state_write(const ms_exec *e, ms_state_sig *sig)
{
    if (e == NULL || sig == NULL)
        return MS_EINVAL;
    if (e->verifier != NULL)
        return MS_EUNSUPPORTED; /* the data check's patterns are per step */
    ms_status st = ms_alloc_state_write(e->cfg.alloc, sig);
    for (uint32_t t = 0; st == MS_OK && t < e->p->n_tensors; t++)
        st = write_tensor(e, &e->rt[t], sig);
    if (st == MS_OK)
        st = write_copies(e, sig);
    if (st == MS_OK)
        st = write_event(e, e->comm_done, sig);
    ms_state_sig_u64(sig, e->n_free_events); /* re-recorded before any wait */
    ms_state_sig_put(sig, e->by_kind, sizeof e->by_kind);
    const int64_t phase[] = {e->in_forward, e->fwd_micro_batch, e->fwd_layer};
    ms_state_sig_put(sig, phase, sizeof phase);
    return st != MS_OK ? st : sig->st;
}

/* The step's schedule: the last one when the plan is the same (NULL is the
 * empty plan), else built anew; a failed build leaves none. */
static ms_status ensure_schedule(ms_exec *e, const ms_plan *plan, ms_diag *d)
{
    if (e->sched_valid && ms_plan_same_decisions(plan, &e->sched_plan))
        return MS_OK;
    e->sched_valid = false;
    ms_status st =
        exec_schedule_build(e->p, e->facts, plan, e->cfg.release_after_copy, &e->sched, d);
    if (st == MS_OK)
        st = plan != NULL ? ms_plan_copy(&e->sched_plan, plan) : ms_plan_clear(&e->sched_plan);
    e->sched_valid = st == MS_OK;
    return st;
}

ms_status ms_exec_step(ms_exec *e, int step, const ms_plan *plan, ms_op_profile *profile,
                       ms_step_result *res, ms_diag *d)
{
    if (e == NULL || profile == NULL || res == NULL)
        return MS_EINVAL;
    memset(res, 0, sizeof *res);
    res->oom_op = MS_NONE;
    e->diag = d;
    e->step = step;
    e->n_rows = 0;
    e->swapped_bytes = 0;
    e->recomputed_ops = 0;
    e->profile = profile;
    e->peak_alloc_seen = 0;
    e->gap_at_peak = 0;
    e->peak_activation = 0;
    memset(profile, 0, (size_t)e->p->n_ops * sizeof *profile);
    for (uint32_t i = 0; i < e->p->n_ops; i++)
        e->kernel_row[i] = -1;
    e->rescued = (ms_rescue_stats){0};
    ms_status st = ensure_schedule(e, plan, d);
    if (st != MS_OK)
        return st;
    if ((st = record_decisions(e)) != MS_OK)
        return st;
    ms_alloc_reset_peak_stats(e->cfg.alloc);
    e->verified_before = exec_verify_checked(e->verifier, &e->verified_bytes_before);
    e->step_start = host_now(e);
    st = issue_step(e);
    if (st == MS_ENOMEM) {
        /* The framework would raise here; the step is lost, the run is not. */
        if ((st = record_segments(e, MS_SNAP_OOM)) != MS_OK)
            return st;
        res->oom = true;
        res->oom_tensor = e->oom_tensor;
        res->oom_bytes = e->p->tensors[e->oom_tensor].bytes;
        snprintf(res->oom_message, sizeof res->oom_message, "%s", d ? d->msg : "out of memory");
        for (uint32_t i = 0; i < e->p->n_ops; i++)
            if (e->kernel_row[i] < 0) {
                res->oom_op = (int32_t)i;
                break;
            }
        release_step_tensors(e);
        st = MS_OK;
    }
    if (st == MS_OK)
        st = finish_step(e, profile, res);
    if (st == MS_OK && !res->oom)
        st = record_segments(e, MS_SNAP_STEP_END);
    if (st == MS_OK && e->record_status != MS_OK)
        st = ms_diag_set(d, e->record_status, "recording the memory events of step %d: %s", step,
                         ms_strerror(e->record_status));
    if (st != MS_OK)
        release_step_tensors(e); /* e.g. cancelled: another stage ran out */
    /* A failure that reached no message of ours: the backend's own. */
    if (st != MS_OK && d != NULL && d->msg[0] == '\0' && be_why(e)[0] != '\0')
        ms_diag_set(d, st, "step %d: the backend failed: %s", step, be_why(e));
    return st;
}
