/* memsim: every public header (one per seam). */
#ifndef MEMSIM_H
#define MEMSIM_H
#include "memsim/status.h"
#include "memsim/device.h"
#include "memsim/backend.h"
#include "memsim/allocator.h"
#include "memsim/scenario.h"
#include "memsim/workload.h"
#include "memsim/policy.h"
#include "memsim/exec.h"
#include "memsim/run.h"
#include "memsim/report.h"
#include "memsim/trace.h"
#include "memsim/calibrate.h"
#include "memsim/torch.h"
#endif
