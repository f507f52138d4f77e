/* Allocator configuration: defaults, the PYTORCH_CUDA_ALLOC_CONF /
 * PYTORCH_NPU_ALLOC_CONF string, and the size rules that depend on it
 * (round_size, get_allocation_size, the oversize limit).
 *
 * The string is lexed as c10's AllocatorConfig::lexArgs does: ',' ':' '['
 * ']' are tokens of their own, spaces are dropped, anything else builds a
 * word.  memsim is stricter than stoi/stod (a value must be a whole number)
 * and names the key and its character offset in every error. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "allocator_internal.h"

#define MAX_REGISTER_THREADS 128u /* CUDAAllocatorConfig::pinned_max_register_threads */

static const char *const flavour_names[] = {"cuda", "npu", "mindspeed", "mindspore"};
#define N_FLAVOURS (sizeof flavour_names / sizeof flavour_names[0])

const char *ms_alloc_flavour_name(ms_alloc_flavour f)
{
    return (unsigned)f < N_FLAVOURS ? flavour_names[f] : NULL;
}

ms_status ms_alloc_flavour_parse(const char *s, ms_alloc_flavour *out)
{
    if (!s || !out)
        return MS_EINVAL;
    for (unsigned i = 0; i < N_FLAVOURS; i++)
        if (strcmp(s, flavour_names[i]) == 0) {
            *out = (ms_alloc_flavour)i;
            return MS_OK;
        }
    return MS_EINVAL;
}

ms_status ms_alloc_config_default(ms_alloc_flavour flavour, ms_alloc_config *cfg)
{
    if (!cfg || (unsigned)flavour >= N_FLAVOURS)
        return MS_EINVAL;
    memset(cfg, 0, sizeof *cfg);
    cfg->flavour = flavour;
    cfg->max_split_size = UINT64_MAX;
    cfg->max_non_split_rounding = MS_KLARGE_BUFFER;
    cfg->pinned_num_register_threads = 1;
    return MS_OK;
}

static bool is_pow2(uint64_t v)
{
    return v && !(v & (v - 1));
}

static unsigned log2_floor(uint64_t v)
{
    return 63u - (unsigned)__builtin_clzll(v);
}

/* ------------------------------------------------------------------ sizes */

/* CUDAAllocatorConfig::roundup_power2_divisions(size): bands start at 1 MiB
 * (2^20) and index floor(log2 size) - 20, clamped to 0..15. */
static unsigned band_divisions(const ms_alloc_config *cfg, uint64_t size)
{
    int index = (int)log2_floor(size) - 20;
    if (index < 0)
        index = 0;
    if (index > MS_ALLOC_BANDS - 1)
        index = MS_ALLOC_BANDS - 1;
    return cfg->roundup_power2_divisions[index];
}

/* roundup_power2_next_division: 1200 with 4 divisions lies in [1024, 2048)
 * cut at 1024, 1280, 1536, 1792, so it rounds to 1280. */
static uint64_t next_division(uint64_t size, unsigned divisions)
{
    if (is_pow2(size))
        return size;
    uint64_t floor2 = UINT64_C(1) << log2_floor(size);
    uint64_t step = floor2 >> log2_floor(divisions);
    if (step == 0)
        return floor2 << 1;
    uint64_t down = size & ~(step - 1);
    return down == size ? size : down + step;
}

uint64_t alloc_round(const ms_alloc_config *cfg, uint64_t size)
{
    /* torch_npu round_size pads every request by 32 bytes first. */
    if (cfg->flavour == MS_ALLOC_NPU)
        size += MS_KNPU_PADDING;
    if (size < MS_KMIN_BLOCK)
        return MS_KMIN_BLOCK;
    unsigned d = band_divisions(cfg, size);
    if (d > 1 && size > MS_KMIN_BLOCK * d)
        return next_division(size, d);
    return MS_KMIN_BLOCK * ((size + MS_KMIN_BLOCK - 1) / MS_KMIN_BLOCK);
}

/* get_allocation_size; exact: MindSpeed's LONG_LC rule (no 20 MiB packing). */
uint64_t alloc_segment_size(uint64_t rounded, bool exact)
{
    if (rounded <= MS_KSMALL_SIZE)
        return MS_KSMALL_BUFFER;
    if (!exact && rounded < MS_KMIN_LARGE_ALLOC)
        return MS_KLARGE_BUFFER;
    return MS_KROUND_LARGE * ((rounded + MS_KROUND_LARGE - 1) / MS_KROUND_LARGE);
}

