/* A PyTorch step as a memsim program, and the policy's plan for it
 * (include/memsim/torch.h).
 *
 * The program is built by hand (ms_program_view allows it: consumers
 * derive the facts themselves): ops in the order the step ran them,
 * tensors saved for backward with their producer and readers, recompute
 * segments for wrapped modules.  The profile is the one `memsim run` gives
 * plan() after a measured step. */
#include <csv.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "bridge_torch/bridge.h"
#include "lib/base/growable.h"
#include "memsim/torch.h"

typedef struct torch_tensor {
    ms_tensor t;
    uint32_t *uses;
    uint32_t n_uses, cap_uses;
} torch_tensor;

struct ms_torch_step {
    ms_policy *policy;
    ms_op *ops;
    ms_op_profile *prof;
    uint32_t n_ops, cap_ops;
    torch_tensor *tensors;
    uint32_t n_tensors, cap_tensors;
    ms_segment *segs;
    uint32_t n_segs, cap_segs;
    /* The tensors as the policy sees them, kept between plans so that an
     * unchanged program keeps its address (and the policy its view). */
    ms_tensor *view_tensors;
    uint32_t cap_view_tensors;
    uint64_t revision; /* ms_program_view.revision: bumped by every change */
    ms_plan plan;
    ms_torch_action *action; /* per tensor, from the last plan */
    bool *recomputed;        /* per segment */
    ms_torch_measure measure; /* the last plan's */
    bool measured;
};

ms_status bridge_policy_load(const char *policy, const char *lib_dir, ms_policy **out, ms_diag *d)
{
    char dir[4096];
    if (lib_dir == NULL) {
        if (ms_data_path("policies_lua", dir, sizeof dir) != MS_OK)
            return ms_diag_set(d, MS_ENOENT, "cannot find the shipped policies "
                                             "(policies_lua); set MEMSIM_DATADIR");
        lib_dir = dir;
    }
    return ms_policy_load(policy, lib_dir, NULL, out, d);
}

ms_status ms_torch_step_create(const char *policy, const char *lib_dir, ms_torch_step **out,
                               ms_diag *d)
{
    if (policy == NULL || out == NULL)
        return ms_diag_set(d, MS_EINVAL, "ms_torch_step_create: NULL argument");
    *out = NULL;
    ms_torch_step *s = calloc(1, sizeof *s);
    if (s == NULL)
        return ms_diag_set(d, MS_ENOMEM, "out of host memory");
    ms_plan_init(&s->plan);
    ms_status st = bridge_policy_load(policy, lib_dir, &s->policy, d);
    if (st != MS_OK) {
        ms_torch_step_free(s);
        return st;
    }
    *out = s;
    return MS_OK;
}

static void free_program(ms_torch_step *s)
{
    for (uint32_t i = 0; i < s->n_ops; i++) {
        free((char *)s->ops[i].name);
        free((uint32_t *)s->ops[i].inputs);
    }
    for (uint32_t i = 0; i < s->n_tensors; i++) {
        free((char *)s->tensors[i].t.name);
        free(s->tensors[i].uses);
    }
    for (uint32_t i = 0; i < s->n_segs; i++) {
        free((char *)s->segs[i].name);
        free((uint32_t *)s->segs[i].inputs);
    }
    free(s->action);
    free(s->recomputed);
    s->action = NULL;
    s->recomputed = NULL;
    s->n_ops = s->n_tensors = s->n_segs = 0;
    s->revision++;
}

ms_status ms_torch_step_reset(ms_torch_step *s)
{
    if (s == NULL)
        return MS_EINVAL;
    free_program(s);
    return ms_plan_clear(&s->plan);
}

ms_status ms_torch_step_free(ms_torch_step *s)
{
    if (s == NULL)
        return MS_OK;
    free_program(s);
    free(s->ops);
    free(s->prof);
    free(s->tensors);
    free(s->segs);
    free(s->view_tensors);
    ms_plan_free(&s->plan);
    ms_policy_free(s->policy);
    free(s);
    return MS_OK;
}

