/* bench_alloc: malloc+free pairs per second through the caching allocator
 * (see bench/README.md for the recorded figures).
 *
 * Two request streams, both generated before timing starts so that only the
 * allocator is measured:
 *
 *   train   a training-like step, replayed: 32 transformer layers whose
 *           forward keeps ~12 activations each (4-22 MiB, plus small norm
 *           statistics and attention log-sum-exps) and frees short-lived
 *           workspaces at once; the backward frees each layer's activations
 *           in reverse while gradient temporaries come and go; an optimizer
 *           pass allocates and frees per-parameter temporaries.  The
 *           sequence length changes from step to step (3 variants), so
 *           cached blocks are reused with splits and merges, not only
 *           exact hits.
 *   random  a stress stream: 512 live tensors, each pair frees a random one
 *           and allocates a size drawn from 512 B - 512 MiB.
 *   snapshot  the alloc/free requests of one device of a real PyTorch memory
 *           snapshot (memsim replay's input) in recorded order; tensors still
 *           live at the end are freed so that rounds repeat.
 *
 * Usage: bench_alloc [train|random] [pairs] [seed]   (train 5000000 1)
 *        bench_alloc snapshot [pairs] FILE [DEVICE] */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "memsim/allocator.h"
#include "memsim/trace.h"
#include "tests/unit/test_allocator_fake.h"

/* One operation: size > 0 allocates tensor id, size 0 frees it. */
typedef struct op {
    uint32_t id;
    uint64_t size;
} op;

typedef struct stream {
    op *ops;
    size_t n, cap;
    uint32_t ids;   /* distinct tensor ids used */
    uint64_t pairs; /* mallocs in ops */
    int oom;        /* host out of memory while generating */
} stream;

static void push(stream *s, uint32_t id, uint64_t size)
{
    if (s->n == s->cap) {
        size_t cap = s->cap ? s->cap * 2 : 4096;
        op *ops = realloc(s->ops, cap * sizeof *ops);
        if (!ops) {
            s->oom = 1;
            return;
        }
        s->ops = ops;
        s->cap = cap;
    }
    s->ops[s->n++] = (op){id, size};
    if (size)
        s->pairs++;
}

/* Tensor ids are reused once freed, LIFO, as a framework's storage would be. */
typedef struct ids {
    uint32_t free_ids[4096];
    uint32_t n_free;
    uint32_t next;
} ids;

static uint32_t M(stream *s, ids *ix, uint64_t size)
{
    uint32_t id = ix->n_free ? ix->free_ids[--ix->n_free] : ix->next++;
    push(s, id, size);
    return id;
}

static void F(stream *s, ids *ix, uint32_t id)
{
    push(s, id, 0);
    if (ix->n_free < 4096)
        ix->free_ids[ix->n_free++] = id;
}

#define LAYERS 32
#define SAVED 12

/* Scaled by the step's sequence length (num/16 of the longest). */
static uint64_t sc(uint64_t base, unsigned num)
{
    return base * num / 16;
}

static void forward_layer(stream *s, ids *ix, unsigned q, uint32_t saved[SAVED])
{
    uint64_t h = sc(4 * MiB, q);
    saved[0] = M(s, ix, h);              /* input norm output */
    saved[1] = M(s, ix, sc(16 * KiB, q)); /* norm statistics */
    saved[2] = M(s, ix, 3 * h);          /* qkv */
    F(s, ix, M(s, ix, h));               /* attention workspace */
    saved[3] = M(s, ix, h);              /* attention output */
    saved[4] = M(s, ix, sc(64 * KiB, q)); /* log-sum-exp */
    F(s, ix, M(s, ix, 512));             /* scalar */
    saved[5] = M(s, ix, h);              /* projection output */
    saved[6] = M(s, ix, h / 2);          /* dropout mask */
    saved[7] = M(s, ix, h);              /* post-attention norm */
    saved[8] = M(s, ix, sc(16 * KiB, q)); /* its statistics */
    saved[9] = M(s, ix, sc(22 * MiB, q)); /* gate+up */
    saved[10] = M(s, ix, sc(11 * MiB, q)); /* activation */
    F(s, ix, M(s, ix, sc(2 * KiB, q)));  /* small temporary */
    saved[11] = M(s, ix, h);             /* mlp output */
}

