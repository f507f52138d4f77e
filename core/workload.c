/* The step program container: the builder's append-only arrays, the pass
 * that derives what follows from the op list (uses, saved_for_backward,
 * segment inputs), and the read-only view handed to the executor. */
#include "workload_build.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct ms_program {
    ms_op *ops;
    uint32_t n_ops;
    ms_tensor *tensors;
    uint32_t n_tensors;
    ms_segment *segments;
    uint32_t n_segments;
    uint32_t *io;         /* op inputs and outputs */
    uint32_t *uses;       /* tensor uses, one run per tensor */
    uint32_t *seg_inputs; /* segment inputs, one run per segment */
    char *names;
    int stage;
    double model_flops;
};

const char *ms_tensor_kind_name(ms_tensor_kind k)
{
    static const char *const names[MS_TK_COUNT] = {
        [MS_TK_WEIGHT] = "weight",         [MS_TK_GRAD] = "grad",
        [MS_TK_OPTIMIZER_STATE] = "optimizer_state", [MS_TK_ACTIVATION] = "activation",
        [MS_TK_TEMP] = "temp",             [MS_TK_COMM_BUFFER] = "comm_buffer",
    };
    return (unsigned)k < MS_TK_COUNT ? names[k] : "?";
}

const char *ms_phase_name(ms_phase p)
{
    switch (p) {
    case MS_PHASE_FORWARD:
        return "forward";
    case MS_PHASE_BACKWARD:
        return "backward";
    case MS_PHASE_OPTIMIZER:
        return "optimizer";
    }
    return "?";
}

/* ---- the builder ----------------------------------------------------- */

void wb_init(wb *b)
{
    memset(b, 0, sizeof *b);
    b->err = MS_OK;
    b->micro_batch = MS_NONE;
    b->layer = MS_NONE;
}

void wb_release(wb *b)
{
    free(b->ops);
    free(b->tensors);
    free(b->segs);
    free(b->ids);
    free(b->names);
    wb_init(b);
}

/* Grow *arr to hold need elements; on failure record MS_ENOMEM. */
static bool grow(wb *b, void **arr, size_t elem, size_t *cap, size_t need)
{
    if (b->err != MS_OK)
        return false;
    if (need <= *cap)
        return true;
    size_t ncap = *cap ? *cap : 64;
    while (ncap < need) {
        if (ncap > SIZE_MAX / 2 / elem) {
            b->err = MS_ENOMEM;
            return false;
        }
        ncap *= 2;
    }
    void *p = realloc(*arr, ncap * elem);
    if (p == NULL) {
        b->err = MS_ENOMEM;
        return false;
    }
    *arr = p;
    *cap = ncap;
    return true;
}

static bool grow32(wb *b, void **arr, size_t elem, uint32_t *cap, size_t need)
{
    size_t c = *cap;
    if (need > WB_MAX_OPS * 8u) {
        if (b->err == MS_OK)
            b->err = MS_ERANGE;
        return false;
    }
    bool ok = grow(b, arr, elem, &c, need);
    *cap = (uint32_t)c;
    return ok;
}

static size_t vname(wb *b, const char *fmt, va_list ap)
{
    char tmp[512];
    int n = vsnprintf(tmp, sizeof tmp, fmt, ap);
    if (n < 0)
        n = 0;
    size_t len = (size_t)n < sizeof tmp ? (size_t)n : sizeof tmp - 1;
    if (!grow(b, (void **)&b->names, 1, &b->cap_names, b->n_names + len + 1))
        return 0;
    size_t off = b->n_names;
    memcpy(b->names + off, tmp, len);
    b->names[off + len] = '\0';
    b->n_names += len + 1;
    return off;
}

