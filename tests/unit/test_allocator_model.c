/* Differential test: the allocator against a naive reference model of the
 * same rules (linear scans instead of ordered sets), on long random request
 * streams over two streams.  Every malloc must return the address the model
 * predicts, and the snapshot (visit) must agree with the statistics: blocks
 * tile their segments, allocated_bytes is the sum of allocated blocks,
 * reserved_bytes the sum of segments, inactive_split the free blocks of
 * split segments.  The rules the model encodes are those of
 * ../shared/reference/caching-allocator.md: round_size, small/large pools,
 * get_allocation_size, best fit by (stream, size, address), max_split_size
 * with its oversize limit, split thresholds, merge on free. */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "memsim/allocator.h"
#include "test_allocator_fake.h"

#define MAX_BLOCKS 8192
#define MAX_LIVE 256

typedef struct mblock {
    uint64_t addr, size, stream;
    int seg;
    bool small, allocated, used;
} mblock;

typedef struct model {
    mblock b[MAX_BLOCKS];
    int n;
    uint64_t next_dev; /* mirrors the fake's bump allocator */
    int next_seg;
    uint64_t max_split;
} model;

static uint64_t m_round(uint64_t s)
{
    return s < 512 ? 512 : (s + 511) / 512 * 512;
}

static uint64_t m_segment(uint64_t r)
{
    if (r <= MiB)
        return 2 * MiB;
    if (r < 10 * MiB)
        return 20 * MiB;
    return (r + 2 * MiB - 1) / (2 * MiB) * (2 * MiB);
}

static int m_new(model *m)
{
    for (int i = 0; i < m->n; i++)
        if (!m->b[i].used)
            return i;
    ck_assert_int_lt(m->n, MAX_BLOCKS);
    return m->n++;
}

/* Best fit: the smallest, then lowest-address, free block of the stream and
 * pool class with size >= r that the max_split rules allow. */
static int m_find(const model *m, uint64_t r, uint64_t stream, bool small)
{
    int best = -1;
    for (int i = 0; i < m->n; i++) {
        const mblock *c = &m->b[i];
        if (!c->used || c->allocated || c->stream != stream || c->small != small || c->size < r)
            continue;
        if (best < 0 || c->size < m->b[best].size ||
            (c->size == m->b[best].size && c->addr < m->b[best].addr))
            best = i;
    }
    if (best < 0)
        return -1;
    /* Only the first candidate in (stream, size, addr) order is examined. */
    uint64_t bs = m->b[best].size;
    if (r < m->max_split && bs >= m->max_split)
        return -1;
    if (r >= m->max_split && bs >= r + 20 * MiB)
        return -1;
    return best;
}

static uint64_t m_malloc(model *m, uint64_t size, uint64_t stream)
{
    uint64_t r = m_round(size);
    bool small = r <= MiB;
    int i = m_find(m, r, stream, small);
    if (i < 0) {
        i = m_new(m);
        m->b[i] = (mblock){m->next_dev, m_segment(r), stream, m->next_seg++, small, false, true};
        m->next_dev += m->b[i].size;
    }
    mblock *b = &m->b[i];
    uint64_t rest = b->size - r;
    bool split = small ? rest >= 512 : (r < m->max_split && rest > MiB);
    if (split) {
        int j = m_new(m);
        b = &m->b[i]; /* m_new may not move, but keep the pointer fresh */
        m->b[j] = (mblock){b->addr + r, rest, stream, b->seg, small, false, true};
        b->size = r;
    }
    b->allocated = true;
    return b->addr;
}

static int m_at(const model *m, uint64_t addr, int seg)
{
    for (int i = 0; i < m->n; i++)
        if (m->b[i].used && m->b[i].addr == addr && m->b[i].seg == seg)
            return i;
    return -1;
}

static int m_ending_at(const model *m, uint64_t end, int seg)
{
    for (int i = 0; i < m->n; i++)
        if (m->b[i].used && m->b[i].addr + m->b[i].size == end && m->b[i].seg == seg)
            return i;
    return -1;
}

static void m_free(model *m, uint64_t addr)
{
    int i = -1;
    for (int k = 0; k < m->n; k++)
        if (m->b[k].used && m->b[k].allocated && m->b[k].addr == addr)
            i = k;
    ck_assert_int_ge(i, 0);
    mblock *b = &m->b[i];
    b->allocated = false;
    int nx = m_at(m, b->addr + b->size, b->seg);
    if (nx >= 0 && !m->b[nx].allocated) {
        b->size += m->b[nx].size;
        m->b[nx].used = false;
    }
    int pv = m_ending_at(m, b->addr, b->seg);
    if (pv >= 0 && !m->b[pv].allocated) {
        m->b[pv].size += b->size;
        b->used = false;
    }
}

/* ------------------------------------------------------------- snapshots */

typedef struct tally {
    uint64_t allocated, reserved, inactive_split, inactive_split_bytes, blocks;
    uint64_t seg_addr, seg_size, seg_fill, seg_blocks, seg_free, seg_free_bytes;
    bool ok;
} tally;

static void close_segment(tally *t)
{
    if (t->seg_blocks == 0)
        return;
    if (t->seg_fill != t->seg_size)
        t->ok = false;
    t->reserved += t->seg_size;
    if (t->seg_blocks > 1) {
        t->inactive_split += t->seg_free;
        t->inactive_split_bytes += t->seg_free_bytes;
    }
}

