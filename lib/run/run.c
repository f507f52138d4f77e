/* A whole run: scenario + policy -> steps on simulated devices -> summaries
 * and a run record.
 *
 * Every pipeline stage is its own device with its own allocator and executor;
 * the stages open together as one device group (backend.h), so on the mock
 * they share one engine and p2p transfers and the pipeline bubble come out of
 * the simulation, not a formula.  Devices are reached through backend.h only.  Before every step the policy's
 * plan() sees each stage's last profile (SmartSwap's outer loop in general
 * form); an OOM ends the run unless the decisions change. */
#include "memsim/run.h"

#include "memsim/exec.h"

#include <gsl/gsl_statistics_double.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/policy/declared.h"
#include "run_fit.h"
#include "run_internal.h"

/* ---- devices ------------------------------------------------------------ */

static int pipeline_stages(const ms_scenario *sc)
{
    int pp = sc->parallel.pipeline_model_parallel_size;
    return pp > 0 ? pp : 1;
}

/* The scenario's allocator, unless the policy brings its own (MindSpeed's
 * memory-fragmentation allocator replaces torch_npu's; the memory fraction
 * is set on top of the scenario's allocator string). */
/* The allocator flavour a run uses: the policy's choice (MindSpeed's
 * fragmentation allocator, for one) over the scenario's. */
static const char *allocator_name(const ms_scenario *sc, const ms_policy *policy)
{
    const ms_policy_allocator *pa = ms_policy_allocator_get(policy);
    return pa && pa->flavour[0] ? pa->flavour : sc->allocator_flavour;
}

static ms_status alloc_config(const ms_scenario *sc, const ms_policy *policy, ms_alloc_config *acfg,
                              ms_diag *d)
{
    const ms_policy_allocator *pa = ms_policy_allocator_get(policy);
    const char *name = allocator_name(sc, policy);
    ms_alloc_flavour flavour = MS_ALLOC_CUDA;
    if (ms_alloc_flavour_parse(name, &flavour) != MS_OK)
        return ms_diag_set(d, MS_EINVAL, "%s: unknown allocator flavour '%s'", sc->path, name);
    ms_status st = ms_alloc_config_default(flavour, acfg);
    if (st == MS_OK && sc->allocator_conf[0] != '\0') {
        st = ms_alloc_config_parse(sc->allocator_conf, acfg, d);
        if (st != MS_OK)
            ms_diag_prefix(d, "%s: allocator.conf: ", sc->path);
    }
    if (st == MS_OK && pa && pa->memory_fraction > 0.0)
        acfg->memory_fraction = pa->memory_fraction;
    return st;
}

/* The executor and allocator of a stage; its device belongs to the group. */
static void stage_close_device(ms_stage *s)
{
    if (s->exec)
        ms_exec_destroy(s->exec);
    if (s->alloc)
        ms_alloc_destroy(s->alloc);
    s->exec = NULL;
    s->alloc = NULL;
    s->backend = NULL;
}

/* simulating: a ctx:simulate step, which answers whether the candidate fits
 * on its own, so an allocation that fails is an OOM there, never rescued. */
static ms_status stage_open_device(const ms_scenario *sc, ms_stage *s, ms_backend *device,
                                   ms_policy *policy, ms_run_record *record, bool quiet_setup,
                                   bool simulating, ms_exec_checks checks, ms_diag *d)
{
    ms_alloc_config acfg;
    ms_status st = alloc_config(sc, policy, &acfg, d);
    s->backend = device;
    if (st == MS_OK)
        st = ms_alloc_create(s->backend, &acfg, &s->alloc);
    if (st == MS_OK) {
        ms_exec_config ecfg = {.program = &s->view,
                               .backend = s->backend,
                               .alloc = s->alloc,
                               .policy = policy,
                               .record = record,
                               .device = &sc->device,
                               .avoid_record_streams = sc->avoid_record_streams,
                               .pipeline_size = sc->parallel.pipeline_model_parallel_size,
                               .batch_p2p_sync = sc->parallel.batch_p2p_sync,
                               .quiet_setup = quiet_setup,
                               .verify = checks.verify,
                               .fault = checks.fault,
                               .rescue_oom = !simulating && ms_policy_rescues_oom(policy),
                               .release_after_copy = acfg.flavour == MS_ALLOC_MINDSPORE};
        st = ms_exec_create(&ecfg, &s->exec, &s->setup_oom, d);
    }
    return st;
}

/* ---- ctx:simulate ---------------------------------------------------------- */

