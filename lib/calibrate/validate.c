/* memsim validate: run the rows of public measurement tables through the
 * model, fit named device parameters on the train rows (gsl_multifit_nlinear
 * on log(predicted / measured)), and report the error of every row, and the
 * mean and max |error| per table and split (GSL statistics). */
#include "validation.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <gsl/gsl_statistics_double.h>
#include <pthread.h>
#include <unistd.h>

#include "fit.h"
#include "memsim/run.h"
#include "memsim/workload.h"
#include "lib/base/units.h"


ms_status ms_validation_load(const char *const *tables, size_t n_tables, ms_validation **out,
                             ms_diag *d)
{
    if (tables == NULL || n_tables == 0 || out == NULL)
        return ms_diag_set(d, MS_EINVAL, "validate: no tables");
    *out = NULL; /* nothing on failure */
    ms_validation *v = calloc(1, sizeof *v);
    if (v == NULL || (v->tables = calloc(n_tables, sizeof *v->tables)) == NULL) {
        free(v);
        return ms_diag_set(d, MS_ENOMEM, "validate: out of memory");
    }
    ms_status st = MS_OK;
    for (size_t i = 0; st == MS_OK && i < n_tables; i++) {
        v->tables[i] = strdup(tables[i]);
        v->n_tables++;
        st = v->tables[i] != NULL ? val_table_load(v, tables[i], d) : MS_ENOMEM;
    }
    if (st != MS_OK) {
        ms_validation_free(v);
        return st;
    }
    *out = v;
    return MS_OK;
}

ms_status ms_validation_free(ms_validation *v)
{
    if (v == NULL)
        return MS_EINVAL;
    val_rows_free(v);
    for (size_t i = 0; i < v->n_tables; i++)
        free(v->tables[i]);
    free(v->tables);
    free(v->fit);
    free(v);
    return MS_OK;
}

/* ---- running a row --------------------------------------------------- */

/* The row's device with the fitted values that apply to it. */
static void fitted_device(const ms_validation *v, const val_row *r, ms_device_spec *s)
{
    *s = r->sc->device;
    for (size_t i = 0; i < v->n_fit; i++)
        if (v->fit[i].device[0] == '\0' || strcmp(v->fit[i].device, s->name) == 0)
            cal_param_set(v->fit[i].p, s, v->fit[i].value);
}

/* Step FLOPs as the row's source counts them. */
static double source_flops(const val_row *r)
{
    const ms_model_config *m = &r->sc->model;
    double B = r->sc->parallel.global_batch_size, s = m->seq_length, l = m->num_layers;
    double h = m->hidden_size, V = m->padded_vocab_size;
    if (r->formula == VAL_FLOPS_MEGATRON_SC21)
        return 96 * B * s * l * h * h * (1 + s / (6 * h) + V / (16 * l * h));
    double f = 0;
    return ms_model_step_flops(m, (uint64_t)B, &f) == MS_OK ? f : 0;
}

static void record_results(val_row *r, const ms_run_summary *s, size_t n)
{
    uint64_t peak = 0;
    for (size_t i = 0; i < n; i++)
        if (s[i].peak_reserved > peak)
            peak = s[i].peak_reserved;
    r->pred_time_s = s[0].step_time_ms / 1e3;
    r->pred_mem_gib = (double)peak / BASE_GIB;
    int world = r->sc->parallel.world_size;
    r->pred_tflops = r->pred_time_s > 0 ? source_flops(r) / (r->pred_time_s * world) / 1e12 : 0;
    r->ran = true;
}

