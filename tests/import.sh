#!/bin/sh
# memsim import on real public training scripts and configs of five
# frameworks (tests/data/import/, their sources in its README.md): each is
# imported, its fields checked for the citations a user reads, and the
# imported scenario run end to end beside a scenario of the same job written
# by hand in memsim's own keys (tests/data/import/by_hand/): the two
# summary.csv files must be the same bytes.  memsim run takes the files
# directly too, with the same result.  Then bad input: each a clear error
# naming the file and line or key, exit status 1.
set -u
src=${MEMSIM_SRCDIR:-$(cd "$(dirname "$0")/.." && pwd)}
build=${MEMSIM_BUILDDIR:-$src}
memsim=$build/memsim
work=$(mktemp -d /tmp/memsim-import-XXXXXX)
trap 'rm -rf "$work"' EXIT
run_dir=$work/cwd
mkdir -p "$run_dir" && ln -s "$src/scenarios" "$src/tests" "$run_dir/"
d=tests/data/import
fails=0
cases=0

ok() { echo "ok   $1"; cases=$((cases + 1)); }
bad() {
    echo "FAIL $1"
    sed 's/^/    /' "$work/err" | head -8
    cases=$((cases + 1))
    fails=$((fails + 1))
}
ms() { (cd "$run_dir" && exec "$memsim" "$@") >"$work/out" 2>"$work/err"; }
# Every line given is in the file (fixed strings).
has_all() {
    file=$1
    shift
    for line in "$@"; do
        grep -qF -- "$line" "$file" || { echo "missing: $line" >>"$work/err"; return 1; }
    done
}

# same_job NAME FILE "IMPORT OPTIONS" "RUN OPTIONS" CITATION...: import FILE,
# check the citations, run the import and by_hand/NAME.lua with the same
# options, compare their summary.csv.  A run that runs out of memory (exit
# 3) is a result like any other.
same_job() {
    name=$1 file=$2 imp=$3 run=$4
    shift 4
    # shellcheck disable=SC2086
    ms import "$d/$file" $imp --out "$work/$name.lua"
    rc=$?
    if [ $rc -eq 0 ] && has_all "$work/$name.lua" "$@"; then ok "$name-imported-with-citations"
    else bad "$name-imported-with-citations: exit $rc"; return; fi
    cp "$work/err" "$work/$name.stderr"
    # shellcheck disable=SC2086
    ms run "$work/$name.lua" $run --quiet --no-advice --out "$work/$name-imported"
    rc=$?
    # shellcheck disable=SC2086
    ms run "$d/by_hand/$name.lua" $run --quiet --no-advice --out "$work/$name-by-hand"
    rc2=$?
    if [ $rc -le 3 ] && [ $rc -ne 1 ] && [ $rc -eq $rc2 ] &&
       cmp -s "$work/$name-imported/summary.csv" "$work/$name-by-hand/summary.csv"
    then ok "$name-runs-as-the-same-job-by-hand (exit $rc)"
    else
        diff "$work/$name-imported/summary.csv" "$work/$name-by-hand/summary.csv" >>"$work/err" 2>&1
        bad "$name-runs-as-the-same-job-by-hand: exit $rc and $rc2"
    fi
}

# ---- Megatron-LM: examples/gpt3, examples/llama, examples/mixtral ---------------
same_job train_gpt3_175b_distributed train_gpt3_175b_distributed.sh \
    "--set parallel.world_size=128" \
    "--set parallel.global_batch_size=32 --set steps=1" \
    'num_layers = 96,  -- --num-layers 96 (train_gpt3_175b_distributed.sh:29)' \
    'ffn_hidden_size = 49152,  -- Megatron'"'"'s default: 4 x hidden' \
    'vocab_size = 50257,  -- --merge-file' \
    'fp16 = true,  -- --fp16 (train_gpt3_175b_distributed.sh:47)' \
    'use_flash_attn = true,  -- --attention-backend auto (train_gpt3_175b_distributed.sh:34)' \
    'world_size = 128,  -- --set parallel.world_size=128' \
    'pipeline_model_parallel_size = 16,  -- --pipeline-model-parallel-size 16 (train_gpt3_175b_distributed.sh:57)'
if grep -qF -- '--step-batch-size-schedule 0:16 (train_gpt3_175b_distributed.sh:40): a batch-size ramp-up' \
    "$work/train_gpt3_175b_distributed.stderr"