static uint32_t backward_layer(stream *s, ids *ix, unsigned q, const uint32_t saved[SAVED],
                               uint32_t grad_in)
{
    uint64_t h = sc(4 * MiB, q);
    uint32_t g1 = M(s, ix, sc(11 * MiB, q));
    uint32_t g2 = M(s, ix, sc(22 * MiB, q));
    F(s, ix, saved[11]);
    F(s, ix, saved[10]);
    F(s, ix, saved[9]);
    F(s, ix, g2);
    uint32_t g3 = M(s, ix, h);
    F(s, ix, g1);
    F(s, ix, saved[8]);
    F(s, ix, saved[7]);
    F(s, ix, saved[6]);
    F(s, ix, saved[5]);
    uint32_t g4 = M(s, ix, 3 * h);
    F(s, ix, saved[4]);
    F(s, ix, saved[3]);
    F(s, ix, M(s, ix, 2 * KiB));
    F(s, ix, saved[2]);
    uint32_t g5 = M(s, ix, h);
    F(s, ix, g4);
    F(s, ix, saved[1]);
    F(s, ix, saved[0]);
    F(s, ix, g3);
    F(s, ix, grad_in);
    return g5;
}

static void train_step(stream *s, ids *ix, unsigned q)
{
    uint32_t saved[LAYERS][SAVED];
    for (int l = 0; l < LAYERS; l++)
        forward_layer(s, ix, q, saved[l]);
    uint32_t loss = M(s, ix, 512);
    uint32_t grad = M(s, ix, sc(4 * MiB, q));
    F(s, ix, loss);
    for (int l = LAYERS; l-- > 0;)
        grad = backward_layer(s, ix, q, saved[l], grad);
    F(s, ix, grad);
    static const uint64_t params[4] = {32 * MiB, 88 * MiB, 16 * KiB, 8 * MiB};
    for (int p = 0; p < 4 * LAYERS; p++) {
        uint32_t m = M(s, ix, params[p % 4]);
        uint32_t v = M(s, ix, params[p % 4]);
        F(s, ix, m);
        F(s, ix, v);
    }
}

static void gen_train(stream *s)
{
    ids ix = {.n_free = 0, .next = 0};
    static const unsigned seq[3] = {16, 13, 15}; /* sequence lengths, x/16 */
    for (int step = 0; step < 3; step++)
        train_step(s, &ix, seq[step]);
    s->ids = ix.next;
}

static uint64_t draw_size(uint64_t *state)
{
    static const uint64_t small[] = {512, 2048, 4096, 8192, 65536, 262144, 1048576};
    static const uint64_t medium[] = {2 * MiB, 4 * MiB, 8 * MiB, 12 * MiB, 16 * MiB, 32 * MiB,
                                      48 * MiB, 64 * MiB};
    static const uint64_t large[] = {96 * MiB, 128 * MiB, 256 * MiB, 512 * MiB};
    uint64_t r = fake_rand(state);
    unsigned pick = (unsigned)(r % 100);
    uint64_t jitter = (r >> 32) % 4 * 512;
    if (pick < 70)
        return small[(r >> 8) % (sizeof small / sizeof small[0])] + jitter;
    if (pick < 95)
        return medium[(r >> 8) % (sizeof medium / sizeof medium[0])] + jitter;
    return large[(r >> 8) % (sizeof large / sizeof large[0])] + jitter;
}

/* 512 live tensors; one replayed chunk of 2^16 pairs after a warm-up fill. */
static void gen_random(stream *s, uint64_t seed)
{
    uint64_t state = seed;
    enum { LIVE = 512, CHUNK = 65536 };
    for (uint32_t i = 0; i < LIVE; i++)
        push(s, i, draw_size(&state));
    for (int i = 0; i < CHUNK; i++) {
        uint32_t slot = (uint32_t)(fake_rand(&state) % LIVE);
        push(s, slot, 0);
        push(s, slot, draw_size(&state));
    }
    for (uint32_t i = 0; i < LIVE; i++)
        push(s, i, 0);
    s->ids = LIVE;
}

