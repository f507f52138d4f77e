/* memsim: a scenario's recompute and swap settings.
 *
 * Scenarios state recompute and activation swap in the frameworks' words
 * (docs/scenario-format.md): Megatron's recompute_granularity /
 * recompute_method / recompute_num_layers, MindFormers' recompute_config
 * (recompute, select_recompute, select_comm_recompute in all their forms)
 * and swap_config (swap, default_prefetch, layer_swap, op_swap).  The loader
 * normalises them; this module prints them as MindFormers logs them and turns
 * them into the decisions (ms_plan) the executor applies, merged by the
 * caller with the memory policy's own. */
#ifndef MEMSIM_MEMORY_CONFIG_H
#define MEMSIM_MEMORY_CONFIG_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "memsim/policy.h"
#include "memsim/scenario.h"
#include "memsim/status.h"
#include "memsim/workload.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct ms_memory_config ms_memory_config;

/* What the settings ask for on one layer (before matching op names). */
typedef struct ms_layer_memory {
    bool full_recompute;       /* the whole layer: Megatron full, MindFormers recompute */
    bool attention_recompute;  /* Megatron selective: the attention core */
    uint32_t n_select;         /* MindFormers select_recompute patterns on (0 if full) */
    uint32_t n_comm;           /* select_comm_recompute patterns on (0 if full) */
    bool layer_swap;           /* swap_config.layer_swap covers the layer */
    int32_t layer_swap_prefetch;
    uint32_t n_op_swap;        /* op_swap patterns (or the default) on */
    int32_t chunk, stage;      /* where the layout puts it */
} ms_layer_memory;

/* True when the scenario states any recompute or swap setting. */
bool ms_memory_config_active(const ms_scenario *sc);

ms_status ms_memory_config_layer(const ms_scenario *sc, int layer, ms_layer_memory *out,
                                 ms_diag *d);

/* Every pattern (select_recompute, select_comm_recompute, op_swap op_name)
 * must match an op of the model's layers: else MS_EINVAL "unknown regex
 * target" naming the file, the field and the pattern.  Builds the op names
 * of one micro-batch of the whole model (ms_program_build). */
ms_status ms_memory_config_check(const ms_scenario *sc, ms_diag *d);

/* Print the settings as MindFormers' LayerSetting logs them ("Formative
 * layer_recompute: ...", then per layer "Set full recompute at layer N",
 * "Set select recompute at layer N: ...", "Set layer swap at layer N and
 * value is: P", "Set op_swap at layer N: ...").  Runs ms_memory_config_check
 * first.  Prints nothing when no setting is active. */
ms_status ms_memory_config_print(const ms_scenario *sc, FILE *out, ms_diag *d);

/* Append to plan the decisions the settings imply for this stage's program:
 * MS_DEC_RECOMPUTE of segments (the layer for full recompute; for select
 * patterns every segment all of whose ops they match), then MS_DEC_SWAP of
 * the saved activations of swapped layers and ops (out_after, in_before =
 * MS_NONE, prefetch = backward_prefetch), except where recompute wins: a
 * tensor produced or read in forward by a recomputed segment is not
 * swapped.  Does not clear plan. */
ms_status ms_memory_config_plan(const ms_scenario *sc, const ms_program_view *program,
                                ms_plan *plan, ms_diag *d);

#ifdef __cplusplus
}
#endif
#endif