then ok gpt3-says-what-it-cannot-express
else cp "$work/train_gpt3_175b_distributed.stderr" "$work/err"; bad gpt3-says-what-it-cannot-express; fi

# FP8 in an if branch, --vocab-size in the branch a mock run takes, a file
# test memsim cannot decide; sequence 4096 for the runs (FP8 parameter
# all-gathers and TE's saved inputs, which let 8192 fit, are not modelled).
same_job train_llama3_8b_h100_fp8 train_llama3_8b_h100_fp8.sh "" \
    "--set model.seq_length=4096 --set steps=1" \
    'fp8_format = "hybrid",  -- --fp8-format hybrid (train_llama3_8b_h100_fp8.sh:108)' \
    'vocab_size = 128256,  -- --vocab-size 128256 (train_llama3_8b_h100_fp8.sh:139)' \
    'num_layers = 32,  -- --num-layers 32 (train_llama3_8b_h100_fp8.sh:57; the value from line 38)' \
    'sequence_parallel = false,  -- --sequence-parallel (train_llama3_8b_h100_fp8.sh:120), off with TP 1 as Megatron turns it' \
    'group_query_attention = true,  -- --group-query-attention (train_llama3_8b_h100_fp8.sh:61)' \
    'grad_reduce_in_bf16 = true,  -- --grad-reduce-in-bf16 (train_llama3_8b_h100_fp8.sh:96)'
if grep -qF "line 180: a condition memsim cannot decide, taken as false ('[ ! -f \"\$PRETRAIN_SCRIPT_PATH\" ]')" \
    "$work/train_llama3_8b_h100_fp8.stderr"
then ok llama3-says-which-condition-it-could-not-decide
else cp "$work/train_llama3_8b_h100_fp8.stderr" "$work/err"; bad llama3-says-which-condition-it-could-not-decide; fi

same_job train_mixtral_8x7b_distributed train_mixtral_8x7b_distributed.sh \
    "--env SLURM_NNODES=4" "--set parallel.global_batch_size=64 --set steps=1" \
    'world_size = 32,  -- --nproc_per_node 8 (train_mixtral_8x7b_distributed.sh:20; the value from line 7) x --nnodes 4 (train_mixtral_8x7b_distributed.sh:21; the value from --env)' \
    'num_experts = 8,  -- --num-experts 8 (train_mixtral_8x7b_distributed.sh:51)' \
    'expert_model_parallel_size = 8,  -- --expert-model-parallel-size 8 (train_mixtral_8x7b_distributed.sh:85)' \
    'vocab_size = 32000,  -- --tokenizer-type Llama2Tokenizer (train_mixtral_8x7b_distributed.sh:62)'

# ---- MindSpeed-LLM: a string of arguments, PYTORCH_NPU_ALLOC_CONF -------------------
same_job pretrain_llama2_7b_ptd pretrain_llama2_7b_ptd.sh "" "--set steps=1" \
    'device = "ascend-910b",  -- not in the script: MindSpeed-LLM trains on Ascend NPUs' \
    'tensor_model_parallel_size = 1,  -- --tensor-model-parallel-size 1 (pretrain_llama2_7b_ptd.sh:30; the value from line 17)' \
    'conf = "expandable_segments:True",  -- PYTORCH_NPU_ALLOC_CONF=expandable_segments:True (pretrain_llama2_7b_ptd.sh:4)' \
    'make_vocab_size_divisible_by = 1,  -- --make-vocab-size-divisible-by 1 (pretrain_llama2_7b_ptd.sh:43)' \
    'world_size = 8,  -- --nproc_per_node 8 (pretrain_llama2_7b_ptd.sh:21; the value from line 6) x --nnodes 1 (pretrain_llama2_7b_ptd.sh:22; the value from line 9)'

# ---- MindFormers and NeMo YAML -------------------------------------------------------
same_job pretrain_llama2_7b pretrain_llama2_7b.yaml "" "--set steps=1" \
    'device_memory = "58GiB",  -- context.max_device_memory: 58GB (pretrain_llama2_7b.yaml:124)' \
    'global_batch_size = 64,  -- runner_config.batch_size: 1 (pretrain_llama2_7b.yaml:18) x data_parallel x runner_config.gradient_accumulation_steps: 8 (pretrain_llama2_7b.yaml:21)' \
    'flavour = "mindspore",' \
    'grad_reduce_in_fp32 = false,  -- model.model_config.param_init_type: float16 (pretrain_llama2_7b.yaml:149): the gradients'"'"' dtype' \
    'mp_comm_recompute = true,  -- recompute_config.mp_comm_recompute: True (pretrain_llama2_7b.yaml:107)'

