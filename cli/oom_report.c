/* The report of a run that ran out of memory (cli_oom_report): what a user
 * reading PyTorch's one-line message wants next - which op and tensor, what
 * held the memory, whether it was fragmentation, and what would have fitted.
 * The last is found by simulating each shipped policy and each allocator
 * setting PyTorch's message suggests on the same scenario. */
#include "commands.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define TOP_TENSORS 10
#define GIB (1024.0 * 1024.0 * 1024.0)

static const char *human(uint64_t b, char buf[32])
{
    ms_alloc_format_size(b, buf, 32);
    return buf;
}

static void put_failure(FILE *out, const ms_run_summary *s, const ms_program_view *pv)
{
    char b[32];
    fprintf(out, "\nout of memory: step %d on device %d (pipeline stage %d of %d)\n", s->oom_step,
            s->stage, s->stage, s->devices);
    if (s->oom_op < 0 || pv == NULL || (uint32_t)s->oom_op >= pv->n_ops) {
        fprintf(out, "  failed while allocating the persistent tensors (weights, grads, optimizer "
                     "state) before the first step: they alone do not fit\n");
    } else {
        const ms_op *op = &pv->ops[s->oom_op];
        fprintf(out, "  failed at op %d %s (%s, micro-batch %d, layer %d)\n", (int)s->oom_op,
                op->name, ms_phase_name(op->phase), op->micro_batch, op->layer);
        if (s->oom_tensor < pv->n_tensors) {
            const ms_tensor *t = &pv->tensors[s->oom_tensor];
            fprintf(out, "  allocating tensor %u %s (%s, %s)\n", s->oom_tensor, t->name,
                    ms_tensor_kind_name(t->kind), human(t->bytes, b));
        }
    }
    fprintf(out, "  allocator: %s\n", s->oom_message);
}

/* The last oom event of (device, step) in the record, or the row count. */
static size_t oom_row(const ms_run_record *rec, int dev, int step)
{
    size_t at = ms_record_n_mem(rec);
    for (size_t i = 0; i < ms_record_n_mem(rec); i++) {
        const ms_mem_row *m = ms_record_mem(rec, i);
        if (m->device == dev && m->step == step && m->action == MS_AA_OOM)
            at = i;
    }
    return at;
}

typedef struct live_tensor {
    uint32_t id;
    uint64_t bytes;
} live_tensor;

static int by_size(const void *a, const void *b)
{
    const live_tensor *x = a, *y = b;
    if (x->bytes != y->bytes)
        return x->bytes < y->bytes ? 1 : -1;
    return x->id < y->id ? -1 : x->id > y->id;
}

/* Live at the oom: persistent tensors (unless the setup itself failed) and
 * what the step allocated and had not freed by then. */
static void put_live(FILE *out, const ms_run_summary *s, const ms_run_record *rec,
                     const ms_program_view *pv)
{
    size_t end = oom_row(rec, s->stage, s->oom_step);
    if (end == ms_record_n_mem(rec)) {
        fprintf(out, "  live tensors: the record does not hold that step's memory events\n");
        return;
    }
    bool *live = calloc(pv->n_tensors + 1, sizeof *live);
    live_tensor *list = calloc(pv->n_tensors + 1, sizeof *list);
    if (live == NULL || list == NULL) {
        free(live);
        free(list);
        return;
    }
    for (uint32_t t = 0; s->oom_op >= 0 && t < pv->n_tensors; t++)
        live[t] = pv->tensors[t].persistent;
    for (size_t i = 0; i <= end; i++) {
        const ms_mem_row *m = ms_record_mem(rec, i);
        if (m->device != s->stage || m->step != s->oom_step || m->tensor >= pv->n_tensors)
            continue;
        if (m->action == MS_AA_ALLOC)
            live[m->tensor] = true;
        else if (m->action == MS_AA_FREE_REQUESTED)
            live[m->tensor] = false;
    }
    size_t n = 0;
    uint64_t by_kind[MS_TK_COUNT] = {0}, count[MS_TK_COUNT] = {0};
    for (uint32_t t = 0; t < pv->n_tensors; t++) {
        if (!live[t])
            continue;
        list[n++] = (live_tensor){t, pv->tensors[t].bytes};
        by_kind[pv->tensors[t].kind] += pv->tensors[t].bytes;
        count[pv->tensors[t].kind]++;
    }
    qsort(list, n, sizeof *list, by_size);
    char b[32];
    fprintf(out, "  live then, by kind:");
    for (int k = 0; k < MS_TK_COUNT; k++)
        if (count[k] > 0)
            fprintf(out, " %s %s (%llu)", ms_tensor_kind_name((ms_tensor_kind)k),
                    human(by_kind[k], b), (unsigned long long)count[k]);
    fprintf(out, "\n  largest live tensors:\n");
    for (size_t i = 0; i < n && i < TOP_TENSORS; i++) {
        const ms_tensor *t = &pv->tensors[list[i].id];
        fprintf(out, "    %12s  %-15s %s\n", human(t->bytes, b), ms_tensor_kind_name(t->kind),
                t->name);
    }
    free(live);
    free(list);
}

