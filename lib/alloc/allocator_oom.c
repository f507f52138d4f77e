/* Out of memory: the oom trace entry, num_ooms, and the message text of
 * each flavour byte for byte (CUDACachingAllocator.cpp malloc;
 * NPUCachingAllocator.cpp malloc), sizes printed by format_size. */
#include <inttypes.h>
#include <stdio.h>

#include "allocator_internal.h"

/* format_size: std::fixed with precision 2, which is printf's %.2f. */
void alloc_format(uint64_t size, char out[32])
{
    if (size <= 1024)
        snprintf(out, 32, "%" PRIu64 " bytes", size);
    else if (size <= 1048576)
        snprintf(out, 32, "%.2f KiB", (double)size / 1024.0);
    else if (size <= UINT64_C(1073741824))
        snprintf(out, 32, "%.2f MiB", (double)size / 1048576.0);
    else
        snprintf(out, 32, "%.2f GiB", (double)size / 1073741824.0);
}

ms_status ms_alloc_format_size(uint64_t size, char *buf, size_t len)
{
    if (!buf || len == 0)
        return MS_EINVAL;
    char tmp[32];
    alloc_format(size, tmp);
    int n = snprintf(buf, len, "%s", tmp);
    return (size_t)n < len ? MS_OK : MS_ERANGE;
}

typedef struct oom_sizes {
    char alloc[32], total[32], free_[32], used[32], allowed[48];
    char allocated[32], active[32], reserved[32], unallocated[32];
} oom_sizes;

static void oom_sizes_fill(const ms_alloc *a, const ms_aparams *p, uint64_t free_bytes,
                           uint64_t total, oom_sizes *s)
{
    const ms_astats *st = &a->stats;
    int64_t allocated = alloc_stat_current(&st->allocated_bytes);
    int64_t reserved = alloc_stat_current(&st->reserved_bytes);
    alloc_format(p->alloc_size, s->alloc);
    alloc_format(total, s->total);
    alloc_format(free_bytes, s->free_);
    alloc_format(free_bytes <= total ? total - free_bytes : 0, s->used);
    alloc_format((uint64_t)allocated, s->allocated);
    alloc_format((uint64_t)alloc_stat_current(&st->active_bytes), s->active);
    alloc_format((uint64_t)reserved, s->reserved);
    alloc_format((uint64_t)(reserved - allocated), s->unallocated);
    s->allowed[0] = '\0';
    if (a->set_fraction) {
        char allowed[32];
        alloc_format(a->allowed_memory_maximum, allowed);
        snprintf(s->allowed, sizeof s->allowed, "%s allowed; ", allowed);
    }
}

/* The process-memory sentence comes from NVML in PyTorch; on a simulated
 * device this process is the only user, so it holds total - free. */
static ms_status cuda_message(const ms_alloc *a, const oom_sizes *s, ms_diag *d)
{
    return ms_diag_set(
        d, MS_ENOMEM,
        "CUDA out of memory. Tried to allocate %s. GPU %d has a total capacity of %s of which %s "
        "is free. Including non-PyTorch memory, this process has %s memory in use. %sOf the "
        "allocated memory %s is allocated by PyTorch, and %s is reserved by PyTorch but "
        "unallocated. If reserved but unallocated memory is large try setting "
        "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True to avoid fragmentation.  See "
        "documentation for Memory Management  "
        "(https://pytorch.org/docs/stable/notes/cuda.html#environment-variables)",
        s->alloc, a->be->device, s->total, s->free_, s->used, s->allowed, s->allocated,
        s->unallocated);
}

static ms_status npu_message(const ms_alloc *a, const oom_sizes *s, ms_diag *d)
{
    return ms_diag_set(d, MS_ENOMEM,
                       "NPU out of memory. Tried to allocate %s (NPU %d; %s total capacity; %s "
                       "already allocated; %s current active; %s free; %s%s reserved in total by "
                       "PyTorch) If reserved memory is >> allocated memory try setting "
                       "max_split_size_mb to avoid fragmentation.",
                       s->alloc, a->be->device, s->total, s->allocated, s->active, s->free_,
                       s->allowed, s->reserved);
}

ms_status alloc_oom(ms_alloc *a, const ms_aparams *p, ms_diag *d)
{
    uint64_t free_bytes = 0, total = 0;
    ms_status st = a->be->ops->mem_get_info(a->be->inst, &free_bytes, &total);
    if (st != MS_OK)
        return ms_diag_set(d, st, "out of memory, and mem_get_info failed: %s", ms_strerror(st));
    a->stats.num_ooms++;
    alloc_emit(a, MS_AA_OOM, free_bytes, p->size, p->stream_id, p->pool);
    oom_sizes s;
    oom_sizes_fill(a, p, free_bytes, total, &s);
    /* MindSpeed's allocator raises torch_npu's message. */
    if (alloc_npu_family(a))
        return npu_message(a, &s, d);
    return cuda_message(a, &s, d);
}
