/* Mock device memory.  Device segments and mapped pages of reservations are
 * charged against the device's HBM capacity (sim/ counts the bytes); address
 * ranges come from a deterministic first-fit address space per device, so a
 * run's addresses are reproducible and freed ranges are reused.
 *
 * Layout of device d: a 16 TiB window at 0x7f0000000000 + d * 2^44; device
 * segments and reservations in its lower 8 TiB, pinned host memory in its
 * upper 8 TiB.  Everything is 512-byte aligned and sized (a segment of n
 * bytes occupies, and costs, n rounded up to 512). */
#include <stdlib.h>
#include <string.h>

#include "mock_private.h"
#include "lib/base/growable.h"

#define MOCK_BASE 0x7f0000000000ULL
#define MOCK_WINDOW (1ULL << 44)
#define MOCK_HALF MS_MAX_DEVICE_MEMORY /* memsim/device.h */
#define MOCK_ALIGN 512ULL

ms_status mock_memory_init(ms_mock *m)
{
    uint64_t base = MOCK_BASE + (uint64_t)m->device * MOCK_WINDOW;
    ms_status st = mock_addrspace_init(&m->dev_as, base, MOCK_HALF, MOCK_ALIGN);
    if (st != MS_OK)
        return st;
    st = mock_addrspace_init(&m->host_as, base + MOCK_HALF, MOCK_HALF, MOCK_ALIGN);
    if (st != MS_OK)
        mock_addrspace_fini(&m->dev_as);
    return st;
}

void mock_memory_fini(ms_mock *m)
{
    for (size_t i = 0; i < m->n_resv; i++)
        base_range_set_fini(&m->resv[i].mapped);
    free(m->resv);
    mock_addrspace_fini(&m->dev_as);
    mock_addrspace_fini(&m->host_as);
}

ms_status mock_mem_get_info(void *inst, uint64_t *free_bytes, uint64_t *total_bytes)
{
    ms_mock *m = inst;
    if (m == NULL || free_bytes == NULL || total_bytes == NULL)
        return MS_EINVAL;
    ms_status st = mock_enter(m);
    if (st != MS_OK)
        return st;
    uint64_t used = 0, cap = 0;
    sim_dev_hbm_usage(m->dev, &used, NULL, &cap);
    *free_bytes = cap - used;
    *total_bytes = cap;
    return MS_OK;
}

/* The reservation that starts at addr (exact) or contains it (!exact). */
static ms_reservation *find_resv(ms_mock *m, uint64_t addr, bool exact, size_t *index)
{
    size_t lo = 0, hi = m->n_resv;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (m->resv[mid].range.addr <= addr)
            lo = mid + 1;
        else
            hi = mid;
    }
    if (lo == 0)
        return NULL;
    ms_reservation *r = &m->resv[lo - 1];
    if (exact ? r->range.addr != addr : addr - r->range.addr >= r->range.size)
        return NULL;
    if (index != NULL)
        *index = lo - 1;
    return r;
}

ms_status mock_malloc_device(void *inst, uint64_t bytes, uint64_t *addr)
{
    ms_mock *m = inst;
    if (m == NULL || addr == NULL || bytes == 0)
        return MS_EINVAL;
    ms_status st = mock_enter(m);
    if (st != MS_OK)
        return st;
    uint64_t fp = mock_addrspace_footprint(&m->dev_as, bytes);
    if (fp == 0)
        return MS_ENOMEM;
    if ((st = sim_dev_hbm_charge(m->dev, fp)) != MS_OK)
        return st;
    if ((st = mock_addrspace_alloc(&m->dev_as, fp, addr)) != MS_OK) {
        sim_dev_hbm_uncharge(m->dev, fp);
        return st;
    }
    if (m->data != NULL && (st = mock_data_device_added(m, *addr, fp, false)) != MS_OK) {
        mock_addrspace_release(&m->dev_as, *addr, NULL);
        sim_dev_hbm_uncharge(m->dev, fp);
    }
    return st;
}

ms_status mock_free_device(void *inst, uint64_t addr)
{
    ms_mock *m = inst;
    if (m == NULL)
        return MS_EINVAL;
    ms_status st = mock_enter(m);
    if (st != MS_OK)
        return st;
    if (find_resv(m, addr, true, NULL) != NULL)
        return MS_EINVAL; /* a reservation is released with va_release */
    uint64_t fp = 0;
    if ((st = mock_addrspace_release(&m->dev_as, addr, &fp)) != MS_OK)
        return st;
    if (m->data != NULL)
        mock_data_device_removed(m, addr);
    return sim_dev_hbm_uncharge(m->dev, fp);
}

ms_status mock_malloc_host(void *inst, uint64_t bytes, uint64_t *addr)
{
    ms_mock *m = inst;
    if (m == NULL || addr == NULL || bytes == 0)
        return MS_EINVAL;
    ms_status st = mock_enter(m);
    if (st != MS_OK)
        return st;
    uint64_t fp = mock_addrspace_footprint(&m->host_as, bytes);
    if (fp == 0 || (m->host_pinned_limit != 0 && fp > m->host_pinned_limit - m->host_used))
        return MS_ENOMEM;
    if ((st = mock_addrspace_alloc(&m->host_as, fp, addr)) != MS_OK)
        return st;
    if (m->data != NULL && (st = mock_data_host_added(m, *addr, fp, addr)) != MS_OK) {
        mock_addrspace_release(&m->host_as, *addr, NULL);
        return st;
    }
    m->host_used += fp;
    return MS_OK;
}

