/* The Lua view of a program: profile.ops, profile.tensors, profile.segments.
 *
 * A step program has tens of thousands of ops and tensors; one Lua table per
 * entry (plus a proxy to make it read-only) costs ~1.5 KB each, which a
 * 100k-op stage would not fit in the policy heap.  So the program is copied
 * once into one packed block, owned by a Lua userdata that frees it when
 * collected (no pointer back into program memory that might be freed), and
 * entries are small userdata read through __index.  The block is malloc'd,
 * outside the Lua heap: it is memsim's program, not the script's data, and
 * counted against the policy's memory cap a 70B stage's (~110 MB of 256)
 * left too little for a search over it.  They behave as read-only records: t.bytes, #profile.ops,
 * ipairs/pairs, tostring; an entry object is created on first access and
 * kept, so the same entry is the same object (usable as a table key).
 *
 * Names are copied into the block too, as C strings back to back, and
 * become Lua strings only when a script reads one: interning every op,
 * tensor and segment name up front cost more than the rest of the view
 * together (~470 instructions a name, most never read by a policy), and
 * the hundreds of thousands of strings it made were then walked by every
 * garbage collection cycle.  A Lua string is a value, so making it on each
 * read shows the script exactly what the eager table did. */
#include "policy_host.h"
#include "policy_view.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include <lauxlib.h>

#define MT_BLOB "memsim.policy.blob"


static const char *const entry_mt[ENTRY_COUNT] = {
    "memsim.policy.op", "memsim.policy.tensor", "memsim.policy.segment",
};
static const char *const entry_word[ENTRY_COUNT] = {"op", "tensor", "segment"};
const char *const pol_view_array_names[ENTRY_COUNT] = {"ops", "tensors", "segments"};

static const char *const stream_names[MS_SR_COUNT] = {"compute", "comm"};
static const char *const class_names[MS_KC_COUNT] = {
    "matmul", "attention", "elementwise", "norm", "comm",
};

#define NAME_OF(table, v) \
    ((unsigned)(v) < sizeof(table) / sizeof((table)[0]) ? (table)[(unsigned)(v)] : "unknown")


/* ---- the packed copy ---- */

/* The userdata that owns the blocks, each made from prog on the first read
 * of its kind of entry, and the last measured figures of the program's ops. */
struct vbox {
    vblob *blob[ENTRY_COUNT]; /* NULL until that array is first read */
    const pol_program *prog;  /* NULL once retired */
    ms_op_profile *prof;      /* n_ops, once a measured profile came */
    bool measured;
};

static int box_gc(lua_State *L)
{
    vbox *x = luaL_checkudata(L, 1, MT_BLOB);
    for (int t = 0; t < ENTRY_COUNT; t++) {
        free(x->blob[t]);
        x->blob[t] = NULL;
    }
    free(x->prof);
    x->prof = NULL;
    return 0;
}

static size_t align8(size_t n)
{
    return (n + 7) & ~(size_t)7;
}

static size_t name_size(const char *s)
{
    return s != NULL ? strlen(s) + 1 : 0;
}

/* What the block of one kind of entry must hold beyond its array: the id
 * lists and the names (with the leading NUL of offset 0). */
static void measure(const ms_program_view *pv, int type, size_t *n_ids, size_t *n_chars)
{
    size_t ids = 0, chars = 1;
    switch (type) {
    case ENTRY_OP:
        for (uint32_t i = 0; i < pv->n_ops; i++) {
            const ms_op *o = &pv->ops[i];
            ids += (size_t)o->n_inputs + o->n_outputs;
            chars += name_size(o->name) + name_size(o->kernel.name);
        }
        break;
    case ENTRY_TENSOR:
        for (uint32_t i = 0; i < pv->n_tensors; i++) {
            ids += pv->tensors[i].n_uses;
            chars += name_size(pv->tensors[i].name);
        }
        break;
    default:
        for (uint32_t i = 0; i < pv->n_segments; i++) {
            ids += pv->segments[i].n_inputs;
            chars += name_size(pv->segments[i].name);
        }
    }
    *n_ids = ids;
    *n_chars = chars;
}

