/* Writing a device file (scenarios/devices/NAME.lua) from an
 * ms_device_spec: the inverse of lib/scenario/device_file.c, in the same
 * data-sheet units, every number in the shortest form that reads back to the
 * same double, so write-then-load gives the spec back exactly.  Written to
 * PATH.tmp and renamed. */
#include "cal_internal.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "memsim/backend.h"
#include "lib/base/units.h"

#define GB 1e9

ms_fit_residuals ms_fit_residuals_none(void)
{
    return (ms_fit_residuals){-1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1};
}

/* The shortest %g that reads back as v. */
static void put_num(FILE *f, double v)
{
    char buf[40];
    for (int prec = 6; prec <= 17; prec++) {
        snprintf(buf, sizeof buf, "%.*g", prec, v);
        if (strtod(buf, NULL) == v)
            break;
    }
    fputs(buf, f);
}

/* A Lua string literal: quotes, backslashes and control bytes escaped. */
static void put_str(FILE *f, const char *s)
{
    fputc('"', f);
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if (*p == '"' || *p == '\\')
            fprintf(f, "\\%c", *p);
        else if (*p < 0x20 || *p == 0x7f)
            fprintf(f, "\\%03u", *p);
        else
            fputc(*p, f);
    }
    fputc('"', f);
}

static void put_field(FILE *f, const char *indent, const char *key, double v)
{
    fprintf(f, "%s%s = ", indent, key);
    put_num(f, v);
    fputs(",\n", f);
}

static void put_curve(FILE *f, const char *key, const ms_curve *c, double scale)
{
    if (c->n == 0)
        return;
    fprintf(f, "  %s = {", key);
    for (int i = 0; i < c->n; i++) {
        fputs(i ? ", {" : "{", f);
        put_num(f, c->x[i]);
        fputs(", ", f);
        put_num(f, c->y[i] / scale);
        fputc('}', f);
    }
    fputs("},\n", f);
}

static void put_param(FILE *f, const char *indent, const char *name, const ms_device_spec *s,
                      bool skip_zero)
{
    const cal_param *p = cal_param_find(name);
    double v = cal_param_get(p, s);
    if (skip_zero && v == 0)
        return;
    const char *dot = strchr(name, '.');
    put_field(f, indent, dot ? dot + 1 : name, v);
}

static bool any_param(const ms_device_spec *s, const char *const *names, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (cal_param_get(cal_param_find(names[i]), s) != 0)
            return true;
    return false;
}

/* A section of scalars ("gemm = { ... }"), left out when all are zero. */
static void put_section(FILE *f, const char *section, const char *const *names, size_t n,
                        const ms_device_spec *s)
{
    if (!any_param(s, names, n))
        return;
    fprintf(f, "  %s = {\n", section);
    for (size_t i = 0; i < n; i++)
        put_param(f, "    ", names[i], s, true);
    fputs("  },\n", f);
}

static void put_memory(FILE *f, const ms_device_spec *s)
{
    fputs("  name = ", f);
    put_str(f, s->name);
    fprintf(f, ",\n  hbm_bytes = %llu,\n", (unsigned long long)s->hbm_bytes);
    put_param(f, "  ", "hbm_bandwidth_gbs", s, false);
    put_field(f, "  ", "host_pinned_gib", (double)s->host_pinned_bytes / BASE_GIB);
    static const char *const peaks[] = {"peak_tflops.bf16", "peak_tflops.fp16", "peak_tflops.fp32",
                                        "peak_tflops.fp8", "peak_tflops.int8"};
    put_section(f, "peak_tflops", peaks, 5, s);
}

static void put_compute(FILE *f, const ms_device_spec *s)
{
    static const char *const gemm[] = {"gemm.bf16", "gemm.fp16",   "gemm.fp32",   "gemm.fp8",
                                       "gemm.int8", "gemm.m_half", "gemm.n_half", "gemm.k_half"};
    static const char *const flash[] = {"flash_attention.max", "flash_attention.seq_half",
                                        "flash_attention.head_dim_half",
                                        "flash_attention.executed_fraction"};
    put_section(f, "gemm", gemm, 8, s);
    put_section(f, "flash_attention", flash, 4, s);
    put_curve(f, "matmul_efficiency", &s->matmul_eff, 1);
    put_curve(f, "attention_efficiency", &s->attention_eff, 1);
    put_curve(f, "hbm_efficiency", &s->hbm_eff, 1);
}

