/* memsim import's readers on small inputs written here (tests/import.sh runs
 * the real public scripts and configs): the bash a training script uses to
 * build its command line (defaults, arrays, arithmetic, quoting, if/else),
 * what it does not run (said in a note), Megatron's defaults and rules,
 * the YAML and JSON readers, and bad input named with its file and line. */
#include <check.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "memsim/scenario.h"

static char dir[] = "/tmp/memsim-test-import-XXXXXX";
static const char *const written[] = {"a.sh",   "b.sh",      "c.sh",      "d.sh",     "e.sh",
                                      "f.sh",   "g.sh",      "h.sh",      "i.sh",     "j.sh",
                                      "k.sh",   "args.txt",  "bomb.yaml", "tab.json", "x.json",
                                      "y.yaml", "gpt2.json", "mf.yaml"};

/* Each test writes its files into dir, under one of the names above. */
static const char *write_file(const char *name, const char *text)
{
    static char path[512];
    bool known = false;
    for (size_t i = 0; i < sizeof written / sizeof written[0]; i++)
        known |= strcmp(written[i], name) == 0;
    ck_assert_msg(known, "%s: add it to written[]", name);
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "w");
    ck_assert_ptr_nonnull(f);
    fputs(text, f);
    fclose(f);
    return path;
}

/* Import text as a file called name; the scenario, or the error in *err. */
static ms_import *import_as(const char *name, const char *text, const ms_import_options *opt,
                            ms_diag *d)
{
    ms_import *im = NULL;
    memset(d, 0, sizeof *d);
    ms_status st = ms_import_read(write_file(name, text), opt, &im, d);
    ck_assert_int_eq(st == MS_OK, im != NULL);
    return im;
}

static ms_import *import_ok(const char *name, const char *text, const ms_import_options *opt)
{
    ms_diag d;
    ms_import *im = import_as(name, text, opt, &d);
    ck_assert_msg(im != NULL, "%s", d.msg);
    return im;
}

#define HAS(text, part)                                                                            \
    ck_assert_msg(strstr((text), (part)) != NULL, "lacks \"%s\" in:\n%s", (part), (text))
#define LACKS(text, part)                                                                          \
    ck_assert_msg(strstr((text), (part)) == NULL, "has \"%s\" in:\n%s", (part), (text))

/* The arguments a model needs, for scripts that test something else. */
#define MODEL                                                                                      \
    "--num-layers 2 --hidden-size 64 --num-attention-heads 4 --seq-length 128 "                    \
    "--vocab-size 1000"

START_TEST(defaults_and_assignments)
{
    ms_import *im =
        import_ok("a.sh",
                  "#!/bin/bash\n"
                  "NL=${NUM_LAYERS:-6}\n" /* unset: the default */
                  "H=${HIDDEN:=256}\n"    /* assigns HIDDEN too */
                  "HEADS=8\n"
                  "HEADS=${HEADS:-2}\n" /* set: kept */
                  "SP=${HEADS:+--sequence-parallel}\n"
                  "torchrun pretrain_gpt.py --num-layers $NL --hidden-size ${HIDDEN} \\\n"
                  "  --num-attention-heads \"$HEADS\" $SP --seq-length 128 \\\n"
                  "  --vocab-size 1000 --tensor-model-parallel-size 2\n",
                  NULL);
    const char *s = ms_import_scenario(im);
    HAS(s, "num_layers = 6,  -- --num-layers 6 (a.sh:7; the value from line 2)");
    HAS(s, "hidden_size = 256,  -- --hidden-size 256 (a.sh:7; the value from line 3)");
    HAS(s, "num_attention_heads = 8,  -- --num-attention-heads 8 (a.sh:8; the value from line 4)");
    HAS(s, "sequence_parallel = true,  -- --sequence-parallel (a.sh:6)");
    ms_import_free(im);
}
END_TEST

