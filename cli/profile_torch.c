/* memsim profile-torch: a policy's plan(profile, ctx) on a training step
 * measured in PyTorch (the profile CSV memsim_torch writes,
 * docs/torch.md), without running the job again: the decisions it makes
 * there, in totals and per tensor. */
#include "commands.h"

#include <getopt.h>
#include <stdio.h>
#include <string.h>

#include "memsim/allocator.h"
#include "memsim/torch.h"

static void usage(FILE *out)
{
    fprintf(out, "usage: memsim profile-torch PROFILE.csv --policy FILE|NAME [--out OUT.csv]\n"
                 "\n"
                 "Runs a policy's plan(profile, ctx) on a step measured in PyTorch (the CSV\n"
                 "memsim_torch's Session.write_profile writes: per-op times and memory, the\n"
                 "tensors saved for backward, the recompute segments) and prints what it\n"
                 "decides: tensors kept, offloaded and recomputed, with their bytes.\n"
                 "\n"
                 "  --policy FILE|NAME  a policy file, or a shipped policy (policies_lua/)\n"
                 "  --out OUT.csv       the profile again with these decisions\n");
}

static int report(const char *path, const char *policy, ms_torch_step *s, const ms_torch_measure *m)
{
    ms_torch_summary sum;
    ms_torch_summarize(s, &sum);
    static const char *const what[3] = {"kept", "offloaded", "recomputed"};
    printf("memsim profile-torch: %s (step %d: %u ops, %u saved tensors, %u segments)\n", path,
           m->step, sum.ops, sum.tensors, sum.segments);
    printf("policy %s%s\n", policy, sum.stable ? " (stable)" : "");
    for (int a = 0; a < 3; a++) {
        char size[32];
        ms_alloc_format_size(sum.bytes[a], size, sizeof size);
        printf("  %-10s %6u tensors  %s\n", what[a], sum.count[a], size);
    }
    printf("  segments recomputed: %u of %u\n", sum.segments_recomputed, sum.segments);
    return 0;
}

int cli_profile_torch(int argc, char **argv)
{
    static const struct option opts[] = {{"policy", required_argument, NULL, 'p'},
                                         {"out", required_argument, NULL, 'o'},
                                         {"help", no_argument, NULL, 'h'},
                                         {NULL, 0, NULL, 0}};
    const char *policy = NULL, *out = NULL;
    int c;
    optind = 1;
    while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        if (c == 'h') {
            usage(stdout);
            return 0;
        }
        if (c == 'p')
            policy = optarg;
        else if (c == 'o')
            out = optarg;
        else {
            usage(stderr);
            return 2;
        }
    }
    if (optind != argc - 1 || policy == NULL) {
        fprintf(stderr, "memsim profile-torch: %s\n",
                policy ? "give one PROFILE.csv" : "--policy is required");
        usage(stderr);
        return 2;
    }
    const char *path = argv[optind];
    ms_torch_step *s = NULL;
    ms_torch_measure m;
    ms_diag d = {0};
    ms_status st = ms_torch_step_create(policy, NULL, &s, &d);
    if (st == MS_OK)
        st = ms_torch_profile_read(s, path, &m, &d);
    if (st == MS_OK)
        st = ms_torch_plan(s, &m, &d);
    if (st == MS_OK && out != NULL)
        st = ms_torch_profile_write(s, out, &d);
    int rc = 1;
    if (st == MS_OK) {
        rc = report(path, policy, s, &m);
        if (out != NULL)
            printf("wrote %s\n", out);
    } else
        fprintf(stderr, "memsim profile-torch: %s\n", d.msg[0] ? d.msg : ms_strerror(st));
    ms_torch_step_free(s);
    return rc;
}