/* Most id lists hold one to three ids, for which a call to memcpy costs
 * several times the copy (the view copies ~160k lists per stage). */
static uint32_t copy_ids(uint32_t *dst, size_t *at, const uint32_t *src, uint32_t n)
{
    uint32_t off = (uint32_t)*at;
    uint32_t *d = dst + *at;
    if (n > 4)
        memcpy(d, src, n * sizeof *src);
    else
        for (uint32_t i = 0; i < n; i++)
            d[i] = src[i];
    *at += n;
    return off;
}

/* Append s to the names; its offset, or 0 for no name.  measure() checked
 * that every offset fits in 32 bits. */
static uint32_t add_name(char *names, size_t *at, const char *s)
{
    if (s == NULL)
        return 0;
    uint32_t off = (uint32_t)*at;
    *at = (size_t)(stpcpy(names + *at, s) - names) + 1;
    return off;
}

/* Write positions in the block's variable parts while filling it. */
typedef struct fill_at {
    size_t id, name;
} fill_at;

static void fill_ops(vblob *b, fill_at *at, const ms_program_view *pv)
{
    for (uint32_t i = 0; i < pv->n_ops; i++) {
        const ms_op *o = &pv->ops[i];
        vop *v = &b->ops[i];
        *v = (vop){.model_flops = o->model_flops, .flops = o->kernel.flops,
                   .hbm_bytes = o->kernel.bytes, .layer = o->layer,
                   .micro_batch = o->micro_batch, .segment = o->segment, .n_in = o->n_inputs,
                   .n_out = o->n_outputs, .phase = (uint8_t)o->phase,
                   .stream = (uint8_t)o->stream, .cls = (uint8_t)o->kernel.cls};
        v->name = add_name(b->names, &at->name, o->name);
        v->kernel = add_name(b->names, &at->name, o->kernel.name);
        v->in_off = copy_ids(b->ids, &at->id, o->inputs, o->n_inputs);
        v->out_off = copy_ids(b->ids, &at->id, o->outputs, o->n_outputs);
    }
}

static void fill_tensors(vblob *b, fill_at *at, const ms_program_view *pv,
                         const ms_program_facts *dv)
{
    for (uint32_t i = 0; i < pv->n_tensors; i++) {
        const ms_tensor *t = &pv->tensors[i];
        vtensor *v = &b->tensors[i];
        *v = (vtensor){.bytes = t->bytes, .producer = t->producer, .layer = t->layer,
                       .micro_batch = t->micro_batch,
                       .last_forward_use = dv->last_forward_use[i],
                       .first_backward_use = dv->first_backward_use[i], .n_uses = t->n_uses,
                       .kind = (uint8_t)t->kind, .dtype = (uint8_t)t->dtype,
                       .persistent = t->persistent, .saved = t->saved_for_backward};
        v->name = add_name(b->names, &at->name, t->name);
        v->uses_off = copy_ids(b->ids, &at->id, t->uses, t->n_uses);
    }
}

static void fill_segments(vblob *b, fill_at *at, const ms_program_view *pv,
                          const ms_program_facts *dv)
{
    for (uint32_t i = 0; i < pv->n_segments; i++) {
        const ms_segment *s = &pv->segments[i];
        vsegment *v = &b->segments[i];
        *v = (vsegment){.saved_bytes = dv->saved_bytes[i], .input_bytes = dv->input_bytes[i],
                        .layer = s->layer, .micro_batch = s->micro_batch, .parent = s->parent,
                        .first_op = s->first_op, .last_op = s->last_op,
                        .first_backward_op = s->first_backward_op, .n_in = s->n_inputs};
        v->name = add_name(b->names, &at->name, s->name);
        v->in_off = copy_ids(b->ids, &at->id, s->inputs, s->n_inputs);
    }
}

static size_t entry_size(int type)
{
    return type == ENTRY_OP       ? sizeof(vop)
           : type == ENTRY_TENSOR ? sizeof(vtensor)
                                  : sizeof(vsegment);
}