/* The layer of a module path: its first all-digit component, a
 * ModuleList's index (layers.3.mlp.fc1, transformer.h.3.attn), as the
 * simulator names its ops (layers.3.attention.core); MS_NONE without one. */
static int32_t layer_of(const char *name)
{
    for (const char *c = name; *c != '\0';) {
        size_t n = strcspn(c, ".");
        if (n > 0 && n < 9 && strspn(c, "0123456789") == n)
            return (int32_t)strtol(c, NULL, 10);
        c += n + (c[n] == '.');
    }
    return MS_NONE;
}

ms_status ms_torch_op_add(ms_torch_step *s, const char *name, ms_phase phase, uint32_t *op)
{
    if (s == NULL || name == NULL || op == NULL ||
        (phase != MS_PHASE_FORWARD && phase != MS_PHASE_BACKWARD))
        return MS_EINVAL;
    if (s->n_ops >= INT32_MAX || !MS_GROW(s->ops, s->n_ops, s->cap_ops, 64))
        return MS_ENOMEM;
    uint32_t cap = s->cap_ops;
    if (!base_resize_array((void **)&s->prof, cap, sizeof *s->prof))
        return MS_ENOMEM;
    char *n = strdup(name);
    if (n == NULL)
        return MS_ENOMEM;
    uint32_t id = s->n_ops++;
    s->revision++;
    s->ops[id] = (ms_op){.id = id,
                         .name = n,
                         .kernel = {.name = n, .cls = MS_KC_ELEMENTWISE},
                         .phase = phase,
                         .micro_batch = 0,
                         .layer = layer_of(n),
                         .segment = MS_NONE};
    s->prof[id] = (ms_op_profile){0};
    *op = id;
    return MS_OK;
}

ms_status ms_torch_op_measure(ms_torch_step *s, uint32_t op, int64_t start_ns, int64_t end_ns,
                              uint64_t allocated, uint64_t reserved)
{
    if (s == NULL || op >= s->n_ops || start_ns < 0 || end_ns < start_ns)
        return MS_EINVAL;
    s->prof[op] = (ms_op_profile){start_ns, end_ns, allocated, reserved, allocated};
    return MS_OK;
}

ms_status ms_torch_tensor_add(ms_torch_step *s, const char *name, uint64_t bytes,
                              ms_tensor_kind kind, int32_t producer, uint32_t *tensor)
{
    if (s == NULL || name == NULL || tensor == NULL || (unsigned)kind >= MS_TK_COUNT ||
        producer < MS_NONE || (producer >= 0 && (uint32_t)producer >= s->n_ops))
        return MS_EINVAL;
    if (s->n_tensors >= INT32_MAX || !MS_GROW(s->tensors, s->n_tensors, s->cap_tensors, 64))
        return MS_ENOMEM;
    char *n = strdup(name);
    if (n == NULL)
        return MS_ENOMEM;
    uint32_t id = s->n_tensors++;
    s->revision++;
    bool saved = kind == MS_TK_ACTIVATION;
    s->tensors[id] = (torch_tensor){.t = {.id = id,
                                          .name = n,
                                          .bytes = bytes,
                                          .dtype = MS_DTYPE_FP32,
                                          .kind = kind,
                                          .producer = producer,
                                          .persistent = kind == MS_TK_WEIGHT,
                                          .saved_for_backward = saved,
                                          .layer = producer >= 0 ? s->ops[producer].layer : MS_NONE,
                                          .micro_batch = saved ? 0 : MS_NONE}};
    *tensor = id;
    return MS_OK;
}

ms_status ms_torch_tensor_use(ms_torch_step *s, uint32_t tensor, uint32_t op)
{
    if (s == NULL || tensor >= s->n_tensors || op >= s->n_ops)
        return MS_EINVAL;
    torch_tensor *t = &s->tensors[tensor];
    if ((t->t.producer != MS_NONE && op < (uint32_t)t->t.producer) ||
        (t->n_uses > 0 && op < t->uses[t->n_uses - 1]))
        return MS_EINVAL; /* uses are recorded in program order */
    if (t->n_uses > 0 && t->uses[t->n_uses - 1] == op)
        return MS_OK;
    if (!MS_GROW(t->uses, t->n_uses, t->cap_uses, 4))
        return MS_ENOMEM;
    t->uses[t->n_uses++] = op;
    s->revision++;
    return MS_OK;
}

