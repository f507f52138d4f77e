/* memsim: the mock NPU, backend.h implemented on the discrete-event simulator.
 * Several mock devices may share one engine (one virtual device timeline). */
#ifndef MEMSIM_BACKEND_MOCK_H
#define MEMSIM_BACKEND_MOCK_H

#include "memsim/backend.h"
#include "memsim/sim.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Create a mock device on engine; *out is freed by ms_backend_close(). */
ms_status ms_mock_create(ms_sim *engine, const ms_device_spec *spec, int device, uint64_t seed,
                         ms_backend **out);

#ifdef __cplusplus
}
#endif
#endif