/* Point b's array of this kind at entries and fill it. */
static void fill(vblob *b, int type, void *entries, const pol_program *prog)
{
    fill_at at = {.id = 0, .name = 1};
    if (type == ENTRY_OP) {
        b->ops = entries;
        fill_ops(b, &at, &prog->view);
    } else if (type == ENTRY_TENSOR) {
        b->tensors = entries;
        fill_tensors(b, &at, &prog->view, prog->dv);
    } else {
        b->segments = entries;
        fill_segments(b, &at, &prog->view, prog->dv);
    }
}

/* The block of one kind of x's program's entries: one allocation holding
 * its array, id lists and names, so nothing in it needs the garbage
 * collector's attention.  One a kind, because most scripts read one or two:
 * full recompute reads only the segments, and the tensors, the largest
 * kind, are read by few (building all three was 4% of a 64-micro-batch
 * llama2-70B run under full_recompute). */
static vblob *build_blob(lua_State *L, vbox *x, int type)
{
    if (x->prog == NULL)
        luaL_error(L, "profile.%s: the program this profile described was replaced since (its "
                   "step recorded again); read the profile of the current call",
                   pol_view_array_names[type]);
    const ms_program_view *pv = &x->prog->view;
    size_t n_ids, n_chars;
    measure(pv, type, &n_ids, &n_chars);
    if (n_ids > UINT32_MAX || n_chars > UINT32_MAX)
        luaL_error(L, "program too large for the policy view (%zu ids, %zu name bytes; "
                   "at most %u each)", n_ids, n_chars, (unsigned)UINT32_MAX);
    uint32_t n[ENTRY_COUNT] = {pv->n_ops, pv->n_tensors, pv->n_segments};
    size_t off_entries = align8(sizeof(vblob));
    size_t off_ids = off_entries + align8((size_t)n[type] * entry_size(type));
    size_t off_names = off_ids + n_ids * sizeof(uint32_t);
    char *base = malloc(off_names + n_chars);
    if (base == NULL)
        luaL_error(L, "out of memory building the program view (%zu bytes)", off_names + n_chars);
    /* The collector does not see the block: a step as if it were allocated
     * in the heap keeps the pace at which dropped views (a retired program's,
     * or one a script let go) are freed what it was when the heap held them. */
    size_t kib = (off_names + n_chars) >> 10;
    lua_gc(L, LUA_GCSTEP, kib > INT_MAX ? INT_MAX : (int)kib);
    vblob *b = (vblob *)base;
    *b = (vblob){.measured = x->measured, .prof = x->prof};
    memcpy(b->n, n, sizeof n);
    b->ids = (uint32_t *)(base + off_ids);
    b->names = base + off_names;
    b->names[0] = '\0';
    fill(b, type, base + off_entries, x->prog);
    x->blob[type] = b;
    return b;
}

const vblob *pol_view_blob(lua_State *L, int idx, vref *r)
{
    if (r->blob != NULL)
        return r->blob;
    lua_getiuservalue(L, idx, 1);
    vbox *x = lua_touserdata(L, -1);
    lua_pop(L, 1);
    r->blob = x->blob[r->type] != NULL ? x->blob[r->type] : build_blob(L, x, r->type);
    return r->blob;
}

static void push_array(lua_State *L, int blob, int type)
{
    vref *r = lua_newuserdatauv(L, sizeof *r, 3);
    *r = (vref){.blob = NULL, .type = (uint8_t)type}; /* until first read */
    lua_pushvalue(L, blob);
    lua_setiuservalue(L, -2, 1);
    lua_createtable(L, 0, 0);
    lua_setiuservalue(L, -2, 2);
    luaL_getmetatable(L, entry_mt[type]);
    lua_setiuservalue(L, -2, 3);
    luaL_setmetatable(L, MT_ARRAY);
}

vbox *pol_push_program(lua_State *L, const pol_program *prog)
{
    luaL_checkstack(L, 8, "building the program view");
    lua_createtable(L, 0, 4);
    vbox *x = lua_newuserdatauv(L, sizeof *x, 0);
    *x = (vbox){.prog = prog};
    luaL_setmetatable(L, MT_BLOB);
    int blob = lua_gettop(L);
    for (int t = 0; t < ENTRY_COUNT; t++) {
        push_array(L, blob, t);
        lua_setfield(L, blob - 1, pol_view_array_names[t]);
    }
    lua_setfield(L, -2, "blob");
    return x;
}

