/* Fuzz target: any input read as a CSV trace (action,addr,size,stream,
 * time_us[,device_free]) must either load and replay or fail with a
 * message, never crash or leave a half-made snapshot (libFuzzer entry; make
 * builds it with tests/fuzz/driver.c). */
#include <stddef.h>
#include <stdint.h>

#include "memsim/trace.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    ms_snapshot *s = NULL;
    ms_diag d = {0};
    /* The name says CSV; a first byte 0x80 still reads as a pickle. */
    if (ms_snapshot_load_buffer(data, size, "fuzz.csv", &s, &d) != MS_OK) {
        if (d.msg[0] == '\0' || s != NULL)
            __builtin_trap();
        return 0;
    }
    ms_replay_options o;
    ms_replay_result r;
    ms_replay_options_default(&o);
    o.capacity = 1ULL << 34;
    if (ms_replay_run(s, &o, &r, &d) == MS_OK)
        ms_replay_result_free(&r);
    else if (d.msg[0] == '\0')
        __builtin_trap();
    ms_snapshot_free(s);
    return 0;
}
