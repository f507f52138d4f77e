/* Megatron-LM's argument names for settings a scenario also holds under
 * memsim's own names (docs/scenario-format.md, "Megatron's names"), so that a
 * Megatron command line translates key by key.  Each is resolved here, before
 * validation, into the field it means, with Megatron's meaning: the vocabulary
 * padded as Megatron pads it, --bf16/--fp16 as the dtype, --group-query-
 * attention deciding what --num-query-groups means.  The rest of the loader
 * sees one name per setting; a setting given under both names must agree. */
#include "scenario_load.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

/* Megatron's --make-vocab-size-divisible-by default (arguments.py). */
#define MEGATRON_VOCAB_DIVISOR 128

static const char *key(int id, char *buf, size_t size)
{
    return scn_path_of(id, buf, size);
}

static ms_status disagree(int a, int b, const char *file, ms_diag *d)
{
    char p[96], q[96];
    return ms_diag_set(d, MS_EINVAL,
                       "%s: %s and %s disagree (one setting, in memsim's and "
                       "Megatron's words): give one of them",
                       file, key(a, p, sizeof p), key(b, q, sizeof q));
}

/* v[alias] (negated when neg) means v[canon]. */
static ms_status bool_alias(st_value *v, int canon, int alias, bool neg, const char *file,
                            ms_diag *d)
{
    if (!v[alias].set)
        return MS_OK;
    bool want = neg ? !v[alias].b : v[alias].b;
    if (v[canon].set && v[canon].b != want)
        return disagree(canon, alias, file, d);
    v[canon].set = true;
    v[canon].b = want;
    return MS_OK;
}

static ms_status str_alias(st_value *v, int canon, int alias, const char *file, ms_diag *d)
{
    if (!v[alias].set)
        return MS_OK;
    if (v[canon].set && strcmp(v[canon].s, v[alias].s) != 0)
        return disagree(canon, alias, file, d);
    v[canon] = v[alias];
    return MS_OK;
}

/* --bf16 / --fp16: the parameters' dtype, fp32 with neither (arguments.py:
 * params_dtype).  With --fp16 Megatron keeps the main grads in fp16 unless
 * --accumulate-allreduce-grads-in-fp32; with --bf16 it turns that on. */
static ms_status precision(st_value *v, const char *file, ms_diag *d)
{
    if (!v[SC_BF16].set && !v[SC_FP16].set)
        return MS_OK;
    bool bf = v[SC_BF16].set && v[SC_BF16].b, fp = v[SC_FP16].set && v[SC_FP16].b;
    if (bf && fp)
        return ms_diag_set(d, MS_EINVAL,
                           "%s: model.bf16 and model.fp16 are both true (Megatron "
                           "takes at most one of --bf16 and --fp16)",
                           file);
    const char *want = bf ? "bf16" : fp ? "fp16" : "fp32";
    if (v[SC_DTYPE].set && strcmp(v[SC_DTYPE].s, want) != 0)
        return disagree(SC_DTYPE, bf || !fp ? SC_BF16 : SC_FP16, file, d);
    v[SC_DTYPE].set = true;
    snprintf(v[SC_DTYPE].s, sizeof v[SC_DTYPE].s, "%s", want);
    if (fp && !v[SC_GRAD_FP32].set && !v[SC_ACC_FP32].set && !v[SC_GRAD_BF16].set) {
        v[SC_GRAD_FP32].set = true;
        v[SC_GRAD_FP32].b = false;
    }
    return MS_OK;
}

/* --num-query-groups counts only with --group-query-attention, whose default
 * is one group (arguments.py); without it every head has its own K and V. */
static ms_status query_groups(st_value *v, const char *file, ms_diag *d)
{
    if (!v[SC_GQA].set)
        return MS_OK;
    if (v[SC_GQA].b) {
        if (!v[SC_GROUPS].set) {
            v[SC_GROUPS].set = true;
            v[SC_GROUPS].i = 1;
        }
        return MS_OK;
    }
    if (v[SC_GROUPS].set && v[SC_HEADS].set && v[SC_GROUPS].i != v[SC_HEADS].i)
        return ms_diag_set(d, MS_EINVAL,
                           "%s: model.num_query_groups (%" PRId64 ") needs "
                           "model.group_query_attention = true: without --group-query-attention "
                           "Megatron gives every head its own key and value",
                           file, v[SC_GROUPS].i);
    return MS_OK;
}