/* The physical device in the CLI's spelling "cuda:1" (0 without a colon). */
static ms_status device_ordinal(const char *backend, int *ordinal, ms_diag *d)
{
    const char *colon = strchr(backend, ':');
    *ordinal = 0;
    if (colon == NULL)
        return MS_OK;
    char *end = NULL;
    long v = strtol(colon + 1, &end, 10);
    if (colon[1] == '\0' || *end != '\0' || v < 0 || v > 1023)
        return ms_diag_set(d, MS_EINVAL,
                           "backend '%s': the device after ':' must be a number "
                           "from 0 (e.g. cuda:1)",
                           backend);
    *ordinal = (int)v;
    return MS_OK;
}

/* The devices of a run, or of one ctx:simulate, as one group. */
static ms_status open_group(const ms_scenario *sc, const char *backend, int n, int first,
                            bool functional, ms_device_group **out, ms_diag *d)
{
    ms_group_config cfg = {.spec = &sc->device,
                           .n_devices = n,
                           .first_device = first,
                           .seed = sc->seed,
                           .functional = functional};
    ms_status st = device_ordinal(backend, &cfg.ordinal, d);
    return st == MS_OK ? ms_group_open(backend, &cfg, out, d) : st;
}

/* Steps of one plan on the candidate's own device until one runs out of
 * memory: the highest peaks, the last step's time, and each step's own. */
static ms_status simulate_steps(ms_stage *s, const ms_plan *plan, int steps, ms_sim_result *out,
                                ms_diag *d)
{
    ms_status st = MS_OK;
    for (int k = 0; st == MS_OK && k < steps && !out->oom; k++) {
        if ((st = ms_exec_step(s->exec, k, plan, s->prof, &s->res, d)) != MS_OK)
            break;
        out->oom = s->res.oom;
        out->step[out->n_steps++] =
            (ms_sim_step){.peak_allocated = s->res.peak_allocated,
                          .peak_reserved = s->res.peak_reserved,
                          .step_time_ns = s->res.step_time_ns,
                          .oom = s->res.oom};
        if (s->res.peak_allocated > out->peak_allocated)
            out->peak_allocated = s->res.peak_allocated;
        if (s->res.peak_reserved > out->peak_reserved)
            out->peak_reserved = s->res.peak_reserved;
        out->step_time_ns = s->res.step_time_ns;
    }
    return st;
}

const ms_scenario *run_on_memory(const ms_scenario *sc, uint64_t bytes, ms_scenario *copy)
{
    *copy = *sc;
    copy->device.hbm_bytes = bytes;
    return copy;
}

static ms_status simulate_plan(void *user, const ms_plan *plan, const ms_sim_options *opt,
                               ms_sim_result *out, ms_diag *d)
{
    ms_sim_ctx *c = user;
    ms_stage s = {.view = c->stage->view};
    ms_device_group *group = NULL;
    memset(out, 0, sizeof *out);
    if (opt == NULL || opt->steps < 1 || opt->steps > MS_SIM_MAX_STEPS ||
        opt->capacity > MS_SIM_MAX_CAPACITY)
        return ms_diag_set(d, MS_EINVAL,
                           "simulate: steps must be from 1 to %d and capacity at most 2^43 bytes",
                           MS_SIM_MAX_STEPS);
    ms_scenario copy;
    /* The run's own scenario, or a copy on a device with another memory. */
    const ms_scenario *sc = opt->capacity ? run_on_memory(c->sc, opt->capacity, &copy) : c->sc;
    ms_status st = open_group(sc, "mock", 1, c->index, false, &group, d);
    if (st == MS_OK)
        st = stage_open_device(sc, &s, ms_group_device(group, 0), c->policy, NULL, false, true,
                               (ms_exec_checks){0}, d);
    if (st == MS_OK)
        s.prof = calloc(s.view.n_ops ? s.view.n_ops : 1, sizeof *s.prof);
    if (st == MS_OK && s.prof == NULL)
        st = MS_ENOMEM;
    if (st == MS_OK && s.setup_oom)
        out->oom = true;
    else if (st == MS_OK)
        st = simulate_steps(&s, plan, opt->steps, out, d);
    free(s.prof);
    stage_close_device(&s);
    if (group)
        ms_group_close(group);
    return st;
}

/* ---- the run ------------------------------------------------------------- */