/* How far an oversize cached block may exceed an oversize request:
 * max_non_split_rounding (CUDA), kLargeBuffer fixed (torch_npu, and
 * MindSpeed's allocator, which copies torch_npu's rule). */
uint64_t alloc_oversize_limit(const ms_alloc_config *cfg)
{
    return cfg->flavour == MS_ALLOC_CUDA ? cfg->max_non_split_rounding : MS_KLARGE_BUFFER;
}

ms_status ms_alloc_config_round_size(const ms_alloc_config *cfg, uint64_t size, uint64_t *rounded)
{
    if (!cfg || !rounded || size > UINT64_MAX / 4)
        return MS_EINVAL;
    *rounded = alloc_round(cfg, size);
    return MS_OK;
}

ms_status ms_alloc_config_allocation_size(const ms_alloc_config *cfg, uint64_t rounded, bool exact,
                                          uint64_t *segment)
{
    if (!cfg || !segment || rounded > UINT64_MAX / 4)
        return MS_EINVAL;
    *segment = alloc_segment_size(rounded, exact);
    return MS_OK;
}

ms_status alloc_config_check(const ms_alloc_config *cfg)
{
    if ((unsigned)cfg->flavour >= N_FLAVOURS)
        return MS_EINVAL;
    if (cfg->max_split_size < MS_KLARGE_BUFFER || cfg->max_non_split_rounding < MS_KLARGE_BUFFER)
        return MS_ERANGE;
    if (!(cfg->garbage_collection_threshold >= 0.0 && cfg->garbage_collection_threshold < 1.0))
        return MS_ERANGE;
    if (!(cfg->memory_fraction >= 0.0 && cfg->memory_fraction <= 1.0))
        return MS_ERANGE;
    for (int i = 0; i < MS_ALLOC_BANDS; i++) {
        unsigned d = cfg->roundup_power2_divisions[i];
        if (d != 0 && !is_pow2(d))
            return MS_ERANGE;
    }
    return MS_OK;
}

/* ------------------------------------------------------------------ lexer */

typedef struct conf_tok {
    const char *text;
    size_t off;
} conf_tok;

typedef struct conf_parse {
    const char *conf;
    conf_tok *toks;
    size_t n;
    char *buf;
    ms_alloc_config *cfg;
    ms_diag *d;
    const conf_tok *key; /* the key being parsed, for messages */
    bool set_max_split;
    bool set_gc;
    bool set_expandable_true;
} conf_parse;

static bool is_sep(char c)
{
    return c == ',' || c == ':' || c == '[' || c == ']';
}

static ms_status lex(conf_parse *ps)
{
    size_t len = strlen(ps->conf);
    ps->toks = malloc((len + 1) * sizeof *ps->toks);
    ps->buf = malloc(2 * len + 2);
    if (!ps->toks || !ps->buf)
        return ms_diag_set(ps->d, MS_ENOMEM, "allocator config: out of host memory");
    char *w = ps->buf;
    bool in_word = false;
    for (size_t i = 0; i < len; i++) {
        char c = ps->conf[i];
        if (c == ' ')
            continue;
        if (is_sep(c)) {
            if (in_word)
                *w++ = '\0';
            in_word = false;
            ps->toks[ps->n++] = (conf_tok){w, i};
            *w++ = c;
            *w++ = '\0';
            continue;
        }
        if (!in_word)
            ps->toks[ps->n++] = (conf_tok){w, i};
        in_word = true;
        *w++ = c;
    }
    if (in_word)
        *w = '\0';
    return MS_OK;
}

/* ----------------------------------------------------------- value parsers */

/* MindSpeed's allocator reads PYTORCH_NPU_ALLOC_CONF with torch_npu's rules
 * (CachingAllocatorConfig.cpp). */
static bool npu_conf(const ms_alloc_config *cfg)
{
    return cfg->flavour == MS_ALLOC_NPU || cfg->flavour == MS_ALLOC_MINDSPEED;
}

static const char *flavour_env(const conf_parse *ps)
{
    return npu_conf(ps->cfg) ? "PYTORCH_NPU_ALLOC_CONF" : "PYTORCH_CUDA_ALLOC_CONF";
}

/* Every message names the key and its offset; at is the offending token
 * (NULL: the string ended early). */
