/* Byte units of reports and messages.  GiB is 2^30 bytes, as PyTorch's
 * out-of-memory messages and memory snapshots count them, so memsim's
 * figures read the same as the framework's. */
#ifndef MEMSIM_BASE_UNITS_H
#define MEMSIM_BASE_UNITS_H

#include <stdint.h>

#define BASE_GIB 1073741824.0

static inline double base_gib(uint64_t bytes)
{
    return (double)bytes / BASE_GIB;
}

#endif
