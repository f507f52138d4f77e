/* Fuzz target for the pickle decoder (docs/replay.md, "Fuzzing").  make
 * builds it with tests/fuzz/driver.c and `make fuzz-smoke` runs it; with
 * libFuzzer instead:
 *
 *   clang -g -O1 -fsanitize=fuzzer,address,undefined -Iinclude -I. \
 *       tests/fuzz/fuzz_pickle.c lib/replay/pickle.c lib/base/status.c -lm -o fuzz_pickle
 *   ./fuzz_pickle -max_len=4096 -max_total_time=300 CORPUS_DIR
 *
 * Every input must either decode or fail with a message; the walk below
 * touches every reachable value through the public accessors (bounded in
 * depth, since memoised values may form cycles). */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "memsim/trace.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Memoised values make a DAG (or a cycle): the walk is bounded in depth
 * and in visits, or a shared chain would take exponential time. */
static size_t walk(const ms_pickle_value *v, int depth, size_t *budget)
{
    size_t n = 0, seen = 1;
    const ms_pickle_value *k, *x;
    if (*budget == 0)
        return 0;
    --*budget;
    if (depth > 16 || ms_pickle_len(v, &n) != MS_OK)
        return seen;
    if (n > 64)
        n = 64;
    for (size_t i = 0; i < n; i++) {
        if (ms_pickle_kind_of(v) == MS_PK_DICT) {
            if (ms_pickle_dict_item(v, i, &k, &x) == MS_OK)
                seen += walk(k, depth + 1, budget) + walk(x, depth + 1, budget);
        } else if (ms_pickle_item(v, i, &x) == MS_OK) {
            seen += walk(x, depth + 1, budget);
        }
    }
    if (ms_pickle_kind_of(v) == MS_PK_DICT) {
        ms_pickle_dict_get(v, "segments", &x);
        ms_pickle_dict_get(v, "", &x);
    }
    return seen;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    ms_pickle_limits lim;
    ms_pickle_limits_default(&lim);
    lim.max_memo = 1 << 16;
    lim.max_values = 1 << 20;
    lim.max_compare = 1 << 16;
    ms_pickle *p = NULL;
    ms_diag d = {0};
    if (ms_pickle_decode(data, size, &lim, &p, &d) == MS_OK) {
        size_t budget = 100000;
        walk(ms_pickle_root(p), 0, &budget);
        ms_pickle_free(p);
    } else if (d.msg[0] == '\0' || p != NULL) {
        __builtin_trap(); /* an error must say why and leave nothing */
    }
    return 0;
}