static ms_status fail(conf_parse *ps, ms_status code, const conf_tok *at, const char *what)
{
    const char *env = flavour_env(ps);
    const conf_tok *k = ps->key;
    if (!k && at)
        return ms_diag_set(ps->d, code, "%s: %s at offset %zu, found '%s'", env, what, at->off,
                           at->text);
    if (!k)
        return ms_diag_set(ps->d, code, "%s: %s at the end of the string", env, what);
    if (!at)
        return ms_diag_set(ps->d, code, "%s: key '%s' at offset %zu: %s at the end of the string",
                           env, k->text, k->off, what);
    if (at != k)
        return ms_diag_set(ps->d, code, "%s: key '%s' at offset %zu: %s, found '%s' at offset %zu",
                           env, k->text, k->off, what, at->text, at->off);
    return ms_diag_set(ps->d, code, "%s: key '%s' at offset %zu: %s", env, k->text, k->off, what);
}

/* A message about the key itself. */
static ms_status fail_key(conf_parse *ps, ms_status code, const char *what)
{
    return fail(ps, code, ps->key, what);
}

static const conf_tok *tok_at(const conf_parse *ps, size_t i)
{
    return i < ps->n ? &ps->toks[i] : NULL;
}

/* consumeToken: token i must be the single character c. */
static ms_status expect(conf_parse *ps, size_t i, char c)
{
    const conf_tok *t = tok_at(ps, i);
    if (t && t->text[0] == c && t->text[1] == '\0')
        return MS_OK;
    char what[64];
    snprintf(what, sizeof what, "expected '%c'", c);
    return fail(ps, MS_EINVAL, t, what);
}

/* The value after "key:"; *i is left on it. */
static ms_status value_tok(conf_parse *ps, size_t *i, const conf_tok **out)
{
    ms_status st = expect(ps, ++*i, ':');
    if (st != MS_OK)
        return st;
    const conf_tok *t = tok_at(ps, ++*i);
    if (!t || is_sep(t->text[0]))
        return fail(ps, MS_EINVAL, t, "missing value");
    *out = t;
    return MS_OK;
}

static ms_status to_uint(conf_parse *ps, const conf_tok *t, uint64_t *v)
{
    const char *s = t->text;
    if (!*s)
        return fail(ps, MS_EINVAL, t, "expected a non-negative integer");
    uint64_t acc = 0;
    for (; *s; s++) {
        if (*s < '0' || *s > '9')
            return fail(ps, MS_EINVAL, t, "expected a non-negative integer");
        unsigned digit = (unsigned)(*s - '0');
        if (acc > (UINT64_MAX - digit) / 10)
            return fail(ps, MS_ERANGE, t, "integer too large");
        acc = acc * 10 + digit;
    }
    *v = acc;
    return MS_OK;
}

static ms_status to_double(conf_parse *ps, const conf_tok *t, double *v)
{
    char *end = NULL;
    errno = 0;
    double x = strtod(t->text, &end);
    if (end == t->text || *end != '\0' || errno == ERANGE || !isfinite(x))
        return fail(ps, MS_EINVAL, t, "expected a number");
    *v = x;
    return MS_OK;
}

static ms_status to_bool(conf_parse *ps, const conf_tok *t, bool *v)
{
    if (strcmp(t->text, "True") == 0)
        *v = true;
    else if (strcmp(t->text, "False") == 0)
        *v = false;
    else
        return fail(ps, MS_EINVAL, t, "expected a single True/False argument");
    return MS_OK;
}

/* ------------------------------------------------------------ key parsers */

static ms_status parse_bool_key(conf_parse *ps, size_t *i, bool *field)
{
    const conf_tok *t = NULL;
    ms_status st = value_tok(ps, i, &t);
    bool v = false;
    if (st == MS_OK)
        st = to_bool(ps, t, &v);
    if (st == MS_OK && field)
        *field = v;
    return st;
}

/* max_split_size_mb / max_non_split_rounding_mb: at least kLargeBuffer in
 * MiB (c10 AllocatorConfig: >= 20; torch_npu: > 20), clamped to SIZE_MAX. */
