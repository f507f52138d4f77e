/* A libFuzzer-compatible driver for the fuzz targets in tests/fuzz, so that
 * make builds them with any compiler and `make fuzz-smoke` runs them for a
 * bounded time (a clang -fsanitize=fuzzer build links the targets without
 * this file instead; docs/replay.md, "Fuzzing").
 *
 *   fuzz_X [-t SECONDS] [-s SEED] [-m MAX_LEN] CORPUS_FILE_OR_DIR...
 *
 * Every corpus input runs once as it is; then, until the time is up, inputs
 * made by mutating corpus entries (bit flips, byte changes, insertions,
 * deletions, duplicated chunks, splices of two entries), from a fixed seed,
 * so a failure repeats with the same arguments.  A target reports a defect
 * by crashing (or by a sanitizer's report); each input that runs is written
 * to ./fuzz-last-input first, so a crash leaves the input behind. */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

typedef struct input {
    uint8_t *data;
    size_t size;
} input;

typedef struct corpus {
    input *in;
    size_t n, cap;
} corpus;

static void add_file(corpus *c, const char *path, size_t max_len)
{
    FILE *f = fopen(path, "rb");
    if (f == NULL)
        return;
    uint8_t *buf = malloc(max_len ? max_len : 1);
    size_t n = buf ? fread(buf, 1, max_len, f) : 0;
    fclose(f);
    if (buf == NULL)
        return;
    if (c->n == c->cap) {
        size_t cap = c->cap ? 2 * c->cap : 16;
        input *grown = realloc(c->in, cap * sizeof *grown);
        if (grown == NULL) {
            free(buf);
            return;
        }
        c->in = grown;
        c->cap = cap;
    }
    c->in[c->n++] = (input){buf, n};
}

static int cmp_names(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* A directory's files in name order (readdir's order is the filesystem's). */
static void add_path(corpus *c, const char *path, size_t max_len)
{
    struct stat st;
    if (stat(path, &st) != 0)
        return;
    if (!S_ISDIR(st.st_mode)) {
        add_file(c, path, max_len);
        return;
    }
    DIR *d = opendir(path);
    if (d == NULL)
        return;
    char *names[4096];
    size_t n = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL && n < 4096)
        if (e->d_name[0] != '.')
            names[n++] = strdup(e->d_name);
    closedir(d);
    qsort(names, n, sizeof *names, cmp_names);
    for (size_t i = 0; i < n; i++) {
        char file[8192];
        snprintf(file, sizeof file, "%s/%s", path, names[i]);
        add_path(c, file, max_len);
        free(names[i]);
    }
}

static uint64_t next(uint64_t *s)
{
    *s ^= *s >> 12;
    *s ^= *s << 25;
    *s ^= *s >> 27;
    return *s * 2685821657736338717ULL;
}

/* One mutation of buf (size n, capacity max) in place; the new size. */
static size_t mutate(uint8_t *buf, size_t n, size_t max, const corpus *c, uint64_t *rng)
{
    size_t at = n ? next(rng) % n : 0;
    switch (next(rng) % 7) {
    case 0: /* flip a bit */
        if (n)
            buf[at] ^= (uint8_t)(1u << (next(rng) % 8));
        return n;
    case 1: /* an interesting byte */
    {
        static const uint8_t bytes[] = {0,   1,   0x7f, 0x80, 0xff, '\n', ',',  '"',
                                        '{', '}', '(',  '.',  'N',  'J',  0x94, 0x95};
        if (n)
            buf[at] = bytes[next(rng) % sizeof bytes];
        return n;
    }
    case 2: /* insert a random byte */
        if (n < max) {
            memmove(buf + at + 1, buf + at, n - at);
            buf[at] = (uint8_t)next(rng);
            return n + 1;
        }
        return n;
    case 3: /* delete a run */
    {
        size_t len = n ? 1 + next(rng) % (n - at < 16 ? n - at : 16) : 0;
        memmove(buf + at, buf + at + len, n - at - len);
        return n - len;
    }
    case 4: /* duplicate a chunk */
    {
        size_t len = n ? 1 + next(rng) % (n - at < 64 ? n - at : 64) : 0;
        if (n + len > max)
            return n;
        memmove(buf + at + len, buf + at, n - at);
        return n + len;
    }
    case 5: /* splice: our head, another entry's tail */
    {
        const input *o = &c->in[next(rng) % c->n];
        size_t from = o->size ? next(rng) % o->size : 0;
        size_t len = o->size - from;
        if (at + len > max)
            len = max - at;
        memcpy(buf + at, o->data + from, len);
        return at + len;
    }
    default: /* truncate */ return at;
    }
}

static void run_one(const uint8_t *data, size_t n)
{
    FILE *f = fopen("fuzz-last-input", "wb");
    if (f != NULL) {
        fwrite(data, 1, n, f);
        fclose(f);
    }
    LLVMFuzzerTestOneInput(data, n);
}

int main(int argc, char **argv)
{
    double seconds = 10;
    uint64_t seed = 1;
    size_t max_len = 1 << 16;
    corpus c = {0};
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "-t") == 0 && i + 1 < argc)
            seconds = atof(argv[++i]);
        else if (strcmp(argv[i], "-s") == 0 && i + 1 < argc)
            seed = strtoull(argv[++i], NULL, 10) | 1;
        else if (strcmp(argv[i], "-m") == 0 && i + 1 < argc)
            max_len = strtoull(argv[++i], NULL, 10);
        else
            add_path(&c, argv[i], max_len);
    }
    if (c.n == 0) {
        fprintf(stderr, "%s: no corpus input (give files or directories)\n", argv[0]);
        return 2;
    }
    for (size_t i = 0; i < c.n; i++)
        run_one(c.in[i].data, c.in[i].size);
    uint8_t *buf = malloc(max_len + 1);
    struct timespec t0, t;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    unsigned long runs = 0;
    for (;; runs++) {
        clock_gettime(CLOCK_MONOTONIC, &t);
        if ((double)(t.tv_sec - t0.tv_sec) + (double)(t.tv_nsec - t0.tv_nsec) / 1e9 >= seconds)
            break;
        const input *base = &c.in[next(&seed) % c.n];
        size_t n = base->size < max_len ? base->size : max_len;
        memcpy(buf, base->data, n);
        for (int k = 1 + (int)(next(&seed) % 4); k > 0; k--)
            n = mutate(buf, n, max_len, &c, &seed);
        run_one(buf, n);
    }
    printf("%s: %zu corpus inputs and %lu mutated ones in %.0f s: no crash\n", argv[0], c.n, runs,
           seconds);
    remove("fuzz-last-input");
    free(buf);
    for (size_t i = 0; i < c.n; i++)
        free(c.in[i].data);
    free(c.in);
    return 0;
}