START_TEST(arrays_arithmetic_and_quotes)
{
    const ms_import_options opt = {.env = (const char *const[]){"NODES=2"}, .n_env = 1};
    ms_import *im = import_ok("b.sh",
                              "GPUS=4\n"
                              "WORLD=$(( GPUS * (NODES + 0) ))\n"
                              "ARGS=(\n"
                              "  --num-layers 2   # a comment (with parens\n"
                              "  --hidden-size 64\n"
                              ")\n"
                              "ARGS+=(\"--num-attention-heads 4\" '--seq-length' 128)\n"
                              "MORE=\"--vocab-size 1000 \\\n"
                              "  --micro-batch-size 2\"\n"
                              "python -m torch.distributed.launch --nproc_per_node=$GPUS \\\n"
                              "  --nnodes $NODES pretrain_gpt.py ${ARGS[@]} $MORE \\\n"
                              "  --global-batch-size=$((WORLD * 2)) | tee log.txt 2>&1\n",
                              &opt);
    const char *s = ms_import_scenario(im);
    HAS(s, "num_layers = 2,  -- --num-layers 2 (b.sh:4)");
    HAS(s, "num_attention_heads = 4,  -- --num-attention-heads 4 (b.sh:7)");
    HAS(s, "seq_length = 128,  -- --seq-length 128 (b.sh:7)");
    HAS(s, "micro_batch_size = 2,  -- --micro-batch-size 2 (b.sh:9)");
    HAS(s, "global_batch_size = 16,  -- --global-batch-size 16 (b.sh:12)");
    HAS(s, "world_size = 8,  -- --nproc_per_node 4 (b.sh:10) x --nnodes 2 (b.sh:11; the value "
           "from --env)");
    ms_import_free(im);
}
END_TEST

START_TEST(if_elif_else)
{
    ms_import *im =
        import_ok("c.sh",
                  "MODE=large\nN=3\n"
                  "if [ \"$MODE\" = small ]; then\n  L=2\n"
                  "elif [[ $N -gt 2 && \"$MODE\" != tiny ]]; then\n  L=12\n"
                  "else\n  L=24\nfi\n"
                  "if [ -z \"$UNSET\" ] || false; then TP=2; else TP=4; fi\n"
                  "if [ -f /some/file ]; then PP=2; else PP=1; fi\n"
                  "torchrun pretrain_gpt.py --num-layers $L --hidden-size 64 "
                  "--num-attention-heads 4 --seq-length 128 --vocab-size 1000 "
                  "--tensor-model-parallel-size $TP --pipeline-model-parallel-size $PP\n",
                  NULL);
    const char *s = ms_import_scenario(im);
    HAS(s, "num_layers = 12,  -- --num-layers 12 (c.sh:12; the value from line 6)");
    HAS(s, "tensor_model_parallel_size = 2,");
    HAS(s, "pipeline_model_parallel_size = 1,");
    HAS(ms_import_not_modelled(im),
        "line 11: a condition memsim cannot decide, taken as false ('[ -f /some/file ]')");
    ms_import_free(im);
}
END_TEST

/* Loops, functions, here-documents and command substitutions are not run;
 * an argument built from one is not taken. */
START_TEST(what_is_not_run)
{
    ms_import *im = import_ok("d.sh",
                              "for i in 1 2; do\n  TP=$i\ndone\n"
                              "setup() {\n  echo hi\n}\n"
                              "cat > cfg <<EOF\n--num-layers 99\nEOF\n"
                              "torchrun pretrain_gpt.py " MODEL " --micro-batch-size $(nproc)\n"
                              "exit 0\n"
                              "torchrun pretrain_gpt.py --num-layers 5\n",
                              NULL);
    const char *s = ms_import_scenario(im), *nm = ms_import_not_modelled(im);
    HAS(s, "num_layers = 2,");
    LACKS(s, "micro_batch_size");
    HAS(nm, "line 1: a loop is not run");
    HAS(nm, "line 4: a function is not run");
    HAS(nm, "--micro-batch-size $(nproc) (d.sh:10): its value comes from a command memsim "
            "import does not run");
    HAS(nm, "line 11: the script exits here; what follows was not read");
    ms_import_free(im);
}
END_TEST

/* Megatron's own rules: its defaults written out, --num-query-groups only
 * with --group-query-attention, the FFN width of --swiglu, the vocabulary
 * of the tokenizer, SP off with TP 1, the allocator's environment. */
