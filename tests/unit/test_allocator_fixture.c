/* The allocator test fixture (test_allocator_fixture.h). */
#include "test_allocator_fixture.h"

#include <check.h>
#include <string.h>

static void record(void *user, const ms_alloc_event *ev)
{
    fx *f = user;
    if (f->n_ev < FX_MAX_EVENTS)
        f->ev[f->n_ev++] = *ev;
}

void fx_open_cfg(fx *f, const ms_alloc_config *cfg, uint64_t capacity, int device)
{
    memset(f, 0, sizeof *f);
    f->be = fake_open(capacity, device);
    ck_assert_ptr_nonnull(f->be);
    f->s0 = fake_stream(f->be);
    f->s1 = fake_stream(f->be);
    ck_assert_int_eq(ms_alloc_create(f->be, cfg, &f->a), MS_OK);
    ck_assert_int_eq(ms_alloc_set_observer(f->a, record, f), MS_OK);
}

void fx_open(fx *f, ms_alloc_flavour flavour, const char *conf, uint64_t capacity)
{
    ms_alloc_config cfg;
    ck_assert_int_eq(ms_alloc_config_default(flavour, &cfg), MS_OK);
    ck_assert_int_eq(ms_alloc_config_parse(conf, &cfg, NULL), MS_OK);
    fx_open_cfg(f, &cfg, capacity, 0);
}

void fx_close(fx *f)
{
    ck_assert_int_eq(ms_alloc_destroy(f->a), MS_OK);
    ck_assert_uint_eq(fake_get_counts(f->be)->used, 0);
    ck_assert_int_eq(fake_get_counts(f->be)->events_live, 0);
    fake_close(f->be);
}

uint64_t fx_mp(fx *f, uint64_t size, ms_stream *s, int pool)
{
    uint64_t addr = 0;
    ms_status st = ms_alloc_malloc(f->a, size, s, pool, &addr, &f->d);
    ck_assert_msg(st == MS_OK, "malloc(%llu): %s", (unsigned long long)size, f->d.msg);
    return addr;
}

uint64_t fx_ms(fx *f, uint64_t size, ms_stream *s)
{
    return fx_mp(f, size, s, 0);
}

uint64_t fx_m(fx *f, uint64_t size)
{
    return fx_mp(f, size, f->s0, 0);
}

void fx_f(fx *f, uint64_t addr)
{
    ck_assert_int_eq(ms_alloc_free(f->a, addr), MS_OK);
}

ms_alloc_stats fx_stats(fx *f)
{
    ms_alloc_stats s;
    s = ms_alloc_get_stats(f->a);
    return s;
}

const fake_counts *fx_counts(fx *f)
{
    return fake_get_counts(f->be);
}

static void collect(void *user, const ms_block_info *info)
{
    fx_blocks *bs = user;
    if (bs->n < FX_MAX_BLOCKS)
        bs->b[bs->n++] = *info;
}

fx_blocks fx_visit(fx *f)
{
    fx_blocks bs = {.n = 0};
    ck_assert_int_eq(ms_alloc_visit_blocks(f->a, collect, &bs), MS_OK);
    return bs;
}

const ms_alloc_event *fx_last(const fx *f, ms_alloc_action action)
{
    for (int i = f->n_ev; i-- > 0;)
        if (f->ev[i].action == action)
            return &f->ev[i];
    return NULL;
}
