/* Device files (scenarios/devices/NAME.lua): a Lua table in the units of a
 * data sheet (GiB, GB/s, TFLOP/s, microseconds) read into an ms_device_spec
 * in bytes, bytes per second, FLOP/s and nanoseconds, then checked by
 * ms_device_spec_validate.  Errors name the device file. */
#include "scenario_load.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "lib/base/sandbox.h"
#include "memsim/backend.h"
#include "lib/base/units.h"

#define DEVICE_INSTRUCTIONS 20000000ULL
#define DEVICE_MEMORY (64u << 20)
#define GB 1e9
#define US 1e3 /* ns */

enum dv_field {
    DV_NAME = 0,
    DV_HBM_GIB,
    DV_HBM_BYTES,
    DV_HBM_BW,
    DV_PINNED_GIB,
    DV_MATMUL_EFF,
    DV_ATTN_EFF,
    DV_HBM_EFF,
    DV_H2D,
    DV_D2H,
    DV_LINK_LAT,
    DV_LAUNCH,
    DV_KERNEL,
    DV_QUEUE,
    DV_PER_NODE,
    DV_INTRA_BW,
    DV_INTRA_LAT,
    DV_INTER_BW,
    DV_INTER_LAT,
    DV_PEAK_BF16,
    DV_PEAK_FP16,
    DV_PEAK_FP32,
    DV_PEAK_FP8,
    DV_PEAK_INT8,
    DV_GEMM_FP32,
    DV_GEMM_FP16,
    DV_GEMM_BF16,
    DV_GEMM_FP8,
    DV_GEMM_INT8,
    DV_GEMM_M,
    DV_GEMM_N,
    DV_GEMM_K,
    DV_FA_MAX,
    DV_FA_SEQ,
    DV_FA_DIM,
    DV_FA_EXEC,
    DV_INTRA_EFF,
    DV_INTER_EFF,
    DV_INTRA_TOPO,
    DV_CE_AG,
    DV_CE_RS,
    DV_CE_A2A,
    DV_CE_BC,
    DV_CE_P2P,
    DV_OVERLAP,
    DV_OVERLAP_COPY,
    DV_PV_SOURCE,
    DV_PV_DATE,
    DV_PV_DEVICE,
    DV_PV_DRIVER,
    DV_PV_COMMAND,
    DV_RS_GEMM,
    DV_RS_FA,
    DV_RS_HBM,
    DV_RS_H2D,
    DV_RS_D2H,
    DV_RS_INTRA,
    DV_RS_INTER,
    DV_RS_LAUNCH,
    DV_RS_OVERLAP,
    DV_RS_COPY_COMPUTE,
    DV_RS_VALIDATION,
    DV_COUNT
};