START_TEST(megatron_rules)
{
    ms_import *im = import_ok("e.sh",
                              "export PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True\n"
                              "torchrun --nproc_per_node 8 pretrain_gpt.py --num-layers 2 "
                              "--hidden-size 4096 --num-attention-heads 32 --seq-length 128 "
                              "--swiglu --num-query-groups 8 --tokenizer-type GPT2BPETokenizer "
                              "--sequence-parallel --kv-channels 64 --bogus-flag --lr=1e-4\n",
                              NULL);
    const char *s = ms_import_scenario(im), *nm = ms_import_not_modelled(im),
               *ne = ms_import_no_effect(im);
    HAS(s, "ffn_hidden_size = 10880,  -- Megatron's default with --swiglu");
    HAS(s, "vocab_size = 50257,  -- --tokenizer-type GPT2BPETokenizer (e.sh:2): GPT-2's BPE "
           "vocabulary has 50257 tokens");
    HAS(s, "normalization = \"LayerNorm\",  -- Megatron's default --normalization");
    HAS(s, "overlap_grad_reduce = false,  -- Megatron's default (no --overlap-grad-reduce)");
    HAS(s, "sequence_parallel = false,  -- --sequence-parallel (e.sh:2), off with TP 1");
    HAS(s, "conf = \"expandable_segments:True\",  -- PYTORCH_CUDA_ALLOC_CONF=");
    HAS(s, "bf16 = false,  -- no --bf16 or --fp16: Megatron trains in fp32");
    LACKS(s, "num_query_groups");
    HAS(ne, "--num-query-groups 8 (e.sh:2): without --group-query-attention Megatron does not "
            "use it");
    HAS(nm, "--kv-channels 64 (e.sh:2): a head size other than hidden / heads");
    HAS(nm, "--bogus-flag (e.sh:2): not an argument memsim import knows");
    HAS(ne, "--lr 1e-4 (e.sh:2): the learning rate");
    ms_import_free(im);
}
END_TEST

START_TEST(bare_argument_list)
{
    ms_import *im = import_ok("args.txt", MODEL " --bf16\n", NULL);
    const char *s = ms_import_scenario(im);
    HAS(s, "num_layers = 2,  -- --num-layers 2 (args.txt:1)");
    HAS(ms_import_not_modelled(im), "the number of devices was not found");
    ms_import_free(im);
}
END_TEST

START_TEST(script_errors)
{
    ms_diag d;
    ck_assert_ptr_null(import_as("f.sh", "echo no training here\n", NULL, &d));
    HAS(d.msg, "f.sh: no training command found");
    ck_assert_ptr_null(
        import_as("g.sh", "torchrun pretrain_gpt.py --num-layers 2 --seq-length\n", NULL, &d));
    HAS(d.msg, "--seq-length (g.sh:1): expected a value after it");
    ck_assert_ptr_null(
        import_as("h.sh", "torchrun pretrain_gpt.py --sequence-parallel 4\n", NULL, &d));
    HAS(d.msg, "--sequence-parallel 4 (h.sh:1): expected no value, or true or false");
    ck_assert_ptr_null(import_as("i.sh", "torchrun pretrain_gpt.py --num-layers 2\n", NULL, &d));
    HAS(d.msg, "the vocabulary size is not given");
    const ms_import_options bad_set = {.sets = (const char *const[]){"steps"}, .n_sets = 1};
    ck_assert_ptr_null(import_as("j.sh", "torchrun pretrain_gpt.py " MODEL "\n", &bad_set, &d));
    HAS(d.msg, "override 'steps': expected KEY=VALUE");
    ck_assert_int_ne(ms_import_read(NULL, NULL, NULL, &d), MS_OK);
}
END_TEST

START_TEST(yaml_and_json_readers)
{
    ms_diag d;
    /* An alias bomb stops at the node budget, with the line. */
    char bomb[4096] = "a: &a [x, x, x, x, x, x, x, x, x, x]\n";
    for (int i = 0; i < 8; i++)
        snprintf(bomb + strlen(bomb), sizeof bomb - strlen(bomb),
                 "%c: &%c [*%c, *%c, *%c, *%c, *%c, *%c, *%c, *%c, *%c, *%c]\n", 'b' + i, 'b' + i,
                 'a' + i, 'a' + i, 'a' + i, 'a' + i, 'a' + i, 'a' + i, 'a' + i, 'a' + i, 'a' + i,
                 'a' + i);
    ck_assert_ptr_null(import_as("bomb.yaml", bomb, NULL, &d));
    HAS(d.msg, "more than 1000000 values");
    ck_assert_ptr_null(import_as("tab.json", "{\n\t\"a\": [1,\n", NULL, &d));
    HAS(d.msg, "tab.json:");
    HAS(d.msg, "not valid YAML or JSON");
    ck_assert_ptr_null(import_as("x.json", "{\"num_hidden_layers\": \"two\"}\n", NULL, &d));
    HAS(d.msg, "x.json:1: num_hidden_layers: expected an integer");
    ck_assert_ptr_null(import_as("y.yaml", "seed: 1\n", NULL, &d));
    HAS(d.msg, "y.yaml: expected model.model_config with num_layers");
    /* A GPT-2 config: n_* names, tied embeddings, biases, learned positions. */
    ms_import *im =
        import_ok("gpt2.json",
                  "{\"model_type\": \"gpt2\", \"n_layer\": 12, \"n_embd\": 768, "
                  "\"n_head\": 12, \"n_positions\": 1024, \"vocab_size\": 50257, "
                  "\"activation_function\": \"gelu_new\", \"layer_norm_epsilon\": 1e-5}\n",
                  NULL);
    const char *s = ms_import_scenario(im);
    HAS(s, "arch = \"gpt\",");
    HAS(s, "ffn_hidden_size = 3072,  -- n_inner absent: GPT-2's 4 x n_embd");
    HAS(s, "seq_length = 1024,");
    HAS(s, "untie_embeddings_and_output_weights = false,");
    HAS(s, "disable_bias_linear = false,");
    ms_import_free(im);
}
END_TEST

