/* memsim list: the shipped scenarios, devices and policies, with the first
 * line of each file's header comment (cli/commands.h). */
#include "commands.h"

#include <stdio.h>
#include <string.h>

/* The first comment line of a Lua file ("-- what it is"), or "". */
static void describe(const char *dir, const char *name, char *out, size_t n)
{
    char path[8400], line[512];
    snprintf(path, sizeof path, "%s/%s.lua", dir, name);
    out[0] = '\0';
    FILE *f = fopen(path, "r");
    if (f == NULL)
        return;
    while (fgets(line, sizeof line, f) != NULL) {
        if (strncmp(line, "--", 2) != 0)
            break;
        const char *p = line + 2;
        while (*p == ' ' || *p == '-')
            p++;
        p += strncmp(p, name, strlen(name)) == 0 && p[strlen(name)] == ':' ? strlen(name) + 1 : 0;
        while (*p == ' ')
            p++;
        if (*p != '\n' && *p != '\0') {
            snprintf(out, n, "%.*s", (int)strcspn(p, "\n"), p);
            break;
        }
    }
    fclose(f);
}

static int list_one(const char *title, const char *sub, bool names_only)
{
    cli_names names;
    if (cli_names_list(sub, &names) != MS_OK) {
        fprintf(stderr, "memsim list: cannot find the shipped %s (%s); set MEMSIM_DATADIR\n", title,
                sub);
        return CLI_ERROR;
    }
    if (!names_only)
        printf("%s (%s):\n", title, names.dir);
    for (size_t i = 0; i < names.n; i++) {
        char what[512];
        if (names_only) {
            printf("%s\n", names.name[i]);
            continue;
        }
        describe(names.dir, names.name[i], what, sizeof what);
        printf("  %-32s %.90s\n", names.name[i], what);
    }
    cli_names_free(&names);
    return CLI_OK;
}

int cli_list(int argc, char **argv)
{
    static const char *const kinds[][3] = {{"scenarios", "scenarios", "scenarios"},
                                           {"devices", "devices", "scenarios/devices"},
                                           {"policies", "policies", "policies_lua"}};
    bool names_only = false;
    const char *which = NULL;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--names") == 0) {
            names_only = true;
        } else if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            printf("usage: memsim list [scenarios|devices|policies|keys] [--names]\n\n"
                   "Lists what ships with memsim: scenario files (memsim run takes their path),\n"
                   "device files (a scenario's device = NAME), policies (--policy NAME), or the\n"
                   "keys --set overrides.  --names prints bare names, one a line (for scripts\n"
                   "and shell completion).\n\nExample:\n  memsim list policies\n");
            return CLI_OK;
        } else if (which == NULL) {
            which = argv[i];
        } else {
            fprintf(stderr, "memsim list: one of scenarios, devices, policies, keys\n");
            return CLI_USAGE;
        }
    }
    if (which != NULL && strcmp(which, "keys") == 0) {
        char key[128];
        for (size_t i = 0; i < ms_scenario_key_count(); i++)
            if (ms_scenario_key(i, key, sizeof key) == MS_OK)
                printf("%s\n", key);
        return CLI_OK;
    }
    int rc = CLI_OK, shown = 0;
    for (size_t k = 0; k < 3; k++) {
        if (which != NULL && strcmp(which, kinds[k][0]) != 0)
            continue;
        if (shown++ > 0 && !names_only)
            printf("\n");
        int r = list_one(kinds[k][1], kinds[k][2], names_only);
        rc = r != CLI_OK ? r : rc;
    }
    if (shown == 0) {
        fprintf(stderr, "memsim list: '%s': expected scenarios, devices, policies or keys\n",
                which);
        return CLI_USAGE;
    }
    return rc;
}
