/* Loading a scenario file: run it in a sandbox, apply the overrides to the
 * table it returns, read the table against the schema, validate, then load
 * its device file (docs/scenario-format.md). */
#include "scenario_load.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/base/sandbox.h"
#include "memory_config.h"

/* Scenario files only build a table: a small budget stops a runaway loop
 * in well under a second. */
#define SCENARIO_INSTRUCTIONS 20000000ULL
#define SCENARIO_MEMORY (64u << 20)

static const st_field fields[SC_COUNT] = {
    [SC_NAME] = {"", "name", ST_STR},
    [SC_DEVICE] = {"", "device", ST_STR},
    [SC_DEVMEM] = {"", "device_memory", ST_SIZE},
    [SC_POLICY] = {"", "policy", ST_STR},
    [SC_STEPS] = {"", "steps", ST_INT},
    [SC_SEED] = {"", "seed", ST_INT},
    [SC_ARCH] = {"model", "arch", ST_STR},
    [SC_LAYERS] = {"model", "num_layers", ST_INT},
    [SC_HIDDEN] = {"model", "hidden_size", ST_INT},
    [SC_FFN] = {"model", "ffn_hidden_size", ST_INT},
    [SC_HEADS] = {"model", "num_attention_heads", ST_INT},
    [SC_GROUPS] = {"model", "num_query_groups", ST_INT},
    [SC_SEQ] = {"model", "seq_length", ST_INT},
    [SC_VOCAB] = {"model", "padded_vocab_size", ST_INT},
    [SC_NORM] = {"model", "normalization", ST_STR},
    [SC_SWIGLU] = {"model", "swiglu", ST_BOOL},
    [SC_UNTIE] = {"model", "untie_embeddings", ST_BOOL},
    [SC_FLASH] = {"model", "use_flash_attn", ST_BOOL},
    [SC_HDROP] = {"model", "hidden_dropout", ST_NUM},
    [SC_ADROP] = {"model", "attention_dropout", ST_NUM},
    [SC_DTYPE] = {"model", "dtype", ST_STR},
    [SC_FP8] = {"model", "fp8", ST_STR},
    [SC_BIAS] = {"model", "add_bias_linear", ST_BOOL},
    [SC_POS] = {"model", "position_embedding_type", ST_STR},
    [SC_EXPERTS] = {"model", "num_experts", ST_INT},
    [SC_TOPK] = {"model", "moe_router_topk", ST_INT},
    [SC_MOE_FFN] = {"model", "moe_ffn_hidden_size", ST_INT},
    [SC_MOE_CAP] = {"model", "moe_expert_capacity_factor", ST_NUM},
    [SC_MOE_CAP_ALIAS] = {"model", "moe_capacity_factor", ST_NUM},
    [SC_VOCAB_RAW] = {"model", "vocab_size", ST_INT},
    [SC_VOCAB_DIV] = {"model", "make_vocab_size_divisible_by", ST_INT},
    [SC_MAXPOS] = {"model", "max_position_embeddings", ST_INT},
    [SC_UNTIE_M] = {"model", "untie_embeddings_and_output_weights", ST_BOOL},
    [SC_BF16] = {"model", "bf16", ST_BOOL},
    [SC_FP16] = {"model", "fp16", ST_BOOL},
    [SC_FP8_FORMAT] = {"model", "fp8_format", ST_STR},
    [SC_NOBIAS] = {"model", "disable_bias_linear", ST_BOOL},
    [SC_GQA] = {"model", "group_query_attention", ST_BOOL},
    [SC_KV_CHANNELS] = {"model", "kv_channels", ST_INT},
    [SC_M_GRAN] = {"model", "recompute_granularity", ST_STR},
    [SC_M_METHOD] = {"model", "recompute_method", ST_STR},
    [SC_M_NLAYERS] = {"model", "recompute_num_layers", ST_INT},
    [SC_WORLD] = {"parallel", "world_size", ST_INT},
    [SC_TP] = {"parallel", "tensor_model_parallel_size", ST_INT},
    [SC_PP] = {"parallel", "pipeline_model_parallel_size", ST_INT},
    [SC_VPP] = {"parallel", "num_layers_per_virtual_pipeline_stage", ST_INT},
    [SC_CP] = {"parallel", "context_parallel_size", ST_INT},
    [SC_SP] = {"parallel", "sequence_parallel", ST_BOOL},
    [SC_DISTOPT] = {"parallel", "use_distributed_optimizer", ST_BOOL},
    [SC_OVERLAP_GRAD] = {"parallel", "overlap_grad_reduce", ST_BOOL},
    [SC_P2P_SYNC] = {"parallel", "batch_p2p_sync", ST_BOOL},
    [SC_P2P_SPLIT] = {"parallel", "scatter_gather_tensors_in_pipeline", ST_BOOL},
    [SC_GRAD_FP32] = {"parallel", "grad_reduce_in_fp32", ST_BOOL},
    [SC_ACC_FP32] = {"parallel", "accumulate_allreduce_grads_in_fp32", ST_BOOL},
    [SC_GRAD_BF16] = {"parallel", "grad_reduce_in_bf16", ST_BOOL},
    [SC_PARAM_GATHER] = {"parallel", "overlap_param_gather", ST_BOOL},
    [SC_TP_OVERLAP] = {"parallel", "tp_comm_overlap", ST_BOOL},
    [SC_MBS] = {"parallel", "micro_batch_size", ST_INT},
    [SC_GBS] = {"parallel", "global_batch_size", ST_INT},
    [SC_EP] = {"parallel", "expert_model_parallel_size", ST_INT},
    [SC_INTERLEAVE] = {"parallel", "pp_interleave_num", ST_INT},
    [SC_OFFSET] = {"parallel", "offset", ST_TREE},
    [SC_ACONF] = {"allocator", "conf", ST_STR},
    [SC_AFLAVOUR] = {"allocator", "flavour", ST_STR},
    [SC_AVOIDRS] = {"allocator", "avoid_record_streams", ST_BOOL},
    [SC_DETAIL] = {"report", "detail", ST_STR},
    [SC_MAXBYTES] = {"report", "max_bytes", ST_SIZE},
    [SC_GRAN] = {"recompute", "recompute_granularity", ST_STR},
    [SC_METHOD] = {"recompute", "recompute_method", ST_STR},
    [SC_NLAYERS] = {"recompute", "recompute_num_layers", ST_INT},
    [SC_RC_RECOMPUTE] = {"recompute_config", "recompute", ST_TREE},
    [SC_RC_SELECT] = {"recompute_config", "select_recompute", ST_TREE},
    [SC_RC_COMM] = {"recompute_config", "select_comm_recompute", ST_TREE},
    [SC_RC_POCOMM] = {"recompute_config", "parallel_optimizer_comm_recompute", ST_BOOL},
    [SC_RC_MPCOMM] = {"recompute_config", "mp_comm_recompute", ST_BOOL},
    [SC_RC_SLICE] = {"recompute_config", "recompute_slice_activation", ST_BOOL},
    [SC_SW_SWAP] = {"swap_config", "swap", ST_BOOL},
    [SC_SW_PREFETCH] = {"swap_config", "default_prefetch", ST_INT},
    [SC_SW_LAYER] = {"swap_config", "layer_swap", ST_TREE},
    [SC_SW_OP] = {"swap_config", "op_swap", ST_TREE},
};

