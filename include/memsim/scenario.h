/* memsim: scenario files.
 *
 * A scenario is a Lua file returning a table (docs/scenario-format.md): the
 * model and its parallel layout in Megatron vocabulary, the device (a file
 * under scenarios/devices/), allocator settings, steps and seed.  Scenario
 * files are untrusted: they run in a sandbox with no os/io/require, under an
 * instruction and memory budget.  Unknown keys are errors naming the file
 * and the key; values out of range name the field and the constraint. */
#ifndef MEMSIM_SCENARIO_H
#define MEMSIM_SCENARIO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "memsim/device.h"
#include "memsim/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Which steps the per-op, per-event and per-tensor reports (ops.csv,
 * memory.csv, tensors.csv, trace.json) cover; summary.csv always covers all.
 * A 70B pipeline step is ~1.5 M ops and ~2 GB of detail, so large scenarios
 * keep only the last step (the steady state a user tunes), and
 * report.max_bytes bounds what any run writes. */
typedef enum ms_report_detail {
    MS_DETAIL_ALL = 0,
    MS_DETAIL_LAST,
    MS_DETAIL_NONE,
} ms_report_detail;

/* report.max_bytes by default: the detail a run writes at most (estimated
 * before it is written; ms_run_detail).  2.3 times the largest detail of the
 * shipped scenarios below 70B (mixtral-8x7b under full_recompute, 3 steps:
 * 225 MB), while one step of scenarios/llama2-70b.lua (about 1.8 GB) is over
 * it: a folder a spreadsheet or a trace viewer still opens. */
#define MS_REPORT_MAX_BYTES_DEFAULT (512ull << 20)

typedef enum ms_arch { MS_ARCH_LLAMA = 0, MS_ARCH_GPT } ms_arch;
typedef enum ms_norm { MS_NORM_RMSNORM = 0, MS_NORM_LAYERNORM } ms_norm;
/* Megatron's --position-embedding-type: rotary (llama) or learned absolute
 * position embeddings added after the word embeddings (gpt). */
typedef enum ms_pos_embed { MS_POS_ROPE = 0, MS_POS_LEARNED_ABSOLUTE } ms_pos_embed;
/* Megatron's --fp8-format: the transformer layers' linear layers run as
 * Transformer Engine's FP8 GEMMs (e4m3: every tensor E4M3; hybrid: E4M3
 * forward, E5M2 grads; one byte an element either way). */
typedef enum ms_fp8_format { MS_FP8_NONE = 0, MS_FP8_E4M3, MS_FP8_HYBRID } ms_fp8_format;

typedef struct ms_model_config {
    ms_arch arch;
    int num_layers;
    int hidden_size;
    int ffn_hidden_size;
    int num_attention_heads;
    int num_query_groups;      /* GQA groups; == heads for MHA */
    int seq_length;
    int padded_vocab_size;
    ms_norm normalization;
    bool swiglu;               /* llama: SwiGLU MLP; gpt: GeLU */
    bool untie_embeddings;     /* separate output layer weights */
    bool use_flash_attn;
    double hidden_dropout;     /* > 0 adds dropout masks (gpt) */
    double attention_dropout;
    ms_dtype dtype;            /* activations and low-precision weights */
    ms_fp8_format fp8;         /* MS_FP8_NONE: the linear layers run in dtype */
    bool add_bias_linear;      /* biases on the linear layers (gpt; llama: none) */
    ms_pos_embed position_embedding_type;
    /* Mixture of experts (Megatron names); num_experts == 0: dense MLP. */
    int num_experts;           /* --num-experts */
    int moe_router_topk;       /* --moe-router-topk */
    int moe_ffn_hidden_size;   /* --moe-ffn-hidden-size (0: ffn_hidden_size) */
    double moe_capacity_factor;/* --moe-expert-capacity-factor (0: no dropping, top-k x tokens) */
    /* --max-position-embeddings: the rows of the learned absolute position
     * table (no effect with rope); 0 (a config built by hand): seq_length. */
    int max_position_embeddings;
} ms_model_config;