static void tally_block(void *user, const ms_block_info *b)
{
    tally *t = user;
    if (b->segment_addr != t->seg_addr || t->seg_blocks == 0) {
        close_segment(t);
        t->seg_addr = b->segment_addr;
        t->seg_size = b->segment_size;
        t->seg_fill = t->seg_blocks = t->seg_free = t->seg_free_bytes = 0;
    }
    if (b->addr != b->segment_addr + t->seg_fill)
        t->ok = false; /* blocks must tile the segment in address order */
    t->seg_fill += b->size;
    t->seg_blocks++;
    t->blocks++;
    if (b->allocated) {
        t->allocated += b->size;
    } else {
        t->seg_free++;
        t->seg_free_bytes += b->size;
    }
}

static void check_snapshot(ms_alloc *a, const model *m)
{
    tally t = {.ok = true};
    ck_assert_int_eq(ms_alloc_visit_blocks(a, tally_block, &t), MS_OK);
    close_segment(&t);
    ck_assert(t.ok);
    ms_alloc_stats s;
    s = ms_alloc_get_stats(a);
    ck_assert_int_eq(s.allocated_bytes[MS_STAT_ALL].current, (int64_t)t.allocated);
    ck_assert_int_eq(s.active_bytes[MS_STAT_ALL].current, (int64_t)t.allocated);
    ck_assert_int_eq(s.reserved_bytes[MS_STAT_ALL].current, (int64_t)t.reserved);
    ck_assert_int_eq(s.inactive_split[MS_STAT_ALL].current, (int64_t)t.inactive_split);
    ck_assert_int_eq(s.inactive_split_bytes[MS_STAT_ALL].current,
                     (int64_t)t.inactive_split_bytes);
    uint64_t model_blocks = 0;
    for (int i = 0; i < m->n; i++)
        model_blocks += m->b[i].used;
    ck_assert_uint_eq(t.blocks, model_blocks);
}

/* ------------------------------------------------------------ the streams */

/* Sizes around the thresholds: 512, 1 MiB, 10 MiB, max_split. */
static uint64_t draw(uint64_t *state)
{
    uint64_t r = fake_rand(state);
    switch (r % 6) {
    case 0: return 1 + (r >> 8) % 4096;
    case 1: return 1 + (r >> 8) % (2 * MiB);
    case 2: return MiB - 1024 + (r >> 8) % 2048;
    case 3: return 1 + (r >> 8) % (12 * MiB);
    case 4: return 9 * MiB + (r >> 8) % (4 * MiB);
    default: return 1 + (r >> 8) % (80 * MiB);
    }
}

static void run_stream(const char *conf, uint64_t max_split, uint64_t seed, int ops)
{
    static model m; /* large: keep it off the stack */
    memset(&m, 0, sizeof m);
    m.next_dev = FAKE_DEV_BASE;
    m.max_split = max_split;
    ms_backend *be = fake_open(UINT64_C(1) << 50, 0);
    ms_stream *st[2] = {fake_stream(be), fake_stream(be)};
    ms_alloc_config cfg;
    ms_alloc_config_default(MS_ALLOC_CUDA, &cfg);
    ck_assert_int_eq(ms_alloc_config_parse(conf, &cfg, NULL), MS_OK);
    ms_alloc *a = NULL;
    ck_assert_int_eq(ms_alloc_create(be, &cfg, &a), MS_OK);
    uint64_t live[MAX_LIVE] = {0};
    uint64_t state = seed;
    for (int i = 0; i < ops; i++) {
        int slot = (int)(fake_rand(&state) % MAX_LIVE);
        if (live[slot]) {
            ck_assert_int_eq(ms_alloc_free(a, live[slot]), MS_OK);
            m_free(&m, live[slot]);
            live[slot] = 0;
            continue;
        }
        uint64_t size = draw(&state);
        uint64_t s = fake_rand(&state) % 4 == 0; /* a quarter on stream 1 */
        uint64_t want = m_malloc(&m, size, s);
        ck_assert_int_eq(ms_alloc_malloc(a, size, st[s], 0, &live[slot], NULL), MS_OK);
        ck_assert_msg(live[slot] == want, "op %d: malloc(%llu) at %llx, model %llx", i,
                      (unsigned long long)size, (unsigned long long)live[slot],
                      (unsigned long long)want);
        if (i % 997 == 0)
            check_snapshot(a, &m);
    }
    check_snapshot(a, &m);
    ms_alloc_destroy(a);
    fake_close(be);
}

START_TEST(test_model_default)
{
    run_stream("", UINT64_MAX, 1, 40000);
    run_stream("", UINT64_MAX, 2, 40000);
}
END_TEST

START_TEST(test_model_max_split)
{
    run_stream("max_split_size_mb:20", 20 * MiB, 3, 40000);
    run_stream("max_split_size_mb:40", 40 * MiB, 4, 40000);
}
END_TEST

static Suite *model_suite(void)
{
    Suite *s = suite_create("allocator_model");
    TCase *tc = tcase_create("differential");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_model_default);
    tcase_add_test(tc, test_model_max_split);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(model_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