void pol_view_retire(vbox *x)
{
    if (x != NULL)
        x->prog = NULL;
}

void pol_update_measured(lua_State *L, vbox *x, const ms_profile *prof)
{
    uint32_t n = x->prog != NULL ? x->prog->view.n_ops : 0;
    x->measured = prof->measured && prof->ops != NULL && n == prof->program.n_ops;
    if (x->measured && n > 0) {
        if (x->prof == NULL && (x->prof = malloc(n * sizeof *x->prof)) == NULL)
            luaL_error(L, "out of memory keeping the measured profile (%u ops)", (unsigned)n);
        memcpy(x->prof, prof->ops, n * sizeof *x->prof);
    }
    for (int t = 0; t < ENTRY_COUNT; t++)
        if (x->blob[t] != NULL) {
            x->blob[t]->measured = x->measured;
            x->blob[t]->prof = x->prof;
        }
}

/* ---- fields ---- */

/* The Lua string is made here, on read (see the top of the file). */
static void push_name(lua_State *L, const vblob *b, uint32_t off)
{
    if (off == 0)
        lua_pushnil(L);
    else
        lua_pushstring(L, b->names + off);
}

/* An id list is a fresh table on every read: the caller may keep or change
 * it without touching the profile. */
static void push_ids(lua_State *L, const vblob *b, uint32_t off, uint32_t n)
{
    lua_createtable(L, (int)n, 0);
    for (uint32_t i = 0; i < n; i++) {
        lua_pushinteger(L, b->ids[off + i]);
        lua_rawseti(L, -2, (lua_Integer)i + 1);
    }
}

static void push_opt(lua_State *L, int32_t v)
{
    if (v >= 0)
        lua_pushinteger(L, v);
    else
        lua_pushnil(L); /* MS_NONE */
}

/* Field names in pairs() order (sorted), per entry type; the index in this
 * list is the field's code. */
static const char *const op_fields[] = {
    "active", "allocated", "class", "finish", "flops", "hbm_bytes", "id", "inputs", "kernel",
    "layer", "micro_batch", "model_flops", "name", "outputs", "phase", "reserved", "segment",
    "start", "stream", NULL,
};
enum {
    OF_ACTIVE, OF_ALLOCATED, OF_CLASS, OF_FINISH, OF_FLOPS, OF_HBM_BYTES, OF_ID, OF_INPUTS,
    OF_KERNEL, OF_LAYER, OF_MICRO_BATCH, OF_MODEL_FLOPS, OF_NAME, OF_OUTPUTS, OF_PHASE,
    OF_RESERVED, OF_SEGMENT, OF_START, OF_STREAM,
};
static const char *const tensor_fields[] = {
    "bytes", "dtype", "first_backward_use", "first_use", "id", "kind", "last_forward_use",
    "last_use", "layer", "micro_batch", "name", "persistent", "producer", "saved", "uses", NULL,
};
enum {
    TF_BYTES, TF_DTYPE, TF_FIRST_BACKWARD_USE, TF_FIRST_USE, TF_ID, TF_KIND,
    TF_LAST_FORWARD_USE, TF_LAST_USE, TF_LAYER, TF_MICRO_BATCH, TF_NAME, TF_PERSISTENT,
    TF_PRODUCER, TF_SAVED, TF_USES,
};
static const char *const segment_fields[] = {
    "first_backward_op", "first_op", "id", "input_bytes", "inputs", "last_op", "layer",
    "micro_batch", "name", "parent", "saved_bytes", NULL,
};
enum {
    SF_FIRST_BACKWARD_OP, SF_FIRST_OP, SF_ID, SF_INPUT_BYTES, SF_INPUTS, SF_LAST_OP, SF_LAYER,
    SF_MICRO_BATCH, SF_NAME, SF_PARENT, SF_SAVED_BYTES,
};
static const char *const *const fields_of[ENTRY_COUNT] = {op_fields, tensor_fields,
                                                          segment_fields};

