/* The executor's data check (exec_verify.h): deterministic patterns written
 * over swapped and recomputed tensors and compared when they are read again. */
#include "exec_verify.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "lib/base/growable.h"

/* A pinned staging buffer and the event after the copy that uses it: a
 * fill's source (released when the H2D is done) or a check's destination
 * (compared, then released). */
typedef struct verify_copy {
    uint64_t host;
    uint64_t capacity; /* of the buffer, at least bytes */
    uint64_t bytes;
    ms_event *done;
    bool is_check;
    uint64_t seed;
    exec_check_subject what;
} verify_copy;

/* A staging buffer no copy uses any more, kept for the next fill or check:
 * pinned allocations are slow on real runtimes, and every fresh page costs
 * the functional mock a page fault. */
typedef struct verify_spare {
    uint64_t host, bytes;
} verify_spare;

/* Staging bytes in use (pending copies) and kept spare, at most: beyond it
 * the host waits for the oldest copy, so a step that swaps or recomputes
 * many gigabytes does not need as much pinned memory again to check it. */
#define VERIFY_STAGING_LIMIT (512ull << 20)

struct exec_verifier {
    ms_backend *b;
    verify_copy *pending; /* in issue order */
    size_t n, cap;
    uint64_t pending_bytes;
    verify_spare *spare;
    size_t n_spare, cap_spare;
    uint64_t spare_bytes;
    uint64_t checks, checked_bytes;
};

#define BE(v, call, ...) ((v)->b->ops->call((v)->b->inst, __VA_ARGS__))