typedef struct ms_parallel_config {
    int tensor_model_parallel_size;
    int pipeline_model_parallel_size;
    int num_layers_per_virtual_pipeline_stage; /* 0 = no interleaving */
    int context_parallel_size;
    int world_size;
    int data_parallel_size;    /* world / (tp * pp * cp) */
    bool sequence_parallel;
    bool use_distributed_optimizer;
    /* Megatron's --overlap-grad-reduce: the DP grad reduction of a group
     * starts once the last micro-batch's backward is done with it; off, as
     * Megatron's LocalDDP ran (allreduce_gradients after the whole
     * backward), every reduction waits for the end of the backward. */
    bool overlap_grad_reduce;
    /* Megatron's batch_p2p_sync (ModelParallelConfig; on there by default,
     * off in memsim, whose device files were fitted with overlapped p2p): the
     * host calls torch.cuda.synchronize() after each batch of pipeline sends
     * and receives, so the transfers do not overlap compute. */
    bool batch_p2p_sync;
    /* Megatron-core DDP's grad_reduce_in_fp32 (Megatron-LM's
     * --accumulate-allreduce-grads-in-fp32, which it turns on for bf16; NeMo
     * turns it off with grad_sync_dtype bf16) is the negation: the main
     * grads, accumulated and reduced over DP, are fp32 unless this is set
     * (then in the model's dtype; false, a zeroed config's, is Megatron-LM's
     * bf16 default). */
    bool grads_in_model_dtype;
    /* Megatron's --overlap-param-gather (NeMo's overlap_param_sync): the
     * distributed optimizer's parameter all-gathers run in the next step's
     * first forward, each layer's before its first use, beside the compute
     * of the layers before it, instead of after the optimizer step. */
    bool overlap_param_gather;
    /* Megatron's --tp-comm-overlap (NeMo's ub_tp_comm_overlap; needs SP):
     * the sequence-parallel all-gathers and reduce-scatters around the
     * transformer layers' linear layers run inside their GEMMs, chunk by
     * chunk (Transformer Engine's userbuffers). */
    bool tp_comm_overlap;
    /* Megatron 2021-2022's --scatter-gather-tensors-in-pipeline (removed
     * from Megatron-core): without SP each TP rank sends 1/t of a pipeline
     * boundary's activation and the receiver all-gathers it over TP. */
    bool scatter_gather_tensors_in_pipeline;
    int micro_batch_size;
    int global_batch_size;
    int num_micro_batches;     /* global / (mbs * dp) */
    int expert_model_parallel_size; /* --expert-model-parallel-size (1 if dense) */
} ms_parallel_config;

typedef struct ms_scenario {
    char name[128];            /* defaults to the file's base name */
    char path[4096];           /* the file it was loaded from */
    ms_model_config model;
    ms_parallel_config parallel;
    char device_name[64];      /* the device file's base name */
    ms_device_spec device;
    /* device_memory: the memory the run gives the device instead of the
     * device file's hbm_bytes (already applied to device.hbm_bytes), for
     * what-if runs such as a device that never runs out; 0: the file's. */
    uint64_t device_memory;
    char allocator_conf[512];  /* PYTORCH_CUDA_ALLOC_CONF-style string */
    char allocator_flavour[16]; /* "cuda", "npu", "mindspeed" or "mindspore" */
    /* Communication buffers are freed in stream order instead of through
     * record_stream (TORCH_NCCL_AVOID_RECORD_STREAMS=1; default true). With
     * record_stream, a host running ahead holds every freed comm buffer until
     * the device catches up. */
    bool avoid_record_streams;
    char policy[256];          /* default policy name or path ("none") */
    int steps;                 /* training steps to simulate (>= 1) */
    ms_report_detail report_detail; /* report.detail: "all" (default), "last", "none" */
    /* report.max_bytes: over this estimate the run keeps less detail than
     * report_detail asks (ms_run_detail); 0: no limit. */
    uint64_t report_max_bytes;
    uint64_t seed;
    /* Recompute and swap settings (recompute, recompute_config, swap_config)
     * and the pipeline layout (parallel.offset, pp_interleave_num), read
     * by the run (profile.declared, the MindFormers lines) and
     * ms_scenario_chunk_layers; owned by the scenario.  NULL (a scenario
     * built by hand): none, even stages. */
    struct ms_memory_config *memory_config;
} ms_scenario;

