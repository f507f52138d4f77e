/* A whole run: scenario + policy -> steps on a backend -> summary and record.
 *
 * This is SmartSwap's outer loop in general form: before every step the
 * policy's plan() sees the last step's profile and decides; an OOM ends the
 * run unless the policy changes its decisions (on_oom or a new plan). */
#include "memsim/exec.h"

#include <gsl/gsl_statistics_double.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "memsim/backend_mock.h"
#include "memsim/sim.h"

struct ms_run {
    ms_run_summary summary;
    ms_run_record *record;
    ms_program *program;
    ms_program_view view;
};

static bool is_dir(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

ms_status ms_data_path(const char *sub, char *buf, size_t n)
{
    if (sub == NULL || buf == NULL || n == 0)
        return MS_EINVAL;
    const char *roots[] = {getenv("MEMSIM_DATADIR"), MS_SRCDIR, MS_DATADIR};
    for (size_t i = 0; i < sizeof roots / sizeof roots[0]; i++) {
        if (roots[i] == NULL || roots[i][0] == '\0')
            continue;
        if ((size_t)snprintf(buf, n, "%s/%s", roots[i], sub) >= n)
            continue;
        if (is_dir(buf))
            return MS_OK;
    }
    return MS_ENOENT;
}

/* One simulated device with its own engine, allocator and executor. */
typedef struct ms_sim_device {
    ms_sim *engine;
    ms_backend *backend;
    ms_alloc *alloc;
    ms_exec *exec;
} ms_sim_device;

static void sim_device_close(ms_sim_device *dev)
{
    if (dev->exec)
        ms_exec_destroy(dev->exec);
    if (dev->alloc)
        ms_alloc_destroy(dev->alloc);
    if (dev->backend)
        ms_backend_close(dev->backend);
    if (dev->engine)
        ms_sim_destroy(dev->engine);
    memset(dev, 0, sizeof *dev);
}

static ms_status sim_device_open(const ms_scenario *sc, const ms_program_view *view,
                                 const char *backend, ms_policy *policy, ms_run_record *record,
                                 ms_sim_device *dev, bool *setup_oom, ms_diag *d)
{
    memset(dev, 0, sizeof *dev);
    ms_alloc_config acfg;
    ms_alloc_flavour flavour = strcmp(sc->allocator_flavour, "npu") == 0 ? MS_ALLOC_NPU
                                                                         : MS_ALLOC_CUDA;
    ms_status st = ms_alloc_config_default(flavour, &acfg);
    if (st == MS_OK && sc->allocator_conf[0] != '\0') {
        st = ms_alloc_config_parse(sc->allocator_conf, &acfg, d);
        if (st != MS_OK)
            ms_diag_prefix(d, "%s: allocator.conf: ", sc->path);
    }
    if (st == MS_OK)
        st = ms_sim_create(&dev->engine);
    if (st == MS_OK) {
        ms_backend_config bcfg = {.spec = &sc->device, .device = 0, .engine = dev->engine,
                                  .seed = sc->seed};
        st = ms_backend_open(backend, &bcfg, &dev->backend, d);
    }
    if (st == MS_OK)
        st = ms_alloc_create(dev->backend, &acfg, &dev->alloc);
    if (st == MS_OK) {
        ms_exec_config ecfg = {.program = view, .backend = dev->backend, .alloc = dev->alloc,
                               .policy = policy, .record = record, .device = &sc->device,
                               .avoid_record_streams = sc->avoid_record_streams};
        st = ms_exec_create(&ecfg, &dev->exec, setup_oom, d);
    }
    if (st != MS_OK)
        sim_device_close(dev);
    return st;
}

/* ctx:simulate(plan): the candidate runs one step on a fresh device, so a
 * policy can search without disturbing the real run. */
typedef struct ms_sim_ctx {
    const ms_scenario *sc;
    const ms_program_view *view;
    const char *backend;
    ms_policy *policy;
} ms_sim_ctx;

static ms_status simulate_plan(void *user, const ms_plan *plan, ms_sim_result *out, ms_diag *d)
{
    ms_sim_ctx *c = user;
    ms_sim_device dev;
    bool setup_oom = false;
    ms_status st = sim_device_open(c->sc, c->view, c->backend, c->policy, NULL, &dev, &setup_oom,
                                   d);
    if (st != MS_OK)
        return st;
    memset(out, 0, sizeof *out);
    ms_op_profile *prof = calloc(c->view->n_ops ? c->view->n_ops : 1, sizeof *prof);
    if (prof == NULL) {
        sim_device_close(&dev);
        return MS_ENOMEM;
    }
    ms_step_result res;
    if (setup_oom) {
        out->oom = true;
    } else {
        st = ms_exec_step(dev.exec, 0, plan, prof, &res, d);
        if (st == MS_OK) {
            out->oom = res.oom;
            out->peak_allocated = res.peak_allocated;
            out->peak_reserved = res.peak_reserved;
            out->step_time_ns = res.step_time_ns;
        }
    }
    free(prof);
    sim_device_close(&dev);
    return st;
}

static bool same_plan(const ms_plan *a, const ms_plan *b)
{
    return a->n == b->n &&
           (a->n == 0 || memcmp(a->items, b->items, a->n * sizeof *a->items) == 0);
}

static void fill_static_summary(ms_run *r, const ms_scenario *sc, const char *policy_name)
{
    ms_run_summary *s = &r->summary;
    snprintf(s->scenario, sizeof s->scenario, "%s", sc->name);
    snprintf(s->policy, sizeof s->policy, "%s", policy_name);
    snprintf(s->device, sizeof s->device, "%s", sc->device.name);
    s->devices = 1;
    s->capacity = sc->device.hbm_bytes;
    s->oom_step = -1;
    for (uint32_t i = 0; i < r->view.n_tensors; i++) {
        const ms_tensor *t = &r->view.tensors[i];
        if (!t->persistent)
            continue;
        if (t->kind == MS_TK_WEIGHT)
            s->weights_bytes += t->bytes;
        else if (t->kind == MS_TK_GRAD)
            s->grads_bytes += t->bytes;
        else if (t->kind == MS_TK_OPTIMIZER_STATE)
            s->optimizer_bytes += t->bytes;
    }
    s->model_flops_per_step = r->view.model_flops;
}

static void fill_step_summary(ms_run *r, const ms_scenario *sc, const double *times_ms, int n,
                              const ms_step_result *last, ms_alloc *alloc)
{
    ms_run_summary *s = &r->summary;
    s->steps = n;
    if (n > 0) {
        s->step_time_ms = times_ms[n - 1];
        /* The first step warms the allocator's cache; steady state is after. */
        const double *steady = n > 1 ? times_ms + 1 : times_ms;
        size_t m = n > 1 ? (size_t)n - 1 : 1;
        s->step_time_mean_ms = gsl_stats_mean(steady, 1, m);
        s->step_time_sd_ms = m > 1 ? gsl_stats_sd(steady, 1, m) : 0.0;
        double tflops = r->view.model_flops / (s->step_time_ms * 1e-3) / 1e12;
        s->model_tflops = tflops;
        double peak = sc->device.peak_flops[sc->model.dtype];
        s->mfu = peak > 0 ? tflops * 1e12 / peak : 0.0;
    }
    if (last != NULL) {
        s->swapped_bytes = last->swapped_bytes;
        s->recomputed_ops = last->recomputed_ops;
    }
    ms_alloc_stats st;
    if (ms_alloc_get_stats(alloc, &st) == MS_OK) {
        s->num_alloc_retries = st.num_alloc_retries;
        s->num_ooms = st.num_ooms;
    }
}

static void note_peaks(ms_run_summary *s, const ms_step_result *res)
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
}