static const st_field dv_fields[DV_COUNT] = {
    [DV_NAME] = {"", "name", ST_STR},
    [DV_HBM_GIB] = {"", "hbm_gib", ST_NUM},
    [DV_HBM_BYTES] = {"", "hbm_bytes", ST_INT},
    [DV_HBM_BW] = {"", "hbm_bandwidth_gbs", ST_NUM},
    [DV_PINNED_GIB] = {"", "host_pinned_gib", ST_NUM},
    [DV_MATMUL_EFF] = {"", "matmul_efficiency", ST_CURVE},
    [DV_ATTN_EFF] = {"", "attention_efficiency", ST_CURVE},
    [DV_HBM_EFF] = {"", "hbm_efficiency", ST_CURVE},
    [DV_H2D] = {"", "h2d_bandwidth", ST_CURVE},
    [DV_D2H] = {"", "d2h_bandwidth", ST_CURVE},
    [DV_LINK_LAT] = {"", "host_link_latency_us", ST_NUM},
    [DV_LAUNCH] = {"", "launch_overhead_us", ST_NUM},
    [DV_KERNEL] = {"", "kernel_overhead_us", ST_NUM},
    [DV_QUEUE] = {"", "launch_queue_depth", ST_INT},
    [DV_PER_NODE] = {"", "devices_per_node", ST_INT},
    [DV_INTRA_BW] = {"", "intra_node_bandwidth_gbs", ST_NUM},
    [DV_INTRA_LAT] = {"", "intra_node_latency_us", ST_NUM},
    [DV_INTER_BW] = {"", "inter_node_bandwidth_gbs", ST_NUM},
    [DV_INTER_LAT] = {"", "inter_node_latency_us", ST_NUM},
    [DV_PEAK_BF16] = {"peak_tflops", "bf16", ST_NUM},
    [DV_PEAK_FP16] = {"peak_tflops", "fp16", ST_NUM},
    [DV_PEAK_FP32] = {"peak_tflops", "fp32", ST_NUM},
    [DV_PEAK_FP8] = {"peak_tflops", "fp8", ST_NUM},
    [DV_PEAK_INT8] = {"peak_tflops", "int8", ST_NUM},
    /* GEMM efficiency by shape (device.h): the fraction of each dtype's peak
     * large GEMMs reach, and the half-saturation sizes of M, N, K. */
    [DV_GEMM_FP32] = {"gemm", "fp32", ST_NUM},
    [DV_GEMM_FP16] = {"gemm", "fp16", ST_NUM},
    [DV_GEMM_BF16] = {"gemm", "bf16", ST_NUM},
    [DV_GEMM_FP8] = {"gemm", "fp8", ST_NUM},
    [DV_GEMM_INT8] = {"gemm", "int8", ST_NUM},
    [DV_GEMM_M] = {"gemm", "m_half", ST_NUM},
    [DV_GEMM_N] = {"gemm", "n_half", ST_NUM},
    [DV_GEMM_K] = {"gemm", "k_half", ST_NUM},
    [DV_FA_MAX] = {"flash_attention", "max", ST_NUM},
    [DV_FA_SEQ] = {"flash_attention", "seq_half", ST_NUM},
    [DV_FA_DIM] = {"flash_attention", "head_dim_half", ST_NUM},
    [DV_FA_EXEC] = {"flash_attention", "executed_fraction", ST_NUM},
    [DV_INTRA_EFF] = {"", "intra_node_efficiency", ST_CURVE},
    [DV_INTER_EFF] = {"", "inter_node_efficiency", ST_CURVE},
    [DV_INTRA_TOPO] = {"", "intra_node_topology", ST_STR},
    [DV_CE_AG] = {"collective_efficiency", "all_gather", ST_NUM},
    [DV_CE_RS] = {"collective_efficiency", "reduce_scatter", ST_NUM},
    [DV_CE_A2A] = {"collective_efficiency", "all_to_all", ST_NUM},
    [DV_CE_BC] = {"collective_efficiency", "broadcast", ST_NUM},
    [DV_CE_P2P] = {"collective_efficiency", "send_recv", ST_NUM},
    [DV_OVERLAP] = {"overlap", "compute_slowdown", ST_NUM},
    [DV_OVERLAP_COPY] = {"overlap", "copy_slowdown", ST_NUM},
    /* Where the values came from (memsim calibrate writes them); read for
     * their types only. */
    [DV_PV_SOURCE] = {"provenance", "source", ST_STR},
    [DV_PV_DATE] = {"provenance", "date", ST_STR},
    [DV_PV_DEVICE] = {"provenance", "device", ST_STR},
    [DV_PV_DRIVER] = {"provenance", "driver", ST_STR},
    [DV_PV_COMMAND] = {"provenance", "command", ST_STR},
    /* RMS relative error of each fit over its measurements. */
    [DV_RS_GEMM] = {"residuals", "gemm", ST_NUM},
    [DV_RS_FA] = {"residuals", "flash_attention", ST_NUM},
    [DV_RS_HBM] = {"residuals", "hbm", ST_NUM},
    [DV_RS_H2D] = {"residuals", "h2d", ST_NUM},
    [DV_RS_D2H] = {"residuals", "d2h", ST_NUM},
    [DV_RS_INTRA] = {"residuals", "intra_node", ST_NUM},
    [DV_RS_INTER] = {"residuals", "inter_node", ST_NUM},
    [DV_RS_LAUNCH] = {"residuals", "launch", ST_NUM},
    [DV_RS_OVERLAP] = {"residuals", "overlap", ST_NUM},
    [DV_RS_COPY_COMPUTE] = {"residuals", "copy_with_compute", ST_NUM},
    [DV_RS_VALIDATION] = {"residuals", "validation", ST_NUM},
};

