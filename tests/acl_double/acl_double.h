/* The ACL test double's control and accounting (tests only): how many
 * devices it pretends to have and their memory, and what the code under
 * test did with them, so a test can check that every byte, stream, event
 * and tensor it made was given back. */
#ifndef MEMSIM_TEST_ACL_DOUBLE_H
#define MEMSIM_TEST_ACL_DOUBLE_H

#include <stdint.h>

#include "acl/acl.h"

typedef struct acl_double_stats {
    uint64_t device_bytes, device_allocs;     /* live, all devices */
    uint64_t host_bytes, host_allocs;         /* live pinned host memory */
    uint64_t host_allocs_made;                /* aclrtMallocHost calls that succeeded */
    uint64_t streams, events, tensors;        /* live */
    uint64_t gemms;                           /* aclnnBatchMatMul calls run */
    uint64_t fp16_gemms;                      /* those on ACL_FLOAT16 operands */
    double gemm_flops;                        /* 2 b m n k summed over them */
    uint64_t bytes_h2d, bytes_d2h, bytes_d2d; /* copied */
    uint64_t swept_bytes, swept_objects;      /* what aclrtResetDevice had to free */
    uint64_t rejected;                        /* calls refused for bad arguments */
} acl_double_stats;

/* Pretend to have n_devices devices of hbm_bytes each (0 devices: none).
 * Clears the counters and the copy delays; nothing may be live. */
void acl_double_configure(int n_devices, uint64_t hbm_bytes);
acl_double_stats acl_double_get_stats(void);
/* Make every stream pause a random 0 .. max_us microseconds before each of
 * its tasks (0: none), each stream with its own sequence from seed, so that
 * work on different streams interleaves in orders a loaded machine only
 * shows now and then: an ordering the code under test forgot shows up as a
 * wrong byte.  ACL_DOUBLE_JITTER=MAX_US[:SEED] sets it at aclInit. */
void acl_double_set_jitter(unsigned max_us, unsigned seed);
/* Make every copy of one kind wait us microseconds on its stream before it
 * moves its bytes, as one direction of a busy copy engine does: work on
 * other streams overtakes it unless something orders it (0: none). */
void acl_double_set_copy_delay(aclrtMemcpyKind kind, unsigned us);

#endif