static ms_status parse_mb_key(conf_parse *ps, size_t *i, uint64_t *field)
{
    const conf_tok *t = NULL;
    uint64_t mb = 0;
    ms_status st = value_tok(ps, i, &t);
    if (st == MS_OK)
        st = to_uint(ps, t, &mb);
    if (st != MS_OK)
        return st;
    uint64_t min_mb = MS_KLARGE_BUFFER / MS_KMB;
    if (npu_conf(ps->cfg) && mb <= min_mb)
        return fail(ps, MS_ERANGE, t, "too small, must be > 20");
    if (mb < min_mb)
        return fail(ps, MS_ERANGE, t, "too small, must be >= 20");
    if (mb > UINT64_MAX / MS_KMB)
        mb = UINT64_MAX / MS_KMB;
    *field = mb * MS_KMB;
    return MS_OK;
}

static ms_status parse_gc_key(conf_parse *ps, size_t *i)
{
    const conf_tok *t = NULL;
    double v = 0;
    ms_status st = value_tok(ps, i, &t);
    if (st == MS_OK)
        st = to_double(ps, t, &v);
    if (st != MS_OK)
        return st;
    if (!(v > 0.0 && v < 1.0))
        return fail(ps, MS_ERANGE, t, "garbage_collect_threshold is invalid, set it in (0.0, 1.0)");
    ps->cfg->garbage_collection_threshold = v;
    ps->set_gc = true;
    return MS_OK;
}

/* One "interval:divisions" pair of the bracket form. */
static ms_status parse_division_pair(conf_parse *ps, size_t *i, bool *first, size_t *last)
{
    unsigned *bands = ps->cfg->roundup_power2_divisions;
    const conf_tok *k = tok_at(ps, *i);
    const conf_tok *t = NULL;
    uint64_t div = 0;
    ms_status st = value_tok(ps, i, &t);
    if (st == MS_OK)
        st = to_uint(ps, t, &div);
    if (st != MS_OK)
        return st;
    if (div != 0 && !is_pow2(div))
        return fail(ps, MS_EINVAL, t, "the divisions have to be a power of 2 or 0");
    if (strcmp(k->text, ">") == 0) {
        /* PyTorch fills from the last named interval itself, so in
         * [256:1,512:2,>:4] the 512 MiB band ends up with 4. */
        for (size_t b = *last; b < MS_ALLOC_BANDS; b++)
            bands[b] = (unsigned)div;
        return MS_OK;
    }
    uint64_t interval = 0;
    st = to_uint(ps, k, &interval);
    if (st != MS_OK)
        return st;
    if (!is_pow2(interval))
        return fail(ps, MS_EINVAL, k, "the intervals have to be a power of 2");
    size_t index = log2_floor(interval);
    if (index > MS_ALLOC_BANDS - 1)
        index = MS_ALLOC_BANDS - 1;
    if (*first) {
        for (size_t b = 0; b < index; b++)
            bands[b] = (unsigned)div;
        *first = false;
    }
    bands[index] = (unsigned)div;
    *last = index;
    return MS_OK;
}

static ms_status parse_divisions_list(conf_parse *ps, size_t *i)
{
    bool first = true;
    size_t last = 0;
    for (;;) {
        const conf_tok *t = tok_at(ps, ++*i);
        if (!t)
            return fail(ps, MS_EINVAL, NULL, "missing ']'");
        if (strcmp(t->text, "]") == 0)
            return MS_OK;
        ms_status st = parse_division_pair(ps, i, &first, &last);
        if (st != MS_OK)
            return st;
        const conf_tok *n = tok_at(ps, *i + 1);
        if (n && strcmp(n->text, "]") != 0) {
            st = expect(ps, ++*i, ',');
            if (st != MS_OK)
                return st;
        }
    }
}

/* roundup_power2_divisions:4 (every band) or :[256:1,512:2,>:4] (bands by
 * interval start in MiB; the first interval also fills the bands below it). */
static ms_status parse_divisions_key(conf_parse *ps, size_t *i)
{
    ms_status st = expect(ps, ++*i, ':');
    if (st != MS_OK)
        return st;
    const conf_tok *t = tok_at(ps, ++*i);
    if (!t)
        return fail(ps, MS_EINVAL, NULL, "missing value");
    if (strcmp(t->text, "[") == 0)
        return parse_divisions_list(ps, i);
    uint64_t div = 0;
    st = to_uint(ps, t, &div);
    if (st != MS_OK)
        return st;
    if (!is_pow2(div))
        return fail(ps, MS_EINVAL, t, "the divisions have to be a power of 2");
    for (int b = 0; b < MS_ALLOC_BANDS; b++)
        ps->cfg->roundup_power2_divisions[b] = (unsigned)div;
    return MS_OK;
}