static void push_measured(lua_State *L, const vblob *b, uint32_t i, int code)
{
    if (!b->measured) {
        lua_pushnil(L);
        return;
    }
    const ms_op_profile *m = &b->prof[i];
    switch (code) {
    case OF_START: lua_pushinteger(L, m->start_ns); break;
    case OF_FINISH: lua_pushinteger(L, m->end_ns); break;
    case OF_ALLOCATED: lua_pushinteger(L, (lua_Integer)m->allocated); break;
    case OF_RESERVED: lua_pushinteger(L, (lua_Integer)m->reserved); break;
    default: lua_pushinteger(L, (lua_Integer)m->active); break;
    }
}

static void push_op_field(lua_State *L, const vref *r, int code)
{
    const vop *o = &r->blob->ops[r->index];
    switch (code) {
    case OF_ID: lua_pushinteger(L, r->index); break;
    case OF_NAME: push_name(L, r->blob, o->name); break;
    case OF_PHASE: lua_pushstring(L, ms_phase_name((ms_phase)o->phase)); break;
    case OF_LAYER: push_opt(L, o->layer); break;
    case OF_MICRO_BATCH: push_opt(L, o->micro_batch); break;
    case OF_STREAM: lua_pushstring(L, NAME_OF(stream_names, o->stream)); break;
    case OF_INPUTS: push_ids(L, r->blob, o->in_off, o->n_in); break;
    case OF_OUTPUTS: push_ids(L, r->blob, o->out_off, o->n_out); break;
    case OF_SEGMENT: push_opt(L, o->segment); break;
    case OF_MODEL_FLOPS: lua_pushnumber(L, o->model_flops); break;
    case OF_KERNEL: push_name(L, r->blob, o->kernel); break;
    case OF_CLASS: lua_pushstring(L, NAME_OF(class_names, o->cls)); break;
    case OF_FLOPS: lua_pushnumber(L, o->flops); break;
    case OF_HBM_BYTES: lua_pushnumber(L, o->hbm_bytes); break;
    default: push_measured(L, r->blob, r->index, code); break;
    }
}

static void push_tensor_field(lua_State *L, const vref *r, int code)
{
    const vtensor *t = &r->blob->tensors[r->index];
    const uint32_t *uses = r->blob->ids + t->uses_off;
    switch (code) {
    case TF_ID: lua_pushinteger(L, r->index); break;
    case TF_NAME: push_name(L, r->blob, t->name); break;
    case TF_BYTES: lua_pushinteger(L, (lua_Integer)t->bytes); break;
    case TF_DTYPE: lua_pushstring(L, ms_dtype_name((ms_dtype)t->dtype)); break;
    case TF_KIND: lua_pushstring(L, ms_tensor_kind_name((ms_tensor_kind)t->kind)); break;
    case TF_PRODUCER: push_opt(L, t->producer); break;
    case TF_PERSISTENT: lua_pushboolean(L, t->persistent); break;
    case TF_SAVED: lua_pushboolean(L, t->saved); break;
    case TF_LAYER: push_opt(L, t->layer); break;
    case TF_MICRO_BATCH: push_opt(L, t->micro_batch); break;
    case TF_USES: push_ids(L, r->blob, t->uses_off, t->n_uses); break;
    case TF_FIRST_USE: push_opt(L, t->n_uses ? (int32_t)uses[0] : MS_NONE); break;
    case TF_LAST_USE: push_opt(L, t->n_uses ? (int32_t)uses[t->n_uses - 1] : MS_NONE); break;
    case TF_LAST_FORWARD_USE: push_opt(L, t->last_forward_use); break;
    default: push_opt(L, t->first_backward_use); break;
    }
}

static void push_segment_field(lua_State *L, const vref *r, int code)
{
    const vsegment *s = &r->blob->segments[r->index];
    switch (code) {
    case SF_ID: lua_pushinteger(L, r->index); break;
    case SF_NAME: push_name(L, r->blob, s->name); break;
    case SF_LAYER: push_opt(L, s->layer); break;
    case SF_MICRO_BATCH: push_opt(L, s->micro_batch); break;
    case SF_PARENT: push_opt(L, s->parent); break;
    case SF_FIRST_OP: lua_pushinteger(L, s->first_op); break;
    case SF_LAST_OP: lua_pushinteger(L, s->last_op); break;
    case SF_INPUTS: push_ids(L, r->blob, s->in_off, s->n_in); break;
    case SF_FIRST_BACKWARD_OP: lua_pushinteger(L, s->first_backward_op); break;
    case SF_SAVED_BYTES: lua_pushinteger(L, (lua_Integer)s->saved_bytes); break;
    default: lua_pushinteger(L, (lua_Integer)s->input_bytes); break;
    }
}