ms_status ms_torch_segment_add(ms_torch_step *s, const char *name, uint32_t first_op,
                               uint32_t last_op, uint32_t *segment)
{
    if (s == NULL || name == NULL || segment == NULL || first_op > last_op || last_op >= s->n_ops)
        return MS_EINVAL;
    for (uint32_t i = first_op; i <= last_op; i++)
        if (s->ops[i].phase != MS_PHASE_FORWARD)
            return MS_EINVAL;
    if (!MS_GROW(s->segs, s->n_segs, s->cap_segs, 16))
        return MS_ENOMEM;
    char *n = strdup(name);
    if (n == NULL)
        return MS_ENOMEM;
    uint32_t id = s->n_segs++;
    s->revision++;
    s->segs[id] = (ms_segment){.id = id,
                               .name = n,
                               .layer = layer_of(n),
                               .micro_batch = 0,
                               .parent = MS_NONE,
                               .first_op = first_op,
                               .last_op = last_op,
                               .first_backward_op = s->n_ops};
    for (uint32_t i = first_op; i <= last_op; i++)
        if (s->ops[i].segment == MS_NONE)
            s->ops[i].segment = (int32_t)id;
    *segment = id;
    return MS_OK;
}

/* What the recording cannot give as it goes: each op's inputs (the saved
 * tensors it reads), each segment's first backward reader of what it
 * saved and its inputs (tensors read inside but produced before it). */
static ms_status finish_program(ms_torch_step *s)
{
    for (uint32_t i = 0; i < s->n_ops; i++) {
        free((uint32_t *)s->ops[i].inputs);
        s->ops[i].inputs = NULL;
        s->ops[i].n_inputs = 0;
    }
    for (uint32_t t = 0; t < s->n_tensors; t++) {
        torch_tensor *tt = &s->tensors[t];
        tt->t.uses = tt->uses;
        tt->t.n_uses = tt->n_uses;
        for (uint32_t k = 0; k < tt->n_uses; k++) {
            ms_op *o = &s->ops[tt->uses[k]];
            uint32_t *in = realloc((uint32_t *)o->inputs, (o->n_inputs + 1) * sizeof *in);
            if (in == NULL)
                return MS_ENOMEM;
            in[o->n_inputs++] = t;
            o->inputs = in;
        }
    }
    for (uint32_t g = 0; g < s->n_segs; g++) {
        ms_segment *sg = &s->segs[g];
        sg->first_backward_op = s->n_ops > 0 ? s->n_ops - 1 : 0;
        for (uint32_t t = 0; t < s->n_tensors; t++) {
            const torch_tensor *tt = &s->tensors[t];
            int32_t p = tt->t.producer;
            if (p < (int32_t)sg->first_op || p > (int32_t)sg->last_op)
                continue;
            for (uint32_t k = 0; k < tt->n_uses; k++)
                if (s->ops[tt->uses[k]].phase == MS_PHASE_BACKWARD &&
                    tt->uses[k] < sg->first_backward_op)
                    sg->first_backward_op = tt->uses[k];
        }
    }
    return MS_OK;
}