static void fill_static_summary(ms_run *r, int i, const char *policy_name)
{
    const ms_scenario *sc = r->sc;
    ms_run_summary *s = &r->summaries[i];
    const ms_program_view *v = &r->stages[i].view;
    if (r->notes.scaled) {
        /* A name too long for the column loses its end, not the note. */
        char note[48];
        int len = snprintf(note, sizeof note, " (%d of %d layers)", r->notes.layers,
                           r->notes.scenario_layers);
        int keep = (int)sizeof s->scenario - 1 - len;
        snprintf(s->scenario, sizeof s->scenario, "%.*s%s", keep > 0 ? keep : 0, sc->name, note);
    } else
        snprintf(s->scenario, sizeof s->scenario, "%s", sc->name);
    snprintf(s->policy, sizeof s->policy, "%s", policy_name);
    snprintf(s->device, sizeof s->device, "%s", sc->device.name);
    s->devices = r->n;
    s->stage = r->first_stage + i;
    s->capacity = sc->device.hbm_bytes;
    s->oom_step = -1;
    s->oom_op = -1;
    s->oom_tensor = UINT32_MAX;
    for (uint32_t t = 0; t < v->n_tensors; t++) {
        const ms_tensor *tn = &v->tensors[t];
        if (!tn->persistent)
            continue;
        if (tn->kind == MS_TK_WEIGHT)
            s->weights_bytes += tn->bytes;
        else if (tn->kind == MS_TK_GRAD)
            s->grads_bytes += tn->bytes;
        else if (tn->kind == MS_TK_OPTIMIZER_STATE)
            s->optimizer_bytes += tn->bytes;
    }
    s->model_flops_per_step = v->model_flops;
}

static void note_step(ms_run_summary *s, const ms_step_result *res, int step)
{
    if (res->peak_allocated > s->peak_allocated) {
        s->peak_allocated = res->peak_allocated;
        s->reserved_minus_allocated_at_peak = res->reserved_minus_allocated_at_peak;
    }
    if (res->peak_reserved > s->peak_reserved)
        s->peak_reserved = res->peak_reserved;
    if (res->peak_active > s->peak_active)
        s->peak_active = res->peak_active;
    if (res->peak_activation_bytes > s->peak_activation_bytes)
        s->peak_activation_bytes = res->peak_activation_bytes;
    if (res->oom && !s->oom) {
        s->oom = true;
        s->oom_step = step;
        s->oom_op = res->oom_op;
        s->oom_tensor = res->oom_tensor;
        s->oom_bytes = res->oom_bytes;
        snprintf(s->oom_message, sizeof s->oom_message, "%s", res->oom_message);
    }
}

/* The policy decides, the scenario's declared recompute and swap settings
 * following its decisions (profile.declared) unless it replaced them, then
 * what on_oom added; the executor applies MindFormers' precedence whatever
 * the order (recompute over swap, keep over both). */
static ms_status plan_stage(ms_run *r, ms_stage *s, ms_diag *d)
{
    ms_status st = ms_policy_plan(r->policy, &s->profile, simulate_plan,
                                  &r->simctx[s - r->stages], &s->plan, d);
    for (uint32_t i = 0; st == MS_OK && i < s->oom_plan.n; i++)
        st = ms_plan_add(&s->plan, &s->oom_plan.items[i]);
    return st;
}

/* A stage that runs out of memory stops issuing, so the others would wait
 * forever for its sends: as in a real job, the whole step is lost.  The
 * others' parked calls are cancelled and their step ends without a result. */
static ms_status run_stage_step(void *user, int host)
{
    ms_run *r = user;
    ms_stage *s = &r->stages[host];
    ms_diag_clear(&s->diag);
    ms_status st = ms_exec_step(s->exec, s->step, &s->plan, s->prof, &s->res, &s->diag);
    if (st == MS_OK && s->res.oom)
        ms_group_cancel(r->group);
    if (st == MS_ECANCELED) {
        s->cancelled = true;
        ms_diag_clear(&s->diag);
        return MS_OK;
    }
    return st;
}

static ms_status execute_stages(ms_run *r, int step, ms_diag *d)
{
    ms_status st = MS_OK;
    for (int i = 0; i < r->n; i++) {
        r->stages[i].step = step;
        r->stages[i].cancelled = false;
    }
    st = ms_group_run(r->group, run_stage_step, r);
    for (int i = 0; i < r->n && st != MS_OK; i++)
        if (r->stages[i].diag.code != MS_OK) {
            ms_diag_set(d, r->stages[i].diag.code, "stage %d: %s", i, r->stages[i].diag.msg);
            break;
        }
    return st;
}

static void profile_after(ms_run *r, ms_stage *s, int step)
{
    const ms_scenario *sc = r->sc;
    s->profile = (ms_profile){.step = step,
                              .measured = true,
                              .program = s->view,
                              .ops = s->prof,
                              .peak_allocated = s->res.peak_allocated,
                              .peak_reserved = s->res.peak_reserved,
                              .capacity = sc->device.hbm_bytes,
                              .step_time_ns = s->res.step_time_ns,
                              .oom = s->res.oom,
                              .oom_op = s->res.oom_op,
                              .device = &sc->device,
                              .current = &s->prev_plan,
                              .declared = &s->declared,
                              .peak_active = s->res.peak_active,
                              .rescued = s->res.rescued,
                              .allocator = allocator_name(sc, r->policy)};
}