static void push_field(lua_State *L, const vref *r, int code)
{
    if (r->type == ENTRY_OP)
        push_op_field(L, r, code);
    else if (r->type == ENTRY_TENSOR)
        push_tensor_field(L, r, code);
    else
        push_segment_field(L, r, code);
}

/* ---- entry metamethods (upvalue 1: field name -> code) ---- */

static int entry_index(lua_State *L)
{
    const vref *r = lua_touserdata(L, 1);
    lua_pushvalue(L, 2);
    if (r == NULL || lua_rawget(L, lua_upvalueindex(1)) != LUA_TNUMBER)
        return 0; /* not a field: nil, as a table would answer */
    push_field(L, r, (int)lua_tointeger(L, -1));
    return 1;
}

static int entry_newindex(lua_State *L)
{
    return luaL_error(L, "profile tables are read-only (assignment to field '%s')",
                      luaL_tolstring(L, 2, NULL));
}

/* Iterator of pairs(): upvalue 1 the entry, 2 the next code; absent (nil)
 * fields are skipped, as next() would. */
static int entry_next(lua_State *L)
{
    const vref *r = lua_touserdata(L, lua_upvalueindex(1));
    const char *const *fields = fields_of[r->type];
    for (lua_Integer code = lua_tointeger(L, lua_upvalueindex(2)); fields[code] != NULL;
         code++) {
        push_field(L, r, (int)code);
        if (lua_isnil(L, -1)) {
            lua_pop(L, 1);
            continue;
        }
        lua_pushinteger(L, code + 1);
        lua_replace(L, lua_upvalueindex(2));
        lua_pushstring(L, fields[code]);
        lua_insert(L, -2);
        return 2;
    }
    return 0;
}

static int entry_pairs(lua_State *L)
{
    lua_pushvalue(L, 1);
    lua_pushinteger(L, 0);
    lua_pushcclosure(L, entry_next, 2);
    lua_pushnil(L);
    lua_pushnil(L);
    return 3;
}

static int entry_tostring(lua_State *L)
{
    const vref *r = lua_touserdata(L, 1);
    const vblob *b = r->blob;
    uint32_t name = r->type == ENTRY_OP       ? b->ops[r->index].name
                    : r->type == ENTRY_TENSOR ? b->tensors[r->index].name
                                              : b->segments[r->index].name;
    lua_pushfstring(L, "%s %d (%s)", entry_word[r->type], (int)r->index,
                    name != 0 ? b->names + name : "?");
    return 1;
}

/* ---- array metamethods ---- */

/* Entry i (1-based) of the array at idx, made on first access and cached in
 * the array's uservalue 2, so that the same entry is the same object. */
void pol_view_push_entry(lua_State *L, int idx, const vref *r, lua_Integer i)
{
    lua_getiuservalue(L, idx, 2);
    if (lua_rawgeti(L, -1, i) != LUA_TNIL) {
        lua_remove(L, -2);
        return;
    }
    lua_pop(L, 1);
    vref *e = lua_newuserdatauv(L, sizeof *e, 1);
    *e = (vref){.blob = r->blob, .index = (uint32_t)(i - 1), .type = r->type};
    lua_getiuservalue(L, idx, 1);
    lua_setiuservalue(L, -2, 1);
    lua_getiuservalue(L, idx, 3);
    lua_setmetatable(L, -2);
    lua_pushvalue(L, -1);
    lua_rawseti(L, -3, i);
    lua_remove(L, -2);
}

/* A string key is a method: select on every array; backward_starts,
 * forward_starts and layer_range on ops. */