static ms_status parse_threads_key(conf_parse *ps, size_t *i)
{
    const conf_tok *t = NULL;
    uint64_t v = 0;
    ms_status st = value_tok(ps, i, &t);
    if (st == MS_OK)
        st = to_uint(ps, t, &v);
    if (st != MS_OK)
        return st;
    if (!is_pow2(v))
        return fail(ps, MS_EINVAL, t, "number of register threads has to be a power of 2");
    if (v > MAX_REGISTER_THREADS)
        return fail(ps, MS_ERANGE, t, "number of register threads should be <= 128");
    ps->cfg->pinned_num_register_threads = (unsigned)v;
    return MS_OK;
}

static ms_status parse_fraction_key(conf_parse *ps, size_t *i)
{
    const conf_tok *t = NULL;
    double v = 0;
    ms_status st = value_tok(ps, i, &t);
    if (st == MS_OK)
        st = to_double(ps, t, &v);
    if (st != MS_OK)
        return st;
    if (!(v >= 0.0 && v <= 1.0))
        return fail(ps, MS_ERANGE, t, "per_process_memory_fraction must be in [0, 1]");
    ps->cfg->memory_fraction = v;
    return MS_OK;
}

static ms_status parse_positive_ignored(conf_parse *ps, size_t *i)
{
    const conf_tok *t = NULL;
    uint64_t v = 0;
    ms_status st = value_tok(ps, i, &t);
    if (st == MS_OK)
        st = to_uint(ps, t, &v);
    if (st == MS_OK && v == 0)
        st = fail(ps, MS_ERANGE, t, "has to be greater than 0");
    return st;
}

static ms_status parse_backend_key(conf_parse *ps, size_t *i)
{
    const conf_tok *t = NULL;
    ms_status st = value_tok(ps, i, &t);
    if (st != MS_OK)
        return st;
    if (strcmp(t->text, "native") == 0)
        return MS_OK;
    if (strcmp(t->text, "cudaMallocAsync") == 0)
        return fail(ps, MS_EUNSUPPORTED, t, "backend cudaMallocAsync is not modelled");
    return fail(ps, MS_EINVAL, t, "unknown allocator backend, options are native and cudaMallocAsync");
}

/* torch_npu keys memsim recognises but whose behaviour it does not model. */
static bool npu_unmodelled(const char *key)
{
    static const char *const keys[] = {"pin_memory_expandable_segments", "base_addr_aligned_kb",
                                       "page_size", "segment_size_mb", "multi_stream_lazy_reclaim",
                                       "throw_on_npumalloc_oom"};
    for (size_t k = 0; k < sizeof keys / sizeof keys[0]; k++)
        if (strcmp(key, keys[k]) == 0)
            return true;
    return false;
}

static bool key_is(const char *key, const char *a, const char *b)
{
    return strcmp(key, a) == 0 || (b && strcmp(key, b) == 0);
}

static ms_status parse_flavour_key(conf_parse *ps, size_t *i, const char *key)
{
    ms_alloc_config *c = ps->cfg;
    if (c->flavour == MS_ALLOC_CUDA) {
        if (key_is(key, "release_lock_on_cudamalloc", "release_lock_on_hipmalloc"))
            return parse_bool_key(ps, i, &c->release_lock_on_malloc);
        if (key_is(key, "pinned_use_cuda_host_register", "pinned_use_hip_host_register"))
            return parse_bool_key(ps, i, &c->pinned_use_host_register);
        if (key_is(key, "backend", NULL))
            return parse_backend_key(ps, i);
        if (key_is(key, "graph_capture_record_stream_reuse", NULL))
            return parse_bool_key(ps, i, NULL);
    } else {
        if (key_is(key, "release_lock_on_npumalloc", NULL))
            return parse_bool_key(ps, i, &c->release_lock_on_malloc);
        if (key_is(key, "pinned_mem_register", NULL))
            return parse_bool_key(ps, i, &c->pinned_use_host_register);
        if (key_is(key, "per_process_memory_fraction", NULL))
            return parse_fraction_key(ps, i);
        if (npu_unmodelled(key))
            return fail_key(ps, MS_EUNSUPPORTED, "torch_npu option not modelled by memsim");
    }
    char what[96];
    snprintf(what, sizeof what, "unrecognized CachingAllocator option (%s flavour)",
             npu_conf(c) ? "NPU" : "CUDA");
    return fail_key(ps, MS_EINVAL, what);
}

