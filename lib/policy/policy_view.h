/* The packed program behind profile.ops, .tensors and .segments
 * (policy_view.c), shared with the walks that run in C over it
 * (policy_view_query.c).  Internal to lib/policy. */
#ifndef MEMSIM_POLICY_VIEW_H
#define MEMSIM_POLICY_VIEW_H

#include <stdbool.h>
#include <stdint.h>

#include <lua.h>

#include "memsim/policy.h"
#include "memsim/workload.h"

#define MT_ARRAY "memsim.policy.array"

enum entry_type { ENTRY_OP = 0, ENTRY_TENSOR, ENTRY_SEGMENT, ENTRY_COUNT };

/* The profile's field of each array: "ops", "tensors", "segments". */
extern const char *const pol_view_array_names[ENTRY_COUNT];

/* A name field is an offset into the blob's names; 0 is no name (nil),
 * since offset 0 holds a lone NUL that no entry points to. */
typedef struct vop {
    double model_flops, flops, hbm_bytes;
    uint32_t name, kernel;
    int32_t layer, micro_batch, segment;
    uint32_t in_off, n_in, out_off, n_out;
    uint8_t phase, stream, cls;
} vop;

typedef struct vtensor {
    uint64_t bytes;
    uint32_t name;
    int32_t producer, layer, micro_batch, last_forward_use, first_backward_use;
    uint32_t uses_off, n_uses;
    uint8_t kind, dtype, persistent, saved;
} vtensor;

typedef struct vsegment {
    uint64_t saved_bytes, input_bytes;
    uint32_t name;
    int32_t layer, micro_batch, parent;
    uint32_t first_op, last_op, first_backward_op, in_off, n_in;
} vsegment;

/* The block of one kind of entry: this header, then the array it points
 * into (ops, tensors or segments: the others are NULL), its id lists and
 * its names, in one allocation. */
typedef struct vblob {
    uint32_t n[ENTRY_COUNT];
    bool measured;
    vop *ops;
    vtensor *tensors;
    vsegment *segments;
    ms_op_profile *prof; /* the last measured step, when measured */
    uint32_t *ids;       /* the kind's id lists, back to back */
    char *names;         /* the kind's names, NUL-terminated, back to back */
} vblob;

/* An entry or an array: uservalue 1 is the blob's userdata (kept alive by
 * it); an array's uservalue 2 caches its entry objects and 3 is their
 * metatable (at hand, where luaL_setmetatable would look its name up in the
 * registry for every entry made). */
typedef struct vref {
    const vblob *blob;
    uint32_t index;
    uint8_t type;
} vref;

/* The block behind the array r at stack index idx, made on its first read
 * (an error if its program was retired before). */
const vblob *pol_view_blob(lua_State *L, int idx, vref *r);

/* Entry i (1-based) of the array at stack index idx, the same object on
 * every read. */
void pol_view_push_entry(lua_State *L, int idx, const vref *r, lua_Integer i);

/* profile.tensors:select(filter), .segments:select, .ops:select, and the
 * ops' backward_starts(), forward_starts() and layer_range(). */
int pol_view_select(lua_State *L);
int pol_view_select_segments(lua_State *L);
int pol_view_select_ops(lua_State *L);
int pol_view_forward_starts(lua_State *L);
int pol_view_layer_range(lua_State *L);
int pol_view_backward_starts(lua_State *L);

#endif