static void put_links(FILE *f, const ms_device_spec *s)
{
    put_curve(f, "h2d_bandwidth", &s->h2d_bw, GB);
    put_curve(f, "d2h_bandwidth", &s->d2h_bw, GB);
    put_param(f, "  ", "host_link_latency_us", s, false);
    put_param(f, "  ", "launch_overhead_us", s, false);
    put_param(f, "  ", "kernel_overhead_us", s, false);
    fprintf(f, "  launch_queue_depth = %d,\n  devices_per_node = %d,\n", s->launch_queue_depth,
            s->devices_per_node);
    fprintf(f, "  intra_node_topology = \"%s\",\n", s->intra_node_mesh ? "mesh" : "switch");
    put_param(f, "  ", "intra_node_bandwidth_gbs", s, false);
    put_param(f, "  ", "intra_node_latency_us", s, false);
    put_curve(f, "intra_node_efficiency", &s->intra_node_eff, 1);
    put_param(f, "  ", "inter_node_bandwidth_gbs", s, false);
    put_param(f, "  ", "inter_node_latency_us", s, false);
    put_curve(f, "inter_node_efficiency", &s->inter_node_eff, 1);
    static const char *const coll[] = {
        "collective_efficiency.all_gather", "collective_efficiency.reduce_scatter",
        "collective_efficiency.all_to_all", "collective_efficiency.broadcast",
        "collective_efficiency.send_recv"};
    static const char *const overlap[] = {"overlap.compute_slowdown", "overlap.copy_slowdown"};
    put_section(f, "collective_efficiency", coll, 5, s);
    put_section(f, "overlap", overlap, 2, s);
}

static void put_provenance(FILE *f, const ms_device_provenance *p)
{
    const struct {
        const char *key, *v;
    } kv[] = {{"source", p->source},
              {"date", p->date},
              {"device", p->device},
              {"driver", p->driver},
              {"command", p->command}};
    fputs("  provenance = {\n", f);
    for (size_t i = 0; i < sizeof kv / sizeof kv[0]; i++) {
        if (kv[i].v[0] == '\0')
            continue;
        fprintf(f, "    %s = ", kv[i].key);
        put_str(f, kv[i].v);
        fputs(",\n", f);
    }
    fputs("  },\n", f);
}

static void put_residuals(FILE *f, const ms_fit_residuals *r)
{
    const struct {
        const char *key;
        double v;
    } kv[] = {{"gemm", r->gemm},
              {"flash_attention", r->flash_attention},
              {"hbm", r->hbm},
              {"h2d", r->h2d},
              {"d2h", r->d2h},
              {"intra_node", r->intra_node},
              {"inter_node", r->inter_node},
              {"launch", r->launch},
              {"overlap", r->overlap},
              {"copy_with_compute", r->copy_with_compute},
              {"validation", r->validation}};
    bool any = false;
    for (size_t i = 0; i < sizeof kv / sizeof kv[0]; i++)
        any |= kv[i].v >= 0;
    if (!any)
        return;
    fputs("  -- RMS relative error of each fit over its measurements\n  residuals = {\n", f);
    for (size_t i = 0; i < sizeof kv / sizeof kv[0]; i++)
        if (kv[i].v >= 0)
            put_field(f, "    ", kv[i].key, kv[i].v);
    fputs("  },\n", f);
}

ms_status ms_device_write(const char *path, const ms_device_spec *spec,
                          const ms_device_provenance *prov, const ms_fit_residuals *res, ms_diag *d)
{
    if (path == NULL || spec == NULL)
        return ms_diag_set(d, MS_EINVAL, "ms_device_write: NULL argument");
    ms_status st = ms_device_spec_validate(spec, d);
    if (st != MS_OK)
        return st;
    char tmp[4200];
    if (snprintf(tmp, sizeof tmp, "%s.tmp", path) >= (int)sizeof tmp)
        return ms_diag_set(d, MS_EINVAL, "%s: path too long", path);
    FILE *f = fopen(tmp, "w");
    if (f == NULL)
        return ms_diag_set(d, MS_EIO, "%s: cannot write: %s", tmp, strerror(errno));
    fprintf(f,
            "-- Device file of %s, written by memsim (ms_device_write); the provenance and\n"
            "-- residuals below say where its values came from.\nreturn {\n",
            spec->name);
    put_memory(f, spec);
    put_compute(f, spec);
    put_links(f, spec);
    if (prov != NULL)
        put_provenance(f, prov);
    if (res != NULL)
        put_residuals(f, res);
    fputs("}\n", f);
    bool bad = ferror(f) != 0;
    if (fclose(f) != 0 || bad) {
        remove(tmp);
        return ms_diag_set(d, MS_EIO, "%s: write failed", tmp);
    }
    if (rename(tmp, path) != 0) {
        remove(tmp);
        return ms_diag_set(d, MS_EIO, "%s: cannot rename into place: %s", path, strerror(errno));
    }
    return MS_OK;
}
