/* A real device that cannot hold a scenario's stage runs fewer layers
 * (run_fit.h).  Whether a layer count fits is asked of the mock: the same
 * stage, policy and steps on a device model whose memory is what the real
 * device has free, so a policy that swaps or recomputes its way into the
 * memory counts as fitting, as it would on the device. */
#include "run_fit.h"
#include "run_internal.h"
#include "lib/base/units.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>


/* The scenario reloaded with its overrides and model.num_layers = layers. */
static ms_status reload(const ms_scenario *sc, const ms_run_options *opt, int layers,
                        const ms_scenario **out, ms_diag *d)
{
    const char **sets = calloc(opt->n_overrides + 1, sizeof *sets);
    char layer_set[64];
    if (sets == NULL)
        return MS_ENOMEM;
    for (size_t i = 0; i < opt->n_overrides; i++)
        sets[i] = opt->overrides[i];
    snprintf(layer_set, sizeof layer_set, "model.num_layers=%d", layers);
    sets[opt->n_overrides] = layer_set;
    ms_status st = ms_scenario_load(sc->path, sets, opt->n_overrides + 1, out, d);
    free(sets);
    if (st != MS_OK)
        ms_diag_prefix(d, "scaling %s to %d layers to fit the device: ", sc->name, layers);
    return st;
}

/* Does the stage, under the run's policy, get through its steps in
 * `usable` bytes on the mock?  *why: the mock's out-of-memory message. */
static ms_status fits(const ms_scenario *sc, const ms_run_options *opt, uint64_t usable, bool *ok,
                      char *why, size_t n_why, ms_diag *d)
{
    ms_scenario probe;
    run_on_memory(sc, usable, &probe);
    ms_run_options mock = {.policy = opt->policy,
                           .policy_dir = opt->policy_dir,
                           .backend = "mock",
                           .single_stage = true,
                           .stage = opt->single_stage ? opt->stage : 0,
                           .quiet_policy = true};
    ms_run *run = NULL;
    ms_status st = ms_run_execute(&probe, &mock, &run, d);
    if (st != MS_OK) {
        ms_diag_prefix(d, "predicting whether %s fits the device: ", sc->name);
        return st;
    }
    size_t n = 0;
    const ms_run_summary *s = ms_run_summaries(run, &n);
    *ok = n > 0 && !s[0].oom;
    if (n > 0 && s[0].oom)
        snprintf(why, n_why, "%s", s[0].oom_message);
    ms_run_free(run);
    return MS_OK;
}

static int layer_step(const ms_scenario *sc)
{
    int pp = sc->parallel.pipeline_model_parallel_size > 0
                 ? sc->parallel.pipeline_model_parallel_size
                 : 1;
    return pp * ms_scenario_chunks(sc);
}

/* The largest multiple of step from step to sc's layers whose stage fits
 * (fitting only gets easier with fewer layers: a binary search). */
static ms_status search(const ms_scenario *sc, const ms_run_options *opt, uint64_t usable,
                        run_fit *out, char *why, size_t n_why, ms_diag *d)
{
    int step = layer_step(sc), lo = 0, hi = sc->model.num_layers / step - 1;
    const ms_scenario *best = NULL;
    char scratch[MS_DIAG_MAX];
    ms_status st = MS_OK;
    while (st == MS_OK && lo <= hi) {
        int mid = lo + (hi - lo) / 2;
        const ms_scenario *cand = NULL;
        bool ok = false;
        st = reload(sc, opt, (mid + 1) * step, &cand, d);
        if (st == MS_OK)
            st = fits(cand, opt, usable, &ok, mid == 0 ? why : scratch,
                      mid == 0 ? n_why : sizeof scratch, d);
        if (st == MS_OK && ok) {
            if (best != NULL)
                ms_scenario_free(best);
            best = cand;
            lo = mid + 1;
        } else {
            if (cand != NULL)
                ms_scenario_free(cand);
            hi = mid - 1;
        }
    }
    if (st != MS_OK) {
        if (best != NULL)
            ms_scenario_free(best);
        return st;
    }
    out->scaled = best;
    out->layers = best != NULL ? best->model.num_layers : 0;
    return MS_OK;
}

ms_status run_fit_layers(const ms_scenario *sc, const ms_run_options *opt, uint64_t usable,
                         uint64_t total, run_fit *out, ms_diag *d)
{
    *out = (run_fit){.scenario_layers = sc->model.num_layers, .layers = sc->model.num_layers};
    char why[MS_DIAG_MAX] = "";
    bool ok = false;
    ms_status st = fits(sc, opt, usable, &ok, why, sizeof why, d);
    if (st != MS_OK || ok)
        return st;
    char smallest[MS_DIAG_MAX] = "";
    if ((st = search(sc, opt, usable, out, smallest, sizeof smallest, d)) != MS_OK)
        return st;
    if (out->scaled != NULL)
        return MS_OK;
    int step = layer_step(sc);
    return ms_diag_set(d, MS_ENOMEM,
                       "%s cannot run on backend '%s': stage %d does not fit in the %.2f GiB the "
                       "device has free (of %.2f GiB), even with %d of its %d layers under policy "
                       "'%s' (the mock's prediction: %s)",
                       sc->name, opt->backend, opt->single_stage ? opt->stage : 0, base_gib(usable),
                       base_gib(total), step, sc->model.num_layers,
                       opt->policy ? opt->policy : sc->policy, smallest[0] ? smallest : why);
}
