/* memsim: memory policies written in Lua.
 *
 * A policy is a Lua module returning a table of hooks (docs/policy-api.md):
 *   plan(profile, ctx)      before every step; decisions go through ctx
 *   pool(tensor)            once per tensor: the allocator pool to use
 *   on_oom(request, ctx)    when the allocator fails; may add decisions
 * Decisions are data (an ms_plan) that the executor applies.  Policies are
 * untrusted: no os/io/debug, require only of modules in the policy library
 * directory, no bytecode, an instruction budget and a memory cap; an error
 * stops the run with the script's file:line. */
#ifndef MEMSIM_POLICY_H
#define MEMSIM_POLICY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "memsim/status.h"
#include "memsim/workload.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum ms_decision_kind {
    MS_DEC_SWAP = 0,  /* tensor: D2H after out_after, H2D back before in_before */
    MS_DEC_RECOMPUTE, /* segment: drop after forward, re-issue before backward */
    MS_DEC_KEEP       /* tensor: pin on device (overrides earlier decisions) */
} ms_decision_kind;

typedef struct ms_decision {
    ms_decision_kind kind;
    uint32_t tensor;     /* SWAP, KEEP */
    uint32_t segment;    /* RECOMPUTE */
    int32_t out_after;   /* op id after which the copy out starts; MS_NONE:
                            after the tensor's last forward use */
    int32_t in_before;   /* op id the tensor must be back for; MS_NONE: its
                            first backward use */
    int32_t prefetch;    /* start the copy in this many ops before in_before
                            (>= 0; default 1) */
} ms_decision;

typedef struct ms_plan {
    ms_decision *items;
    uint32_t n;
    uint32_t cap;
    bool stable;         /* the policy called ctx:stable() */
} ms_plan;

MS_API ms_status ms_plan_init(ms_plan *p);
MS_API ms_status ms_plan_add(ms_plan *p, const ms_decision *dec);
MS_API ms_status ms_plan_clear(ms_plan *p); /* keeps capacity; resets stable */
MS_API ms_status ms_plan_copy(ms_plan *dst, const ms_plan *src);
/* The same decisions in the same order (NULL is the empty plan; whether
 * the policy called ctx:stable() is not compared). */
MS_API bool ms_plan_same_decisions(const ms_plan *a, const ms_plan *b);
MS_API ms_status ms_plan_free(ms_plan *p);

/* What one op did in the last step (modeled in the mock, measured on hardware). */
typedef struct ms_op_profile {
    int64_t start_ns;    /* device start, relative to the step start */
    int64_t end_ns;
    uint64_t allocated;  /* allocator state right after its outputs were allocated */
    uint64_t reserved;
    uint64_t active;
} ms_op_profile;

/* What the in-step OOM rescue did during a step (ms_policy_rescues_oom). */
typedef struct ms_rescue_stats {
    uint32_t count; /* tensors swapped out to let an allocation through */
    uint64_t bytes;
    uint64_t peak_request; /* the largest allocation that needed it */
} ms_rescue_stats;

typedef struct ms_profile {
    int step;                       /* index of the step the profile is of; -1: none run yet */
    bool measured;                  /* false before the first step: structure only */
    ms_program_view program;
    const ms_op_profile *ops;       /* n == program.n_ops, NULL when !measured */
    uint64_t peak_allocated;
    uint64_t peak_reserved;
    uint64_t capacity;              /* device memory */
    int64_t step_time_ns;
    bool oom;
    int32_t oom_op;                 /* op whose allocation failed, or MS_NONE */
    const ms_device_spec *device;
    const ms_plan *current;         /* decisions that were in force */
    /* The decisions the scenario declares for this program (its recompute
     * and swap settings; NULL or empty: none).  plan() appends them after
     * the policy's own unless it calls ctx:replace_declared(). */
    const ms_plan *declared;
    uint64_t peak_active;    /* bytes, last step (measured only) */
    ms_rescue_stats rescued; /* the last step's in-step OOM rescues */
    const char *allocator;   /* flavour name of the stage's allocator, or NULL */
} ms_profile;

typedef struct ms_oom_request {
    uint64_t bytes;
    uint32_t tensor;
    uint32_t op;
    uint64_t allocated;
    uint64_t reserved;
    uint64_t capacity;
} ms_oom_request;

#define MS_SIM_MAX_STEPS 8
/* One simulated step of a candidate. */
typedef struct ms_sim_step {
    uint64_t peak_allocated;
    uint64_t peak_reserved;
    int64_t step_time_ns;
    bool oom;
} ms_sim_step;
/* Result of evaluating a candidate plan on the simulator (ctx:simulate):
 * over `steps` consecutive steps from a fresh device (each step after the
 * first starts from the cache the one before left, as a real run's do), the
 * highest peaks, whether any step ran out of memory, and the last step's
 * time; and each step run (up to the first that ran out of memory) on its
 * own: the first of n steps is the one-step simulation of the plan. */
