/* memsim validate's files: the per-row table (CSV through libcsv, written
 * whole or not at all by lib/report's writer) and the fitted devices. */
#include "validation.h"

#include <math.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "lib/report/csv_out.h"

static const char *const columns[] = {"table",    "id",        "split",     "device", "metric",
                                      "measured", "predicted", "error_pct", "source"};

static ms_status write_row(ms_csv_out *w, const ms_validation *v, const val_row *r)
{
    double e = NAN;
    bool ok = val_row_error(r, &e);
    const char *metric = r->meas_time_s > 0   ? "step_time_s"
                         : r->meas_tflops > 0 ? "tflops_per_device"
                                              : "peak_memory_gib";
    double meas = r->meas_time_s > 0   ? r->meas_time_s
                  : r->meas_tflops > 0 ? r->meas_tflops
                                       : r->meas_mem_gib;
    double pred = r->meas_time_s > 0   ? r->pred_time_s
                  : r->meas_tflops > 0 ? r->pred_tflops
                                       : r->pred_mem_gib;
    ms_status st = rep_csv_str(w, v->tables[r->table]);
    if (st == MS_OK)
        st = rep_csv_str(w, r->id);
    if (st == MS_OK)
        st = rep_csv_str(w, r->train ? "train" : "test");
    if (st == MS_OK)
        st = rep_csv_str(w, r->sc->device.name);
    if (st == MS_OK)
        st = rep_csv_str(w, metric);
    if (st == MS_OK)
        st = rep_csv_f64(w, meas, 4);
    if (st == MS_OK)
        st = ok ? rep_csv_f64(w, pred, 4) : rep_csv_str(w, "");
    if (st == MS_OK)
        st = ok ? rep_csv_f64(w, 100 * e, 2) : rep_csv_str(w, r->error);
    if (st == MS_OK)
        st = rep_csv_str(w, r->source);
    return st == MS_OK ? rep_csv_end_row(w) : st;
}

ms_status ms_validation_write_csv(const ms_validation *v, const char *path, ms_diag *d)
{
    if (v == NULL || path == NULL)
        return ms_diag_set(d, MS_EINVAL, "validate: NULL argument");
    ms_csv_out w;
    ms_status st = rep_csv_open(&w, path, d);
    if (st != MS_OK)
        return st;
    st = rep_csv_header(&w, columns, (int)(sizeof columns / sizeof columns[0]));
    for (size_t i = 0; st == MS_OK && i < v->n_rows; i++)
        st = write_row(&w, v, &v->rows[i]);
    if (st != MS_OK) {
        rep_csv_abort(&w);
        return ms_diag_set(d, st, "%s: write failed", path);
    }
    return rep_csv_close(&w, d);
}

static void provenance(const ms_validation *v, const char *device, const char *command,
                       ms_device_provenance *p)
{
    memset(p, 0, sizeof *p);
    size_t len = (size_t)snprintf(p->source, sizeof p->source, "memsim validate: fitted");
    for (size_t i = 0; i < v->n_fit && len < sizeof p->source; i++)
        len += (size_t)snprintf(p->source + len, sizeof p->source - len, " %s", v->fit[i].p->name);
    for (size_t i = 0; i < v->n_tables && len < sizeof p->source; i++)
        len += (size_t)snprintf(p->source + len, sizeof p->source - len, "%s%s",
                                i ? ", " : " on the train rows of ", v->tables[i]);
    time_t now = time(NULL);
    struct tm tm;
    if (gmtime_r(&now, &tm) != NULL)
        strftime(p->date, sizeof p->date, "%Y-%m-%dT%H:%M:%SZ", &tm);
    snprintf(p->device, sizeof p->device, "%s", device);
    snprintf(p->command, sizeof p->command, "%s", command ? command : "");
}

ms_status ms_validation_write_devices(const ms_validation *v, const char *dir, const char *command,
                                      ms_diag *d)
{
    if (v == NULL || dir == NULL)
        return ms_diag_set(d, MS_EINVAL, "validate: NULL argument");
    for (size_t i = 0; i < v->n_rows; i++) {
        const val_row *r = &v->rows[i];
        bool first = true; /* each device once, from its first row */
        for (size_t k = 0; k < i; k++)
            first &= strcmp(v->rows[k].sc->device.name, r->sc->device.name) != 0;
        if (!first)
            continue;
        ms_device_spec s = r->sc->device;
        for (size_t j = 0; j < v->n_fit; j++)
            if (v->fit[j].device[0] == '\0' || strcmp(v->fit[j].device, s.name) == 0)
                cal_param_set(v->fit[j].p, &s, v->fit[j].value);
        char path[4200];
        snprintf(path, sizeof path, "%s/%s.lua", dir, s.name);
        ms_device_provenance prov;
        provenance(v, s.name, command, &prov);
        ms_fit_residuals res = ms_fit_residuals_none();
        res.validation = v->fit_rms;
        ms_status st = ms_device_write(path, &s, &prov, &res, d);
        if (st != MS_OK)
            return st;
    }
    return MS_OK;
}
