/* Fuzz target: any input as a scenario file must either load or fail with a
 * message, within the sandbox's budgets (libFuzzer entry;
 * make builds it with tests/fuzz/driver.c).  Scenario files are untrusted
 * Lua: the input runs in the sandbox. */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "memsim/scenario.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char path[64];
    snprintf(path, sizeof path, "/tmp/memsim-fuzz-scenario-%ld.lua", (long)getpid());
    FILE *f = fopen(path, "wb");
    if (f == NULL)
        return 0;
    fwrite(data, 1, size, f);
    fclose(f);
    const ms_scenario *sc = NULL;
    ms_diag d = {0};
    ms_status st = ms_scenario_load(path, NULL, 0, &sc, &d);
    if (st == MS_OK)
        ms_scenario_free(sc);
    else if (d.msg[0] == '\0' || sc != NULL)
        __builtin_trap(); /* an error says why and leaves nothing */
    remove(path);
    return 0;
}
