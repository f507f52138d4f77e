/* The step program container: the builder's append-only arrays (which
 * become the program's), what follows from the op list (uses,
 * saved_for_backward, segment inputs), and the read-only view handed to the
 * executor. */
#include "workload_build.h"
#include "lib/base/growable.h"

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
    ms_program_facts facts;
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

void wl_build_init(wb *b)
{
    memset(b, 0, sizeof *b);
    b->err = MS_OK;
    b->micro_batch = MS_NONE;
    b->layer = MS_NONE;
}

void wl_build_release(wb *b)
{
    free(b->ops);
    free(b->op_at);
    free(b->tensors);
    free(b->tensor_at);
    free(b->segs);
    free(b->ids);
    free(b->names);
    wl_build_init(b);
}

static bool grow_slow(wb *b, void **arr, size_t elem, size_t *cap, size_t need)
{
    size_t ncap = base_grown_capacity(*cap, need, 64);
    if (!base_resize_array(arr, ncap, elem)) {
        b->err = MS_ENOMEM;
        return false;
    }
    *cap = ncap;
    return true;
}

/* Grow *arr to hold need elements; on failure record MS_ENOMEM.  Called
 * for every op and tensor, so the common case (room left) stays inline. */
static inline bool grow(wb *b, void **arr, size_t elem, size_t *cap, size_t need)
{
    if (b->err != MS_OK)
        return false;
    return need <= *cap || grow_slow(b, arr, elem, cap, need);
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

/* Two arrays indexed alike: both grow from *cap the same way, so they end
 * at the same capacity. */
static bool grow_pair(wb *b, void **x, size_t ex, void **y, size_t ey, uint32_t *cap, size_t need)
{
    uint32_t cx = *cap;
    return grow32(b, x, ex, &cx, need) && grow32(b, y, ey, cap, need);
}

/* A failed reservation is no error here: growing on demand still works. */
void wl_build_reserve(wb *b, size_t ops)
{
    if (b->err != MS_OK)
        return;
    if (ops > WB_MAX_OPS)
        ops = WB_MAX_OPS;
    /* Per op, the shipped scenarios (llama, gpt, MoE) have at most 1.2
     * tensors, 4.3 ids and 0.13 segments, and 45 bytes a name. */
    size_t tensors = ops + ops / 4, segs = ops / 6 + 1, ids = ops * 9 / 2;
    size_t names = (ops + tensors + segs) * 48;
    if (ops > b->cap_ops && base_resize_array((void **)&b->ops, ops, sizeof *b->ops) &&
        base_resize_array((void **)&b->op_at, ops, sizeof *b->op_at))
        b->cap_ops = (uint32_t)ops;
    if (tensors > b->cap_tensors &&
        base_resize_array((void **)&b->tensors, tensors, sizeof *b->tensors) &&
        base_resize_array((void **)&b->tensor_at, tensors, sizeof *b->tensor_at))
        b->cap_tensors = (uint32_t)tensors;
    if (segs > b->cap_segs && base_resize_array((void **)&b->segs, segs, sizeof *b->segs))
        b->cap_segs = (uint32_t)segs;
    if (ids > b->cap_ids && base_resize_array((void **)&b->ids, ids, sizeof *b->ids))
        b->cap_ids = ids;
    if (names > b->cap_names && base_resize_array((void **)&b->names, names, 1))
        b->cap_names = names;
}

/* ---- names -------------------------------------------------------------
 *
 * Every op, tensor and segment is named, and printf-style formatting of
 * those names was two thirds of ms_program_build under callgrind (vsnprintf
 * parses the format and walks its stream machinery for each piece).  The hot
 * paths therefore copy the known pieces; vsnprintf stays for the rare
 * formatted names.  Either way a name is cut at WB_NAME_MAX bytes, the
 * 512-byte buffer it was always formatted into, so both give the same bytes. */

#define WB_NAME_MAX 511

size_t wl_build_put_int(char *buf, int32_t v)
{
    char digits[10];
    uint32_t u = v < 0 ? 0u - (uint32_t)v : (uint32_t)v;
    size_t n = 0, len = 0;
    do {
        digits[n++] = (char)('0' + u % 10);
        u /= 10;
    } while (u != 0);
    if (v < 0)
        buf[len++] = '-';
    while (n > 0)
        buf[len++] = digits[--n];
    return len;
}

/* Appends len bytes of s at dst[n], as far as they fit before the NUL of a
 * cap-byte buffer (snprintf's truncation); returns the new length. */
static size_t put(char *dst, size_t cap, size_t n, const char *s, size_t len)
{
    if (len > cap - 1 - n)
        len = cap - 1 - n;
    memcpy(dst + n, s, len);
    return n + len;
}

/* "layers.<layer>" at dst[n]; returns the new length. */
static size_t put_layer(char *dst, size_t cap, size_t n, int32_t layer)
{
    char pre[24] = "layers.";
    size_t k = 7 + wl_build_put_int(pre + 7, layer);
    return put(dst, cap, n, pre, k);
}

char *wl_build_name_join(char *buf, size_t cap, int32_t layer, ...)
{
    if (cap == 0)
        return buf;
    va_list ap;
    va_start(ap, layer);
    const char *s = va_arg(ap, const char *);
    size_t n = 0;
    if (layer != MS_NONE) {
        n = put_layer(buf, cap, n, layer);
        if (s != NULL)
            n = put(buf, cap, n, ".", 1);
    }
    for (; s != NULL; s = va_arg(ap, const char *))
        n = put(buf, cap, n, s, strlen(s));
    va_end(ap);
    buf[n] = '\0';
    return buf;
}

/* Room for one more name at the end of names: a pointer to at least
 * WB_NAME_MAX + 1 bytes, or NULL after an error.  name_commit keeps it. */
static char *name_room(wb *b)
{
    if (!grow(b, (void **)&b->names, 1, &b->cap_names, b->n_names + WB_NAME_MAX + 1))
        return NULL;
    return b->names + b->n_names;
}

static size_t name_commit(wb *b, size_t len)
{
    size_t off = b->n_names;
    b->n_names += len + 1;
    return off;
}

/* Names almost always arrive preformatted, as ("%s", name): copied, not
 * formatted.  *len gets the name's length. */
static size_t vname(wb *b, size_t *len, const char *fmt, va_list ap)
{
    char *dst = name_room(b);
    if (dst == NULL)
        return *len = 0;
    size_t n;
    if (fmt[0] == '%' && fmt[1] == 's' && fmt[2] == '\0') {
        const char *s = va_arg(ap, const char *);
        n = put(dst, WB_NAME_MAX + 1, 0, s, strlen(s));
        dst[n] = '\0';
    } else {
        int r = vsnprintf(dst, WB_NAME_MAX + 1, fmt, ap);
        n = r < 0 ? 0 : (size_t)r < WB_NAME_MAX ? (size_t)r : WB_NAME_MAX;
        dst[n] = '\0';
    }
    *len = n;
    return name_commit(b, n);
}

static uint32_t new_tensor(wb *b, size_t name, uint64_t bytes, ms_dtype dt, ms_tensor_kind kind)
{
    if (!grow_pair(b, (void **)&b->tensors, sizeof *b->tensors, (void **)&b->tensor_at,
                   sizeof *b->tensor_at, &b->cap_tensors, (size_t)b->n_tensors + 1))
        return WB_NO_TENSOR;
    uint32_t id = b->n_tensors++;
    b->tensors[id] = (ms_tensor){.id = id, .bytes = bytes, .dtype = dt, .kind = kind,
                                 .producer = MS_NONE, .layer = b->layer,
                                 .micro_batch = b->micro_batch};
    b->tensor_at[id] = (wb_tensor_at){.name = name};
    return id;
}

uint32_t wl_build_persistent(wb *b, uint64_t bytes, ms_dtype dt, ms_tensor_kind kind, int32_t layer,
                             const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    size_t len, name = vname(b, &len, fmt, ap);
    va_end(ap);
    uint32_t id = new_tensor(b, name, bytes, dt, kind);
    if (id == WB_NO_TENSOR)
        return id;
    b->tensors[id].persistent = true;
    b->tensors[id].layer = layer;
    b->tensors[id].micro_batch = MS_NONE;
    return id;
}

/* Every input exists when the op is issued (made by an earlier op, or
 * persistent) and appears once (an in-place write lists it once more, as an
 * output).  A failure is a bug in a model function. */
static bool inputs_valid(const wb *b, const uint32_t *in, uint32_t n_in)
{
    for (uint32_t i = 0; i < n_in; i++) {
        if (in[i] >= b->n_tensors)
            return false;
        const ms_tensor *t = &b->tensors[in[i]];
        if (t->producer == MS_NONE && !t->persistent)
            return false;
        for (uint32_t j = 0; j < i; j++)
            if (in[j] == in[i])
                return false;
    }
    return true;
}

/* Op o reads in[]: count the uses, and mark what a forward op made and a
 * backward op reads as saved for backward. */
static void note_reads(wb *b, uint32_t o, const uint32_t *in, uint32_t n_in)
{
    bool backward = b->ops[o].phase == MS_PHASE_BACKWARD;
    for (uint32_t i = 0; i < n_in; i++) {
        ms_tensor *t = &b->tensors[in[i]];
        t->n_uses++;
        if (backward && b->tensor_at[in[i]].forward)
            t->saved_for_backward = true;
    }
    b->n_reads += n_in;
}

uint32_t wl_build_op_add(wb *b, const ms_kernel *k, double model_flops, const uint32_t *in,
                         uint32_t n_in, const char *fmt, ...)
{
    if (b->err != MS_OK)
        return 0;
    if (b->n_ops >= WB_MAX_OPS) {
        b->err = MS_ERANGE;
        return 0;
    }
    if (!inputs_valid(b, in, n_in)) {
        b->err = MS_EINTERNAL;
        return 0;
    }
    va_list ap;
    va_start(ap, fmt);
    size_t len, name = vname(b, &len, fmt, ap);
    va_end(ap);
    if (!grow_pair(b, (void **)&b->ops, sizeof *b->ops, (void **)&b->op_at, sizeof *b->op_at,
                   &b->cap_ops, (size_t)b->n_ops + 1) ||
        !grow(b, (void **)&b->ids, sizeof *b->ids, &b->cap_ids, b->n_ids + n_in))
        return 0;
    uint32_t o = b->n_ops;
    b->ops[o] = (ms_op){.id = o, .kernel = *k, .phase = b->phase, .micro_batch = b->micro_batch,
                        .layer = b->layer,
                        .stream = k->cls == MS_KC_COMM ? MS_SR_COMM : MS_SR_COMPUTE,
                        .n_inputs = n_in,
                        .segment = b->seg_depth > 0 ? b->seg_stack[b->seg_depth - 1] : MS_NONE,
                        .model_flops = model_flops, .chunk = b->chunk};
    b->op_at[o] = (wb_op_at){.name = name, .io = b->n_ids};
    b->last_name_len = (uint32_t)len;
    if (n_in)
        memcpy(b->ids + b->n_ids, in, n_in * sizeof *in);
    b->n_ids += n_in;
    note_reads(b, o, in, n_in);
    b->seg_reads += (size_t)n_in * (size_t)b->seg_depth;
    for (int i = 0; i < b->seg_depth; i++) {
        wb_segment *s = &b->segs[b->seg_stack[i]];
        if (s->first_op == UINT32_MAX)
            s->first_op = o;
        s->last_op = o;
    }
    return b->n_ops++;
}

static bool append_out(wb *b, uint32_t t)
{
    if (b->err != MS_OK || b->n_ops == 0)
        return false;
    ms_op *op = &b->ops[b->n_ops - 1];
    if (b->op_at[b->n_ops - 1].io + op->n_inputs + op->n_outputs != b->n_ids) {
        b->err = MS_EINTERNAL; /* outputs must follow their op */
        return false;
    }
    if (!grow(b, (void **)&b->ids, sizeof *b->ids, &b->cap_ids, b->n_ids + 1))
        return false;
    b->ids[b->n_ids++] = t;
    op->n_outputs++;
    return true;
}

uint32_t wl_build_out(wb *b, const char *suffix, uint64_t bytes, ms_dtype dt, ms_tensor_kind kind)
{
    if (b->err != MS_OK || b->n_ops == 0)
        return WB_NO_TENSOR;
    uint32_t op = b->n_ops - 1;
    char *dst = name_room(b);
    if (dst == NULL)
        return WB_NO_TENSOR;
    /* The op's name is read after name_room, which may move names. */
    size_t n = put(dst, WB_NAME_MAX + 1, 0, b->names + b->op_at[op].name, b->last_name_len);
    n = put(dst, WB_NAME_MAX + 1, n, ".", 1);
    n = put(dst, WB_NAME_MAX + 1, n, suffix, strlen(suffix));
    dst[n] = '\0';
    size_t name = name_commit(b, n);
    uint32_t t = new_tensor(b, name, bytes, dt, kind);
    if (t == WB_NO_TENSOR || !append_out(b, t))
        return WB_NO_TENSOR;
    b->tensors[t].producer = (int32_t)op;
    b->tensor_at[t].forward = b->ops[op].phase == MS_PHASE_FORWARD;
    return t;
}

void wl_build_inplace(wb *b, uint32_t t)
{
    if (b->err != MS_OK || b->n_ops == 0)
        return;
    const ms_op *op = &b->ops[b->n_ops - 1];
    const uint32_t *in = b->ids + b->op_at[b->n_ops - 1].io;
    bool read = false;
    for (uint32_t i = 0; i < op->n_inputs; i++)
        read |= in[i] == t;
    if (!read) {
        b->err = MS_EINTERNAL; /* an in-place write is a read-modify-write */
        return;
    }
    append_out(b, t);
}

ms_op *wl_build_last_op(wb *b)
{
    return b->err == MS_OK && b->n_ops > 0 ? &b->ops[b->n_ops - 1] : NULL;
}

static bool seg_can_open(wb *b)
{
    if (b->err != MS_OK)
        return false;
    if (b->seg_depth >= WB_SEG_DEPTH) {
        b->err = MS_EINTERNAL;
        return false;
    }
    return true;
}

static void seg_push(wb *b, size_t name)
{
    if (!grow32(b, (void **)&b->segs, sizeof *b->segs, &b->cap_segs, b->n_segs + 1))
        return;
    b->segs[b->n_segs] = (wb_segment){
        .name = name, .layer = b->layer, .micro_batch = b->micro_batch,
        .parent = b->seg_depth > 0 ? b->seg_stack[b->seg_depth - 1] : MS_NONE,
        .first_op = UINT32_MAX, .last_op = 0, .open = true};
    b->seg_stack[b->seg_depth++] = (int32_t)b->n_segs++;
}

void wl_build_seg_begin(wb *b, const char *fmt, ...)
{
    if (!seg_can_open(b))
        return;
    va_list ap;
    va_start(ap, fmt);
    size_t len, name = vname(b, &len, fmt, ap);
    va_end(ap);
    seg_push(b, name);
}

void wl_build_seg_begin_layer(wb *b, const char *module)
{
    if (!seg_can_open(b))
        return;
    char *dst = name_room(b);
    if (dst == NULL)
        return;
    size_t n = put_layer(dst, WB_NAME_MAX + 1, 0, b->layer);
    if (module != NULL) {
        n = put(dst, WB_NAME_MAX + 1, n, ".", 1);
        n = put(dst, WB_NAME_MAX + 1, n, module, strlen(module));
    }
    dst[n] = '\0';
    seg_push(b, name_commit(b, n));
}

void wl_build_seg_end(wb *b)
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

/* ---- repeating a unit ---------------------------------------------------
 *
 * A stage's micro-batches issue the same ops: the forward of a model chunk
 * (or its backward) differs from one micro-batch to the next only in the
 * micro-batch stamp, the ids of the tensors it makes and reads (a backward
 * reads its own forward's) and the tags of its p2p transfers.  Emitting each
 * through the model code again was most of ms_program_build on the shipped
 * llama2-70B (512 micro-batches), so later micro-batches copy the first
 * one's records instead, names shared.  test_workload_repeat checks that the
 * programs are the same either way. */

void wl_build_mark(const wb *b, wb_mark *at)
{
    *at = (wb_mark){.op = b->n_ops, .tensor = b->n_tensors, .seg = b->n_segs, .id = b->n_ids,
                    .seg_reads = b->seg_reads, .seg_depth = b->seg_depth};
}

static bool in_range(uint32_t v, uint32_t lo, uint32_t hi)
{
    return v >= lo && v < hi;
}

static bool unit_ids_known(const wb *b, const wb_unit *u)
{
    for (size_t i = u->from.id; i < u->to.id; i++) {
        uint32_t t = b->ids[i];
        if (!in_range(t, u->from.tensor, u->to.tensor) && !in_range(t, u->pair_lo, u->pair_hi) &&
            (t >= b->n_tensors || !b->tensors[t].persistent))
            return false;
    }
    return true;
}

static bool unit_records_own(const wb *b, const wb_unit *u)
{
    for (uint32_t s = u->from.seg; s < u->to.seg; s++)
        if (b->segs[s].open ||
            (b->segs[s].parent != MS_NONE &&
             !in_range((uint32_t)b->segs[s].parent, u->from.seg, u->to.seg)))
            return false;
    for (uint32_t o = u->from.op; o < u->to.op; o++)
        if (b->ops[o].segment != MS_NONE &&
            !in_range((uint32_t)b->ops[o].segment, u->from.seg, u->to.seg))
            return false;
    for (uint32_t t = u->from.tensor; t < u->to.tensor; t++)
        if (b->tensors[t].persistent || !in_range((uint32_t)b->tensors[t].producer, u->from.op,
                                                  u->to.op))
            return false;
    return true;
}

bool wl_build_unit_repeatable(const wb *b, const wb_unit *u)
{
    return b->err == MS_OK && u->from.seg_depth == 0 && u->to.seg_depth == 0 &&
           u->from.op < u->to.op && u->to.op <= b->n_ops && u->to.tensor <= b->n_tensors &&
           unit_ids_known(b, u) && unit_records_own(b, u);
}

/* Room for a copy of u: false (and the builder's error) if there is none. */
static bool repeat_room(wb *b, const wb_unit *u)
{
    size_t ops = (size_t)b->n_ops + (u->to.op - u->from.op);
    if (b->err == MS_OK && ops > WB_MAX_OPS)
        b->err = MS_ERANGE;
    return grow_pair(b, (void **)&b->ops, sizeof *b->ops, (void **)&b->op_at, sizeof *b->op_at,
                     &b->cap_ops, ops) &&
           grow_pair(b, (void **)&b->tensors, sizeof *b->tensors, (void **)&b->tensor_at,
                     sizeof *b->tensor_at, &b->cap_tensors,
                     (size_t)b->n_tensors + (u->to.tensor - u->from.tensor)) &&
           grow32(b, (void **)&b->segs, sizeof *b->segs, &b->cap_segs,
                  (size_t)b->n_segs + (u->to.seg - u->from.seg)) &&
           grow(b, (void **)&b->ids, sizeof *b->ids, &b->cap_ids, b->n_ids + (u->to.id - u->from.id));
}

/* Renumbering from u to its copy. */
typedef struct wb_move {
    uint32_t op, tensor, seg, pair;
    int32_t micro_batch;
} wb_move;

static uint32_t moved_id(const wb_unit *u, const wb_move *mv, uint32_t t)
{
    if (in_range(t, u->from.tensor, u->to.tensor))
        return t + mv->tensor;
    if (in_range(t, u->pair_lo, u->pair_hi))
        return t + mv->pair;
    return t;
}

static int32_t moved_seg(const wb_move *mv, int32_t s)
{
    return s == MS_NONE ? MS_NONE : s + (int32_t)mv->seg;
}

static void repeat_tensors(wb *b, const wb_unit *u, const wb_move *mv)
{
    for (uint32_t t = u->from.tensor; t < u->to.tensor; t++) {
        ms_tensor *c = &b->tensors[t + mv->tensor];
        *c = b->tensors[t];
        c->id = t + mv->tensor;
        c->producer += (int32_t)mv->op;
        c->micro_batch = mv->micro_batch;
        c->n_uses = 0; /* counted again as the copies read them */
        c->saved_for_backward = false;
        b->tensor_at[t + mv->tensor] = b->tensor_at[t];
    }
    b->n_tensors += u->to.tensor - u->from.tensor;
}

static void repeat_segments(wb *b, const wb_unit *u, const wb_move *mv)
{
    for (uint32_t s = u->from.seg; s < u->to.seg; s++) {
        wb_segment *c = &b->segs[s + mv->seg];
        *c = b->segs[s];
        c->parent = moved_seg(mv, c->parent);
        c->micro_batch = mv->micro_batch;
        c->first_op += mv->op;
        c->last_op += mv->op;
    }
    b->n_segs += u->to.seg - u->from.seg;
}

static void repeat_ops(wb *b, const wb_unit *u, const wb_move *mv, int tag_shift)
{
    size_t id_shift = b->n_ids - u->from.id;
    for (uint32_t o = u->from.op; o < u->to.op; o++) {
        uint32_t n = o + mv->op;
        ms_op *c = &b->ops[n];
        *c = b->ops[o];
        c->id = n;
        c->micro_batch = mv->micro_batch;
        c->segment = moved_seg(mv, c->segment);
        if (c->kernel.comm == MS_COMM_SEND || c->kernel.comm == MS_COMM_RECV)
            c->kernel.tag += tag_shift;
        b->op_at[n] = (wb_op_at){.name = b->op_at[o].name, .io = b->op_at[o].io + id_shift};
        uint32_t *io = b->ids + b->op_at[n].io;
        const uint32_t *from = b->ids + b->op_at[o].io;
        for (uint32_t i = 0; i < c->n_inputs + c->n_outputs; i++)
            io[i] = moved_id(u, mv, from[i]);
        note_reads(b, n, io, c->n_inputs);
    }
    b->n_ops += u->to.op - u->from.op;
    b->n_ids += u->to.id - u->from.id;
}

void wl_build_repeat(wb *b, const wb_unit *u, int32_t micro_batch, uint32_t pair_to,
                     int tag_shift)
{
    if (!repeat_room(b, u))
        return;
    wb_move mv = {.op = b->n_ops - u->from.op, .tensor = b->n_tensors - u->from.tensor,
                  .seg = b->n_segs - u->from.seg, .pair = pair_to - u->pair_lo,
                  .micro_batch = micro_batch};
    repeat_tensors(b, u, &mv);
    repeat_segments(b, u, &mv);
    repeat_ops(b, u, &mv, tag_shift);
    b->seg_reads += u->to.seg_reads - u->from.seg_reads;
    b->last_name_len = (uint32_t)strlen(b->names + b->op_at[b->n_ops - 1].name);
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
    ms_program_facts_free(&p->facts);
    free(p);
}

/* Names, and a run of uses per tensor (filled by link_ops). */
static void link_tensors(const wb *b, ms_program *p)
{
    size_t off = 0;
    for (uint32_t t = 0; t < p->n_tensors; t++) {
        ms_tensor *tn = &p->tensors[t];
        tn->name = p->names + b->tensor_at[t].name;
        tn->uses = p->uses + off;
        off += tn->n_uses;
        tn->n_uses = 0;
    }
}

static double auto_bytes(const ms_program *p, const ms_op *op)
{
    double sum = 0;
    for (uint32_t i = 0; i < op->n_inputs; i++)
        sum += (double)p->tensors[op->inputs[i]].bytes;
    for (uint32_t i = 0; i < op->n_outputs; i++)
        sum += (double)p->tensors[op->outputs[i]].bytes;
    return sum;
}

/* Names, inputs and outputs; kernel bytes < 0 become the bytes of the
 * inputs and outputs; each op joins its inputs' uses in op order, so every
 * run comes out ascending. */
static void link_ops(const wb *b, ms_program *p)
{
    for (uint32_t o = 0; o < p->n_ops; o++) {
        ms_op *op = &p->ops[o];
        op->name = p->names + b->op_at[o].name;
        op->inputs = p->io + b->op_at[o].io;
        op->outputs = op->inputs + op->n_inputs;
        if (op->kernel.bytes < 0)
            op->kernel.bytes = auto_bytes(p, op);
        p->model_flops += op->model_flops;
        for (uint32_t i = 0; i < op->n_inputs; i++) {
            ms_tensor *t = &p->tensors[op->inputs[i]];
            ((uint32_t *)t->uses)[t->n_uses++] = o;
        }
    }
}

static int cmp_u32(const void *a, const void *b)
{
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return (x > y) - (x < y);
}

/* A segment reads a handful of tensors: insertion sort is cheaper than
 * qsort's comparator calls up to a few dozen. */
static void sort_ids(uint32_t *a, uint32_t n)
{
    if (n > 32) {
        qsort(a, n, sizeof *a, cmp_u32);
        return;
    }
    for (uint32_t i = 1; i < n; i++) {
        uint32_t x = a[i], j = i;
        for (; j > 0 && a[j - 1] > x; j--)
            a[j] = a[j - 1];
        a[j] = x;
    }
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
    size_t total = b->seg_reads;
    p->seg_inputs = malloc((total ? total : 1) * sizeof *p->seg_inputs);
    if (p->seg_inputs == NULL)
        return MS_ENOMEM;
    size_t off = 0;
    for (uint32_t i = 0; i < b->n_segs; i++) {
        const wb_segment *w = &b->segs[i];
        ms_segment *s = &p->segments[i];
        *s = (ms_segment){.id = i, .name = p->names + w->name, .layer = w->layer,
                          .micro_batch = w->micro_batch, .parent = w->parent,
                          .first_op = w->first_op, .last_op = w->last_op,
                          .op_level = w->op_level};
        uint32_t *in = p->seg_inputs + off, n = 0;
        for (uint32_t o = w->first_op; o <= w->last_op; o++)
            for (uint32_t k = 0; k < p->ops[o].n_inputs; k++) {
                uint32_t t = p->ops[o].inputs[k];
                if (!inside(s, p->tensors[t].producer))
                    in[n++] = t;
            }
        sort_ids(in, n);
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

/* Worth a segment of its own: it keeps an output for backward (something
 * to drop), and every input outlives the forward pass (persistent, or kept
 * for backward), so a replay before the backward finds them.  An input freed
 * after forward (sequence parallelism's all-gathered activations, gathered
 * again in backward) would have to be kept, which is not what recompute
 * saves. */
static bool recomputable_alone(const ms_program *p, uint32_t o)
{
    const ms_op *op = &p->ops[o];
    for (uint32_t k = 0; k < op->n_inputs; k++) {
        const ms_tensor *t = &p->tensors[op->inputs[k]];
        if (!t->persistent && !t->saved_for_backward)
            return false;
    }
    for (uint32_t k = 0; k < op->n_outputs; k++) {
        const ms_tensor *t = &p->tensors[op->outputs[k]];
        if (t->producer == (int32_t)o && t->saved_for_backward && !t->persistent)
            return true;
    }
    return false;
}

/* MindFormers' select_recompute may name a single op of a module
 * ("feed_forward\.w1\.matmul": recompute that matmul's output from its
 * kept inputs).  Recompute works on segments, so every forward op of a layer
 * that keeps a tensor for backward and shares its innermost segment with
 * other ops gets a segment of its own, nested in that one.  They are
 * appended after the model's segments, which keep their ids (a parent's id
 * is still smaller than its children's). */
static bool add_op_segments(wb *b, ms_program *p)
{
    uint32_t n_model = b->n_segs;
    for (uint32_t o = 0; o < p->n_ops; o++) {
        ms_op *op = &p->ops[o];
        if (op->phase != MS_PHASE_FORWARD || op->layer == MS_NONE || op->segment == MS_NONE ||
            (uint32_t)op->segment >= n_model)
            continue;
        const wb_segment *in = &b->segs[op->segment];
        if (in->first_op == in->last_op || !recomputable_alone(p, o))
            continue;
        if (!grow32(b, (void **)&b->segs, sizeof *b->segs, &b->cap_segs, b->n_segs + 1))
            return false;
        b->segs[b->n_segs] = (wb_segment){
            .name = b->op_at[o].name, .layer = op->layer, .micro_batch = op->micro_batch,
            .parent = op->segment, .first_op = o, .last_op = o, .op_level = true};
        op->segment = (int32_t)b->n_segs++;
        b->seg_reads += op->n_inputs;
    }
    return true;
}

/* The program keeps only what it uses of a reserved array: shrinking is
 * done in place, and if it fails the larger block serves as well. */
static void *shrink(void *arr, size_t n, size_t elem)
{
    void *p = realloc(arr, (n ? n : 1) * elem);
    return p != NULL ? p : arr;
}

/* The builder's arrays move into the program (b keeps what is left to
 * free); wl_build_finish then only links them. */
static void take_arrays(wb *b, ms_program *p)
{
    p->ops = shrink(b->ops, b->n_ops, sizeof *b->ops);
    p->n_ops = b->n_ops;
    p->tensors = shrink(b->tensors, b->n_tensors, sizeof *b->tensors);
    p->n_tensors = b->n_tensors;
    p->names = shrink(b->names, b->n_names, 1);
    p->io = shrink(b->ids, b->n_ids, sizeof *b->ids);
    b->ops = NULL;
    b->tensors = NULL;
    b->names = NULL;
    b->ids = NULL;
}

ms_status wl_build_finish(wb *b, int stage, ms_program **out)
{
    *out = NULL;
    if (b->err != MS_OK)
        return b->err;
    if (b->seg_depth != 0)
        return MS_EINTERNAL;
    /* An empty program still gets arrays, as the view promises. */
    if (!grow_pair(b, (void **)&b->ops, sizeof *b->ops, (void **)&b->op_at, sizeof *b->op_at,
                   &b->cap_ops, 1) ||
        !grow_pair(b, (void **)&b->tensors, sizeof *b->tensors, (void **)&b->tensor_at,
                   sizeof *b->tensor_at, &b->cap_tensors, 1))
        return b->err;
    ms_program *p = calloc(1, sizeof *p);
    if (p == NULL)
        return MS_ENOMEM;
    p->stage = stage;
    take_arrays(b, p);
    p->uses = malloc((b->n_reads ? b->n_reads : 1) * sizeof *p->uses);
    if (p->uses == NULL) {
        program_free_parts(p);
        return MS_ENOMEM;
    }
    link_tensors(b, p);
    link_ops(b, p);
    if (!add_op_segments(b, p)) {
        program_free_parts(p);
        return MS_ENOMEM;
    }
    p->n_segments = b->n_segs;
    /* Every element is written below: no need to zero them. */
    p->segments = malloc((b->n_segs ? b->n_segs : 1) * sizeof *p->segments);
    if (p->segments == NULL) {
        program_free_parts(p);
        return MS_ENOMEM;
    }
    ms_status st = build_segments(b, p);
    ms_program_view v = ms_program_get_view(p);
    if (st == MS_OK)
        st = ms_program_facts_derive(&v, &p->facts, NULL);
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

ms_program_view ms_program_get_view(const ms_program *p)
{
    if (p == NULL)
        return (ms_program_view){0};
    return (ms_program_view){.ops = p->ops, .n_ops = p->n_ops, .tensors = p->tensors,
                             .n_tensors = p->n_tensors, .segments = p->segments,
                             .n_segments = p->n_segments, .stage = p->stage,
                             .model_flops = p->model_flops,
                             .facts = p->facts.last_forward_use != NULL ? &p->facts : NULL};
}
