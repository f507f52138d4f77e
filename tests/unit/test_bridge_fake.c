/* The host-memory runtime double (test_bridge_fake.h). */
#include <stdlib.h>
#include <string.h>

#include "tests/unit/test_bridge_fake.h"

static bridge_fake_state fake;

/* Allocation sizes by address, to give the capacity back on free. */
typedef struct fake_block {
    uint64_t addr, bytes;
} fake_block;
static fake_block blocks[4096];

bridge_fake_state *bridge_fake(void)
{
    return &fake;
}

void bridge_fake_reset(uint64_t capacity)
{
    fake = (bridge_fake_state){.capacity = capacity};
}

static ms_status f_open(int ordinal, void **ctx, ms_diag *d)
{
    (void)ordinal;
    (void)d;
    fake.opens++;
    *ctx = &fake;
    return MS_OK;
}

static void f_close(void *ctx)
{
    (void)ctx;
    fake.closes++;
}

static const char *f_last_error(void *ctx)
{
    (void)ctx;
    return "out of memory (fake)";
}

static ms_status f_mem_get_info(void *ctx, uint64_t *free_bytes, uint64_t *total_bytes)
{
    (void)ctx;
    *free_bytes = fake.capacity - fake.used;
    *total_bytes = fake.capacity;
    return MS_OK;
}

static ms_status f_malloc(void *ctx, uint64_t bytes, uint64_t *addr)
{
    (void)ctx;
    fake.mallocs++;
    if (bytes > fake.capacity - fake.used)
        return MS_ENOMEM;
    for (size_t i = 0; i < sizeof blocks / sizeof blocks[0]; i++)
        if (blocks[i].addr == 0) {
            /* 512-byte aligned as cudaMalloc's pointers are (at least). */
            void *p = aligned_alloc(512, (size_t)bytes);
            if (p == NULL)
                return MS_ENOMEM;
            blocks[i] = (fake_block){(uint64_t)(uintptr_t)p, bytes};
            fake.used += bytes;
            fake.live_allocs++;
            *addr = blocks[i].addr;
            return MS_OK;
        }
    return MS_ENOMEM;
}

static ms_status f_free(void *ctx, uint64_t addr)
{
    (void)ctx;
    fake.frees++;
    for (size_t i = 0; i < sizeof blocks / sizeof blocks[0]; i++)
        if (blocks[i].addr == addr && addr != 0) {
            free((void *)(uintptr_t)addr);
            fake.used -= blocks[i].bytes;
            fake.live_allocs--;
            blocks[i] = (fake_block){0};
            return MS_OK;
        }
    return MS_EINVAL;
}

static ms_status f_stream_synchronize(void *ctx, void *s)
{
    (void)ctx;
    (void)s;
    fake.syncs++;
    return MS_OK;
}

static ms_status f_device_synchronize(void *ctx)
{
    (void)ctx;
    fake.syncs++;
    return MS_OK;
}

static const npu_runtime fake_runtime = {
    .name = "cuda",
    .device_noun = "fake device",
    .open = f_open,
    .close = f_close,
    .last_error = f_last_error,
    .mem_get_info = f_mem_get_info,
    .malloc_device = f_malloc,
    .free_device = f_free,
    .stream_synchronize = f_stream_synchronize,
    .device_synchronize = f_device_synchronize,
};

const npu_runtime *bridge_fake_runtime(void)
{
    return &fake_runtime;
}