typedef struct ms_sim_result {
    uint64_t peak_allocated;
    uint64_t peak_reserved;
    int64_t step_time_ns;
    bool oom;
    int n_steps;
    ms_sim_step step[MS_SIM_MAX_STEPS];
} ms_sim_result;
/* The most device memory a simulation may be given (memsim/device.h). */
#define MS_SIM_MAX_CAPACITY MS_MAX_DEVICE_MEMORY
/* How a candidate is simulated: steps from 1 to MS_SIM_MAX_STEPS; capacity,
 * the device memory in bytes (up to MS_SIM_MAX_CAPACITY), or 0 for the
 * scenario's own.  A larger device is a what-if: none simulated where
 * nothing runs out of memory times the step that no plan of swaps and
 * recomputes can beat, which lets a search stop once a plan reaches it. */
typedef struct ms_sim_options {
    int steps;
    uint64_t capacity;
} ms_sim_options;
typedef ms_status (*ms_simulate_fn)(void *user, const ms_plan *plan, const ms_sim_options *opt,
                                    ms_sim_result *out, ms_diag *d);

typedef struct ms_policy_limits {
    uint64_t max_instructions; /* per hook call; 0: default (200 million) */
    size_t max_memory;         /* bytes of Lua heap; 0: default (256 MiB) */
} ms_policy_limits;

typedef struct ms_policy ms_policy;

/* Load the policy at path; lib_dir is the only directory require() may read
 * (the shipped policies_lua/).  A name without '/' or ".lua" is looked up as
 * lib_dir/NAME.lua. */
MS_API ms_status ms_policy_load(const char *path, const char *lib_dir, const ms_policy_limits *lim,
                         ms_policy **out, ms_diag *d);
MS_API ms_status ms_policy_free(ms_policy *p);
/* The policy's name: its table's `name` field, else the file's base name. */
MS_API const char *ms_policy_name(const ms_policy *p); /* NULL for NULL */

/* Pools the policy declares in its `pools` table, e.g.
 *   pools = { long = { exact_segments = true, lendable = true } }
 * The executor creates them in the allocator before the first step. */
typedef struct ms_pool_decl {
    char name[64];
    bool exact_segments;
    bool lendable;
} ms_pool_decl;
MS_API const ms_pool_decl *ms_policy_pools(const ms_policy *p, uint32_t *n);

/* The allocator a policy brings (its `allocator` table), e.g.
 *   allocator = { flavour = "mindspeed", memory_fraction = 0.94 }
 * MindSpeed's memory-fragmentation feature is an allocator of its own
 * (MEMORY_FRAGMENTATION=1 loads it in place of torch_npu's), and the seed
 * advises torch_npu.npu.set_per_process_memory_fraction next to it. */
typedef struct ms_policy_allocator {
    char flavour[16];       /* "" : the scenario's */
    double memory_fraction; /* 0: the scenario's */
} ms_policy_allocator;
MS_API const ms_policy_allocator *ms_policy_allocator_get(const ms_policy *p);
/* The policy's `oom_rescue = true`: an allocation that fails inside a step
 * is rescued by swapping idle tensors out synchronously and retrying, as
 * SmartSwap's and adaptive memory's allocator hooks do, instead of losing
 * the step. */
MS_API bool ms_policy_rescues_oom(const ms_policy *p);

/* Call plan(profile, ctx) if the policy has it; decisions are appended to
 * plan (cleared first), then prof->declared unless the policy called
 * ctx:replace_declared().  sim may be NULL (ctx:simulate then errors). */
MS_API ms_status ms_policy_plan(ms_policy *p, const ms_profile *prof, ms_simulate_fn sim, void *sim_user,
                         ms_plan *plan, ms_diag *d);
/* Call pool(tensor): the pool's name in buf ("default" without the hook). */
MS_API ms_status ms_policy_pool(ms_policy *p, const ms_tensor *t, char *buf, size_t n, ms_diag *d);
/* Call on_oom(request, ctx): *handled is true if it added decisions. */
MS_API ms_status ms_policy_on_oom(ms_policy *p, const ms_oom_request *req, const ms_profile *prof,
                           ms_plan *plan, bool *handled, ms_diag *d);
/* Where ctx:log writes (stderr by default; NULL silences it). */
MS_API ms_status ms_policy_set_log(ms_policy *p, FILE *stream);

#ifdef __cplusplus
}
#endif
#endif