static ms_status handle_oom(ms_run *r, ms_stage *s, ms_diag *d)
{
    bool handled = false;
    if (r->policy == NULL || s->res.oom_op == MS_NONE)
        return MS_OK;
    ms_oom_request req = {.bytes = s->res.oom_bytes, .tensor = s->res.oom_tensor,
                          .op = (uint32_t)s->res.oom_op, .allocated = s->res.peak_allocated,
                          .reserved = s->res.peak_reserved, .capacity = r->sc->device.hbm_bytes};
    return ms_policy_on_oom(r->policy, &req, &s->profile, &s->oom_plan, &handled, d);
}

/* Plans for every stage; false in *go if every stage that ran out of memory
 * would repeat the same decisions (and so fail the same way). */
static ms_status plan_step(ms_run *r, int step, bool *stable, bool *go, ms_diag *d)
{
    bool any_oom = false, any_change = false;
    *go = true;
    for (int i = 0; i < r->n; i++) {
        ms_stage *s = &r->stages[i];
        bool oomed = step > 0 && s->res.oom;
        /* A step that completed only thanks to OOM rescues (SmartSwap's
         * forced swaps) also goes back to the policy. */
        bool rescued = step > 0 && s->res.rescued.count > 0;
        any_oom |= oomed;
        /* SmartSwap's STABLE stage: a frozen plan is only executed, until an
         * OOM sends the policy back to planning. */
        if (!*stable || oomed || rescued) {
            ms_status st = plan_stage(r, s, d);
            if (st != MS_OK)
                return st;
        }
        any_change |= oomed && !ms_plan_same_decisions(&s->plan, &s->prev_plan);
    }
    if (any_oom && !any_change) {
        *go = false;
        return MS_OK;
    }
    bool all_stable = true;
    for (int i = 0; i < r->n; i++) {
        all_stable &= r->stages[i].plan.stable;
        ms_plan_copy(&r->stages[i].prev_plan, &r->stages[i].plan);
    }
    *stable = all_stable;
    return MS_OK;
}

/* An abandoned step has no result, but its executor saw what the stage
 * held until then (peaks are reset at each step's start, not at release). */
static void peaks_of_abandoned_step(ms_stage *s)
{
    ms_exec_partial_peaks(s->exec, &s->res);
}

static bool any_setup_oom(ms_run *r, ms_diag *d)
{
    bool any = false;
    for (int i = 0; i < r->n; i++) {
        if (!r->stages[i].setup_oom)
            continue;
        /* Weights, grads and optimizer state alone do not fit. */
        ms_run_summary *s = &r->summaries[i];
        s->oom = true;
        s->oom_step = 0;
        snprintf(s->oom_message, sizeof s->oom_message, "%s",
                 d && d->msg[0] ? d->msg : "out of memory at setup");
        any = true;
    }
    if (any && d)
        ms_diag_clear(d);
    return any;
}

/* A pipeline that ran out of memory leaves the other stages' work stuck in
 * their streams, and a real job crashes.  As the job would be relaunched
 * with the policy's new decisions, every stage starts again on a fresh
 * device (empty caches, persistent tensors allocated anew), keeping its
 * program, plans, profile and summary. */
static ms_status relaunch_pipeline(ms_run *r, ms_diag *d)
{
    for (int i = 0; i < r->n; i++) {
        ms_stage *s = &r->stages[i];
        ms_alloc_stats st = ms_alloc_get_stats(s->alloc);
        s->earlier_ooms += st.num_ooms;
        s->earlier_retries += st.num_alloc_retries;
        stage_close_device(s);
    }
    ms_group_close(r->group);
    r->group = NULL;
    ms_status st =
        open_group(r->sc, r->backend, r->n, r->first_stage, r->checks.verify, &r->group, d);
    for (int i = 0; st == MS_OK && i < r->n; i++)
        st = stage_open_device(r->sc, &r->stages[i], ms_group_device(r->group, i), r->policy,
                               r->record, true, false, r->checks, d);
    return st;
}

/* The pipeline bubble of a stage: its compute stream's wait for receives
 * (ms_step_result.pipeline_wait_ns) plus the time the pipeline's step runs
 * before this stage starts and after it is done.  Without a pipeline it is
 * 0: idle time from host overhead or copies is no bubble. */
static double bubble_fraction(const ms_step_result *res, int64_t start, int64_t end)
{
    if (end <= start)
        return 0.0;
    int64_t idle = res->pipeline_wait_ns + (res->start_ns - start) + (end - res->end_ns);
    return (double)idle / (double)(end - start);
}

/* ---- the detail kept (ms_run_detail) ----------------------------------- */

/* What the record adds to the estimate of every step's detail since it was
 * last counted. */
static void detail_account(ms_run *r)
{
    uint64_t now = ms_report_detail_bytes(r->record, (size_t)r->n);
    r->all_bytes += now - r->counted_bytes;
    r->counted_bytes = now;
}

