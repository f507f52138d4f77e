/* libFuzzer target for snapshot import and replay: any input, read as a
 * pickle snapshot (first byte 0x80) or else as a CSV trace, must either
 * replay or fail with a message (docs/replay.md, "Fuzzing"); built with
 * -DFUZZ_AS_CSV it is fuzz_csv_trace, every input named a CSV trace.  make builds
 * it with tests/fuzz/driver.c and `make fuzz-smoke` runs it; with libFuzzer
 * instead:
 *
 *   clang -g -O1 -fsanitize=fuzzer,address,undefined -Iinclude -I. \
 *       tests/fuzz/fuzz_replay.c lib/replay/[a-z]*.c lib/alloc/[a-z]*.c \
 *       lib/base/status.c lib/base/backend_handle.c -lcsv -lm -o fuzz_replay
 *   ./fuzz_replay -max_len=4096 -max_total_time=300 CORPUS_DIR
 */
#include <stddef.h>
#include <stdint.h>

#include "memsim/trace.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    ms_snapshot *s = NULL;
    ms_diag d = {0};
#ifdef FUZZ_AS_CSV
    /* fuzz_csv_trace: the name says CSV; a first byte 0x80 still reads as a
     * pickle. */
    const char *name = "fuzz.csv";
#else
    const char *name = size > 0 && data[0] == 0x80 ? "fuzz.pickle" : "fuzz.csv";
#endif
    if (ms_snapshot_load_buffer(data, size, name, &s, &d) != MS_OK) {
        if (d.msg[0] == '\0' || s != NULL)
            __builtin_trap();
        return 0;
    }
    ms_replay_options o;
    ms_replay_result r;
    ms_replay_options_default(&o);
    /* Small enough that the model's page tables stay small. */
    o.capacity = 1ULL << 34;
    if (ms_replay_run(s, &o, &r, &d) == MS_OK)
        ms_replay_result_free(&r);
    else if (d.msg[0] == '\0')
        __builtin_trap();
    ms_snapshot_free(s);
    return 0;
}
