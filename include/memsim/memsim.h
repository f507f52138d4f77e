#ifndef MEMSIM_H
#define MEMSIM_H
#include "memsim/status.h"
#include "memsim/device.h"
#include "sim/sim.h"
#include "memsim/backend.h"
#include "backend_mock/mock.h"
#include "memsim/allocator.h"
#include "memsim/scenario.h"
#include "memsim/workload.h"
#include "memsim/policy.h"
#include "memsim/exec.h"
#include "memsim/report.h"
#endif