/* Drop the steps before `step`; INT_MAX: every step, as "last" does before
 * each step (the executor's setup rows, made before its first step, carry
 * step 0 and go with them). */
static ms_status detail_clear_before(ms_run *r, int step, ms_diag *d)
{
    detail_account(r);
    ms_status st = ms_record_clear_steps_before(r->record, step);
    if (st != MS_OK)
        return ms_diag_set(d, st, "keeping the last step's record: %s", ms_strerror(st));
    r->counted_bytes = ms_report_detail_bytes(r->record, (size_t)r->n);
    return MS_OK;
}

/* "last" keeps nothing of the steps before this one. */
static ms_status detail_before_step(ms_run *r, ms_diag *d)
{
    if (r->record == NULL || r->notes.detail.kept != MS_DETAIL_LAST)
        return MS_OK;
    return detail_clear_before(r, INT_MAX, d);
}

/* Once every step's detail is over the limit, the record keeps the step just
 * run and then the last one, as "last" would: what it holds never grows past
 * the limit by more than a step. */
static ms_status detail_after_step(ms_run *r, int step, ms_diag *d)
{
    ms_run_detail *dt = &r->notes.detail;
    if (r->record == NULL)
        return MS_OK;
    dt->last_step = step;
    detail_account(r);
    if (dt->kept != MS_DETAIL_ALL || dt->max_bytes == 0 || r->all_bytes <= dt->max_bytes)
        return MS_OK;
    dt->kept = MS_DETAIL_LAST;
    return detail_clear_before(r, step, d);
}

/* After the last step: the last step's detail alone may be over the limit
 * too, and then the reports are the summary alone. */
static void detail_finish(ms_run *r)
{
    ms_run_detail *dt = &r->notes.detail;
    if (r->record == NULL)
        return;
    detail_account(r);
    if (dt->kept == MS_DETAIL_LAST)
        dt->last_bytes = r->counted_bytes;
    if (dt->kept == MS_DETAIL_LAST && dt->max_bytes > 0 && dt->last_bytes > dt->max_bytes)
        dt->kept = MS_DETAIL_NONE;
    dt->requested_bytes = dt->requested == MS_DETAIL_ALL ? r->all_bytes : dt->last_bytes;
    dt->limited = dt->kept != dt->requested;
}

static void detail_start(ms_run *r)
{
    r->notes.detail =
        (ms_run_detail){.requested = r->sc->report_detail,
                        .kept = r->record != NULL ? r->sc->report_detail : MS_DETAIL_NONE,
                        .max_bytes = r->sc->report_max_bytes,
                        .last_step = -1};
}

static void notify(const ms_run *r, ms_run_phase phase, int step)
{
    if (r->progress != NULL)
        r->progress(r->progress_user,
                    &(ms_run_progress){.phase = phase,
                                       .step = step,
                                       .steps = r->sc->steps,
                                       .repeated = r->notes.fast_forwarded_steps});
}

static ms_status simulate_step(ms_run *r, int step, ms_diag *d)
{
    ms_status st = detail_before_step(r, d);
    if (st == MS_OK)
        st = execute_stages(r, step, d);
    if (st == MS_OK)
        run_ff_after_step(r, step);
    return st;
}

/* "last" keeps the repeat's rows alone, as it would the simulated step's. */
static ms_status repeat_step(ms_run *r, int step, ms_diag *d)
{
    ms_status st = run_ff_repeat(r, step, d);
    if (st == MS_OK && r->record != NULL && r->notes.detail.kept == MS_DETAIL_LAST)
        st = detail_clear_before(r, step, d);
    return st;
}