ms_status val_row_run(const ms_validation *v, val_row *r, ms_diag *d)
{
    /* The loaded scenario stays as loaded; the run sees a copy with the
     * fitted device (the copy shares its read-only settings). */
    ms_scenario sc = *r->sc;
    fitted_device(v, r, &sc.device);
    ms_status st = ms_device_spec_validate(&sc.device, d);
    ms_run_options opt = {.policy = r->policy[0] ? r->policy : NULL, .record = false};
    ms_run *run = NULL;
    ms_diag rd = {0};
    r->ran = false;
    r->error[0] = '\0';
    if (st == MS_OK)
        st = ms_run_execute(&sc, &opt, &run, &rd);
    if (st == MS_OK) {
        size_t n = 0;
        const ms_run_summary *s = ms_run_summaries(run, &n);
        if (n == 0 || s[0].oom || !(s[0].step_time_ms > 0))
            snprintf(r->error, sizeof r->error, "no step completed: %s",
                     n && s[0].oom ? "out of memory" : "no time");
        else
            record_results(r, s, n);
    } else {
        snprintf(r->error, sizeof r->error, "%s", rd.msg[0] ? rd.msg : ms_strerror(st));
    }
    if (run != NULL)
        ms_run_free(run);
    return MS_OK;
}

bool val_row_error(const val_row *r, double *err)
{
    if (!r->ran)
        return false;
    if (r->meas_time_s > 0)
        *err = r->pred_time_s / r->meas_time_s - 1;
    else if (r->meas_tflops > 0)
        *err = r->pred_tflops / r->meas_tflops - 1;
    else
        *err = r->pred_mem_gib / r->meas_mem_gib - 1;
    return true;
}

/* Rows are independent runs (no state is shared but the read-only
 * validation), so several threads take them in turn. */
typedef struct row_pool {
    const ms_validation *v;
    val_row **rows;
    size_t n, next;
    pthread_mutex_t lock;
    FILE *log;
} row_pool;

static void *row_worker(void *arg)
{
    row_pool *p = arg;
    for (;;) {
        pthread_mutex_lock(&p->lock);
        size_t i = p->next++;
        if (i < p->n && p->log != NULL)
            fprintf(p->log, "validate: %s row %d (%s)\n", p->v->tables[p->rows[i]->table],
                    p->rows[i]->row, p->rows[i]->id);
        pthread_mutex_unlock(&p->lock);
        if (i >= p->n)
            return NULL;
        val_row_run(p->v, p->rows[i], NULL);
    }
}

int val_jobs(void)
{
    const char *env = getenv("MEMSIM_JOBS");
    long n = env != NULL ? strtol(env, NULL, 10) : sysconf(_SC_NPROCESSORS_ONLN);
    return n < 1 ? 1 : n > 64 ? 64 : (int)n;
}

ms_status val_rows_run(const ms_validation *v, val_row **rows, size_t n, FILE *log)
{
    row_pool p = {.v = v, .rows = rows, .n = n, .log = log};
    if (pthread_mutex_init(&p.lock, NULL) != 0)
        return MS_ENOMEM;
    pthread_t th[64];
    int jobs = val_jobs(), started = 0;
    if ((size_t)jobs > n)
        jobs = (int)n;
    for (int j = 1; j < jobs; j++)
        started += pthread_create(&th[started], NULL, row_worker, &p) == 0;
    row_worker(&p); /* this thread works too, so no thread is not an error */
    for (int j = 0; j < started; j++)
        pthread_join(th[j], NULL);
    pthread_mutex_destroy(&p.lock);
    return MS_OK;
}

ms_status ms_validation_run(ms_validation *v, FILE *log, ms_diag *d)
{
    if (v == NULL)
        return MS_EINVAL;
    val_row **all = malloc((v->n_rows ? v->n_rows : 1) * sizeof *all);
    if (all == NULL)
        return ms_diag_set(d, MS_ENOMEM, "validate: out of memory");
    for (size_t i = 0; i < v->n_rows; i++)
        all[i] = &v->rows[i];
    ms_status st = val_rows_run(v, all, v->n_rows, log);
    free(all);
    if (st != MS_OK)
        return ms_diag_set(d, st, "validate: cannot start the row threads");
    size_t failed = 0;
    for (size_t i = 0; i < v->n_rows; i++)
        failed += !v->rows[i].ran;
    if (failed > 0)
        return ms_diag_set(d, MS_ERANGE,
                           "validate: %zu row%s could not be predicted (see the "
                           "table)",
                           failed, failed == 1 ? "" : "s");
    return MS_OK;
}

