/* memsim: the discrete-event engine and the device models built on it.
 *
 * The engine owns one int64 nanosecond virtual clock and an event queue
 * ordered by (time, sequence), so simultaneous events run in the order they
 * were scheduled and every run is deterministic.  Device models (streams,
 * events, the compute engine, copy engines on a full-duplex host link, HBM
 * capacity, the cost model) live beside it in sim/.  Nothing here knows about
 * tensors or policies. */
#ifndef MEMSIM_SIM_H
#define MEMSIM_SIM_H

#include <stdbool.h>
#include <stdint.h>

#include "memsim/device.h"
#include "memsim/status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct ms_sim ms_sim;
typedef void (*ms_sim_fn)(ms_sim *sim, void *arg);

ms_status ms_sim_create(ms_sim **out);
ms_status ms_sim_destroy(ms_sim *sim);
ms_status ms_sim_now(const ms_sim *sim, int64_t *now_ns);
/* Run fn(sim, arg) at virtual time at (>= now). */
ms_status ms_sim_schedule(ms_sim *sim, int64_t at_ns, ms_sim_fn fn, void *arg);
/* Run every event with time <= until_ns; the clock ends at until_ns. */
ms_status ms_sim_run_until(ms_sim *sim, int64_t until_ns);
/* Run the next event; *ran is false if the queue was empty. */
ms_status ms_sim_step(ms_sim *sim, bool *ran);
/* Run until the queue is empty. */
ms_status ms_sim_run(ms_sim *sim);

/* (sim/ adds the device models and the cost model below.) */

#ifdef __cplusplus
}
#endif
#endif