/* Load path, applying overrides ("model.seq_length=8192", "steps=4") before
 * validation.  The device file NAME.lua is looked up in <scenario dir>/devices,
 * <scenario dir>/../devices, $MEMSIM_DATADIR/scenarios/devices, then the
 * source and installed data directories (MS_SRCDIR, MS_DATADIR
 * /scenarios/devices).  Errors name the file (and line, key or field).  A
 * loaded scenario is read-only: overrides go through the loader. */
MS_API ms_status ms_scenario_load(const char *path, const char *const *overrides,
                                  size_t n_overrides, const ms_scenario **out, ms_diag *d);
MS_API ms_status ms_scenario_free(const ms_scenario *sc);

/* The keys a scenario table has and --set overrides ("steps",
 * "model.seq_length", ...): key i of ms_scenario_key_count() into buf. */
MS_API size_t ms_scenario_key_count(void);
MS_API ms_status ms_scenario_key(size_t i, char *buf, size_t n);

/* ---- formats users already have (docs/scenario-format.md, "Importing") ----
 *
 * A Megatron-LM or MindSpeed-LLM training script or command line, a
 * MindFormers or NeMo YAML, a Hugging Face config.json, read into a scenario
 * file whose every field cites the argument or key it came from, with what
 * could not be expressed listed.  ms_scenario_load reads these formats too
 * (with its overrides as --set), so memsim run takes them directly. */
typedef enum ms_import_format {
    MS_IMPORT_AUTO = 0, /* from the file's name and first bytes */
    MS_IMPORT_SCENARIO, /* a scenario file (Lua): nothing to import */
    MS_IMPORT_MEGATRON, /* a Megatron-LM / MindSpeed-LLM script or command line */
    MS_IMPORT_YAML,     /* a MindFormers or NeMo YAML (told apart by its keys) */
    MS_IMPORT_HF,       /* a Hugging Face config.json */
} ms_import_format;

typedef struct ms_import_options {
    ms_import_format format;
    const char *device;     /* NULL: the framework's usual device */
    const char *const *env; /* NAME=VALUE: a script's starting environment */
    size_t n_env;
    const char *const *sets; /* KEY=VALUE: scenario fields, cited as --set */
    size_t n_sets;
} ms_import_options;

typedef struct ms_import ms_import;

/* The format of the file at path: by its name (.lua, .sh, .yaml/.yml,
 * .json), else by its first bytes. */
MS_API ms_status ms_import_detect(const char *path, ms_import_format *fmt, ms_diag *d);
/* Read path into a scenario.  Errors name the file, the line or key, and
 * what was expected. */
MS_API ms_status ms_import_read(const char *path, const ms_import_options *opt, ms_import **out,
                                ms_diag *d);
/* The scenario file's text (Lua), comments citing each field's source. */
MS_API const char *ms_import_scenario(const ms_import *im);
/* What was not expressed, a line each ("" when nothing): what memsim does
 * not model, and what has no effect on memory or step time. */
MS_API const char *ms_import_not_modelled(const ms_import *im);
MS_API const char *ms_import_no_effect(const ms_import *im);
/* "a Megatron-LM training script", "a MindFormers configuration", ... */
MS_API const char *ms_import_kind(const ms_import *im);
MS_API ms_status ms_import_free(ms_import *im);

/* Load one device file into spec. */
MS_API ms_status ms_device_load(const char *path, ms_device_spec *spec, ms_diag *d);

/* Pipeline layout.  Each stage holds `chunks` model chunks (1 without
 * interleaving; Megatron's virtual stages, MindFormers' pp_interleave_num);
 * chunk c of stage s holds layers first..first+count-1.  Chunks are numbered
 * chunk-major: chunk 0 of stages 0..pp-1 holds the first layers, then chunk 1
 * (Megatron's and MindFormers' order).  With parallel.offset the counts are
 * MindFormers' num_layers / (pp x chunks) + offset[c][s]; else even. */
MS_API int ms_scenario_chunks(const ms_scenario *sc); /* 1 without interleaving (or NULL) */
MS_API ms_status ms_scenario_chunk_layers(const ms_scenario *sc, int stage, int chunk, int *first,
                                   int *count);

#ifdef __cplusplus
}
#endif
#endif