static ms_status in_range(const st_value *v, int id, int64_t hi, const char *file, ms_diag *d)
{
    char p[96];
    if (v[id].i >= 1 && v[id].i <= hi)
        return MS_OK;
    return ms_diag_set(d, MS_ERANGE, "%s: field '%s' must be in 1..%" PRId64 " (got %" PRId64 ")",
                       file, key(id, p, sizeof p), hi, v[id].i);
}

/* Megatron's _vocab_size_with_padding: up to a multiple of
 * --make-vocab-size-divisible-by x TP. */
static ms_status vocabulary(st_value *v, const char *file, ms_diag *d)
{
    if (v[SC_VOCAB_RAW].set && v[SC_VOCAB].set)
        return ms_diag_set(d, MS_EINVAL,
                           "%s: give one of model.vocab_size (padded as Megatron "
                           "pads it) and model.padded_vocab_size",
                           file);
    if (v[SC_VOCAB_DIV].set && !v[SC_VOCAB_RAW].set)
        return ms_diag_set(d, MS_EINVAL,
                           "%s: model.make_vocab_size_divisible_by needs "
                           "model.vocab_size (model.padded_vocab_size is padded already)",
                           file);
    if (!v[SC_VOCAB_RAW].set)
        return MS_OK;
    int64_t div = v[SC_VOCAB_DIV].set ? v[SC_VOCAB_DIV].i : MEGATRON_VOCAB_DIVISOR;
    int64_t tp = v[SC_TP].set && v[SC_TP].i >= 1 && v[SC_TP].i <= (1 << 20) ? v[SC_TP].i : 1;
    ms_status st = in_range(v, SC_VOCAB_RAW, 1 << 26, file, d);
    if (st == MS_OK && v[SC_VOCAB_DIV].set)
        st = in_range(v, SC_VOCAB_DIV, 1 << 20, file, d);
    if (st != MS_OK)
        return st;
    int64_t vocab = v[SC_VOCAB_RAW].i;
    int64_t multiple = div * tp;
    v[SC_VOCAB].set = true;
    v[SC_VOCAB].i = (vocab + multiple - 1) / multiple * multiple;
    return MS_OK;
}

/* Megatron asserts max_position_embeddings >= seq_length; memsim models
 * kv_channels = hidden / heads only (Megatron's default). */
static ms_status shapes(const st_value *v, const char *file, ms_diag *d)
{
    if (v[SC_MAXPOS].set && v[SC_SEQ].set && v[SC_MAXPOS].i < v[SC_SEQ].i)
        return ms_diag_set(d, MS_EINVAL,
                           "%s: model.max_position_embeddings (%" PRId64 ") must "
                           "be >= model.seq_length (%" PRId64 "), as Megatron checks",
                           file, v[SC_MAXPOS].i, v[SC_SEQ].i);
    if (!v[SC_KV_CHANNELS].set)
        return MS_OK;
    int64_t h = v[SC_HIDDEN].i, a = v[SC_HEADS].i;
    if (!v[SC_HIDDEN].set || !v[SC_HEADS].set || a < 1 || v[SC_KV_CHANNELS].i * a != h)
        return ms_diag_set(d, MS_EINVAL,
                           "%s: model.kv_channels (%" PRId64 ") must be "
                           "model.hidden_size / model.num_attention_heads: memsim models "
                           "Megatron's default head size only",
                           file, v[SC_KV_CHANNELS].i);
    return MS_OK;
}

ms_status scn_megatron_resolve(st_value *vals, const char *file, ms_diag *d)
{
    ms_status st;
    if ((st = bool_alias(vals, SC_UNTIE, SC_UNTIE_M, false, file, d)) != MS_OK ||
        (st = bool_alias(vals, SC_BIAS, SC_NOBIAS, true, file, d)) != MS_OK ||
        (st = str_alias(vals, SC_FP8, SC_FP8_FORMAT, file, d)) != MS_OK ||
        (st = precision(vals, file, d)) != MS_OK ||
        (st = bool_alias(vals, SC_GRAD_FP32, SC_ACC_FP32, false, file, d)) != MS_OK ||
        (st = bool_alias(vals, SC_GRAD_FP32, SC_GRAD_BF16, true, file, d)) != MS_OK ||
        (st = query_groups(vals, file, d)) != MS_OK || (st = vocabulary(vals, file, d)) != MS_OK)
        return st;
    return shapes(vals, file, d);
}