ms_status mock_free_host(void *inst, uint64_t addr)
{
    ms_mock *m = inst;
    if (m == NULL)
        return MS_EINVAL;
    ms_status st = mock_enter(m);
    if (st != MS_OK)
        return st;
    uint64_t fp = 0;
    if (m->data != NULL && (st = mock_data_host_removed(m, addr, &addr)) != MS_OK)
        return st; /* not a buffer of ours; addr is now the accounting address */
    if ((st = mock_addrspace_release(&m->host_as, addr, &fp)) != MS_OK)
        return st;
    m->host_used -= fp;
    return MS_OK;
}

ms_status mock_va_reserve(void *inst, uint64_t bytes, uint64_t *addr)
{
    ms_mock *m = inst;
    if (m == NULL || addr == NULL || bytes == 0)
        return MS_EINVAL;
    ms_status st = mock_enter(m);
    if (st != MS_OK)
        return st;
    if (!MS_GROW(m->resv, m->n_resv, m->cap_resv, 8))
        return MS_ENOMEM;
    /* Address space only: reserving costs no capacity (cuMemAddressReserve). */
    uint64_t a = 0;
    if ((st = mock_addrspace_alloc(&m->dev_as, bytes, &a)) != MS_OK)
        return st;
    size_t i = 0;
    while (i < m->n_resv && m->resv[i].range.addr < a)
        i++;
    memmove(&m->resv[i + 1], &m->resv[i], (m->n_resv - i) * sizeof *m->resv);
    uint64_t fp = mock_addrspace_footprint(&m->dev_as, bytes);
    if (m->data != NULL && (st = mock_data_device_added(m, a, fp, true)) != MS_OK) {
        mock_addrspace_release(&m->dev_as, a, NULL);
        return st;
    }
    m->resv[i] = (ms_reservation){.range = {a, fp}};
    m->n_resv++;
    *addr = a;
    return MS_OK;
}

ms_status mock_va_release(void *inst, uint64_t addr)
{
    ms_mock *m = inst;
    if (m == NULL)
        return MS_EINVAL;
    ms_status st = mock_enter(m);
    if (st != MS_OK)
        return st;
    size_t i = 0;
    ms_reservation *r = find_resv(m, addr, true, &i);
    /* As cuMemAddressFree, every mapping must be gone first. */
    if (r == NULL || r->mapped.n > 0)
        return MS_EINVAL;
    if ((st = mock_addrspace_release(&m->dev_as, addr, NULL)) != MS_OK)
        return st;
    if (m->data != NULL)
        mock_data_device_removed(m, addr);
    base_range_set_fini(&r->mapped);
    memmove(&m->resv[i], &m->resv[i + 1], (m->n_resv - i - 1) * sizeof *m->resv);
    m->n_resv--;
    return MS_OK;
}

/* The reservation holding all of [addr, addr + bytes), or NULL. */
static ms_reservation *resv_holding(ms_mock *m, uint64_t addr, uint64_t bytes)
{
    ms_reservation *r = find_resv(m, addr, false, NULL);
    if (r == NULL || bytes > r->range.size - (addr - r->range.addr))
        return NULL;
    return r;
}

ms_status mock_mem_map(void *inst, uint64_t addr, uint64_t bytes)
{
    ms_mock *m = inst;
    if (m == NULL || bytes == 0)
        return MS_EINVAL;
    ms_status st = mock_enter(m);
    if (st != MS_OK)
        return st;
    ms_reservation *r = resv_holding(m, addr, bytes);
    if (r == NULL)
        return MS_EINVAL;
    ms_range_set *ms = &r->mapped;
    ptrdiff_t i = base_range_set_floor(ms, addr);
    bool overlaps_before = i >= 0 && ms->v[i].addr + ms->v[i].size > addr;
    bool overlaps_after = (size_t)(i + 1) < ms->n && ms->v[i + 1].addr < addr + bytes;
    if (overlaps_before || overlaps_after)
        return MS_EINVAL; /* already mapped */
    if ((st = base_range_set_reserve(ms, 1)) != MS_OK)
        return st;
    if ((st = sim_dev_hbm_charge(m->dev, bytes)) != MS_OK)
        return st;
    base_range_set_add(ms, (ms_range){addr, bytes}, true);
    return MS_OK;
}

ms_status mock_mem_unmap(void *inst, uint64_t addr, uint64_t bytes)
{
    ms_mock *m = inst;
    if (m == NULL || bytes == 0)
        return MS_EINVAL;
    ms_status st = mock_enter(m);
    if (st != MS_OK)
        return st;
    ms_reservation *r = resv_holding(m, addr, bytes);
    if (r == NULL)
        return MS_EINVAL;
    ms_range_set *ms = &r->mapped;
    ptrdiff_t i = base_range_set_floor(ms, addr);
    if (i < 0 || addr >= ms->v[i].addr + ms->v[i].size ||
        bytes > ms->v[i].addr + ms->v[i].size - addr)
        return MS_EINVAL; /* part of the range is not mapped */
    if ((st = base_range_set_reserve(ms, 1)) != MS_OK)
        return st;
    base_range_set_cut(ms, (size_t)i, (ms_range){addr, bytes});
    if (m->data != NULL)
        mock_data_device_unmapped(m, addr, bytes);
    return sim_dev_hbm_uncharge(m->dev, bytes);
}
