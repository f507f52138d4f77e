/* backend_mock/: the mock NPU instance, shared by its source files. */
#ifndef MEMSIM_MOCK_PRIVATE_H
#define MEMSIM_MOCK_PRIVATE_H

#include "address_space.h"
#include "backend_mock/mock.h"

struct ms_mock;

struct ms_stream {
    struct ms_mock *owner;
    ms_simstream *ss;
    struct ms_stream *prev, *next;
};

struct ms_event {
    struct ms_mock *owner;
    ms_simevent *se;
    struct ms_event *prev, *next;
};

/* One remembered kernel price: the fields sim_cost_kernel_ns reads (doubles
 * as their bit patterns, so only identical inputs match) and its result. */
typedef struct ms_price_memo {
    uint64_t flops, bytes, comm_bytes;
    int64_t shape[4]; /* GEMM and attention efficiency go by shape */
    int32_t cls, dtype, comm, link, group_size, ranks_per_node;
    bool used;
    int64_t ns;
} ms_price_memo;

/* Open addressing (linear probing); emptied when three quarters full, so a
 * workload with more distinct kernels than that only prices some again. */
enum { MS_PRICE_MEMO_BITS = 10, MS_PRICE_MEMO_SLOTS = 1 << MS_PRICE_MEMO_BITS };

/* A va_reserve'd range and the parts of it that are mapped. */
typedef struct ms_reservation {
    ms_range range;
    ms_range_set mapped; /* coalesced */
} ms_reservation;

typedef struct ms_mock {
    ms_sim *sim;
    ms_simdev *dev;
    const ms_cost_model *cm; /* the device's */
    ms_simhost *host;
    int device;
    uint64_t seed;
    int64_t launch_overhead_ns;
    uint32_t queue_depth;
    uint64_t host_pinned_limit; /* 0: unlimited */
    uint64_t host_used;
    ms_addrspace dev_as;  /* device segments and reservations */
    ms_addrspace host_as; /* pinned host memory */
    ms_reservation *resv; /* sorted by address */
    size_t n_resv, cap_resv;
    struct ms_stream *streams; /* open handles */
    struct ms_event *events;
    ms_price_memo prices[MS_PRICE_MEMO_SLOTS];
    uint32_t n_prices; /* slots used */
} ms_mock;

/* memory.c */
ms_status mock_memory_init(ms_mock *m);
void mock_memory_fini(ms_mock *m);
ms_status mock_mem_get_info(void *inst, uint64_t *free_bytes, uint64_t *total_bytes);
ms_status mock_malloc_device(void *inst, uint64_t bytes, uint64_t *addr);
ms_status mock_free_device(void *inst, uint64_t addr);
ms_status mock_malloc_host(void *inst, uint64_t bytes, uint64_t *addr);
ms_status mock_free_host(void *inst, uint64_t addr);
ms_status mock_va_reserve(void *inst, uint64_t bytes, uint64_t *addr);
ms_status mock_va_release(void *inst, uint64_t addr);
ms_status mock_mem_map(void *inst, uint64_t addr, uint64_t bytes);
ms_status mock_mem_unmap(void *inst, uint64_t addr, uint64_t bytes);

/* mock.c: every host-side call starts here (device time catches up). */
ms_status mock_enter(ms_mock *m);

#endif