static const st_schema dv_schema = {dv_fields, DV_COUNT};

/* Fields a device file must give: without them no time can be modeled. */
static const int required[] = {DV_HBM_BW, DV_PINNED_GIB, DV_H2D, DV_D2H, DV_PER_NODE,
                               DV_INTRA_BW, DV_INTER_BW};

typedef struct dv_read_ctx {
    const char *file;
    st_value *vals;
    ms_diag *d;
    ms_status st;
} dv_read_ctx;

static int read_protected(lua_State *L)
{
    dv_read_ctx *c = lua_touserdata(L, 2);
    c->st = scn_table_read(L, 1, &dv_schema, c->vals, c->file, c->d);
    return 0;
}

static ms_status run_file(const char *path, st_value *vals, ms_diag *d)
{
    ms_sandbox *sb = NULL;
    ms_sandbox_limits lim = {DEVICE_INSTRUCTIONS, DEVICE_MEMORY};
    ms_status st = base_sandbox_create(&lim, &sb);
    if (st != MS_OK)
        return ms_diag_set(d, st, "%s: cannot create a Lua state", path);
    lua_State *L;
    base_sandbox_state(sb, &L);
    dv_read_ctx c = {.file = path, .vals = vals, .d = d};
    st = base_sandbox_dofile(sb, path, 1, d);
    if (st == MS_OK && lua_type(L, -1) != LUA_TTABLE) {
        st = ms_diag_set(d, MS_EINVAL, "%s: a device file must return a table (got %s)", path,
                         lua_typename(L, lua_type(L, -1)));
    } else if (st == MS_OK) {
        lua_pushcfunction(L, read_protected);
        lua_insert(L, -2);
        lua_pushlightuserdata(L, &c);
        st = base_sandbox_pcall(sb, 2, 0, d);
        if (st != MS_OK && d != NULL && strstr(d->msg, path) == NULL)
            ms_diag_prefix(d, "%s: ", path);
        if (st == MS_OK)
            st = c.st;
    }
    base_sandbox_destroy(sb);
    return st;
}

static ms_status positive(const st_value *v, int id, bool allow_zero, const char *file,
                          ms_diag *d)
{
    if (!v[id].set || (allow_zero ? v[id].n >= 0 : v[id].n > 0))
        return MS_OK;
    return ms_diag_set(d, MS_ERANGE, "%s: field '%s' must be %s (got %g)", file,
                       dv_fields[id].key, allow_zero ? ">= 0" : "> 0", v[id].n);
}