static const st_schema schema = {fields, SC_COUNT};

const st_schema *scn_schema(void)
{
    return &schema;
}

/* The keys --set accepts, for a command line's "did you mean". */
size_t ms_scenario_key_count(void)
{
    return SC_COUNT;
}

ms_status ms_scenario_key(size_t i, char *buf, size_t n)
{
    if (i >= SC_COUNT || buf == NULL || n == 0)
        return MS_EINVAL;
    const st_field *f = &fields[i];
    int len = snprintf(buf, n, "%s%s%s", f->section, f->section[0] ? "." : "", f->key);
    return len >= 0 && (size_t)len < n ? MS_OK : MS_ERANGE;
}

void scn_base_name(const char *path, char *out, size_t size)
{
    const char *base = strrchr(path, '/');
    base = base ? base + 1 : path;
    size_t len = strlen(base);
    if (len > 4 && strcmp(base + len - 4, ".lua") == 0)
        len -= 4;
    if (len >= size)
        len = size - 1;
    memcpy(out, base, len);
    out[len] = '\0';
}

/* What the protected reader works on. */
typedef struct sc_read_ctx {
    const char *file;
    const char *text; /* an imported file's scenario; NULL: run the file */
    const char *const *overrides;
    size_t n_overrides;
    st_value *vals;
    ms_diag *d;
    ms_status st;
} sc_read_ctx;

/* Runs under base_sandbox_pcall: (table, ctx) -> nothing; the outcome is in
 * ctx, so a validation failure is not a Lua error. */
static int read_protected(lua_State *L)
{
    sc_read_ctx *c = lua_touserdata(L, 2);
    c->st = scn_apply_overrides(L, 1, c->overrides, c->n_overrides, &schema, c->file, c->d);
    if (c->st == MS_OK)
        c->st = scn_table_read(L, 1, &schema, c->vals, c->file, c->d);
    return 0;
}