static uint64_t mix64(uint64_t x)
{
    /* splitmix64's finaliser: every input bit reaches every output bit. */
    x ^= x >> 30;
    x *= 0xbf58476d1ce4e5b9ull;
    x ^= x >> 27;
    x *= 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

uint64_t exec_verify_seed(int device, int step, uint32_t tensor, int generation)
{
    uint64_t key = (uint64_t)(uint32_t)device << 48 ^ (uint64_t)(uint32_t)step << 34 ^
                   (uint64_t)(uint32_t)generation << 32 ^ tensor;
    return mix64(key + 0x9e3779b97f4a7c15ull);
}

/* Word i of the pattern: distinct seeds differ in every word, and a copy
 * shifted by any number of words differs too. */
static uint64_t pattern_word(uint64_t seed, uint64_t i)
{
    return seed ^ (i + 1) * 0x9e3779b97f4a7c15ull;
}

static void pattern_write(uint8_t *p, uint64_t bytes, uint64_t seed)
{
    uint64_t words = bytes / 8;
    for (uint64_t i = 0; i < words; i++) {
        uint64_t w = pattern_word(seed, i);
        memcpy(p + i * 8, &w, 8);
    }
    uint64_t w = pattern_word(seed, words);
    memcpy(p + words * 8, &w, bytes % 8);
}

/* Offset of the first byte that differs from the pattern, or bytes. */
static uint64_t pattern_first_difference(const uint8_t *p, uint64_t bytes, uint64_t seed,
                                         uint64_t *differing_words)
{
    uint64_t words = bytes / 8, first = bytes;
    *differing_words = 0;
    for (uint64_t i = 0; i <= words; i++) {
        uint64_t len = i < words ? 8 : bytes % 8;
        uint64_t want = pattern_word(seed, i), have = 0;
        memcpy(&have, p + i * 8, len);
        if (len < 8)
            want &= (UINT64_C(1) << (8 * len)) - 1;
        if (have == want)
            continue;
        (*differing_words)++;
        for (uint64_t k = 0; first == bytes && k < len; k++)
            if ((uint8_t)(have >> (8 * k)) != (uint8_t)(want >> (8 * k)))
                first = i * 8 + k;
    }
    return first;
}

ms_status exec_verify_create(ms_backend *b, exec_verifier **out)
{
    if (b == NULL || out == NULL)
        return MS_EINVAL;
    exec_verifier *v = calloc(1, sizeof *v);
    if (v == NULL)
        return MS_ENOMEM;
    v->b = b;
    *out = v;
    return MS_OK;
}

/* Keep a finished staging buffer spare, dropping the oldest spares beyond
 * the limit. */
static void give_back(exec_verifier *v, uint64_t host, uint64_t bytes)
{
    if (bytes > VERIFY_STAGING_LIMIT || !MS_GROW(v->spare, v->n_spare, v->cap_spare, 16)) {
        BE(v, free_host, host);
        return;
    }
    v->spare[v->n_spare++] = (verify_spare){host, bytes};
    v->spare_bytes += bytes;
    size_t drop = 0;
    while (v->spare_bytes + v->pending_bytes > VERIFY_STAGING_LIMIT && drop < v->n_spare - 1) {
        BE(v, free_host, v->spare[drop].host);
        v->spare_bytes -= v->spare[drop++].bytes;
    }
    memmove(v->spare, v->spare + drop, (v->n_spare - drop) * sizeof *v->spare);
    v->n_spare -= drop;
}

static void release(exec_verifier *v, verify_copy *c)
{
    BE(v, event_destroy, c->done);
    v->pending_bytes -= c->capacity;
    give_back(v, c->host, c->capacity);
}

void exec_verify_destroy(exec_verifier *v)
{
    if (v == NULL)
        return;
    for (size_t i = 0; i < v->n; i++)
        release(v, &v->pending[i]);
    for (size_t i = 0; i < v->n_spare; i++)
        BE(v, free_host, v->spare[i].host);
    free(v->pending);
    free(v->spare);
    free(v);
}

/* A staging buffer of bytes: the smallest spare that holds it, else a new
 * one, after waiting for the oldest copies while the staging in use would
 * pass the limit. */
static ms_status staging(exec_verifier *v, uint64_t bytes, uint64_t *host, uint64_t *capacity,
                         ms_diag *d)
{
    ms_status st = MS_OK;
    while (st == MS_OK && v->n > 0 && v->pending_bytes + bytes > VERIFY_STAGING_LIMIT) {
        st = BE(v, event_synchronize, v->pending[0].done);
        if (st == MS_OK)
            st = exec_verify_settle(v, false, d);
    }
    if (st != MS_OK)
        return st;
    size_t best = v->n_spare;
    for (size_t i = 0; i < v->n_spare; i++)
        if (v->spare[i].bytes >= bytes &&
            (best == v->n_spare || v->spare[i].bytes < v->spare[best].bytes))
            best = i;
    if (best < v->n_spare && v->spare[best].bytes <= 2 * bytes) {
        *host = v->spare[best].host;
        *capacity = v->spare[best].bytes;
        v->spare_bytes -= v->spare[best].bytes;
        memmove(v->spare + best, v->spare + best + 1, (v->n_spare - best - 1) * sizeof *v->spare);
        v->n_spare--;
        return MS_OK;
    }
    *capacity = bytes;
    if ((st = BE(v, malloc_host, bytes, host)) != MS_OK)
        return ms_diag_set(d, st,
                           "verify: no pinned host memory for %" PRIu64 " bytes of "
                           "staging: %s",
                           bytes, ms_strerror(st));
    return MS_OK;
}

/* Issue the copy and remember its staging buffer until the copy is done. */
static ms_status track_copy(exec_verifier *v, ms_stream *s, verify_copy *c, uint64_t dst,
                            uint64_t src, ms_copy_kind kind, ms_diag *d)
{
    if (!MS_GROW(v->pending, v->n, v->cap, 64))
        return MS_ENOMEM;
    ms_status st = BE(v, memcpy_async, dst, src, c->bytes, kind, s, UINT64_MAX);
    if (st == MS_OK && (st = BE(v, event_create, &c->done)) == MS_OK &&
        (st = BE(v, event_record, c->done, s)) != MS_OK)
        BE(v, event_destroy, c->done);
    if (st != MS_OK) {
        /* The copy may be queued: the buffer stays until the device is idle. */
        v->b->ops->device_synchronize(v->b->inst);
        BE(v, free_host, c->host);
        return ms_diag_set(d, st, "verify: %s copy failed: %s",
                           kind == MS_COPY_H2D ? "fill" : "check", ms_strerror(st));
    }
    v->pending[v->n++] = *c;
    v->pending_bytes += c->capacity;
    return MS_OK;
}

ms_status exec_verify_fill(exec_verifier *v, ms_stream *s, uint64_t addr, uint64_t bytes,
                           uint64_t seed, uint64_t host_buf, ms_diag *d)
{
    if (v == NULL || s == NULL || bytes == 0)
        return MS_EINVAL;
    uint64_t src = host_buf, capacity = bytes;
    ms_status st = src != 0 ? MS_OK : staging(v, bytes, &src, &capacity, d);
    if (st != MS_OK)
        return st;
    pattern_write((uint8_t *)(uintptr_t)src, bytes, seed);
    if (host_buf != 0) {
        st = BE(v, memcpy_async, addr, src, bytes, MS_COPY_H2D, s, UINT64_MAX);
        return st == MS_OK ? MS_OK
                           : ms_diag_set(d, st, "verify: fill copy failed: %s", ms_strerror(st));
    }
    verify_copy c = {.host = src, .capacity = capacity, .bytes = bytes};
    return track_copy(v, s, &c, addr, src, MS_COPY_H2D, d);
}

ms_status exec_verify_check(exec_verifier *v, ms_stream *s, uint64_t addr, uint64_t bytes,
                            uint64_t seed, const exec_check_subject *what, ms_diag *d)
{
    if (v == NULL || s == NULL || what == NULL || bytes == 0)
        return MS_EINVAL;
    ms_status st = exec_verify_settle(v, false, d);
    if (st != MS_OK)
        return st;
    uint64_t dst = 0, capacity = 0;
    if ((st = staging(v, bytes, &dst, &capacity, d)) != MS_OK)
        return st;
    verify_copy c = {.host = dst,
                     .capacity = capacity,
                     .bytes = bytes,
                     .is_check = true,
                     .seed = seed,
                     .what = *what};
    return track_copy(v, s, &c, dst, addr, MS_COPY_D2H, d);
}

static ms_status compare(exec_verifier *v, const verify_copy *c, ms_diag *d)
{
    const uint8_t *p = (const uint8_t *)(uintptr_t)c->host;
    uint64_t differing = 0;
    uint64_t first = pattern_first_difference(p, c->bytes, c->seed, &differing);
    v->checks++;
    v->checked_bytes += c->bytes;
    if (first == c->bytes)
        return MS_OK;
    uint8_t want[8];
    uint64_t w = pattern_word(c->seed, first / 8);
    memcpy(want, &w, 8);
    return ms_diag_set(
        d, MS_EHAZARD,
        "verify: tensor %u (%s) read by op %u (%s) after %s does not hold what was "
        "written: byte %" PRIu64 " of %" PRIu64 " is 0x%02x, expected 0x%02x (%" PRIu64
        " of %" PRIu64 " 8-byte words differ)",
        c->what.tensor, c->what.tensor_name, c->what.op, c->what.op_name, c->what.since, first,
        c->bytes, p[first], want[first % 8], differing, (c->bytes + 7) / 8);
}

ms_status exec_verify_settle(exec_verifier *v, bool wait, ms_diag *d)
{
    if (v == NULL)
        return MS_EINVAL;
    ms_status first_error = MS_OK;
    size_t k = 0;
    for (size_t i = 0; i < v->n; i++) {
        verify_copy *c = &v->pending[i];
        bool done = false;
        ms_status st =
            wait ? BE(v, event_synchronize, c->done) : BE(v, event_query, c->done, &done);
        if (st != MS_OK && first_error == MS_OK)
            first_error =
                ms_diag_set(d, st, "verify: waiting for a copy failed: %s", ms_strerror(st));
        if (st != MS_OK || !(wait || done)) {
            v->pending[k++] = *c;
            continue;
        }
        if (c->is_check && first_error == MS_OK)
            first_error = compare(v, c, d);
        release(v, c);
    }
    v->n = k;
    return first_error;
}

uint64_t exec_verify_checked(const exec_verifier *v, uint64_t *bytes)
{
    if (bytes != NULL)
        *bytes = v != NULL ? v->checked_bytes : 0;
    return v != NULL ? v->checks : 0;
}