static ms_status check_values(const st_value *v, const char *file, ms_diag *d)
{
    for (size_t i = 0; i < sizeof required / sizeof required[0]; i++)
        if (!v[required[i]].set)
            return ms_diag_set(d, MS_EINVAL, "%s: field '%s' is required", file,
                               dv_fields[required[i]].key);
    if (v[DV_NAME].set && (v[DV_NAME].s[0] == '\0' || strlen(v[DV_NAME].s) > 63))
        return ms_diag_set(d, MS_ERANGE, "%s: field 'name' must be 1 to 63 bytes", file);
    if (v[DV_HBM_GIB].set == v[DV_HBM_BYTES].set)
        return ms_diag_set(d, MS_EINVAL, "%s: give exactly one of 'hbm_gib' and 'hbm_bytes'",
                           file);
    if (v[DV_HBM_BYTES].set && v[DV_HBM_BYTES].i <= 0)
        return ms_diag_set(d, MS_ERANGE, "%s: field 'hbm_bytes' must be > 0", file);
    static const int pos[] = {DV_HBM_GIB, DV_HBM_BW, DV_INTRA_BW, DV_INTER_BW};
    static const int nonneg[] = {DV_PINNED_GIB, DV_LINK_LAT, DV_LAUNCH, DV_KERNEL, DV_INTRA_LAT,
                                 DV_INTER_LAT, DV_PEAK_BF16, DV_PEAK_FP16, DV_PEAK_FP32,
                                 DV_PEAK_FP8, DV_PEAK_INT8};
    ms_status st = MS_OK;
    for (size_t i = 0; st == MS_OK && i < sizeof pos / sizeof pos[0]; i++)
        st = positive(v, pos[i], false, file, d);
    for (size_t i = 0; st == MS_OK && i < sizeof nonneg / sizeof nonneg[0]; i++)
        st = positive(v, nonneg[i], true, file, d);
    /* Past the mock's address window a run would fail on addresses, not
     * on capacity. */
    if (st == MS_OK && v[DV_HBM_GIB].set && v[DV_HBM_GIB].n * BASE_GIB > MS_MAX_DEVICE_MEMORY)
        st = ms_diag_set(d, MS_ERANGE, "%s: field 'hbm_gib' must be at most 8192 (8 TiB) (got %g)",
                         file, v[DV_HBM_GIB].n);
    if (st == MS_OK && v[DV_HBM_BYTES].set && (uint64_t)v[DV_HBM_BYTES].i > MS_MAX_DEVICE_MEMORY)
        st = ms_diag_set(d, MS_ERANGE,
                         "%s: field 'hbm_bytes' must be at most 2^43 (8 TiB) (got %" PRId64 ")", file,
                         v[DV_HBM_BYTES].i);
    if (st == MS_OK && v[DV_PINNED_GIB].n > 1e9)
        st = ms_diag_set(d, MS_ERANGE, "%s: field 'host_pinned_gib' is beyond any host", file);
    if (st == MS_OK && v[DV_INTRA_TOPO].set && strcmp(v[DV_INTRA_TOPO].s, "switch") != 0 &&
        strcmp(v[DV_INTRA_TOPO].s, "mesh") != 0)
        st = ms_diag_set(d, MS_EINVAL,
                         "%s: field 'intra_node_topology' must be \"switch\" or "
                         "\"mesh\" (got \"%s\")",
                         file, v[DV_INTRA_TOPO].s);
    return st;
}

static void scaled_curve(const st_value *v, double scale, ms_curve *out)
{
    *out = v->set ? v->c : (ms_curve){0};
    for (int i = 0; i < out->n; i++)
        out->y[i] *= scale;
}

static double num_or_zero(const st_value *v)
{
    return v->set ? v->n : 0;
}

/* The GEMM and attention models, the network efficiencies and the overlap
 * (device.h; an absent value is 0, "not modeled"). */
