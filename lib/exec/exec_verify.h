/* The executor's data check (private to lib/exec/): --verify.
 *
 * A tensor that leaves the device (swap) or is re-made (recompute) gets a
 * deterministic pattern when it is produced; when it is used again, its
 * bytes are copied back to the host and compared with what was written.  A
 * mismatch is an error naming the tensor and the op that read it.  Proxy
 * kernels compute nothing, so the check proves data movement and lifetimes
 * (the bytes a consumer reads are the bytes last written for that tensor),
 * not numerics.
 *
 * Only backend.h is used: the pattern is written into a pinned host buffer
 * and copied to the device (H2D on the producer's stream, after the
 * producer), the check is a D2H copy on the consumer's stream, after what
 * the consumer waits for, compared on the host once the copy's event has
 * completed.  So the check needs a backend that carries data (backend.h's
 * carries_data). */
#ifndef MEMSIM_EXEC_VERIFY_H
#define MEMSIM_EXEC_VERIFY_H

#include <stdbool.h>
#include <stdint.h>

#include "memsim/backend.h"
#include "memsim/status.h"

typedef struct exec_verifier exec_verifier;

/* What a check names when it fails (strings owned by the program). */
typedef struct exec_check_subject {
    uint32_t tensor;
    const char *tensor_name;
    uint32_t op;
    const char *op_name;
    const char *since; /* "its swap-in", "its recompute" */
} exec_check_subject;

/* The pattern of one production of one tensor (device, step, tensor and
 * generation all change it, so stale bytes from another step, another
 * tensor or the forward copy of a recomputed tensor never pass). */
uint64_t exec_verify_seed(int device, int step, uint32_t tensor, int generation);

ms_status exec_verify_create(ms_backend *b, exec_verifier **out);
/* Frees what is left; call after the device is idle (pending checks are
 * dropped unchecked). */
void exec_verify_destroy(exec_verifier *v);

/* Write the pattern of seed over [addr, addr + bytes) of device memory on
 * stream s, after the work issued there so far.  host_buf: a pinned buffer
 * of at least bytes that the caller owns and that holds the pattern
 * afterwards (a swap's own host buffer), or 0 to use a staging buffer
 * released once the copy is done. */
ms_status exec_verify_fill(exec_verifier *v, ms_stream *s, uint64_t addr, uint64_t bytes,
                           uint64_t seed, uint64_t host_buf, ms_diag *d);
/* Copy [addr, addr + bytes) back on stream s, after the work issued there so
 * far, to be compared with the pattern of seed once the copy is done. */
ms_status exec_verify_check(exec_verifier *v, ms_stream *s, uint64_t addr, uint64_t bytes,
                            uint64_t seed, const exec_check_subject *what, ms_diag *d);
/* Compare the checks whose copies are done and release finished staging
 * buffers; with wait, wait for all of them first.  The first mismatch is
 * MS_EHAZARD with its message in d. */
ms_status exec_verify_settle(exec_verifier *v, bool wait, ms_diag *d);
/* Checks issued and bytes compared since creation (for tests). */
uint64_t exec_verify_checked(const exec_verifier *v, uint64_t *bytes);

#endif