static ms_status run_steps(ms_run *r, ms_diag *d)
{
    bool stable = false;
    for (int step = 0; step < r->sc->steps; step++) {
        bool go;
        notify(r, MS_RUN_PLANNING, step);
        ms_status st = plan_step(r, step, &stable, &go, d);
        if (st != MS_OK)
            return st;
        if (!go)
            break;
        bool repeat;
        if ((st = run_ff_check(r, step, &repeat, d)) != MS_OK)
            return st;
        notify(r, repeat ? MS_RUN_REPEATING : MS_RUN_SIMULATING, step);
        if ((st = repeat ? repeat_step(r, step, d) : simulate_step(r, step, d)) != MS_OK ||
            (st = detail_after_step(r, step, d)) != MS_OK)
            return st;
        r->steps_run = step + 1;
        bool oom = false;
        int64_t start = 0, end = 0;
        for (int i = 0; i < r->n; i++) {
            ms_stage *s = &r->stages[i];
            if (s->cancelled)
                peaks_of_abandoned_step(s);
            note_step(&r->summaries[i], &s->res, step);
            profile_after(r, s, step);
            oom |= s->res.oom;
            if (i == 0 || s->res.start_ns < start)
                start = s->res.start_ns;
            if (i == 0 || s->res.end_ns > end)
                end = s->res.end_ns;
        }
        for (int i = 0; oom && i < r->n; i++)
            if (r->stages[i].res.oom && (st = handle_oom(r, &r->stages[i], d)) != MS_OK)
                return st;
        /* The next plan_step ends the run unless some decisions changed. */
        if (oom && r->n > 1 && step + 1 < r->sc->steps &&
            ((st = relaunch_pipeline(r, d)) != MS_OK || any_setup_oom(r, d)))
            return st;
        if (oom)
            continue;
        /* The pipeline's step lasts from the first host's start to the last
         * device's finish. */
        double step_ms = (double)(end - start) / 1e6;
        r->times_ms[r->done_steps++] = step_ms;
        r->notes.verified_tensors = 0;
        r->notes.verified_bytes = 0;
        for (int i = 0; i < r->n; i++) {
            ms_run_summary *s = &r->summaries[i];
            const ms_step_result *res = &r->stages[i].res;
            s->swapped_bytes = res->swapped_bytes;
            s->recomputed_ops = res->recomputed_ops;
            r->notes.verified_tensors += res->verified_tensors;
            r->notes.verified_bytes += res->verified_bytes;
            s->bubble_fraction = bubble_fraction(res, start, end);
        }
    }
    return MS_OK;
}

static void fill_times(ms_run *r)
{
    int n = r->done_steps;
    for (int i = 0; i < r->n; i++) {
        ms_run_summary *s = &r->summaries[i];
        s->steps = n;
        /* Counted whether or not a step completed: a run that ran out of
         * memory in its first step did run out. */
        if (r->stages[i].alloc != NULL) {
            ms_alloc_stats st = ms_alloc_get_stats(r->stages[i].alloc);
            s->num_alloc_retries = st.num_alloc_retries + r->stages[i].earlier_retries;
            s->num_ooms = st.num_ooms + r->stages[i].earlier_ooms;
        }
        if (n == 0)
            continue;
        s->step_time_ms = r->times_ms[n - 1];
        /* The first step warms the allocator's cache; steady state is after. */
        const double *steady = n > 1 ? r->times_ms + 1 : r->times_ms;
        size_t m = n > 1 ? (size_t)n - 1 : 1;
        s->step_time_mean_ms = gsl_stats_mean(steady, 1, m);
        s->step_time_sd_ms = m > 1 ? gsl_stats_sd(steady, 1, m) : 0.0;
        s->model_tflops = s->model_flops_per_step / (s->step_time_ms * 1e-3) / 1e12;
        double peak = r->sc->device.peak_flops[r->sc->model.dtype];
        s->mfu = peak > 0 ? s->model_tflops * 1e12 / peak : 0.0;
    }
}

static ms_status open_policy(const ms_scenario *sc, const ms_run_options *opt, ms_policy **pol,
                             ms_diag *d)
{
    const char *name = opt->policy ? opt->policy : sc->policy;
    if (name == NULL || name[0] == '\0')
        name = "none";
    char lib[4096];
    const char *lib_dir = opt->policy_dir;
    if (lib_dir == NULL) {
        if (ms_data_path("policies_lua", lib, sizeof lib) != MS_OK)
            return ms_diag_set(d, MS_ENOENT, "cannot find the shipped policies directory "
                               "(policies_lua); set MEMSIM_DATADIR");
        lib_dir = lib;
    }
    ms_status st = ms_policy_load(name, lib_dir, NULL, pol, d);
    if (st == MS_OK && opt->quiet_policy)
        ms_policy_set_log(*pol, NULL);
    return st;
}

/* A stage's program, the decisions its scenario declares for it (which
 * also checks their patterns against it), and what is known before a step. */
static ms_status build_stage(ms_run *r, int i, const char *pname, ms_diag *d)
{
    ms_stage *s = &r->stages[i];
    ms_plan_init(&s->plan);
    ms_plan_init(&s->prev_plan);
    ms_plan_init(&s->oom_plan);
    ms_plan_init(&s->declared);
    ms_status st = ms_program_build(r->sc, r->first_stage + i, &s->program, d);
    s->view = ms_program_get_view(s->program);
    if (st == MS_OK)
        st = pol_declared_plan(r->sc, &s->view, &s->declared, d);
    if (st != MS_OK)
        return st;
    r->views[i] = s->view;
    fill_static_summary(r, i, pname);
    s->prof = calloc(s->view.n_ops ? s->view.n_ops : 1, sizeof *s->prof);
    s->profile = (ms_profile){.step = -1,
                              .measured = false,
                              .program = s->view,
                              .capacity = r->sc->device.hbm_bytes,
                              .oom_op = MS_NONE,
                              .device = &r->sc->device,
                              .current = &s->plan,
                              .declared = &s->declared,
                              .allocator = allocator_name(r->sc, r->policy)};
    r->simctx[i] =
        (ms_sim_ctx){.sc = r->sc, .stage = s, .index = r->first_stage + i, .policy = r->policy};
    return s->prof != NULL ? MS_OK : MS_ENOMEM;
}