static void fill_models(const st_value *v, ms_device_spec *s)
{
    for (int dt = 0; dt < MS_DTYPE_COUNT; dt++)
        s->gemm.max[dt] = num_or_zero(&v[DV_GEMM_FP32 + dt]);
    s->gemm.m_half = num_or_zero(&v[DV_GEMM_M]);
    s->gemm.n_half = num_or_zero(&v[DV_GEMM_N]);
    s->gemm.k_half = num_or_zero(&v[DV_GEMM_K]);
    s->flash.max = num_or_zero(&v[DV_FA_MAX]);
    s->flash.seq_half = num_or_zero(&v[DV_FA_SEQ]);
    s->flash.head_dim_half = num_or_zero(&v[DV_FA_DIM]);
    s->flash.executed_fraction = num_or_zero(&v[DV_FA_EXEC]);
    scaled_curve(&v[DV_INTRA_EFF], 1, &s->intra_node_eff);
    scaled_curve(&v[DV_INTER_EFF], 1, &s->inter_node_eff);
    s->intra_node_mesh = v[DV_INTRA_TOPO].set && strcmp(v[DV_INTRA_TOPO].s, "mesh") == 0;
    s->collective_eff[MS_COMM_ALLGATHER] = num_or_zero(&v[DV_CE_AG]);
    s->collective_eff[MS_COMM_REDUCE_SCATTER] = num_or_zero(&v[DV_CE_RS]);
    s->collective_eff[MS_COMM_ALLTOALL] = num_or_zero(&v[DV_CE_A2A]);
    s->collective_eff[MS_COMM_BROADCAST] = num_or_zero(&v[DV_CE_BC]);
    s->collective_eff[MS_COMM_SEND] = num_or_zero(&v[DV_CE_P2P]);
    s->overlap_compute_slowdown = num_or_zero(&v[DV_OVERLAP]);
    s->overlap_copy_slowdown = num_or_zero(&v[DV_OVERLAP_COPY]);
}

static void fill_spec(const st_value *v, const char *path, ms_device_spec *s)
{
    memset(s, 0, sizeof *s);
    if (v[DV_NAME].set)
        snprintf(s->name, sizeof s->name, "%.63s", v[DV_NAME].s);
    else
        scn_base_name(path, s->name, sizeof s->name);
    s->hbm_bytes = v[DV_HBM_BYTES].set ? (uint64_t)v[DV_HBM_BYTES].i
                                        : (uint64_t)floor(v[DV_HBM_GIB].n * BASE_GIB);
    s->hbm_bw = v[DV_HBM_BW].n * GB;
    s->host_pinned_bytes = (uint64_t)floor(v[DV_PINNED_GIB].n * BASE_GIB);
    static const struct {
        int id;
        ms_dtype dt;
    } peaks[] = {{DV_PEAK_BF16, MS_DTYPE_BF16}, {DV_PEAK_FP16, MS_DTYPE_FP16},
                 {DV_PEAK_FP32, MS_DTYPE_FP32}, {DV_PEAK_FP8, MS_DTYPE_FP8},
                 {DV_PEAK_INT8, MS_DTYPE_INT8}};
    for (size_t i = 0; i < sizeof peaks / sizeof peaks[0]; i++)
        s->peak_flops[peaks[i].dt] = v[peaks[i].id].set ? v[peaks[i].id].n * 1e12 : 0;
    scaled_curve(&v[DV_MATMUL_EFF], 1, &s->matmul_eff);
    scaled_curve(&v[DV_ATTN_EFF], 1, &s->attention_eff);
    scaled_curve(&v[DV_HBM_EFF], 1, &s->hbm_eff);
    scaled_curve(&v[DV_H2D], GB, &s->h2d_bw);
    scaled_curve(&v[DV_D2H], GB, &s->d2h_bw);
    s->host_link_latency_ns = v[DV_LINK_LAT].set ? v[DV_LINK_LAT].n * US : 0;
    s->launch_overhead_ns = v[DV_LAUNCH].set ? v[DV_LAUNCH].n * US : 0;
    s->kernel_overhead_ns = v[DV_KERNEL].set ? v[DV_KERNEL].n * US : 0;
    /* CUDA's default pending-launch queue holds about a thousand launches. */
    s->launch_queue_depth = v[DV_QUEUE].set ? (int)v[DV_QUEUE].i : 1024;
    s->devices_per_node = (int)v[DV_PER_NODE].i;
    s->intra_node_bw = v[DV_INTRA_BW].n * GB;
    s->intra_node_latency_ns = v[DV_INTRA_LAT].set ? v[DV_INTRA_LAT].n * US : 0;
    s->inter_node_bw = v[DV_INTER_BW].n * GB;
    s->inter_node_latency_ns = v[DV_INTER_LAT].set ? v[DV_INTER_LAT].n * US : 0;
    fill_models(v, s);
}