static ms_status parse_key(conf_parse *ps, size_t *i)
{
    ms_alloc_config *c = ps->cfg;
    const char *key = ps->toks[*i].text;
    ps->key = &ps->toks[*i];
    if (key_is(key, "max_split_size_mb", NULL)) {
        ps->set_max_split = true;
        return parse_mb_key(ps, i, &c->max_split_size);
    }
    if (key_is(key, "max_non_split_rounding_mb", NULL))
        return parse_mb_key(ps, i, &c->max_non_split_rounding);
    if (key_is(key, "garbage_collection_threshold", NULL))
        return parse_gc_key(ps, i);
    if (key_is(key, "roundup_power2_divisions", NULL))
        return parse_divisions_key(ps, i);
    if (key_is(key, "expandable_segments", NULL)) {
        ms_status st = parse_bool_key(ps, i, &c->expandable_segments);
        ps->set_expandable_true = st == MS_OK && c->expandable_segments;
        return st;
    }
    if (key_is(key, "pinned_num_register_threads", NULL))
        return parse_threads_key(ps, i);
    if (key_is(key, "pinned_use_background_threads", NULL))
        return parse_bool_key(ps, i, NULL);
    if (key_is(key, "pinned_reserve_segment_size_mb", NULL))
        return parse_positive_ignored(ps, i);
    /* memsim's flavour-neutral spellings of the two lock/pinning switches. */
    if (key_is(key, "release_lock_on_malloc", NULL))
        return parse_bool_key(ps, i, &c->release_lock_on_malloc);
    if (key_is(key, "pinned_use_host_register", NULL))
        return parse_bool_key(ps, i, &c->pinned_use_host_register);
    return parse_flavour_key(ps, i, key);
}

static ms_status parse_all(conf_parse *ps)
{
    for (size_t i = 0; i < ps->n; i++) {
        ps->key = NULL;
        if (is_sep(ps->toks[i].text[0]))
            return ms_diag_set(ps->d, MS_EINVAL, "%s: expected a key at offset %zu, found '%s'",
                               flavour_env(ps), ps->toks[i].off, ps->toks[i].text);
        ms_status st = parse_key(ps, &i);
        if (st != MS_OK)
            return st;
        if (i + 1 < ps->n) {
            ps->key = NULL;
            st = expect(ps, ++i, ',');
            if (st != MS_OK)
                return st;
        }
    }
    /* torch_npu refuses expandable_segments:True next to max_split_size_mb or
     * garbage_collection_threshold in the same string. */
    if (npu_conf(ps->cfg) && ps->set_expandable_true && (ps->set_max_split || ps->set_gc))
        return ms_diag_set(ps->d, MS_EINVAL,
                           "%s: `max_split_size_mb` or `garbage_collection_threshold`, cannot be "
                           "enabled with `expandable_segments`, please set `expandable_segments` "
                           "to `False`.",
                           flavour_env(ps));
    return MS_OK;
}

ms_status ms_alloc_config_parse(const char *conf, ms_alloc_config *cfg, ms_diag *d)
{
    if (!conf || !cfg)
        return ms_diag_set(d, MS_EINVAL, "allocator config: NULL argument");
    if ((unsigned)cfg->flavour >= N_FLAVOURS)
        return ms_diag_set(d, MS_EINVAL, "allocator config: unknown flavour %d", (int)cfg->flavour);
    /* MindSpore's pool is configured through its context
     * (mempool_block_size), not a PyTorch allocator string. */
    if (cfg->flavour == MS_ALLOC_MINDSPORE && conf[0] != '\0')
        return ms_diag_set(d, MS_EINVAL,
                           "allocator config: the mindspore flavour (MindSpore's "
                           "dynamic memory pool) takes no PyTorch allocator options, got '%s'",
                           conf);
    /* Work on a copy so a failed parse leaves cfg untouched. */
    ms_alloc_config work = *cfg;
    conf_parse ps = {.conf = conf, .cfg = &work, .d = d};
    ms_status st = lex(&ps);
    if (st == MS_OK)
        st = parse_all(&ps);
    free(ps.toks);
    free(ps.buf);
    if (st == MS_OK)
        *cfg = work;
    return st;
}