typedef struct ms_run_loop {
    ms_run *run;
    const ms_scenario *sc;
    ms_policy *policy;
    ms_sim_device dev;
    ms_sim_ctx simctx;
    ms_op_profile *prof;
    ms_plan plan, prev_plan, oom_plan;
    double *times_ms;
} ms_run_loop;

static ms_status plan_next(ms_run_loop *L, const ms_profile *prof, ms_diag *d)
{
    ms_plan_clear(&L->plan);
    ms_status st = MS_OK;
    if (L->policy != NULL)
        st = ms_policy_plan(L->policy, prof, simulate_plan, &L->simctx, &L->plan, d);
    for (uint32_t i = 0; st == MS_OK && i < L->oom_plan.n; i++)
        st = ms_plan_add(&L->plan, &L->oom_plan.items[i]);
    return st;
}

static ms_status run_steps(ms_run_loop *L, ms_diag *d)
{
    ms_run *r = L->run;
    const ms_scenario *sc = L->sc;
    ms_profile prof = {.step = -1, .measured = false, .program = r->view, .ops = NULL,
                       .capacity = sc->device.hbm_bytes, .oom_op = MS_NONE,
                       .device = &sc->device, .current = &L->plan};
    ms_step_result res = {0}, last = {0};
    int done = 0;
    bool stable = false;
    for (int step = 0; step < sc->steps; step++) {
        /* SmartSwap's STABLE stage: once the policy froze its plan, steps
         * only execute it, until an OOM sends it back to planning. */
        ms_status st = MS_OK;
        if (!stable || res.oom)
            st = plan_next(L, &prof, d);
        if (st != MS_OK)
            return st;
        stable = L->plan.stable;
        if (step > 0 && res.oom && same_plan(&L->plan, &L->prev_plan))
            break; /* the same decisions would fail the same way */
        ms_plan_copy(&L->prev_plan, &L->plan);
        st = ms_exec_step(L->dev.exec, step, &L->plan, L->prof, &res, d);
        if (st != MS_OK)
            return st;
        note_peaks(&r->summary, &res);
        prof = (ms_profile){.step = step, .measured = true, .program = r->view, .ops = L->prof,
                            .peak_allocated = res.peak_allocated,
                            .peak_reserved = res.peak_reserved,
                            .capacity = sc->device.hbm_bytes, .step_time_ns = res.step_time_ns,
                            .oom = res.oom, .oom_op = res.oom_op, .device = &sc->device,
                            .current = &L->prev_plan};
        if (res.oom) {
            if (!r->summary.oom) {
                r->summary.oom = true;
                r->summary.oom_step = step;
                snprintf(r->summary.oom_message, sizeof r->summary.oom_message, "%s",
                         res.oom_message);
            }
            bool handled = false;
            if (L->policy != NULL && res.oom_op != MS_NONE) {
                ms_oom_request req = {.bytes = res.oom_bytes, .tensor = res.oom_tensor,
                                      .op = (uint32_t)res.oom_op,
                                      .allocated = res.peak_allocated,
                                      .reserved = res.peak_reserved,
                                      .capacity = sc->device.hbm_bytes};
                st = ms_policy_on_oom(L->policy, &req, &prof, &L->oom_plan, &handled, d);
                if (st != MS_OK)
                    return st;
            }
            continue;
        }
        L->times_ms[done++] = (double)res.step_time_ns / 1e6;
        last = res;
    }
    fill_step_summary(r, sc, L->times_ms, done, done ? &last : NULL, L->dev.alloc);
    return MS_OK;
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
    return ms_policy_load(name, lib_dir, NULL, pol, d);
}