ms_status ms_device_load(const char *path, ms_device_spec *spec, ms_diag *d)
{
    if (path == NULL || spec == NULL)
        return ms_diag_set(d, MS_EINVAL, "ms_device_load: NULL argument");
    st_value *vals = calloc(DV_COUNT, sizeof *vals);
    if (vals == NULL)
        return ms_diag_set(d, MS_ENOMEM, "out of memory loading %s", path);
    ms_status st = run_file(path, vals, d);
    if (st == MS_OK)
        st = check_values(vals, path, d);
    if (st == MS_OK && (vals[DV_QUEUE].set && (vals[DV_QUEUE].i < 1 || vals[DV_QUEUE].i > 1 << 24)))
        st = ms_diag_set(d, MS_ERANGE, "%s: field 'launch_queue_depth' must be in 1..%d", path,
                         1 << 24);
    if (st == MS_OK && (vals[DV_PER_NODE].i < 1 || vals[DV_PER_NODE].i > 1 << 20))
        st = ms_diag_set(d, MS_ERANGE, "%s: field 'devices_per_node' must be in 1..%d", path,
                         1 << 20);
    ms_device_spec s;
    if (st == MS_OK) {
        fill_spec(vals, path, &s);
        st = ms_device_spec_validate(&s, d);
        if (st != MS_OK)
            ms_diag_prefix(d, "%s: ", path);
    }
    free(vals);
    if (st == MS_OK)
        *spec = s;
    return st;
}

/* ---- finding a device file ------------------------------------------- */

static bool readable(const char *path)
{
    return access(path, R_OK) == 0;
}

/* Append s to buf (of size bytes), truncating. */
static void append(char *buf, size_t size, const char *s)
{
    size_t len = strlen(buf), add = strlen(s);
    if (len + 1 >= size)
        return;
    if (add > size - 1 - len)
        add = size - 1 - len;
    memcpy(buf + len, s, add);
    buf[len + add] = '\0';
}

ms_status scn_device_path(const char *scenario_path, const char *device, char *out, size_t size,
                          ms_diag *d)
{
    char dir[4096];
    const char *slash = strrchr(scenario_path, '/');
    if (slash == NULL)
        snprintf(dir, sizeof dir, ".");
    else
        snprintf(dir, sizeof dir, "%.*s", (int)(slash - scenario_path), scenario_path);
    const char *env = getenv("MEMSIM_DATADIR");
    char cand[5][4200];
    int n = 0;
    snprintf(cand[n++], sizeof cand[0], "%s/devices", dir);
    snprintf(cand[n++], sizeof cand[0], "%s/../devices", dir);
    if (env != NULL && env[0] != '\0')
        snprintf(cand[n++], sizeof cand[0], "%s/scenarios/devices", env);
    snprintf(cand[n++], sizeof cand[0], "%s/scenarios/devices", MS_SRCDIR);
    snprintf(cand[n++], sizeof cand[0], "%s/scenarios/devices", MS_DATADIR);
    char tried[1024] = "";
    for (int i = 0; i < n; i++) {
        int len = snprintf(out, size, "%s/%s.lua", cand[i], device);
        if (len > 0 && (size_t)len < size && readable(out))
            return MS_OK;
        if (i > 0)
            append(tried, sizeof tried, ", ");
        append(tried, sizeof tried, cand[i]);
    }
    out[0] = '\0';
    return ms_diag_set(d, MS_ENOENT, "%s: device '%s': no file %s.lua in %s", scenario_path,
                       device, device, tried);
}
