/* memsim: a Lua policy deciding inside a real PyTorch training step.
 *
 * memsim_torch (bridge_torch/python) records a step as memsim sees one: an
 * op per module call (its module path as the name, forward or backward,
 * measured times and allocator bytes), a tensor per activation saved for
 * backward (bytes, kind, the op that saved it and the ops that read it),
 * and a recompute segment per module wrapped for it.  ms_torch_plan runs
 * the policy's plan(profile, ctx) on that program, the same hook and the
 * same profile fields `memsim run` gives it (measured = true), and each
 * saved tensor's decision is then asked for by id: keep it, offload it to
 * host memory until backward, or recompute it (its segment is recomputed).
 * docs/torch.md is the manual. */
#ifndef MEMSIM_TORCH_H
#define MEMSIM_TORCH_H

#include <stdbool.h>
#include <stdint.h>

#include "memsim/policy.h"
#include "memsim/status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct ms_torch_step ms_torch_step;

typedef enum ms_torch_action {
    MS_TORCH_KEEP = 0,
    MS_TORCH_OFFLOAD,  /* a swap decision: to host after forward, back before backward */
    MS_TORCH_RECOMPUTE /* its segment is recomputed: dropped, re-run in backward */
} ms_torch_action;

/* Load the policy (a path, or a shipped name); lib_dir NULL: the shipped
 * policies_lua. */
MS_API ms_status ms_torch_step_create(const char *policy, const char *lib_dir, ms_torch_step **out,
                                      ms_diag *d);
MS_API ms_status ms_torch_step_free(ms_torch_step *s);
/* Forget the recorded program (a new structure is being recorded). */
MS_API ms_status ms_torch_step_reset(ms_torch_step *s);

/* Record an op: phase MS_PHASE_FORWARD or MS_PHASE_BACKWARD; its id in *op.
 * Its layer is the first all-digit component of its module path
 * (layers.3.mlp.fc1 and transformer.h.3.attn are layer 3), as the
 * simulator's ops; tensors take their producer's. */
MS_API ms_status ms_torch_op_add(ms_torch_step *s, const char *name, ms_phase phase, uint32_t *op);
/* Its measured device-time interval (ns from the step start) and the
 * allocator's bytes after it. */
MS_API ms_status ms_torch_op_measure(ms_torch_step *s, uint32_t op, int64_t start_ns,
                                     int64_t end_ns, uint64_t allocated, uint64_t reserved);
/* Record a tensor saved for backward by op producer (MS_NONE: outside
 * every op); kind MS_TK_WEIGHT for a parameter, else MS_TK_ACTIVATION. */
MS_API ms_status ms_torch_tensor_add(ms_torch_step *s, const char *name, uint64_t bytes,
                                     ms_tensor_kind kind, int32_t producer, uint32_t *tensor);
/* op reads the tensor (ops are recorded in order: a use is after its
 * producer). */
MS_API ms_status ms_torch_tensor_use(ms_torch_step *s, uint32_t tensor, uint32_t op);
/* A recompute segment: the forward ops first_op..last_op of a module
 * wrapped for recompute; tensors produced inside are its saved tensors. */
MS_API ms_status ms_torch_segment_add(ms_torch_step *s, const char *name, uint32_t first_op,
                                      uint32_t last_op, uint32_t *segment);

typedef struct ms_torch_measure {
    int step;
    uint64_t peak_allocated, peak_reserved, capacity;
    int64_t step_time_ns;
} ms_torch_measure;

/* Run plan(profile, ctx) on the recorded program with the measured figures.
 * A policy error is MS_ESCRIPT / MS_ELIMIT with its file:line in d. */
MS_API ms_status ms_torch_plan(ms_torch_step *s, const ms_torch_measure *m, ms_diag *d);
/* The plan's decision for a tensor (keep before any plan). */
MS_API ms_status ms_torch_decision(const ms_torch_step *s, uint32_t tensor, ms_torch_action *out);
/* Whether the last plan called ctx:stable() (no need to plan again);
 * false for NULL. */
MS_API bool ms_torch_plan_stable(const ms_torch_step *s);
/* Whether the plan recomputes a segment. */
MS_API ms_status ms_torch_segment_recomputed(const ms_torch_step *s, uint32_t segment, bool *out);
/* The measured step as CSV (docs/torch.md): a step row with the figures
 * of the last plan, a row per op, per tensor (with its readers and the
 * last plan's decision) and per segment. */
MS_API ms_status ms_torch_profile_write(const ms_torch_step *s, const char *path, ms_diag *d);
/* Read such a CSV back into s (its program is replaced) and the step's
 * figures into m, so that a policy can plan on a step measured elsewhere
 * (memsim profile-torch).  Errors name the file, line and field. */
MS_API ms_status ms_torch_profile_read(ms_torch_step *s, const char *path, ms_torch_measure *m,
                                       ms_diag *d);

typedef struct ms_torch_summary {
    uint32_t ops, tensors, segments, segments_recomputed;
    uint32_t count[3]; /* tensors by ms_torch_action */
    uint64_t bytes[3];
    bool stable;
} ms_torch_summary;
/* What the last plan decides, in totals. */
MS_API ms_status ms_torch_summarize(const ms_torch_step *s, ms_torch_summary *out);

#ifdef __cplusplus
}
#endif
#endif