same_job nemo_llama2_7b nemo_llama2_7b.yaml "--set model.vocab_size=32000" "--set steps=1" \
    'world_size = 128,  -- trainer.devices: 8 (nemo_llama2_7b.yaml:16) x trainer.num_nodes: 16 (nemo_llama2_7b.yaml:15)' \
    'use_distributed_optimizer = true,  -- model.optim.name: mcore_distributed_optim (nemo_llama2_7b.yaml:150)' \
    'swiglu = true,  -- model.activation: fast-swiglu (nemo_llama2_7b.yaml:84)' \
    'vocab_size = 32000,  -- --set model.vocab_size=32000'

# ---- Hugging Face config.json ------------------------------------------------------------
same_job llama2_7b_hf_config llama2_7b_hf_config.json "" "--set steps=1" \
    'num_layers = 32,  -- num_hidden_layers: 32 (llama2_7b_hf_config.json:15)' \
    'untie_embeddings_and_output_weights = true,  -- tie_word_embeddings: false (llama2_7b_hf_config.json:20)' \
    'seq_length = 4096,  -- not in config.json: memsim import'"'"'s default (--set model.seq_length=N)'

same_job mixtral_8x7b_config mixtral_8x7b_config.json "" \
    "--set parallel.world_size=64 --set parallel.expert_model_parallel_size=8 --set steps=1" \
    'num_experts = 8,  -- num_local_experts: 8 (mixtral_8x7b_config.json:18)' \
    'moe_router_topk = 2,  -- num_experts_per_tok: 2 (mixtral_8x7b_config.json:15)' \
    'num_query_groups = 8,  -- num_key_value_heads: 8 (mixtral_8x7b_config.json:17)'

# ---- memsim run takes them directly ------------------------------------------------------
for job in pretrain_llama2_7b_ptd.sh pretrain_llama2_7b.yaml llama2_7b_hf_config.json; do
    name=${job%.*}
    ms run "$d/$job" --set steps=1 --no-advice --out "$work/$name-direct"
    rc=$?
    if [ $rc -eq 0 ] && cmp -s "$work/$name-direct/summary.csv" "$work/$name-by-hand/summary.csv" &&
       grep -q "^memsim run: read as " "$work/err"
    then ok "run-takes-$job-directly"
    else bad "run-takes-$job-directly: exit $rc"; fi
done

# ---- bad input ---------------------------------------------------------------------------
fails_with() {
    label=$1 text=$2
    shift 2
    ms "$@"
    rc=$?
    if [ $rc -eq 1 ] && grep -qF -- "$text" "$work/err"; then ok "$label"
    else echo "exit $rc, expected 1 and: $text" >>"$work/err"; bad "$label"; fi
}
printf 'echo hello\nmkdir -p logs\n' >"$work/nothing.sh"
fails_with no-training-command "nothing.sh: no training command found" import "$work/nothing.sh"
printf 'NL=abc\ntorchrun pretrain_gpt.py \\\n  --num-layers $NL --hidden-size 64\n' >"$work/notint.sh"
fails_with argument-not-an-integer \
    "--num-layers abc (notint.sh:3; the value from line 1): expected an integer" \
    import "$work/notint.sh"
printf 'model:\n  model_config:\n    num_layers: [1,\n' >"$work/broken.yaml"
fails_with yaml-syntax-error-names-line "broken.yaml:4: not valid YAML or JSON" import "$work/broken.yaml"
printf '[1, 2, 3]\n' >"$work/list.json"
fails_with json-not-a-config "list.json: expected a mapping of keys at the top" import "$work/list.json"
fails_with unknown-set-key "override 'model.hiden_size=5': unknown key 'model.hiden_size'" \
    import "$d/llama2_7b_hf_config.json" --set model.hiden_size=5
fails_with nemo-vocabulary-asks-for-set "add --set model.vocab_size=N" \
    import "$d/nemo_llama2_7b.yaml"
# A field the loader refuses names the argument it came from.
fails_with load-error-cites-the-argument \
    "(parallel.world_size from --nproc_per_node 8 (train_gpt3_175b_distributed.sh:22" \
    run "$d/train_gpt3_175b_distributed.sh" --quiet
fails_with missing-file "cannot open $d/none.sh" import "$d/none.sh"

echo "$cases cases, $fails failed"
[ "$fails" -eq 0 ]
