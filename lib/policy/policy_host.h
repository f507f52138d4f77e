/* The Lua policy host's private parts (lib/policy/ only).
 *
 * policy.c loads a policy and calls its hooks; policy_profile.c builds the
 * read-only Lua view of a profile; policy_ctx.c is the `ctx` object hooks
 * record decisions through.  Every function here that touches the Lua API
 * may raise a Lua error and so runs only inside a protected call. */
#ifndef MEMSIM_POLICY_HOST_H
#define MEMSIM_POLICY_HOST_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include <lua.h>

#include "lib/base/sandbox.h"
#include "memsim/policy.h"

enum { MS_HOOK_PLAN = 0, MS_HOOK_POOL, MS_HOOK_ON_OOM, MS_HOOK_COUNT };

/* The hook call in progress (plan or on_oom): what its ctx writes to. */
typedef struct ms_policy_ctx {
    const char *hook;            /* "plan" or "on_oom", for messages */
    const ms_program_view *prog;
    const ms_program_facts *dv;
    ms_plan *plan;
    uint32_t max_decisions;      /* a runaway loop of ctx:swap stops here */
    ms_plan scratch;             /* candidate of ctx:simulate, freed by the host */
    ms_plan sim_plan;            /* the candidate with the declared decisions after it */
    const ms_plan *declared;     /* the scenario's decisions for this program, or NULL */
    ms_simulate_fn sim;
    void *sim_user;
    size_t logged;               /* bytes ctx:log wrote in this call */
    bool log_capped;
    bool simulating;             /* the simulator is reading plan: no changes */
    bool replace_declared;       /* plan(): the scenario's declared decisions are not added */
    /* Where this call's ctx:swap calls were made, to name both calls of a
     * tensor swapped twice: swap_call[t] is 1 + the index into swap_where
     * of its first call, 0 if none.  Owned here, freed by the host. */
    uint32_t *swap_call;
    char (*swap_where)[96];
    uint32_t n_swap_where, cap_swap_where;
} ms_policy_ctx;

typedef struct vbox vbox;

/* A program the policy met, and its Lua view: one per program, kept while
 * the program is (one stage's after another's no longer rebuilds the view),
 * so each program's view is made once.  Its facts are the builder's, or
 * derived here (own_facts) for a view made by hand.  A program retires when
 * a later one reuses its arrays (a step recorded again into them).  One
 * whose owner refilled its arrays (revision != 0) is then forgotten: a job
 * under the PyTorch bridge records a new program every step, and a list of
 * every one met would grow with the steps. */
typedef struct pol_program {
    ms_program_view view;
    uint32_t id;  /* profile.program_id: never given to another program */
    const ms_program_facts *dv;
    ms_program_facts own_facts;
    int view_ref; /* registry ref of its Lua view, or LUA_NOREF */
    vbox *box;    /* that view's packed copy */
    bool retired;
} pol_program;

struct ms_policy {
    ms_sandbox *sb;
    lua_State *L;
    char path[4096];
    char name[128];
    int hook_ref[MS_HOOK_COUNT];  /* registry refs, LUA_NOREF when absent */
    char hook_where[MS_HOOK_COUNT][320]; /* "file:line" where each hook is defined */
    int format_ref;               /* string.format as it was before the policy ran */
    ms_pool_decl *pools;
    uint32_t n_pools;
    FILE *log;
    int depth;                    /* protected calls in progress (nesting via simulate) */
    ms_policy_ctx *ctx;           /* the live ctx, NULL between hook calls */
    uint64_t ctx_gen;             /* a ctx userdata is live only if its gen matches */
    /* The programs met, in order, less those forgotten; cur is the one of
     * the call in progress.  profile.program_id counts the programs met
     * (from 1): the same number each time the same program comes back (each
     * stage's, in turn), a new one for a new program. */
    pol_program **progs;
    uint32_t n_progs, cap_progs;
    pol_program *cur;
    uint32_t programs_met;
    ms_policy_allocator allocator; /* its `allocator` table */
    bool oom_rescue;               /* its `oom_rescue` flag */
};

/* --- policy_options.c --- */

/* Read the policy table's `allocator` and `oom_rescue` fields (module at
 * index module); errors name the field. */
void pol_read_options(lua_State *L, ms_policy *p, int module);

/* --- policy_profile.c --- */

/* Push the sealed (read-only) profile table; view_idx holds the program
 * view of prof. */
void pol_push_profile(lua_State *L, int view_idx, const ms_profile *prof);
/* Push the sealed table of one tensor, as pool() receives it. */
void pol_push_tensor(lua_State *L, const ms_tensor *t);
/* The request of on_oom as a plain table. */
void pol_push_request(lua_State *L, const ms_oom_request *req);

/* --- policy_view.c --- */

/* Create the metatables of the program view (once per state, at load). */
void pol_view_register(lua_State *L);
/* Push the program view {ops=, tensors=, segments=, blob=} of prog: a packed
 * copy, made when an array is first read, so it never points into C memory;
 * returns the copy's owner.  prog must stay until pol_view_retire. */
vbox *pol_push_program(lua_State *L, const pol_program *prog);
/* prog may go: a view not yet read can no longer be. */
void pol_view_retire(vbox *x);
/* Copy prof's op figures (or their absence) into the view owned by x. */
void pol_update_measured(lua_State *L, vbox *x, const ms_profile *prof);

/* --- policy_ctx.c --- */

/* Create the ctx metatable (once per state, at load). */
void pol_ctx_register(lua_State *L);
/* Push a ctx userdata bound to p's live ctx (p->ctx, generation p->ctx_gen). */
void pol_ctx_push(lua_State *L, ms_policy *p);
/* Largest plan a hook may build for a program (see ms_policy_ctx). */
uint32_t pol_ctx_max_decisions(const ms_program_view *pv);

#endif
