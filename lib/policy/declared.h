/* The decisions a scenario declares (private to lib/policy/ and lib/run/):
 * its recompute and swap settings as a built-in policy layer beneath the
 * Lua policy. */
#ifndef MEMSIM_POLICY_DECLARED_H
#define MEMSIM_POLICY_DECLARED_H

#include <stdio.h>

#include "memsim/policy.h"
#include "memsim/scenario.h"
#include "memsim/workload.h"

/* Append to plan the decisions the settings imply for this stage's program:
 * MS_DEC_RECOMPUTE of segments (the layer for full recompute; for select
 * patterns every segment all of whose ops they match), then MS_DEC_SWAP of
 * the saved activations of swapped layers and ops (out_after, in_before =
 * MS_NONE, prefetch = backward_prefetch), except where recompute wins: a
 * tensor produced or read in forward by a recomputed segment is not
 * swapped.  A pattern on for a layer of the program that matches none of
 * its ops is MS_EINVAL "unknown regex target" naming the file, the field
 * and the pattern.  Does not clear plan. */
ms_status pol_declared_plan(const ms_scenario *sc, const ms_program_view *program, ms_plan *plan,
                            ms_diag *d);

/* Print the settings as MindFormers' LayerSetting logs them ("Formative
 * layer_recompute: ...", then per layer "Set full recompute at layer N",
 * "Set select recompute at layer N: ...", "Set layer swap at layer N and
 * value is: P", "Set op_swap at layer N: ..."), the op paths taken from the
 * program of the stage that holds each layer (views[stage], all stages).
 * Prints nothing when no setting is active. */
ms_status pol_declared_print(const ms_scenario *sc, const ms_program_view *views, int n_views,
                             FILE *out, ms_diag *d);

#endif