static size_t add_name(wb *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static size_t add_name(wb *b, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    size_t off = vname(b, fmt, ap);
    va_end(ap);
    return off;
}

static uint32_t new_tensor(wb *b, size_t name, uint64_t bytes, ms_dtype dt, ms_tensor_kind kind)
{
    if (!grow32(b, (void **)&b->tensors, sizeof *b->tensors, &b->cap_tensors, b->n_tensors + 1))
        return WB_NO_TENSOR;
    wb_tensor *t = &b->tensors[b->n_tensors];
    *t = (wb_tensor){.name = name, .bytes = bytes, .dtype = dt, .kind = kind,
                     .producer = MS_NONE, .layer = b->layer, .micro_batch = b->micro_batch};
    return b->n_tensors++;
}

uint32_t wb_persistent(wb *b, uint64_t bytes, ms_dtype dt, ms_tensor_kind kind, int32_t layer,
                       const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    size_t name = vname(b, fmt, ap);
    va_end(ap);
    uint32_t id = new_tensor(b, name, bytes, dt, kind);
    if (id == WB_NO_TENSOR)
        return id;
    b->tensors[id].persistent = true;
    b->tensors[id].layer = layer;
    b->tensors[id].micro_batch = MS_NONE;
    return id;
}

uint32_t wb_op_add(wb *b, const ms_kernel *k, double model_flops, const uint32_t *in,
                   uint32_t n_in, const char *fmt, ...)
{
    if (b->err != MS_OK)
        return 0;
    if (b->n_ops >= WB_MAX_OPS) {
        b->err = MS_ERANGE;
        return 0;
    }
    for (uint32_t i = 0; i < n_in; i++)
        if (in[i] >= b->n_tensors) {
            b->err = MS_EINTERNAL; /* a model function read a tensor it never made */
            return 0;
        }
    va_list ap;
    va_start(ap, fmt);
    size_t name = vname(b, fmt, ap);
    va_end(ap);
    if (!grow32(b, (void **)&b->ops, sizeof *b->ops, &b->cap_ops, b->n_ops + 1) ||
        !grow(b, (void **)&b->ids, sizeof *b->ids, &b->cap_ids, b->n_ids + n_in))
        return 0;
    wb_op *op = &b->ops[b->n_ops];
    *op = (wb_op){.name = name, .kernel = *k, .phase = b->phase, .micro_batch = b->micro_batch,
                  .layer = b->layer, .stream = k->cls == MS_KC_COMM ? MS_SR_COMM : MS_SR_COMPUTE,
                  .in_off = b->n_ids, .n_in = n_in, .out_off = b->n_ids + n_in,
                  .segment = b->seg_depth > 0 ? b->seg_stack[b->seg_depth - 1] : MS_NONE,
                  .model_flops = model_flops, .chunk = b->chunk};
    if (n_in)
        memcpy(b->ids + b->n_ids, in, n_in * sizeof *in);
    b->n_ids += n_in;
    for (int i = 0; i < b->seg_depth; i++) {
        wb_segment *s = &b->segs[b->seg_stack[i]];
        if (s->first_op == UINT32_MAX)
            s->first_op = b->n_ops;
        s->last_op = b->n_ops;
    }
    return b->n_ops++;
}

static bool append_out(wb *b, uint32_t t)
{
    if (b->err != MS_OK || b->n_ops == 0)
        return false;
    wb_op *op = &b->ops[b->n_ops - 1];
    if (op->out_off + op->n_out != b->n_ids) {
        b->err = MS_EINTERNAL; /* outputs must follow their op */
        return false;
    }
    if (!grow(b, (void **)&b->ids, sizeof *b->ids, &b->cap_ids, b->n_ids + 1))
        return false;
    b->ids[b->n_ids++] = t;
    op->n_out++;
    return true;
}

uint32_t wb_out(wb *b, const char *suffix, uint64_t bytes, ms_dtype dt, ms_tensor_kind kind)
{
    if (b->err != MS_OK || b->n_ops == 0)
        return WB_NO_TENSOR;
    uint32_t op = b->n_ops - 1;
    char opname[400];
    snprintf(opname, sizeof opname, "%s", b->names + b->ops[op].name);
    size_t name = add_name(b, "%s.%s", opname, suffix);
    uint32_t t = new_tensor(b, name, bytes, dt, kind);
    if (t == WB_NO_TENSOR || !append_out(b, t))
        return WB_NO_TENSOR;
    b->tensors[t].producer = (int32_t)op;
    return t;
}

void wb_inplace(wb *b, uint32_t t)
{
    if (b->err != MS_OK || b->n_ops == 0)
        return;
    const wb_op *op = &b->ops[b->n_ops - 1];
    bool read = false;
    for (uint32_t i = 0; i < op->n_in; i++)
        read |= b->ids[op->in_off + i] == t;
    if (!read) {
        b->err = MS_EINTERNAL; /* an in-place write is a read-modify-write */
        return;
    }
    append_out(b, t);
}

wb_op *wb_last_op(wb *b)
{
    return b->err == MS_OK && b->n_ops > 0 ? &b->ops[b->n_ops - 1] : NULL;
}

void wb_seg_begin(wb *b, const char *fmt, ...)
{
    if (b->err != MS_OK)
        return;
    if (b->seg_depth >= WB_SEG_DEPTH) {
        b->err = MS_EINTERNAL;
        return;
    }
    va_list ap;
    va_start(ap, fmt);
    size_t name = vname(b, fmt, ap);
    va_end(ap);
    if (!grow32(b, (void **)&b->segs, sizeof *b->segs, &b->cap_segs, b->n_segs + 1))
        return;
    b->segs[b->n_segs] = (wb_segment){
        .name = name, .layer = b->layer, .micro_batch = b->micro_batch,
        .parent = b->seg_depth > 0 ? b->seg_stack[b->seg_depth - 1] : MS_NONE,
        .first_op = UINT32_MAX, .last_op = 0, .open = true};
    b->seg_stack[b->seg_depth++] = (int32_t)b->n_segs++;
}

void wb_seg_end(wb *b)
{
    if (b->err != MS_OK)
        return;
    if (b->seg_depth == 0) {
        b->err = MS_EINTERNAL;
        return;
    }
    wb_segment *s = &b->segs[b->seg_stack[--b->seg_depth]];
    s->open = false;
    if (s->first_op == UINT32_MAX)
        b->err = MS_EINTERNAL; /* an empty segment is a builder bug */
}

/* ---- finishing --------------------------------------------------------- */

static void program_free_parts(ms_program *p)
{
    free(p->ops);
    free(p->tensors);
    free(p->segments);
    free(p->io);
    free(p->uses);
    free(p->seg_inputs);
    free(p->names);
    free(p);
}

/* Every input exists when the op is issued (made by an earlier op, or
 * persistent) and appears once (an in-place write lists it once more, as an
 * output).  A failure here is a bug in a model function. */
static ms_status check_op_inputs(const wb *b, const uint32_t *io, uint32_t o)
{
    const wb_op *op = &b->ops[o];
    for (uint32_t i = 0; i < op->n_in; i++) {
        uint32_t t = io[op->in_off + i];
        int32_t prod = b->tensors[t].producer;
        if (prod == MS_NONE ? !b->tensors[t].persistent : (uint32_t)prod >= o)
            return MS_EINTERNAL;
        for (uint32_t j = 0; j < i; j++)
            if (io[op->in_off + j] == t)
                return MS_EINTERNAL;
    }
    return MS_OK;
}

static ms_status build_uses(const wb *b, ms_program *p)
{
    size_t total = 0;
    for (uint32_t o = 0; o < b->n_ops; o++) {
        ms_status st = check_op_inputs(b, p->io, o);
        if (st != MS_OK)
            return st;
        total += b->ops[o].n_in;
        for (uint32_t i = 0; i < b->ops[o].n_in; i++)
            p->tensors[p->io[b->ops[o].in_off + i]].n_uses++;
    }
    p->uses = malloc((total ? total : 1) * sizeof *p->uses);
    if (p->uses == NULL)
        return MS_ENOMEM;
    size_t off = 0;
    for (uint32_t t = 0; t < p->n_tensors; t++) {
        p->tensors[t].uses = p->uses + off;
        off += p->tensors[t].n_uses;
        p->tensors[t].n_uses = 0;
    }
    /* Ops in order, so every tensor's uses come out ascending. */
    for (uint32_t o = 0; o < b->n_ops; o++)
        for (uint32_t i = 0; i < b->ops[o].n_in; i++) {
            ms_tensor *t = &p->tensors[p->io[b->ops[o].in_off + i]];
            ((uint32_t *)t->uses)[t->n_uses++] = o;
        }
    return MS_OK;
}

static double auto_bytes(const wb *b, const uint32_t *io, const wb_op *op)
{
    double sum = 0;
    for (uint32_t i = 0; i < op->n_in + op->n_out; i++)
        sum += (double)b->tensors[io[op->in_off + i]].bytes;
    return sum;
}

static void build_ops(const wb *b, ms_program *p)
{
    for (uint32_t o = 0; o < b->n_ops; o++) {
        const wb_op *w = &b->ops[o];
        ms_op *op = &p->ops[o];
        *op = (ms_op){.id = o, .name = p->names + w->name, .kernel = w->kernel,
                      .phase = w->phase, .micro_batch = w->micro_batch, .layer = w->layer,
                      .stream = w->stream, .inputs = p->io + w->in_off, .n_inputs = w->n_in,
                      .outputs = p->io + w->out_off, .n_outputs = w->n_out,
                      .segment = w->segment, .model_flops = w->model_flops,
                      .chunk = w->chunk};
        if (op->kernel.bytes < 0)
            op->kernel.bytes = auto_bytes(b, p->io, w);
        p->model_flops += w->model_flops;
    }
}

static void build_tensors(const wb *b, ms_program *p)
{
    for (uint32_t t = 0; t < b->n_tensors; t++) {
        const wb_tensor *w = &b->tensors[t];
        p->tensors[t] = (ms_tensor){.id = t, .name = p->names + w->name, .bytes = w->bytes,
                                    .dtype = w->dtype, .kind = w->kind, .producer = w->producer,
                                    .persistent = w->persistent, .layer = w->layer,
                                    .micro_batch = w->micro_batch};
    }
}

static void mark_saved(ms_program *p)
{
    for (uint32_t t = 0; t < p->n_tensors; t++) {
        ms_tensor *tn = &p->tensors[t];
        if (tn->producer == MS_NONE || p->ops[tn->producer].phase != MS_PHASE_FORWARD)
            continue;
        for (uint32_t u = 0; u < tn->n_uses && !tn->saved_for_backward; u++)
            tn->saved_for_backward = p->ops[tn->uses[u]].phase == MS_PHASE_BACKWARD;
    }
}

static int cmp_u32(const void *a, const void *b)
{
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return (x > y) - (x < y);
}

static bool inside(const ms_segment *s, int32_t op)
{
    return op != MS_NONE && (uint32_t)op >= s->first_op && (uint32_t)op <= s->last_op;
}

/* What a recompute of s drops (the executor's rule, exec_schedule.c): saved
 * tensors made inside s whose backward readers are all of s's own layer and
 * micro-batch.  s is re-issued before the first backward read of those. */
static uint32_t first_backward_op(const ms_program *p, const ms_segment *s)
{
    uint32_t best = UINT32_MAX, any = UINT32_MAX;
    for (uint32_t o = s->first_op; o <= s->last_op; o++)
        for (uint32_t k = 0; k < p->ops[o].n_outputs; k++) {
            const ms_tensor *t = &p->tensors[p->ops[o].outputs[k]];
            if (t->producer != (int32_t)o || !t->saved_for_backward)
                continue;
            bool own = true;
            uint32_t first = UINT32_MAX;
            for (uint32_t u = 0; u < t->n_uses; u++) {
                const ms_op *r = &p->ops[t->uses[u]];
                if (r->phase != MS_PHASE_BACKWARD)
                    continue;
                if (first == UINT32_MAX)
                    first = r->id;
                own &= r->layer == s->layer && r->micro_batch == s->micro_batch;
            }
            if (first < any)
                any = first;
            if (own && first < best)
                best = first;
        }
    if (best == UINT32_MAX)
        best = any;
    return best == UINT32_MAX ? s->last_op : best;
}

static ms_status build_segments(const wb *b, ms_program *p)
{
    /* Upper bound of segment inputs: all inputs of their ops. */
    size_t total = 0;
    for (uint32_t i = 0; i < b->n_segs; i++)
        for (uint32_t o = b->segs[i].first_op; o <= b->segs[i].last_op; o++)
            total += b->ops[o].n_in;
    p->seg_inputs = malloc((total ? total : 1) * sizeof *p->seg_inputs);
    if (p->seg_inputs == NULL)
        return MS_ENOMEM;
    size_t off = 0;
    for (uint32_t i = 0; i < b->n_segs; i++) {
        const wb_segment *w = &b->segs[i];
        ms_segment *s = &p->segments[i];
        *s = (ms_segment){.id = i, .name = p->names + w->name, .layer = w->layer,
                          .micro_batch = w->micro_batch, .parent = w->parent,
                          .first_op = w->first_op, .last_op = w->last_op};
        uint32_t *in = p->seg_inputs + off, n = 0;
        for (uint32_t o = w->first_op; o <= w->last_op; o++)
            for (uint32_t k = 0; k < p->ops[o].n_inputs; k++) {
                uint32_t t = p->ops[o].inputs[k];
                if (!inside(s, p->tensors[t].producer))
                    in[n++] = t;
            }
        qsort(in, n, sizeof *in, cmp_u32);
        uint32_t m = 0;
        for (uint32_t k = 0; k < n; k++)
            if (m == 0 || in[m - 1] != in[k])
                in[m++] = in[k];
        s->inputs = in;
        s->n_inputs = m;
        off += m;
        s->first_backward_op = first_backward_op(p, s);
    }
    return MS_OK;
}

ms_status wb_finish(wb *b, int stage, ms_program **out)
{
    *out = NULL;
    if (b->err != MS_OK)
        return b->err;
    if (b->seg_depth != 0)
        return MS_EINTERNAL;
    ms_program *p = calloc(1, sizeof *p);
    if (p == NULL)
        return MS_ENOMEM;
    p->stage = stage;
    p->n_ops = b->n_ops;
    p->n_tensors = b->n_tensors;
    p->n_segments = b->n_segs;
    p->ops = calloc(b->n_ops ? b->n_ops : 1, sizeof *p->ops);
    p->tensors = calloc(b->n_tensors ? b->n_tensors : 1, sizeof *p->tensors);
    p->segments = calloc(b->n_segs ? b->n_segs : 1, sizeof *p->segments);
    if (p->ops == NULL || p->tensors == NULL || p->segments == NULL) {
        program_free_parts(p);
        return MS_ENOMEM;
    }
    /* The builder's names and ids move into the program unchanged. */
    p->names = b->names;
    p->io = b->ids;
    b->names = NULL;
    b->ids = NULL;
    build_tensors(b, p);
    build_ops(b, p);
    ms_status st = build_uses(b, p);
    if (st == MS_OK) {
        mark_saved(p);
        st = build_segments(b, p);
    }
    if (st != MS_OK) {
        program_free_parts(p);
        return st;
    }
    *out = p;
    return MS_OK;
}

ms_status ms_program_free(ms_program *p)
{
    if (p == NULL)
        return MS_EINVAL;
    program_free_parts(p);
    return MS_OK;
}

ms_status ms_program_get_view(const ms_program *p, ms_program_view *out)
{
    if (p == NULL || out == NULL)
        return MS_EINVAL;
    *out = (ms_program_view){.ops = p->ops, .n_ops = p->n_ops, .tensors = p->tensors,
                             .n_tensors = p->n_tensors, .segments = p->segments,
                             .n_segments = p->n_segments, .stage = p->stage,
                             .model_flops = p->model_flops};
    return MS_OK;
}