static ms_status run_file(ms_sandbox *sb, sc_read_ctx *c)
{
    lua_State *L;
    base_sandbox_state(sb, &L);
    ms_status st = c->text ? base_sandbox_dostring(sb, c->file, c->text, strlen(c->text), 1, c->d)
                           : base_sandbox_dofile(sb, c->file, 1, c->d);
    if (st != MS_OK)
        return st; /* the message is "file:line: ..." or "cannot open file" */
    if (lua_type(L, -1) != LUA_TTABLE) {
        st = ms_diag_set(c->d, MS_EINVAL, "%s: a scenario file must return a table (got %s)",
                         c->file, lua_typename(L, lua_type(L, -1)));
        lua_pop(L, 1);
        return st;
    }
    lua_pushcfunction(L, read_protected);
    lua_insert(L, -2);
    lua_pushlightuserdata(L, c);
    st = base_sandbox_pcall(sb, 2, 0, c->d);
    if (st != MS_OK) {
        /* A heap or budget error while reading: say which file. */
        if (c->d != NULL && strstr(c->d->msg, c->file) == NULL)
            ms_diag_prefix(c->d, "%s: ", c->file);
        return st;
    }
    return c->st;
}

static ms_status load_device(ms_scenario *sc, ms_diag *d)
{
    char dev_path[4096];
    ms_status st = scn_device_path(sc->path, sc->device_name, dev_path, sizeof dev_path, d);
    if (st == MS_OK)
        st = ms_device_load(dev_path, &sc->device, d);
    if (st != MS_OK)
        return st;
    if (sc->device_memory > 0)
        sc->device.hbm_bytes = sc->device_memory;
    /* Ascend devices come with torch_npu's allocator unless told otherwise. */
    if (sc->allocator_flavour[0] == '\0')
        snprintf(sc->allocator_flavour, sizeof sc->allocator_flavour, "%s",
                 strncmp(sc->device_name, "ascend", 6) == 0 ? "npu" : "cuda");
    return MS_OK;
}

ms_status ms_scenario_load(const char *path, const char *const *overrides, size_t n_overrides,
                           const ms_scenario **out, ms_diag *d)
{
    if (out != NULL)
        *out = NULL;
    if (path == NULL || out == NULL || (n_overrides > 0 && overrides == NULL))
        return ms_diag_set(d, MS_EINVAL, "ms_scenario_load: NULL argument");
    ms_scenario *sc = calloc(1, sizeof *sc);
    st_value *vals = calloc(SC_COUNT, sizeof *vals);
    ms_sandbox *sb = NULL;
    ms_sandbox_limits lim = {SCENARIO_INSTRUCTIONS, SCENARIO_MEMORY};
    ms_status st = sc == NULL || vals == NULL ? MS_ENOMEM : base_sandbox_create(&lim, &sb);
    if (st == MS_ENOMEM)
        ms_diag_set(d, st, "out of memory loading %s", path);
    if (st == MS_OK && strlen(path) >= sizeof sc->path)
        st = ms_diag_set(d, MS_ERANGE, "scenario path too long (%zu bytes)", strlen(path));
    ms_import *im = NULL; /* a script or config rather than a scenario */
    if (st == MS_OK)
        st = scn_import_text(path, overrides, n_overrides, &im, d);
    if (st == MS_OK) {
        snprintf(sc->path, sizeof sc->path, "%s", path);
        sc_read_ctx c = {.file = path,
                         .text = ms_import_scenario(im),
                         .overrides = overrides,
                         .n_overrides = n_overrides,
                         .vals = vals,
                         .d = d};
        st = run_file(sb, &c);
    }
    if (sb != NULL)
        base_sandbox_destroy(sb);
    if (st == MS_OK)
        st = scn_megatron_resolve(vals, path, d);
    if (st == MS_OK)
        st = scn_validate(vals, path, sc, d);
    if (st == MS_OK)
        st = load_device(sc, d);
    if (st != MS_OK)
        scn_import_explain(im, d);
    if (im != NULL)
        ms_import_free(im);
    scn_table_values_release(vals, SC_COUNT);
    free(vals);
    if (st != MS_OK) {
        if (sc != NULL)
            ms_scenario_free(sc);
        return st;
    }
    *out = sc;
    return MS_OK;
}

/* The scenario was the loader's to write and is the loader's to free. */
ms_status ms_scenario_free(const ms_scenario *sc)
{
    if (sc == NULL)
        return MS_EINVAL;
    scn_memory_config_free(sc->memory_config);
    free((void *)sc);
    return MS_OK;
}