static double seconds(clockid_t clock)
{
    struct timespec ts;
    clock_gettime(clock, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int replay(ms_alloc *a, ms_stream *st, const stream *s, uint64_t *addrs)
{
    ms_diag d;
    for (size_t i = 0; i < s->n; i++) {
        const op *o = &s->ops[i];
        if (o->size == 0) {
            ms_alloc_free(a, addrs[o->id]);
        } else if (ms_alloc_malloc(a, o->size, st, 0, &addrs[o->id], &d) != MS_OK) {
            fprintf(stderr, "bench_alloc: %s\n", d.msg);
            return -1;
        }
    }
    return 0;
}

/* The request stream of one device of a real snapshot: an id per live
 * address; frees of memory allocated before the trace began are skipped. */
static int gen_snapshot(stream *s, const char *path, int device)
{
    ms_diag d = {0};
    ms_snapshot *snap = NULL;
    if (ms_snapshot_load(path, &snap, &d) != MS_OK) {
        fprintf(stderr, "bench_alloc: %s\n", d.msg);
        return -1;
    }
    const ms_trace_event *ev = NULL;
    size_t n = 0;
    if (ms_snapshot_trace(snap, device, &ev, &n) != MS_OK) {
        fprintf(stderr, "bench_alloc: %s has no device %d\n", path, device);
        ms_snapshot_free(snap);
        return -1;
    }
    uint64_t *live = calloc(n + 1, sizeof *live); /* address of each id, 0: free */
    ids ix = {0};
    for (size_t i = 0; live && i < n; i++) {
        if (ev[i].action == MS_TA_ALLOC) {
            uint32_t id = M(s, &ix, ev[i].size ? ev[i].size : 1);
            if (id <= n)
                live[id] = ev[i].addr;
        } else if (ev[i].action == MS_TA_FREE_REQUESTED) {
            for (uint32_t id = 0; id < ix.next && id <= n; id++)
                if (live[id] == ev[i].addr) {
                    live[id] = 0;
                    F(s, &ix, id);
                    break;
                }
        }
    }
    for (uint32_t id = 0; live && id < ix.next && id <= n; id++)
        if (live[id])
            F(s, &ix, id);
    s->ids = ix.next;
    free(live);
    ms_snapshot_free(snap);
    return 0;
}

int main(int argc, char **argv)
{
    const char *mode = argc > 1 ? argv[1] : "train";
    uint64_t want = argc > 2 ? strtoull(argv[2], NULL, 10) : 5000000;
    uint64_t seed = argc > 3 ? strtoull(argv[3], NULL, 10) : 1;
    stream s = {0};
    if (strcmp(mode, "train") == 0)
        gen_train(&s);
    else if (strcmp(mode, "random") == 0)
        gen_random(&s, seed);
    else if (strcmp(mode, "snapshot") == 0 && argc > 3 &&
             gen_snapshot(&s, argv[3], argc > 4 ? atoi(argv[4]) : 0) != 0) {
        free(s.ops);
        return 1; /* it said why: no usage line after a snapshot that cannot be read */
    }
    if (s.n == 0 || s.oom || want == 0) {
        fprintf(stderr, "usage: bench_alloc [train|random] [pairs>0] [seed]\n"
                        "       bench_alloc snapshot PAIRS FILE.pickle [DEVICE]\n");
        free(s.ops);
        return 2;
    }
    /* Device memory to spare: the benchmark times the caching path. */
    ms_backend *be = fake_open(UINT64_C(1) << 50, 0);
    ms_stream *st = be ? fake_stream(be) : NULL;
    uint64_t *addrs = calloc(s.ids, sizeof *addrs);
    ms_alloc *a = NULL;
    if (!st || !addrs || ms_alloc_create(be, NULL, &a) != MS_OK) {
        fprintf(stderr, "bench_alloc: setup failed\n");
        return 1;
    }
    /* One untimed pass creates the segments (steady state afterwards). */
    int rc = replay(a, st, &s, addrs);
    uint64_t rounds = (want + s.pairs - 1) / s.pairs;
    /* CPU time as well as wall time: on a shared machine the wall clock
     * counts other tenants' time slices too. */
    double t0 = seconds(CLOCK_MONOTONIC);
    double c0 = seconds(CLOCK_PROCESS_CPUTIME_ID);
    for (uint64_t r = 0; r < rounds && rc == 0; r++)
        rc = replay(a, st, &s, addrs);
    double wall = seconds(CLOCK_MONOTONIC) - t0;
    double cpu = seconds(CLOCK_PROCESS_CPUTIME_ID) - c0;
    ms_alloc_stats stats;
    stats = ms_alloc_get_stats(a);
    uint64_t pairs = rounds * s.pairs;
    printf("mode %s: %" PRIu64 " malloc+free pairs (%" PRIu64 " per round)\n", mode, pairs,
           s.pairs);
    printf("wall %.3f s: %.2f M pairs/s\n", wall, (double)pairs / wall / 1e6);
    printf("cpu  %.3f s: %.2f M pairs/s (%.0f ns a pair)\n", cpu, (double)pairs / cpu / 1e6,
           cpu / (double)pairs * 1e9);
    printf("segments %" PRId64 ", reserved peak %.1f MiB, device mallocs %" PRId64 "\n",
           stats.segment[MS_STAT_ALL].current,
           (double)stats.reserved_bytes[MS_STAT_ALL].peak / MiB, stats.num_device_alloc);
    free(addrs);
    free(s.ops);
    ms_alloc_destroy(a);
    fake_close(be);
    return rc == 0 ? 0 : 1;
}
