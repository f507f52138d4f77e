/* Several host threads driving several simulated devices, one at a time
 * (private to backend_mock/).
 *
 * Each pipeline stage has a host thread in a real job; here each gets a
 * coroutine (its own stack; see cohost.c for the switch): only one ever runs
 * and they hand over explicitly, so a run is as deterministic as a single
 * thread.  A device's backend is wrapped so
 * that a call the mock answers with MS_EAGAIN ("another device's host must
 * move first") parks the thread; the scheduler then runs the host whose
 * clock is smallest, as the mock asks for exact timings, and retries the
 * parked call after someone else made progress.  The executor itself stays
 * plain blocking code. */
#ifndef MEMSIM_COHOST_H
#define MEMSIM_COHOST_H

#include "memsim/backend.h"
#include "memsim/status.h"

typedef struct ms_cohost ms_cohost;

/* The body one host runs (e.g. one training step of one stage). */
typedef ms_status (*ms_cohost_body)(void *user, int host);
/* Called when a host's body has returned (e.g. mock_set_host_idle). */
typedef void (*ms_cohost_done)(void *user, int host);

/* Reads a host's clock for the scheduler without side effects (the
 * backend's own now() catches up and would wake a parked host), and whether
 * a parked host is still waiting (parked may be NULL). */
typedef ms_status (*ms_cohost_clock)(const ms_backend *real, int64_t *ns, bool *parked);
/* How many times any host clock has moved forward (hosts sharing one
 * engine share the count): a turn that leaves it unchanged moved nothing. */
typedef uint64_t (*ms_cohost_moves)(const ms_backend *real);

/* The hosts (indices) whose clock or parked state changed since the last
 * call, at most max into hosts; returns how many changed. */
typedef size_t (*ms_cohost_changes)(const ms_backend *real, int *hosts, size_t max);

ms_status mock_cohost_create(int n_hosts, ms_cohost_clock clock, ms_cohost_moves moves,
                             ms_cohost_changes changes, ms_cohost **out);
ms_status mock_cohost_destroy(ms_cohost *c);
/* Wrap real (not owned) so its MS_EAGAIN answers park host `host`. */
ms_status mock_cohost_wrap(ms_cohost *c, int host, ms_backend *real, ms_backend **wrapped);
/* From a host's body: every call that is or becomes parked in this run
 * returns MS_ECANCELED instead of waiting (the other hosts wait for work
 * this host will never issue). */
ms_status mock_cohost_cancel(ms_cohost *c);
/* Run body(user, h) for every host to completion; returns the first error
 * (by host index) or MS_OK. */
ms_status mock_cohost_run(ms_cohost *c, ms_cohost_body body, ms_cohost_done done, void *user);

#endif
