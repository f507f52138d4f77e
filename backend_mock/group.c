/* The mock's device groups: one engine for every device of the group, so
 * their p2p transfers and the pipeline bubble come out of one simulation,
 * and with several devices the cooperative host threads (cohost.c) that
 * run their hosts in the order exact timings need. */
#include "backend_mock/cohost.h"
#include "backend_mock/mock.h"

#include <stdlib.h>

typedef struct mock_group {
    ms_device_group g;
    ms_sim *engine;
    ms_cohost *co;         /* NULL with one device: its body runs directly */
    ms_backend **real;     /* the mocks; g.devices wraps them with several */
    ms_group_body body;
    void *user;
} mock_group;

static ms_status group_destroy(void *inst)
{
    mock_group *m = inst;
    /* Last to first: every device prices from the first one's table. */
    for (int i = m->g.n_devices - 1; i >= 0; i--) {
        if (m->g.devices[i] != NULL && m->g.devices[i] != m->real[i])
            ms_backend_close(m->g.devices[i]);
        if (m->real[i] != NULL)
            ms_backend_close(m->real[i]);
    }
    if (m->co != NULL)
        mock_cohost_destroy(m->co);
    if (m->engine != NULL)
        sim_destroy(m->engine);
    free(m->g.devices);
    free(m->real);
    free(m);
    return MS_OK;
}

static ms_status host_body(void *user, int host)
{
    mock_group *m = user;
    return m->body(m->user, host);
}

/* A finished host must not bound how far the others run the engine. */
static void host_done(void *user, int host)
{
    mock_group *m = user;
    mock_set_host_idle(m->real[host]);
}

static ms_status group_run(void *inst, ms_group_body body, void *user)
{
    mock_group *m = inst;
    if (m->co == NULL)
        return body(user, 0);
    m->body = body;
    m->user = user;
    /* Every host starts the run together, as every rank starts its step. */
    for (int i = 0; i < m->g.n_devices; i++) {
        ms_status st = mock_set_host_active(m->real[i]);
        if (st != MS_OK)
            return st;
    }
    return mock_cohost_run(m->co, host_body, host_done, m);
}

static ms_status group_cancel(void *inst)
{
    mock_group *m = inst;
    return m->co != NULL ? mock_cohost_cancel(m->co) : MS_OK;
}

/* Between runs every host is done: the engine's state, then each mock's. */
static ms_status group_state_write(void *inst, ms_state_sig *sig, int64_t *now_ns)
{
    mock_group *m = inst;
    ms_status st = sim_state_write(m->engine, sig);
    for (int i = 0; st == MS_OK && i < m->g.n_devices; i++)
        st = mock_state_write(m->real[i], sig);
    if (st == MS_OK)
        st = sim_now(m->engine, now_ns);
    return st;
}

static ms_status group_advance(void *inst, int64_t delta_ns)
{
    mock_group *m = inst;
    return sim_state_shift(m->engine, delta_ns);
}

static const ms_group_ops mock_group_ops = {
    .name = "mock",
    .run = group_run,
    .cancel = group_cancel,
    .destroy = group_destroy,
    .state_write = group_state_write,
    .advance = group_advance,
};

static ms_status open_devices(mock_group *m, const ms_group_config *cfg)
{
    int n = cfg->n_devices;
    ms_status st = sim_create(&m->engine);
    if (st == MS_OK && n > 1)
        st = mock_cohost_create(n, mock_host_clock, mock_host_clock_moves, mock_host_changes,
                                &m->co);
    for (int i = 0; st == MS_OK && i < n; i++) {
        st = mock_create(m->engine, cfg->spec, cfg->first_device + i, cfg->seed, &m->real[i]);
        if (st == MS_OK)
            st = mock_set_host_tag(m->real[i], i);
        if (st == MS_OK && i > 0)
            st = mock_share_prices(m->real[i], m->real[0]);
        if (st == MS_OK && cfg->functional)
            st = mock_enable_data(m->real[i]);
        m->g.devices[i] = m->real[i];
        if (st == MS_OK && m->co != NULL)
            st = mock_cohost_wrap(m->co, i, m->real[i], &m->g.devices[i]);
    }
    return st;
}

ms_status mock_group_open(const ms_group_config *cfg, ms_device_group **out, ms_diag *d)
{
    if (cfg == NULL || cfg->spec == NULL || out == NULL || cfg->n_devices < 1 ||
        cfg->first_device < 0)
        return ms_diag_set(d, MS_EINVAL, "mock: bad device group configuration");
    mock_group *m = calloc(1, sizeof *m);
    if (m == NULL)
        return MS_ENOMEM;
    m->g = (ms_device_group){.ops = &mock_group_ops, .inst = m, .n_devices = cfg->n_devices};
    m->real = calloc((size_t)cfg->n_devices, sizeof *m->real);
    m->g.devices = calloc((size_t)cfg->n_devices, sizeof *m->g.devices);
    ms_status st = m->real != NULL && m->g.devices != NULL ? open_devices(m, cfg) : MS_ENOMEM;
    if (st != MS_OK) {
        group_destroy(m);
        return ms_diag_set(d, st, "mock: cannot open %d devices: %s", cfg->n_devices,
                           ms_strerror(st));
    }
    *out = &m->g;
    return MS_OK;
}