static ms_status apply_plan(ms_torch_step *s)
{
    ms_torch_action *act = calloc(s->n_tensors ? s->n_tensors : 1, sizeof *act);
    bool *rec = calloc(s->n_segs ? s->n_segs : 1, sizeof *rec);
    if (act == NULL || rec == NULL) {
        free(act);
        free(rec);
        return MS_ENOMEM;
    }
    bool *kept = calloc(s->n_tensors ? s->n_tensors : 1, sizeof *kept);
    if (kept == NULL) {
        free(act);
        free(rec);
        return MS_ENOMEM;
    }
    for (uint32_t i = 0; i < s->plan.n; i++) {
        const ms_decision *dc = &s->plan.items[i];
        if (dc->kind == MS_DEC_SWAP && dc->tensor < s->n_tensors)
            act[dc->tensor] = MS_TORCH_OFFLOAD;
        else if (dc->kind == MS_DEC_KEEP && dc->tensor < s->n_tensors)
            kept[dc->tensor] = true;
        else if (dc->kind == MS_DEC_RECOMPUTE && dc->segment < s->n_segs)
            rec[dc->segment] = true;
    }
    /* MindFormers' precedence, as the executor: keep over swap.  A
     * recomputed segment is one torch.utils.checkpoint region, which
     * re-runs the whole module: every activation saved inside it is
     * recomputed, a keep of one of them included. */
    for (uint32_t t = 0; t < s->n_tensors; t++) {
        int32_t p = s->tensors[t].t.producer;
        int32_t g = p >= 0 ? s->ops[p].segment : MS_NONE;
        if (kept[t])
            act[t] = MS_TORCH_KEEP;
        if (g != MS_NONE && rec[g] && s->tensors[t].t.kind == MS_TK_ACTIVATION)
            act[t] = MS_TORCH_RECOMPUTE;
    }
    free(kept);
    free(s->action);
    free(s->recomputed);
    s->action = act;
    s->recomputed = rec;
    return MS_OK;
}

ms_status ms_torch_plan(ms_torch_step *s, const ms_torch_measure *m, ms_diag *d)
{
    if (s == NULL || m == NULL)
        return ms_diag_set(d, MS_EINVAL, "ms_torch_plan: NULL argument");
    ms_status st = finish_program(s);
    if (st != MS_OK)
        return ms_diag_set(d, st, "out of host memory");
    if (s->n_tensors > s->cap_view_tensors) {
        if (!base_resize_array((void **)&s->view_tensors, s->n_tensors,
                               sizeof *s->view_tensors))
            return ms_diag_set(d, MS_ENOMEM, "out of host memory");
        s->cap_view_tensors = s->n_tensors;
    }
    ms_tensor *tv = s->view_tensors;
    for (uint32_t t = 0; t < s->n_tensors; t++)
        tv[t] = s->tensors[t].t;
    ms_profile prof = {.step = m->step,
                       .measured = true,
                       .program = {.ops = s->ops,
                                   .n_ops = s->n_ops,
                                   .tensors = tv,
                                   .n_tensors = s->n_tensors,
                                   .segments = s->segs,
                                   .n_segments = s->n_segs,
                                   .revision = s->revision},
                       .ops = s->prof,
                       .peak_allocated = m->peak_allocated,
                       .peak_reserved = m->peak_reserved,
                       .capacity = m->capacity,
                       .step_time_ns = m->step_time_ns,
                       .oom_op = MS_NONE,
                       .current = &s->plan};
    s->measure = *m;
    s->measured = true;
    ms_plan next;
    ms_plan_init(&next);
    st = ms_policy_plan(s->policy, &prof, NULL, NULL, &next, d);
    if (st == MS_OK)
        st = ms_plan_copy(&s->plan, &next);
    ms_plan_free(&next);
    if (st == MS_OK)
        st = apply_plan(s);
    return st;
}

ms_status ms_torch_decision(const ms_torch_step *s, uint32_t tensor, ms_torch_action *out)
{
    if (s == NULL || out == NULL || tensor >= s->n_tensors)
        return MS_EINVAL;
    *out = s->action ? s->action[tensor] : MS_TORCH_KEEP;
    return MS_OK;
}

bool ms_torch_plan_stable(const ms_torch_step *s)
{
    return s != NULL && s->action != NULL && s->plan.stable;
}

ms_status ms_torch_segment_recomputed(const ms_torch_step *s, uint32_t segment, bool *out)
{
    if (s == NULL || out == NULL || segment >= s->n_segs)
        return MS_EINVAL;
    *out = s->recomputed ? s->recomputed[segment] : false;
    return MS_OK;
}