static ms_status open_stages(ms_run *r, const ms_run_options *opt, ms_diag *d)
{
    const char *pname = ms_policy_name(r->policy);
    ms_status st = MS_OK;
    for (int i = 0; st == MS_OK && i < r->n; i++)
        st = build_stage(r, i, pname, d);
    /* The settings as MindFormers logs them, once every stage's program
     * (which holds the op names of its layers) is built and checked; one
     * stage run alone has only its own. */
    if (st == MS_OK && opt->settings_out != NULL && r->first_stage == 0 &&
        r->n == pipeline_stages(r->sc))
        st = pol_declared_print(r->sc, r->views, r->n, opt->settings_out, d);
    if (st == MS_OK && r->group == NULL)
        st = open_group(r->sc, r->backend, r->n, r->first_stage, r->checks.verify, &r->group, d);
    for (int i = 0; st == MS_OK && i < r->n; i++)
        st = stage_open_device(r->sc, &r->stages[i], ms_group_device(r->group, i), r->policy,
                               r->record, false, false, r->checks, d);
    return st;
}

static void close_devices(ms_run *r)
{
    for (int i = 0; r->stages && i < r->n; i++) {
        ms_stage *s = &r->stages[i];
        stage_close_device(s);
        ms_plan_free(&s->plan);
        ms_plan_free(&s->prev_plan);
        ms_plan_free(&s->oom_plan);
        ms_plan_free(&s->declared);
        ms_plan_free(&s->ff_plan);
        free(s->prof);
        s->prof = NULL;
    }
    if (r->group)
        ms_group_close(r->group);
    if (r->policy)
        ms_policy_free(r->policy);
    r->group = NULL;
    r->policy = NULL;
}

/* Which stages run: all of them, or the one asked for.  A real device runs
 * one stage (its p2p peers would be other processes on other devices). */
static ms_status choose_stages(ms_run *r, const ms_run_options *opt, ms_diag *d)
{
    int pp = pipeline_stages(r->sc);
    const char *backend = opt->backend ? opt->backend : "mock";
    bool mock = strcmp(backend, "mock") == 0;
    if (opt->single_stage && (opt->stage < 0 || opt->stage >= pp))
        return ms_diag_set(d, MS_ERANGE, "--stage %d: %s has %d pipeline stage%s (0..%d)",
                           opt->stage, r->sc->name, pp, pp == 1 ? "" : "s", pp - 1);
    if (!opt->single_stage && !mock && pp > 1)
        return ms_diag_set(d, MS_EINVAL,
                           "%s has %d pipeline stages and backend '%s' runs one on "
                           "its device: choose it with --stage K (0..%d)",
                           r->sc->name, pp, backend, pp - 1);
    r->n = opt->single_stage ? 1 : pp;
    r->first_stage = opt->single_stage ? opt->stage : 0;
    return MS_OK;
}

/* A real device: open it now, see what memory it has free, and fit the
 * scenario's layers to it (run_fit.h). */
static ms_status fit_to_device(ms_run *r, const ms_run_options *opt, ms_diag *d)
{
    /* backend_npu implements no virtual-memory calls (cuMemAddressReserve /
     * aclrtReserveMemAddress) yet, so an expandable-segment allocator would
     * fail at its first segment: refuse before any device memory is taken.
     * The policy is not loaded yet; the setting is the scenario's. */
    ms_alloc_config acfg;
    ms_status st = alloc_config(r->sc, NULL, &acfg, d);
    if (st == MS_OK && acfg.expandable_segments)
        return ms_diag_set(d, MS_EUNSUPPORTED,
                           "%s: allocator.conf asks for expandable segments, "
                           "which backend '%s' does not implement yet (use "
                           "expandable_segments:False)",
                           r->sc->path, r->backend);
    if (st == MS_OK)
        st = open_group(r->sc, r->backend, r->n, r->first_stage, false, &r->group, d);
    ms_backend *b = st == MS_OK ? ms_group_device(r->group, 0) : NULL;
    ms_run_notes *n = &r->notes;
    if (st == MS_OK &&
        (st = b->ops->mem_get_info(b->inst, &n->device_free_before, &n->device_total)) != MS_OK)
        return ms_diag_set(d, st, "backend '%s': mem-get-info failed: %s", r->backend,
                           ms_strerror(st));
    run_fit fit;
    if (st == MS_OK)
        st = run_fit_layers(r->sc, opt, n->device_free_before, n->device_total, &fit, d);
    if (st != MS_OK)
        return st;
    n->device_memory_checked = true;
    n->scenario_layers = fit.scenario_layers;
    n->layers = fit.layers;
    if (fit.scaled != NULL) {
        r->owned_sc = fit.scaled;
        r->sc = fit.scaled;
        n->scaled = true;
    }
    return MS_OK;
}