/* A MindFormers pipeline: micro_batch_num micro-batches, the layers'
 * offset and the recompute settings copied, a key memsim does not take. */
START_TEST(mindformers_pipeline)
{
    ms_import *im = import_ok("mf.yaml",
                              "parallel_config:\n  data_parallel: 2\n  model_parallel: 2\n"
                              "  pipeline_stage: 2\n  micro_batch_num: 4\n"
                              "runner_config:\n  batch_size: 2\n  gradient_accumulation_steps: 3\n"
                              "recompute_config:\n  recompute: [1, 0]\n"
                              "  select_recompute_exclude: false\n"
                              "model:\n  model_config:\n    num_layers: 4\n    hidden_size: 64\n"
                              "    num_heads: 4\n    seq_length: 128\n    vocab_size: 1000\n"
                              "    offset: [1, -1]\n    compute_dtype: bfloat16\n",
                              NULL);
    const char *s = ms_import_scenario(im);
    HAS(s, "world_size = 8,");
    HAS(s, "global_batch_size = 16,  -- runner_config.batch_size: 2 (mf.yaml:7) x data_parallel "
           "x parallel_config.micro_batch_num: 4 (mf.yaml:5)");
    HAS(s, "offset = { 1, -1 },  -- model.model_config.offset: (a table) (mf.yaml:19)");
    HAS(s, "recompute = { 1, 0 },");
    HAS(s, "ffn_hidden_size = 256,");
    HAS(s, "dtype = \"bf16\",");
    HAS(ms_import_not_modelled(im),
        "recompute_config.select_recompute_exclude: false (mf.yaml:11): "
        "a setting memsim does not take");
    HAS(ms_import_no_effect(im), "runner_config.gradient_accumulation_steps: 3 (mf.yaml:8): "
                                 "MindFormers does not use it with pipeline stages");
    ms_import_free(im);
}
END_TEST

/* ms_scenario_load reads the formats too, its overrides as --set, and an
 * error about an imported field names where the field came from. */
START_TEST(scenario_load_imports)
{
    const char *path =
        write_file("k.sh", "torchrun --nproc_per_node 4 pretrain_gpt.py " MODEL
                           " --num-attention-heads 8 --tensor-model-parallel-size 8\n");
    const ms_scenario *sc = NULL;
    ms_diag d = {0};
    ck_assert_int_ne(ms_scenario_load(path, NULL, 0, &sc, &d), MS_OK);
    HAS(d.msg, "parallel.world_size from --nproc_per_node 4 (k.sh:1)");
    const char *ov[] = {"parallel.world_size=8", "device=a100-80gb"};
    ck_assert_msg(ms_scenario_load(path, ov, 2, &sc, &d) == MS_OK, "%s", d.msg);
    ck_assert_int_eq(sc->parallel.world_size, 8);
    ck_assert_int_eq(sc->model.padded_vocab_size, 1024); /* 1000 to a multiple of 128 x 8 */
    ck_assert_str_eq(sc->name, "k");
    ms_scenario_free(sc);
}
END_TEST

int main(void)
{
    if (mkdtemp(dir) == NULL)
        return EXIT_FAILURE;
    Suite *s = suite_create("import");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, defaults_and_assignments);
    tcase_add_test(tc, arrays_arithmetic_and_quotes);
    tcase_add_test(tc, if_elif_else);
    tcase_add_test(tc, what_is_not_run);
    tcase_add_test(tc, megatron_rules);
    tcase_add_test(tc, bare_argument_list);
    tcase_add_test(tc, script_errors);
    tcase_add_test(tc, yaml_and_json_readers);
    tcase_add_test(tc, mindformers_pipeline);
    tcase_add_test(tc, scenario_load_imports);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    for (size_t i = 0; i < sizeof written / sizeof written[0]; i++) {
        char path[512];
        snprintf(path, sizeof path, "%s/%s", dir, written[i]);
        unlink(path);
    }
    rmdir(dir);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