/* ---- the report ------------------------------------------------------- */

static const char *metric_of(const val_row *r)
{
    return r->meas_time_s > 0   ? "step_time_s"
           : r->meas_tflops > 0 ? "tflops_per_device"
                                : "peak_memory_gib";
}

static double measured_of(const val_row *r)
{
    return r->meas_time_s > 0   ? r->meas_time_s
           : r->meas_tflops > 0 ? r->meas_tflops
                                : r->meas_mem_gib;
}

static double predicted_of(const val_row *r)
{
    return r->meas_time_s > 0   ? r->pred_time_s
           : r->meas_tflops > 0 ? r->pred_tflops
                                : r->pred_mem_gib;
}

/* Mean and max |error| (percent) of the rows of a table (-1: all) and split. */
static size_t summarize(const ms_validation *v, int table, bool train, double *mean, double *max)
{
    double *a = malloc((v->n_rows ? v->n_rows : 1) * sizeof *a);
    size_t n = 0;
    for (size_t i = 0; a != NULL && i < v->n_rows; i++) {
        const val_row *r = &v->rows[i];
        double e;
        if ((table < 0 || r->table == table) && r->train == train && val_row_error(r, &e))
            a[n++] = 100 * fabs(e);
    }
    *mean = n ? gsl_stats_mean(a, 1, n) : 0;
    *max = n ? gsl_stats_max(a, 1, n) : 0;
    free(a);
    return n;
}

static void print_summary(const ms_validation *v, FILE *out)
{
    for (int t = -1; t < (int)v->n_tables; t++) {
        if (t < 0 && v->n_tables == 1)
            continue;
        for (int train = 1; train >= 0; train--) {
            double mean, max;
            size_t n = summarize(v, t, train, &mean, &max);
            if (n > 0)
                fprintf(out, "%-40s %-5s %3zu rows  mean |error| %5.2f%%  max %5.2f%%\n",
                        t < 0 ? "all tables" : v->tables[t], train ? "train" : "test", n, mean,
                        max);
        }
    }
}

ms_status ms_validation_print(const ms_validation *v, FILE *out)
{
    if (v == NULL || out == NULL)
        return MS_EINVAL;
    fprintf(out, "%-28s %-5s %-12s %-18s %12s %12s %8s\n", "row", "split", "device", "metric",
            "measured", "predicted", "error");
    for (size_t i = 0; i < v->n_rows; i++) {
        const val_row *r = &v->rows[i];
        double e = 0;
        if (!val_row_error(r, &e)) {
            fprintf(out, "%-28s %-5s %-12s %-18s %12.4g %12s %8s  %s\n", r->id,
                    r->train ? "train" : "test", r->sc->device.name, metric_of(r), measured_of(r),
                    "-", "-", r->error);
            continue;
        }
        fprintf(out, "%-28s %-5s %-12s %-18s %12.4g %12.4g %+7.2f%%\n", r->id,
                r->train ? "train" : "test", r->sc->device.name, metric_of(r), measured_of(r),
                predicted_of(r), 100 * e);
    }
    print_summary(v, out);
    for (size_t i = 0; i < v->n_fit; i++)
        fprintf(out, "fitted %s%s%s = %.6g +- %.2g\n", v->fit[i].device,
                v->fit[i].device[0] ? ":" : "", v->fit[i].p->name, v->fit[i].value,
                v->fit[i].std_error);
    if (v->n_fit > 0)
        fprintf(out, "fit: RMS log error %.4f on the train rows, %d runs of them\n", v->fit_rms,
                v->fit_evaluations);
    return MS_OK;
}
