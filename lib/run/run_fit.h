/* lib/run/: fitting a scenario to a real device (private to lib/run/).
 *
 * A real device runs one pipeline stage; when the mock predicts that the
 * stage, under the run's policy, runs out of the memory the device has free,
 * the scenario is reloaded (with the run's --set overrides) with fewer
 * layers: the most that fit, in steps of the pipeline's stages x chunks so
 * every stage keeps the same share. */
#ifndef MEMSIM_RUN_FIT_H
#define MEMSIM_RUN_FIT_H

#include <stdint.h>

#include "memsim/run.h"

typedef struct run_fit {
    const ms_scenario *scaled; /* owned by the caller; NULL: the scenario fits as it is */
    int layers, scenario_layers;
} run_fit;

/* usable: device memory free for the run (after the backend's own), of
 * total.  MS_ENOMEM, saying what the device has, when even the smallest
 * layer count does not fit. */
ms_status run_fit_layers(const ms_scenario *sc, const ms_run_options *opt, uint64_t usable,
                         uint64_t total, run_fit *out, ms_diag *d);

#endif