/* mem-get-info after the last step, against what the allocator reserves:
 * the cross-check of peak reserved on a real device. */
static void note_device_memory(ms_run *r)
{
    ms_run_notes *n = &r->notes;
    if (!n->device_memory_checked || r->n < 1 || r->stages[0].backend == NULL)
        return;
    ms_backend *b = r->stages[0].backend;
    uint64_t total = 0;
    if (b->ops->mem_get_info(b->inst, &n->device_free_after, &total) != MS_OK)
        n->device_memory_checked = false;
    n->reserved_after = ms_alloc_current(r->stages[0].alloc).reserved;
}

static ms_status alloc_run_arrays(ms_run *r)
{
    r->stages = calloc((size_t)r->n, sizeof *r->stages);
    r->views = calloc((size_t)r->n, sizeof *r->views);
    r->summaries = calloc((size_t)r->n, sizeof *r->summaries);
    r->simctx = calloc((size_t)r->n, sizeof *r->simctx);
    r->times_ms = calloc((size_t)r->sc->steps + 1, sizeof *r->times_ms);
    return r->stages && r->views && r->summaries && r->simctx && r->times_ms ? MS_OK : MS_ENOMEM;
}

ms_status ms_run_execute(const ms_scenario *sc, const ms_run_options *opt, ms_run **out,
                         ms_diag *d)
{
    if (sc == NULL || opt == NULL || out == NULL)
        return MS_EINVAL;
    *out = NULL;
    ms_run *r = calloc(1, sizeof *r);
    if (r == NULL)
        return MS_ENOMEM;
    r->sc = sc;
    r->progress = opt->progress;
    r->progress_user = opt->progress_user;
    run_ff_start(r, !opt->no_fast_forward);
    notify(r, MS_RUN_SETUP, 0);
    r->backend = opt->backend ? opt->backend : "mock";
    r->checks = (ms_exec_checks){.verify = opt->verify, .fault = opt->fault};
    ms_status st = choose_stages(r, opt, d);
    if (st == MS_OK && strcmp(r->backend, "mock") != 0)
        st = fit_to_device(r, opt, d);
    if (st == MS_OK)
        st = alloc_run_arrays(r);
    if (st == MS_OK && opt->record && r->sc->report_detail != MS_DETAIL_NONE)
        st = ms_record_create(&r->record);
    detail_start(r);
    if (st == MS_OK)
        st = open_policy(r->sc, opt, &r->policy, d);
    if (st == MS_OK)
        st = open_stages(r, opt, d);
    if (st == MS_OK && !any_setup_oom(r, d))
        st = run_steps(r, d);
    if (st == MS_OK) {
        fill_times(r);
        note_device_memory(r);
        detail_finish(r);
        notify(r, MS_RUN_DONE, r->steps_run);
    }
    close_devices(r);
    if (st != MS_OK) {
        ms_run_free(r);
        return st;
    }
    *out = r;
    return MS_OK;
}

ms_status ms_run_free(ms_run *r)
{
    if (r == NULL)
        return MS_EINVAL;
    close_devices(r);
    for (int i = 0; r->stages && i < r->n; i++)
        if (r->stages[i].program)
            ms_program_free(r->stages[i].program);
    if (r->record)
        ms_record_free(r->record);
    if (r->owned_sc)
        ms_scenario_free(r->owned_sc);
    run_ff_free(r);
    free(r->stages);
    free(r->views);
    free(r->summaries);
    free(r->simctx);
    free(r->times_ms);
    free(r);
    return MS_OK;
}

const ms_run_summary *ms_run_summaries(const ms_run *r, size_t *n)
{
    if (n != NULL)
        *n = r != NULL ? (size_t)r->n : 0;
    return r != NULL ? r->summaries : NULL;
}

const ms_run_summary *ms_run_summary_get(const ms_run *r)
{
    return r != NULL ? &r->summaries[0] : NULL;
}

const ms_run_notes *ms_run_notes_get(const ms_run *r)
{
    return r != NULL ? &r->notes : NULL;
}

const ms_run_record *ms_run_record_get(const ms_run *r)
{
    return r != NULL ? r->record : NULL;
}

const ms_program_view *ms_run_program_views(const ms_run *r, size_t *n)
{
    if (n != NULL)
        *n = r != NULL ? (size_t)r->n : 0;
    return r != NULL ? r->views : NULL;
}
