/* The executor's per-step schedule of memory actions (private to lib/exec/).
 *
 * A plan is turned into a list of actions keyed by the op they happen
 * before or after: frees at last use, swap-out after `out_after`, swap-in
 * `prefetch` ops before its consumer, recompute before the first backward use
 * of a dropped segment.  Sorting the list once per step keeps the issue loop a
 * simple merge and the order of simultaneous actions deterministic. */
#ifndef MEMSIM_EXEC_ACTIONS_H
#define MEMSIM_EXEC_ACTIONS_H

#include <stdint.h>

#include "memsim/policy.h"
#include "memsim/status.h"
#include "memsim/workload.h"

typedef enum ms_act_when { MS_ACT_BEFORE = 0, MS_ACT_AFTER = 1 } ms_act_when;

/* Order matters within one (op, when): recompute re-creates tensors before a
 * swap-in could be confused with them, and frees run after swap-outs so a
 * swapped tensor is never freed twice. */
typedef enum ms_act_kind {
    MS_ACT_RECOMPUTE = 0,
    MS_ACT_SWAP_IN,
    MS_ACT_SWAP_OUT,
    MS_ACT_RELEASE, /* MindSpore: give back a swapped-out tensor's block */
    MS_ACT_FREE,
} ms_act_kind;

typedef struct ms_action {
    uint32_t op;
    uint8_t when;
    uint8_t kind;
    uint32_t arg; /* tensor id, or segment id for recompute */
} ms_action;

/* Per-tensor decisions resolved from a plan. */
typedef struct ms_tensor_plan {
    uint8_t swap;        /* swapped out and back this step */
    uint8_t dropped;     /* freed after forward, re-created by recompute */
    uint8_t kept;        /* pinned by ctx:keep */
    uint8_t swap_ignored; /* a swap decision that recompute or keep overrode */
    int32_t out_after;
    int32_t in_at;       /* op before which the swap-in is issued */
    int32_t in_before;
    int32_t segment;     /* recomputed segment that re-creates it */
    int32_t release_at;  /* op after which its swapped-out block is released, or MS_NONE */
} ms_tensor_plan;

typedef struct ms_schedule {
    const ms_program_facts *facts; /* the program's (last forward use, ...) */
    ms_action *acts;
    uint32_t n, cap;
    ms_tensor_plan *tensors; /* n_tensors */
    uint8_t *seg_recompute;  /* n_segments: 1 if recomputed */
    int32_t *seg_at;         /* n_segments: op the replay is issued before */
    uint32_t ignored_swaps;  /* swaps overridden by recompute or keep */
} ms_schedule;

/* release_after_copy: swapped-out blocks are released by an MS_ACT_RELEASE
 * `prefetch` ops after the swap-out (MindSpore), not by the swap-out. */
ms_status exec_schedule_build(const ms_program_view *p, const ms_program_facts *facts,
                              const ms_plan *plan, bool release_after_copy, ms_schedule *s,
                              ms_diag *d);
ms_status exec_schedule_free(ms_schedule *s);

#endif