/* The allocator's blocks when the allocation failed (segments.csv's "oom"
 * rows): how much was reserved but free, and in how large a piece. */
static void put_fragmentation(FILE *out, const ms_run_summary *s, const ms_run_record *rec)
{
    uint64_t reserved = 0, allocated = 0, free_bytes = 0, largest = 0, last_seg = UINT64_MAX;
    size_t free_blocks = 0, rows = 0;
    for (size_t i = 0; i < ms_record_n_segments(rec); i++) {
        const ms_segment_row *r = ms_record_segment(rec, i);
        if (r->device != s->stage || r->step != s->oom_step || r->when != MS_SNAP_OOM)
            continue;
        rows++;
        const ms_block_info *b = &r->block;
        if (b->segment_addr != last_seg)
            reserved += b->segment_size;
        last_seg = b->segment_addr;
        if (b->allocated || b->pending_free) {
            allocated += b->size;
        } else {
            free_bytes += b->size;
            free_blocks++;
            largest = b->size > largest ? b->size : largest;
        }
    }
    char b1[32], b2[32], b3[32], b4[32];
    if (rows == 0) {
        fprintf(out, "  fragmentation: the record holds no allocator blocks of that moment\n");
        return;
    }
    fprintf(out,
            "  fragmentation then: %s reserved, %s in use, %s cached but free in %zu blocks "
            "(the largest %s)",
            human(reserved, b1), human(allocated, b2), human(free_bytes, b3), free_blocks,
            human(largest, b4));
    if (s->oom_bytes > 0 && free_bytes >= s->oom_bytes)
        fprintf(out, ": enough in total for the %s request, but not in one block",
                human(s->oom_bytes, b1));
    fprintf(out, "\n");
}

/* conf with key set to value (replacing the key if conf has it). */
static void conf_with(const char *conf, const char *key, const char *value, char *out, size_t n)
{
    size_t at = 0;
    out[0] = '\0';
    size_t klen = strlen(key);
    for (const char *p = conf; p != NULL && *p;) {
        const char *comma = strchr(p, ',');
        size_t len = comma ? (size_t)(comma - p) : strlen(p);
        bool same = len > klen && strncmp(p, key, klen) == 0 && p[klen] == ':';
        if (!same && len > 0 && at < n)
            at += (size_t)snprintf(out + at, n - at, "%s%.*s", at ? "," : "", (int)len, p);
        p = comma ? comma + 1 : NULL;
    }
    if (at < n)
        snprintf(out + at, n - at, "%s%s:%s", at ? "," : "", key, value);
}

#define N_SETTINGS 2

typedef struct advice {
    cli_config cfg[CLI_MAX_NAMES + N_SETTINGS];
    char conf_set[N_SETTINGS][700];
    const char *label[CLI_MAX_NAMES + N_SETTINGS];
    char label_buf[N_SETTINGS][128];
    size_t n;
} advice;

/* The what-ifs: every shipped policy, then the settings PyTorch's message
 * suggests (expandable segments against fragmentation; max_split_size_mb,
 * its older advice) under the run's own policy. */
