/* A caching allocator of pinned host memory (runtime.h), as PyTorch's
 * CachingHostAllocator: pinning is slow (cudaHostAlloc maps and locks every
 * page), and a swapping step asks for the same sizes every step. */
#include <stddef.h>
#include <string.h>

#include "lib/base/growable.h"
#include "lib/base/range_set.h"
#include "runtime.h"

static uint64_t block_size(uint64_t bytes)
{
    uint64_t size = 4096;
    while (size < bytes && size <= UINT64_MAX / 2)
        size *= 2;
    return size;
}

static size_t find(const npu_pinned *p, uint64_t addr)
{
    _Static_assert(offsetof(npu_pinned_block, addr) == 0, "blocks are searched by a leading address");
    return base_addr_lower_bound(p->blocks, p->n, sizeof *p->blocks, addr);
}

static ms_status add_block(npu_pinned *p, uint64_t addr, uint64_t size)
{
    if (!MS_GROW(p->blocks, p->n, p->cap, 16))
        return MS_ENOMEM;
    size_t i = find(p, addr);
    memmove(&p->blocks[i + 1], &p->blocks[i], (p->n - i) * sizeof *p->blocks);
    p->blocks[i] = (npu_pinned_block){.addr = addr, .size = size, .in_use = true};
    p->n++;
    return MS_OK;
}

/* Give every cached (free) block back to the runtime. */
static void release_cached(const npu_runtime *rt, void *ctx, npu_pinned *p)
{
    size_t k = 0;
    for (size_t i = 0; i < p->n; i++) {
        if (p->blocks[i].in_use)
            p->blocks[k++] = p->blocks[i];
        else
            rt->free_host(ctx, p->blocks[i].addr);
    }
    p->n = k;
}

ms_status npu_pinned_malloc(const npu_runtime *rt, void *ctx, npu_pinned *p, uint64_t bytes,
                            uint64_t *addr)
{
    if (p == NULL || addr == NULL || bytes == 0)
        return MS_EINVAL;
    uint64_t size = block_size(bytes);
    for (size_t i = 0; i < p->n; i++) {
        if (!p->blocks[i].in_use && p->blocks[i].size == size) {
            p->blocks[i].in_use = true;
            *addr = p->blocks[i].addr;
            return MS_OK;
        }
    }
    if (!MS_GROW(p->blocks, p->n, p->cap, 16))
        return MS_ENOMEM;
    ms_status st = rt->malloc_host(ctx, size, addr);
    if (st == MS_ENOMEM) {
        release_cached(rt, ctx, p);
        st = rt->malloc_host(ctx, size, addr);
    }
    if (st == MS_OK && (st = add_block(p, *addr, size)) != MS_OK)
        rt->free_host(ctx, *addr);
    return st;
}

ms_status npu_pinned_free(npu_pinned *p, uint64_t addr)
{
    if (p == NULL)
        return MS_EINVAL;
    size_t i = find(p, addr);
    if (i == p->n || p->blocks[i].addr != addr || !p->blocks[i].in_use)
        return MS_EINVAL;
    p->blocks[i].in_use = false;
    return MS_OK;
}

uint64_t npu_pinned_release(const npu_runtime *rt, void *ctx, npu_pinned *p)
{
    uint64_t leaked = 0;
    for (size_t i = 0; i < p->n; i++) {
        if (p->blocks[i].in_use)
            leaked += p->blocks[i].size;
        rt->free_host(ctx, p->blocks[i].addr);
    }
    free(p->blocks);
    *p = (npu_pinned){0};
    return leaked;
}