ms_status ms_run_execute(const ms_scenario *sc, const ms_run_options *opt, ms_run **out,
                         ms_diag *d)
{
    if (sc == NULL || opt == NULL || out == NULL)
        return MS_EINVAL;
    *out = NULL;
    ms_run *r = calloc(1, sizeof *r);
    ms_run_loop L = {.run = r, .sc = sc};
    if (r == NULL)
        return MS_ENOMEM;
    const char *backend = opt->backend ? opt->backend : "mock";
    const char *pname = "none";
    ms_status st = ms_program_build(sc, 0, &r->program, d);
    if (st == MS_OK)
        st = ms_program_get_view(r->program, &r->view);
    if (st == MS_OK)
        st = open_policy(sc, opt, &L.policy, d);
    if (st == MS_OK)
        st = ms_policy_name(L.policy, &pname);
    if (st == MS_OK && opt->record)
        st = ms_record_create(&r->record);
    if (st == MS_OK) {
        fill_static_summary(r, sc, pname);
        L.prof = calloc(r->view.n_ops ? r->view.n_ops : 1, sizeof *L.prof);
        L.times_ms = calloc((size_t)sc->steps + 1, sizeof *L.times_ms);
        ms_plan_init(&L.plan);
        ms_plan_init(&L.prev_plan);
        ms_plan_init(&L.oom_plan);
        if (L.prof == NULL || L.times_ms == NULL)
            st = MS_ENOMEM;
    }
    bool setup_oom = false;
    if (st == MS_OK)
        st = sim_device_open(sc, &r->view, backend, L.policy, r->record, &L.dev, &setup_oom, d);
    L.simctx = (ms_sim_ctx){.sc = sc, .view = &r->view, .backend = backend, .policy = L.policy};
    if (st == MS_OK && setup_oom) {
        /* Weights, grads and optimizer state alone do not fit. */
        r->summary.oom = true;
        r->summary.oom_step = 0;
        snprintf(r->summary.oom_message, sizeof r->summary.oom_message, "%s",
                 d ? d->msg : "out of memory at setup");
        if (d)
            ms_diag_clear(d);
    } else if (st == MS_OK) {
        st = run_steps(&L, d);
    }
    sim_device_close(&L.dev);
    /* The policy name lives in the policy: copy done in fill_static_summary. */
    if (L.policy)
        ms_policy_free(L.policy);
    ms_plan_free(&L.plan);
    ms_plan_free(&L.prev_plan);
    ms_plan_free(&L.oom_plan);
    free(L.prof);
    free(L.times_ms);
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
    if (r->record)
        ms_record_free(r->record);
    if (r->program)
        ms_program_free(r->program);
    free(r);
    return MS_OK;
}

ms_status ms_run_summary_get(const ms_run *r, const ms_run_summary **s)
{
    if (r == NULL || s == NULL)
        return MS_EINVAL;
    *s = &r->summary;
    return MS_OK;
}

ms_status ms_run_record_get(const ms_run *r, const ms_run_record **rec)
{
    if (r == NULL || rec == NULL)
        return MS_EINVAL;
    *rec = r->record;
    return MS_OK;
}

ms_status ms_run_program_view(const ms_run *r, ms_program_view *view)
{
    if (r == NULL || view == NULL)
        return MS_EINVAL;
    *view = r->view;
    return MS_OK;
}