static void build_advice(advice *a, const cli_job *job, const ms_scenario *sc,
                         const cli_names *pols)
{
    static const char *const keys[N_SETTINGS][2] = {{"expandable_segments", "True"},
                                                    {"max_split_size_mb", "128"}};
    for (size_t i = 0; i < pols->n && a->n < CLI_MAX_NAMES; i++) {
        cli_config *c = &a->cfg[a->n];
        c->policy = pols->name[i];
        c->n_sets = job->n_sets < CLI_MAX_SETS ? job->n_sets : CLI_MAX_SETS;
        memcpy(c->sets, job->sets, c->n_sets * sizeof *c->sets);
        a->label[a->n++] = pols->name[i];
    }
    for (int k = 0; k < N_SETTINGS && job->n_sets < CLI_MAX_SETS; k++) {
        char conf[600];
        conf_with(sc->allocator_conf, keys[k][0], keys[k][1], conf, sizeof conf);
        snprintf(a->conf_set[k], sizeof a->conf_set[k], "allocator.conf=%s", conf);
        snprintf(a->label_buf[k], sizeof a->label_buf[k], "allocator %s:%s", keys[k][0],
                 keys[k][1]);
        cli_config *c = &a->cfg[a->n];
        c->policy = job->policy;
        c->n_sets = job->n_sets;
        memcpy(c->sets, job->sets, job->n_sets * sizeof *c->sets);
        c->sets[c->n_sets++] = a->conf_set[k];
        a->label[a->n++] = a->label_buf[k];
    }
}

static ms_status put_advice(FILE *out, const cli_job *job, const ms_scenario *sc, int jobs,
                            ms_diag *d)
{
    cli_names pols;
    if (cli_names_list("policies_lua", &pols) != MS_OK)
        return ms_diag_set(d, MS_ENOENT, "cannot find the shipped policies (policies_lua)");
    advice *a = calloc(1, sizeof *a);
    cli_result *res = NULL;
    ms_status st = a != NULL ? MS_OK : MS_ENOMEM;
    if (st == MS_OK) {
        build_advice(a, job, sc, &pols);
        res = calloc(a->n + 1, sizeof *res);
        st = res != NULL ? MS_OK : MS_ENOMEM;
    }
    if (st == MS_OK) {
        fprintf(out, "\nwhat would have fitted (each simulated on the same scenario and "
                     "overrides):\n");
        fflush(out);
        st = cli_run_configs(job->scenario, job->backend, a->cfg, a->n, NULL, jobs,
                             isatty(STDERR_FILENO), res, d);
    }
    for (size_t i = 0; st == MS_OK && i < a->n; i++) {
        char b1[32], b2[32];
        fprintf(out, "  %-40s ", a->label[i]);
        if (res[i].status != MS_OK)
            fprintf(out, "could not run: %s\n", res[i].error);
        else if (res[i].oom)
            fprintf(out, "out of memory too (step %d, stage %d)\n", res[i].oom_step,
                    res[i].oom_stage);
        else
            fprintf(out, "fits: peak reserved %s of %s, step %.1f ms\n",
                    human(res[i].peak_reserved, b1), human(res[i].capacity, b2),
                    res[i].step_time_ms);
    }
    long best = st == MS_OK ? cli_best_fit(res, a->n) : -1;
    if (st == MS_OK && best < 0)
        fprintf(out, "  none of them fits: the model needs more devices or memory (parallelism, "
                     "micro-batch size, sequence length)\n");
    else if (st == MS_OK)
        fprintf(out, "  the fastest that fits: %s (%.0f tokens/s)\n", a->label[best],
                res[best].tokens_per_s);
    cli_names_free(&pols);
    free(a);
    free(res);
    if (st == MS_ENOMEM)
        ms_diag_set(d, st, "out of memory");
    return st;
}

ms_status cli_oom_report(FILE *out, const cli_job *job, const cli_outcome *o, bool advice_on,
                         int jobs, ms_diag *d)
{
    size_t nv = 0;
    const ms_program_view *views = ms_run_program_views(o->run, &nv);
    const ms_run_record *rec = ms_run_record_get(o->run);
    for (size_t i = 0; i < o->n_rows; i++) {
        const ms_run_summary *s = &o->rows[i];
        if (!s->oom)
            continue;
        const ms_program_view *pv = (size_t)s->stage < nv ? &views[s->stage] : NULL;
        put_failure(out, s, pv);
        if (rec == NULL) {
            fprintf(out, "  (no run record: report.detail = \"none\"; run with --set "
                         "report.detail=last for the live tensors and the allocator's blocks)\n");
            continue;
        }
        if (pv != NULL)
            put_live(out, s, rec, pv);
        put_fragmentation(out, s, rec);
    }
    return advice_on ? put_advice(out, job, o->sc, jobs, d) : MS_OK;
}