/* As every memsim CSV (docs/csv-schemas.md): a plain token bare, anything
 * else through libcsv's quoting. */
static void csv_name(FILE *f, const char *s)
{
    size_t n = strlen(s);
    if (n > 0 &&
        strspn(s, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_.-") == n)
        fputs(s, f);
    else
        csv_fwrite(f, s, n);
}

static void write_ops(FILE *f, const ms_torch_step *s)
{
    for (uint32_t i = 0; i < s->n_ops; i++) {
        fprintf(f, "op,%u,", i);
        csv_name(f, s->ops[i].name);
        fprintf(f, ",%s,%lld,%lld,%llu,%llu,,,,\n", ms_phase_name(s->ops[i].phase),
                (long long)s->prof[i].start_ns, (long long)s->prof[i].end_ns,
                (unsigned long long)s->prof[i].allocated, (unsigned long long)s->prof[i].reserved);
    }
}

static void write_tensors(FILE *f, const ms_torch_step *s)
{
    static const char *const actions[] = {"keep", "offload", "recompute"};
    for (uint32_t t = 0; t < s->n_tensors; t++) {
        const torch_tensor *x = &s->tensors[t];
        fprintf(f, "tensor,%u,", t);
        csv_name(f, x->t.name);
        fprintf(f, ",%s,,,,,%llu,%d,", ms_tensor_kind_name(x->t.kind),
                (unsigned long long)x->t.bytes, x->t.producer);
        for (uint32_t k = 0; k < x->n_uses; k++)
            fprintf(f, k ? " %u" : "%u", x->uses[k]);
        fprintf(f, ",%s\n", actions[s->action ? s->action[t] : MS_TORCH_KEEP]);
    }
}

static void write_segments(FILE *f, const ms_torch_step *s)
{
    for (uint32_t g = 0; g < s->n_segs; g++) {
        fprintf(f, "segment,%u,", g);
        csv_name(f, s->segs[g].name);
        fprintf(f, ",,,,,,,,%u %u,%s\n", s->segs[g].first_op, s->segs[g].last_op,
                s->recomputed && s->recomputed[g] ? "recompute" : "keep");
    }
}

ms_status ms_torch_profile_write(const ms_torch_step *s, const char *path, ms_diag *d)
{
    if (s == NULL || path == NULL)
        return ms_diag_set(d, MS_EINVAL, "ms_torch_profile_write: NULL argument");
    FILE *f = fopen(path, "w");
    if (f == NULL)
        return ms_diag_set(d, MS_EIO, "%s: cannot write: %s", path, strerror(errno));
    fputs("row,id,name,phase_or_kind,start_ns,end_ns,allocated,reserved,bytes,producer,uses,"
          "decision\n",
          f);
    if (s->measured)
        fprintf(f, "step,%d,,,0,%lld,%llu,%llu,%llu,,,\n", s->measure.step,
                (long long)s->measure.step_time_ns, (unsigned long long)s->measure.peak_allocated,
                (unsigned long long)s->measure.peak_reserved,
                (unsigned long long)s->measure.capacity);
    write_ops(f, s);
    write_tensors(f, s);
    write_segments(f, s);
    if (fclose(f) != 0)
        return ms_diag_set(d, MS_EIO, "%s: write error", path);
    return MS_OK;
}

ms_status ms_torch_summarize(const ms_torch_step *s, ms_torch_summary *out)
{
    if (s == NULL || out == NULL)
        return MS_EINVAL;
    *out = (ms_torch_summary){.ops = s->n_ops,
                              .tensors = s->n_tensors,
                              .segments = s->n_segs,
                              .stable = ms_torch_plan_stable(s)};
    for (uint32_t t = 0; t < s->n_tensors; t++) {
        ms_torch_action a = s->action ? s->action[t] : MS_TORCH_KEEP;
        out->count[a]++;
        out->bytes[a] += s->tensors[t].t.bytes;
    }
    for (uint32_t g = 0; g < s->n_segs; g++)
        out->segments_recomputed += s->recomputed && s->recomputed[g];
    return MS_OK;
}
