/* backend_mock/: the mock NPU instance, shared by its source files. */
#ifndef MEMSIM_MOCK_PRIVATE_H
#define MEMSIM_MOCK_PRIVATE_H

#include "address_space.h"
#include "backend_mock/mock.h"
#include "lib/base/obj_pool.h"

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

/* The remembered prices of one device spec.  A price is a function of the
 * cost model and the key alone, and every device of a group is made from
 * the group's one spec, so the group's devices share one table
 * (mock_share_prices): with 64 pipeline stages each a table of its own was
 * 64 x 112 KiB read at random, and half of mock_launch's time on GPT-1T
 * went to those cold slots. */
typedef struct mock_prices {
    ms_price_memo slots[MS_PRICE_MEMO_SLOTS];
    uint32_t used;
} mock_prices;

/* A va_reserve'd range and the parts of it that are mapped. */
typedef struct ms_reservation {
    ms_range range;
    ms_range_set mapped; /* coalesced */
} ms_reservation;

typedef struct mock_data mock_data;

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
    struct ms_event *events; /* open handles */
    base_pool event_pool;    /* their memory, recycled */
    mock_prices own_prices;
    mock_prices *prices; /* own_prices, or the group's (mock_share_prices) */
    mock_data *data;   /* the functional mode's bytes; NULL: timing and capacity only */
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

/* state.c (fast-forward) */
ms_status mock_event_state(void *inst, const ms_event *e, ms_state_sig *sig);

/* mock.c: every host-side call starts here (device time catches up). */
ms_status mock_enter(ms_mock *m);
/* The instance behind a mock's handle (NULL if b is not a mock). */
ms_mock *mock_instance(const ms_backend *b);

/* functional.c: the functional mode (mock_enable_data), called by the
 * memory and copy calls when m->data is set. */
void mock_data_free(ms_mock *m);
ms_status mock_data_fault(const ms_mock *m);
const char *mock_data_fault_text(const ms_mock *m); /* "" when none */
ms_status mock_data_device_added(ms_mock *m, uint64_t addr, uint64_t size, bool reservation);
void mock_data_device_removed(ms_mock *m, uint64_t addr);
void mock_data_device_unmapped(ms_mock *m, uint64_t addr, uint64_t size);
/* A pinned buffer of size bytes whose accounting address is fake; *addr
 * gets its real host address. */
ms_status mock_data_host_added(ms_mock *m, uint64_t fake, uint64_t size, uint64_t *addr);
ms_status mock_data_host_removed(ms_mock *m, uint64_t addr, uint64_t *fake);
ms_status mock_data_copy_issued(ms_mock *m, uint64_t stream_id, uint64_t dst, uint64_t src,
                                uint64_t bytes, ms_copy_kind kind);
/* The last copy issued on the stream did not reach the simulator after all. */
void mock_data_copy_withdrawn(ms_mock *m, uint64_t stream_id);
void mock_data_tracer(void *user, const ms_work_record *rec);
void mock_data_set_tracer(ms_mock *m, ms_work_tracer fn, void *user);

#endif