static int array_method(lua_State *L, const vref *r)
{
    const char *k = lua_tostring(L, 2);
    if (r->type == ENTRY_TENSOR && strcmp(k, "select") == 0)
        lua_pushcfunction(L, pol_view_select);
    else if (r->type == ENTRY_SEGMENT && strcmp(k, "select") == 0)
        lua_pushcfunction(L, pol_view_select_segments);
    else if (r->type == ENTRY_OP && strcmp(k, "select") == 0)
        lua_pushcfunction(L, pol_view_select_ops);
    else if (r->type == ENTRY_OP && strcmp(k, "backward_starts") == 0)
        lua_pushcfunction(L, pol_view_backward_starts);
    else if (r->type == ENTRY_OP && strcmp(k, "forward_starts") == 0)
        lua_pushcfunction(L, pol_view_forward_starts);
    else if (r->type == ENTRY_OP && strcmp(k, "layer_range") == 0)
        lua_pushcfunction(L, pol_view_layer_range);
    else
        return 0;
    return 1;
}

static int array_index(lua_State *L)
{
    vref *r = lua_touserdata(L, 1);
    if (r != NULL && lua_type(L, 2) == LUA_TSTRING)
        return array_method(L, r);
    int ok = 0;
    lua_Integer i = lua_tointegerx(L, 2, &ok);
    if (r == NULL || !ok || lua_type(L, 2) != LUA_TNUMBER || i < 1 ||
        i > pol_view_blob(L, 1, r)->n[r->type])
        return 0;
    pol_view_push_entry(L, 1, r, i);
    return 1;
}

static int array_len(lua_State *L)
{
    vref *r = lua_touserdata(L, 1);
    lua_pushinteger(L, pol_view_blob(L, 1, r)->n[r->type]);
    return 1;
}

static int array_next(lua_State *L)
{
    lua_Integer i = luaL_checkinteger(L, 2) + 1;
    lua_settop(L, 1);
    lua_pushinteger(L, i);
    if (array_index(L) == 0)
        return 0;
    lua_pushinteger(L, i);
    lua_insert(L, -2);
    return 2;
}

static int array_pairs(lua_State *L)
{
    lua_pushcfunction(L, array_next);
    lua_pushvalue(L, 1);
    lua_pushinteger(L, 0);
    return 3;
}

static int array_tostring(lua_State *L)
{
    vref *r = lua_touserdata(L, 1);
    lua_pushfstring(L, "profile.%s (%d)", pol_view_array_names[r->type],
                    (int)pol_view_blob(L, 1, r)->n[r->type]);
    return 1;
}

static void set_common(lua_State *L, lua_CFunction newindex)
{
    lua_pushcfunction(L, newindex);
    lua_setfield(L, -2, "__newindex");
    lua_pushliteral(L, "read-only");
    lua_setfield(L, -2, "__metatable");
}

void pol_view_register(lua_State *L)
{
    luaL_newmetatable(L, MT_BLOB);
    lua_pushcfunction(L, box_gc);
    lua_setfield(L, -2, "__gc");
    lua_pushliteral(L, "read-only");
    lua_setfield(L, -2, "__metatable");
    lua_pop(L, 1);
    for (int t = 0; t < ENTRY_COUNT; t++) {
        luaL_newmetatable(L, entry_mt[t]);
        lua_createtable(L, 0, 20);
        for (int code = 0; fields_of[t][code] != NULL; code++) {
            lua_pushinteger(L, code);
            lua_setfield(L, -2, fields_of[t][code]);
        }
        lua_pushcclosure(L, entry_index, 1);
        lua_setfield(L, -2, "__index");
        lua_pushcfunction(L, entry_pairs);
        lua_setfield(L, -2, "__pairs");
        lua_pushcfunction(L, entry_tostring);
        lua_setfield(L, -2, "__tostring");
        set_common(L, entry_newindex);
        lua_pop(L, 1);
    }
    luaL_newmetatable(L, MT_ARRAY);
    lua_pushcfunction(L, array_index);
    lua_setfield(L, -2, "__index");
    lua_pushcfunction(L, array_len);
    lua_setfield(L, -2, "__len");
    lua_pushcfunction(L, array_pairs);
    lua_setfield(L, -2, "__pairs");
    lua_pushcfunction(L, array_tostring);
    lua_setfield(L, -2, "__tostring");
    set_common(L, entry_newindex);
    lua_pop(L, 1);
}
