/* Recompute and swap settings of a scenario, normalised (private to the
 * scenario loader, scenario_layout.c, scenario_recompute.c,
 * scenario_swap.c, and to lib/policy/declared.c, which prints them and turns
 * them into decisions).
 *
 * Three vocabularies end up here: Megatron's recompute arguments, MindFormers'
 * recompute_config and swap_config (seed 003; MindFormers' LayerSetting), and
 * MindFormers' pipeline layout (pp_interleave_num, offset), which says which
 * layers a per-(interleave, stage) count covers. */
#ifndef MEMSIM_SCENARIO_MEMORY_CONFIG_H
#define MEMSIM_SCENARIO_MEMORY_CONFIG_H

#include <regex.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "memsim/scenario.h"

typedef struct ms_memory_config ms_memory_config;

/* Patterns (select, select_comm, op_swap groups) a scenario may state: the
 * planner keeps one bit per pattern per op. */
#define MC_MAX_PATTERNS 64

/* A `true` inside a list of counts: every layer (MindFormers' MAX_INT32). */
#define MC_ALL INT32_MAX

/* A MindFormers op pattern: a regex per module level, the levels split at
 * the two characters "\." as MindFormers splits them (pattern.split(r'\.')),
 * each level matched whole (re.fullmatch) against one level of the op's
 * module path inside the layer. */
typedef struct mc_regex {
    char *text;          /* as written: "feed_forward\.w1\.activation\.silu" */
    int n;               /* levels */
    regex_t *level;      /* "^(...)$", REG_EXTENDED | REG_NOSUB */
} mc_regex;

/* Which layers a setting covers.  Counts mode (MindFormers without swap):
 * per (chunk c, stage s) the first counts[c * pp + s] layers of that chunk.
 * Index mode (swap_config.swap on): every layer, or the listed ones. */
typedef struct mc_layers {
    int *counts;         /* v x pp, or NULL in index mode */
    bool all;            /* index mode: `true` */
    int *index;          /* index mode: the layer indices, as given */
    int n_index;
} mc_layers;

typedef struct mc_select {
    mc_regex re;
    mc_layers on;
    bool is_default;     /* MindFormers' default pattern, not written by the user */
} mc_select;

/* One {backward_prefetch=, layers=} entry of layer_swap or op_swap. */
typedef struct mc_swap_rule {
    int prefetch;
    mc_layers on;        /* index mode */
} mc_swap_rule;

/* op_swap entries grouped by op_name in order of first appearance, as
 * MindFormers' op_swap_to_dict groups them. */
typedef struct mc_op_swap {
    mc_regex re;
    mc_swap_rule *rules;
    int n_rules;
} mc_op_swap;

typedef enum mc_granularity { MC_GRAN_NONE = 0, MC_GRAN_FULL, MC_GRAN_SELECTIVE } mc_granularity;
typedef enum mc_method { MC_METHOD_NONE = 0, MC_METHOD_UNIFORM, MC_METHOD_BLOCK } mc_method;

struct ms_memory_config {
    /* Layout: chunk c of stage s holds chunk_layers[c * pp + s] layers from
     * chunk_first[...]; chunks in order c = 0 (stages 0..pp-1), c = 1, ...
     * (Megatron's and MindFormers' order). */
    int num_layers, pp, v;
    int *chunk_layers, *chunk_first;
    bool uneven;         /* parallel.offset moves layers between stages */
    char file[4096];     /* for messages */

    /* MindFormers recompute_config (or the defaults, when only swap is on). */
    bool mf;
    bool index_mode;     /* swap_config.swap: layer index lists */
    mc_layers full;      /* recompute */
    mc_select *select;
    int n_select;
    mc_select *comm;     /* select_comm_recompute */
    int n_comm;
    bool mp_comm_recompute, parallel_optimizer_comm_recompute, recompute_slice_activation;

    /* swap_config */
    bool swap;
    int default_prefetch;
    bool swap_default;   /* neither layer_swap nor op_swap: flash attention everywhere */
    mc_swap_rule *layer_swap;
    int n_layer_swap;
    mc_op_swap *op_swap;
    int n_op_swap;

    /* Megatron */
    mc_granularity granularity;
    mc_method method;
    int recompute_num_layers;
};

/* The chunk (v index) and stage of a layer; its index inside the chunk. */
void scn_layer_place(const ms_memory_config *mc, int layer, int *chunk, int *stage, int *local);
/* Does `on` cover layer? */
bool scn_layers_has(const ms_memory_config *mc, const mc_layers *on, int layer);
/* Does pattern re match the op path `rest` ("feed_forward.w1.activation.silu",
 * the op name without "layers.N.")?  *prefix_len: the length of the part of
 * rest its levels matched ("feed_forward" for the pattern "feed_forward"). */
bool scn_regex_match(const mc_regex *re, const char *rest, size_t *prefix_len);

/* Compile text as a pattern (scenario_pattern.c); errors name field. */
ms_status scn_regex_compile(mc_regex *re, const char *text, const char *field, const char *file,
                            ms_diag *d);
void scn_regex_release(mc_regex *re);

void scn_memory_config_free(ms_memory_config *mc);

/* ---- queries (scenario_settings.c) ---- */

/* True when the scenario states any recompute or swap setting. */
bool scn_settings_active(const ms_scenario *sc);

/* What the settings ask for on one layer (before matching op names). */
typedef struct scn_layer_memory {
    bool full_recompute;       /* the whole layer: Megatron full, MindFormers recompute */
    bool attention_recompute;  /* Megatron selective: the attention core */
    uint32_t n_select;         /* MindFormers select_recompute patterns on (0 if full) */
    uint32_t n_comm;           /* select_comm_recompute patterns on (0 if full) */
    bool layer_swap;           /* swap_config.layer_swap covers the layer */
    int32_t layer_swap_prefetch;
    uint32_t n_op_swap;        /* op_swap patterns (or the default) on */
    int32_t chunk, stage;      /* where the layout puts it */
} scn_layer_memory;
ms_status scn_layer_settings(const ms_scenario *sc, int layer, scn_layer_memory *out,
                             ms_diag *d);
/* The whole layer is recomputed (Megatron full, MindFormers recompute). */
bool scn_layer_full(const ms_memory_config *mc, int layer);
/* MindFormers: the first rule of a list that covers the layer, or NULL. */
const mc_swap_rule *scn_rule_for(const ms_memory_config *mc, const mc_swap_rule *rules, int n,
                                 int layer);
/* The Megatron line and MindFormers' "Formative ..." lines of the
 * normalised settings; nothing when none is active. */
void scn_settings_print(const ms_scenario *sc, FILE *out);

#endif
