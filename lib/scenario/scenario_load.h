/* The scenario loader's private parts (lib/scenario/ only).
 *
 * scenario.c runs the file in a sandbox and reads it; scenario_override.c
 * applies "model.seq_length=8192" overrides to the Lua table first;
 * scenario_validate.c fills in the defaults and checks every constraint;
 * device_file.c finds and reads device files. */
#ifndef MEMSIM_SCENARIO_LOAD_H
#define MEMSIM_SCENARIO_LOAD_H

#include <stddef.h>

#include <lua.h>

#include "memsim/scenario.h"
#include "scenario_table.h"

/* Fields of a scenario file, in the order of sc_fields (sections contiguous). */
enum sc_field {
    SC_NAME = 0, SC_DEVICE, SC_DEVMEM, SC_POLICY, SC_STEPS, SC_SEED,
    SC_ARCH, SC_LAYERS, SC_HIDDEN, SC_FFN, SC_HEADS, SC_GROUPS, SC_SEQ, SC_VOCAB, SC_NORM,
    SC_SWIGLU, SC_UNTIE, SC_FLASH, SC_HDROP, SC_ADROP, SC_DTYPE, SC_FP8, SC_BIAS, SC_POS,
    SC_EXPERTS, SC_TOPK, SC_MOE_FFN, SC_MOE_CAP, SC_MOE_CAP_ALIAS,
    SC_VOCAB_RAW, SC_VOCAB_DIV, SC_MAXPOS, SC_UNTIE_M, SC_BF16, SC_FP16, SC_FP8_FORMAT,
    SC_NOBIAS, SC_GQA, SC_KV_CHANNELS,
    SC_M_GRAN, SC_M_METHOD, SC_M_NLAYERS,
    SC_WORLD, SC_TP, SC_PP, SC_VPP, SC_CP, SC_SP, SC_DISTOPT, SC_OVERLAP_GRAD, SC_P2P_SYNC,
    SC_P2P_SPLIT, SC_GRAD_FP32, SC_ACC_FP32, SC_GRAD_BF16, SC_PARAM_GATHER, SC_TP_OVERLAP,
    SC_MBS, SC_GBS,
    SC_EP,
    SC_INTERLEAVE, SC_OFFSET,
    SC_ACONF, SC_AFLAVOUR, SC_AVOIDRS, SC_DETAIL, SC_MAXBYTES,
    SC_GRAN, SC_METHOD, SC_NLAYERS,
    SC_RC_RECOMPUTE, SC_RC_SELECT, SC_RC_COMM, SC_RC_POCOMM, SC_RC_MPCOMM, SC_RC_SLICE,
    SC_SW_SWAP, SC_SW_PREFETCH, SC_SW_LAYER, SC_SW_OP,
    SC_COUNT
};

/* The scenario schema (a constant table). */
const st_schema *scn_schema(void);

/* Apply overrides to the scenario table at idx (inside a protected call). */
ms_status scn_apply_overrides(lua_State *L, int idx, const char *const *overrides, size_t n,
                              const st_schema *schema, const char *file, ms_diag *d);

/* Megatron-LM's argument names for settings a scenario also has under
 * memsim's own (scenario_megatron.c): resolved into the fields they mean,
 * before validation. */
ms_status scn_megatron_resolve(st_value *vals, const char *file, ms_diag *d);

/* A file that is not a scenario, imported (import/import.c) with the overrides as
 * --set; *im stays NULL for a scenario file. */
ms_status scn_import_text(const char *path, const char *const *sets, size_t n_sets,
                          ms_import **im, ms_diag *d);
/* Add to an error about an imported field the argument it came from. */
void scn_import_explain(const ms_import *im, ms_diag *d);

/* Defaults and constraints: vals -> sc (all but the device). */
ms_status scn_validate(const st_value *vals, const char *file, ms_scenario *sc, ms_diag *d);

/* Pipeline layout (scenario_layout.c): chunks per stage from
 * num_layers_per_virtual_pipeline_stage or pp_interleave_num, layers per
 * chunk from parallel.offset; allocates sc->memory_config. */
ms_status scn_layout(const st_value *vals, const char *file, ms_scenario *sc, ms_diag *d);

/* recompute, recompute_config (scenario_recompute.c) and swap_config
 * (scenario_swap.c) into sc->memory_config, after scn_layout. */
ms_status scn_recompute(const st_value *vals, const char *file, ms_scenario *sc, ms_diag *d);
ms_status scn_swap(const st_value *vals, const char *file, ms_scenario *sc, ms_diag *d);

/* Validation helpers shared by the files above (scenario_validate.c). */
const char *scn_path_of(int id, char *buf, size_t size);

/* Find the device file of `device` for the scenario at scenario_path. */
ms_status scn_device_path(const char *scenario_path, const char *device, char *out, size_t size,
                          ms_diag *d);

/* The file's base name without ".lua" ("scenarios/llama2-7b.lua" ->
 * "llama2-7b"), truncated to size. */
void scn_base_name(const char *path, char *out, size_t size);

#endif
