#!/bin/sh
# The memsim command as a user meets it: exit statuses, help, list, "did you
# mean", output folders (per override, whole or not at all, errno text,
# interrupted runs), compare and sweep, and --snapshot read back by Python's
# pickle and by memsim replay.
set -u
src=${MEMSIM_SRCDIR:-$(cd "$(dirname "$0")/.." && pwd)}
build=${MEMSIM_BUILDDIR:-$src}
memsim=$build/memsim
work=$(mktemp -d /tmp/memsim-cli-XXXXXX)
trap 'rm -rf "$work"' EXIT
# Run where files may be written (distcheck's source tree is read-only),
# with the source tree's scenarios and test data at hand.
run_dir=$work/cwd
mkdir -p "$run_dir" && ln -s "$src/scenarios" "$src/tests" "$run_dir/"
tiny=tests/data/cli/tiny-gpt.lua
fails=0
cases=0

ms() { (cd "$run_dir" && exec "$memsim" "$@") >"$work/out" 2>"$work/err"; }

ok() { echo "ok   $1"; cases=$((cases + 1)); }
bad() {
    echo "FAIL $1"
    sed 's/^/    /' "$work/err" | head -5
    cases=$((cases + 1))
    fails=$((fails + 1))
}
# expect NAME STATUS 'TEXT in stdout or stderr' ARGS...
expect() {
    name=$1 want=$2 text=$3
    shift 3
    ms "$@"
    rc=$?
    if [ $rc -ne "$want" ]; then
        bad "$name: exit status $rc, expected $want"
    elif [ -n "$text" ] && ! grep -qF -- "$text" "$work/out" "$work/err"; then
        bad "$name: no '$text' in the output"
    else
        ok "$name"
    fi
}

# ---- exit statuses, help, list, did you mean ------------------------------
expect usage-no-command 2 "usage: memsim run"
expect usage-unknown-command 2 "unknown command 'rnu'; did you mean 'run'?" rnu
expect usage-bad-option 2 "" run $tiny --frobnicate
expect error-missing-scenario 1 "does-not-exist.lua" run "$work/does-not-exist.lua"
expect did-you-mean-policy 1 "no shipped policy 'smart_swp'; did you mean 'smart_swap'?" \
    run $tiny --policy smart_swp --out "$work/x"
expect did-you-mean-key 1 "unknown key 'model.hiden_size'; did you mean 'model.hidden_size'?" \
    run $tiny --set model.hiden_size=3 --out "$work/x"
expect did-you-mean-leaf 1 "did you mean 'model.seq_length'?" \
    run $tiny --set seq_length=3 --out "$work/x"
for cmd in run compare sweep replay list; do
    expect help-$cmd 0 "Example" $cmd --help
done
expect help-exit-status 0 "3 out of memory" --help
expect list 0 "smart_swap" list
expect list-names 0 "llama2-7b" list scenarios --names
expect list-keys 0 "model.seq_length" list keys
if [ -f "$src/cli/memsim.1" ] && command -v man >/dev/null 2>&1; then
    if man -l "$src/cli/memsim.1" 2>/dev/null | grep -q "EXIT STATUS"; then ok man-page
    else bad "man-page: man -l cli/memsim.1 shows no EXIT STATUS"; fi
fi
if command -v bash >/dev/null 2>&1; then
    if bash -c ". '$src/cli/completion/memsim' && complete -p memsim" >/dev/null 2>&1
    then ok completion-loads
    else bad "completion-loads: cli/completion/memsim does not define the completion"; fi
fi

# ---- run: exit status 3 and the OOM report ----------------------------------
expect oom-report 3 "largest live tensors:" \
    run scenarios/llama2-smartswap-tp1.lua --policy none --set steps=1 --out "$work/oom" -j 2
for text in "failed at op 206 layers.13.feed_forward.w3.matmul (forward" \
            "allocating tensor 921 layers.13.feed_forward.w3.matmul.out (activation, 172.00 MiB)" \
            "cached but free in 480 blocks (the largest 2.00 MiB): enough in total" \
            "full_recompute                           fits" \
            "the fastest that fits:"; do
    if grep -qF -- "$text" "$work/oom/oom.txt"; then ok "oom.txt has: $text"
    else bad "oom.txt lacks: $text"; fi
done
# summary.csv after an OOM in step 0 counts it.
if awk -F, 'NR == 2 { exit !($21 == "true" && $24 >= 1) }' "$work/oom/summary.csv"
then ok oom-counted
else bad "oom-counted: summary.csv says oom without num_ooms"; fi

# ---- output folders -----------------------------------------------------------
ms run $tiny --set steps=1 --quiet
ms run $tiny --set steps=1 --set model.seq_length=1024 --quiet
a="$run_dir/results/tiny-gpt-none--steps=1"
b="$run_dir/results/tiny-gpt-none--model.seq_length=1024,steps=1"
if [ -f "$a/summary.csv" ] && [ -f "$b/summary.csv" ]; then ok per-override-folders
else bad "per-override-folders: missing $a or $b"; fi
if tail -n 1 "$b/summary.csv" | grep -q '"steps=1;model.seq_length=1024"$'
then ok summary-records-overrides
else bad "summary-records-overrides: $(tail -n 1 "$b/summary.csv")"; fi
rm -rf "$a" "$b"

# A failed second policy leaves the previous compare as it was: no new
# file, no old summary beside new details.
mkdir -p "$work/cmp" && echo old >"$work/cmp/summary.csv"
expect failed-compare-leaves-nothing 1 "broken on purpose" \
    run $tiny --policy none --policy tests/data/cli/plan_error.lua --out "$work/cmp"
if [ "$(cat "$work/cmp/summary.csv")" = old ] && [ ! -e "$work/cmp/none" ] &&
   ! ls -a "$work" | grep -q memsim-tmp
then ok failed-compare-keeps-old-folder
else bad "failed-compare-keeps-old-folder: $(ls -a "$work" "$work/cmp")"; fi

# A write that fails says which file and why (here: past the file size
# limit, with SIGXFSZ ignored so the write itself fails).
(cd "$run_dir" && trap '' XFSZ && ulimit -f 16 && exec "$memsim" run $tiny --set steps=1 \
    --out "$work/big" --quiet) >"$work/out" 2>"$work/err"
rc=$?
if [ $rc -eq 1 ] && grep -q 'ops.csv: write failed: File too large' "$work/err" &&
   [ ! -e "$work/big" ] && ! ls -a "$work" | grep -q memsim-tmp
then ok write-error-has-cause
else bad "write-error-has-cause: exit $rc"; fi

# SIGTERM at any moment: no staging folder and no partial file are left,
# and a folder under the final name is a complete one.  The run takes well
# under a second here, so the signals land while it simulates and while it
# writes.
term_ok=true
for delay in 0.02 0.05 0.1 0.15 0.2 0.25 0.3 0.4 0.5; do
    rm -rf "$work/term"
    (cd "$run_dir" && exec "$memsim" run scenarios/llama2-7b.lua --out "$work/term" --quiet) \
        >/dev/null 2>&1 &
    pid=$!
    sleep $delay
    kill -TERM $pid 2>/dev/null
    wait $pid 2>/dev/null
    if ls -a "$work" | grep -q memsim-tmp || find "$work/term" -name '*.tmp' 2>/dev/null | grep -q .
    then term_ok=false; echo "    left behind after SIGTERM at $delay s: $(ls -a "$work")"; fi
    if [ -e "$work/term" ] && [ ! -f "$work/term/summary.csv" ]
    then term_ok=false; echo "    an incomplete $work/term after SIGTERM at $delay s"; fi
done
if $term_ok; then ok sigterm-leaves-nothing; else bad sigterm-leaves-nothing; fi

# The moments a random SIGTERM can only hit by chance (one did, once, in CI):
# a staging folder or a .tmp file made and not yet armed for removal, or
# written and not yet renamed into place.  gdb stops memsim at such a moment
# and memsim sends itself SIGTERM there; nothing may be left.
# held NAME 'GDB COMMANDS TO REACH THE MOMENT; ...' LEFTOVER... -- MEMSIM ARGS...
# (the first breakpoint must be reached, the signal must kill memsim, and no
# LEFTOVER may exist.)  Skipped without a gdb that can run a program.
held() {
    name=$1 reach=$2
    shift 2
    leftovers=""
    while [ "$1" != "--" ]; do leftovers="$leftovers $1"; shift; done
    shift
    if [ -z "${gdb_runs:-}" ]; then # can gdb run a program here (ptrace allowed)?
        gdb_runs=no
        command -v gdb >/dev/null 2>&1 && [ -x "$build/libtool" ] &&
            gdb -q -batch -nx -ex run --args /bin/true 2>&1 | grep -q 'exited normally' && gdb_runs=yes
    fi
    if [ "$gdb_runs" != yes ]; then
        echo "skip $name: no gdb that can run a program here"
        return
    fi
    { echo 'set breakpoint pending on'; echo 'handle SIGTERM nostop noprint pass'
      echo "$reach" | tr ';' '\n'
      echo 'call (int)kill((int)getpid(), 15)'; echo delete; echo continue; } >"$work/gdb.cmd"
    (cd "$run_dir" && "$build/libtool" --mode=execute gdb -q -batch -nx -x "$work/gdb.cmd" \
        --args "$memsim" "$@") >"$work/err" 2>&1
    left=""
    for f in $leftovers; do [ -e "$f" ] && left="$left $f"; done
    if grep -q '^Breakpoint 1, ' "$work/err" && grep -q 'terminated with signal SIGTERM' "$work/err" &&
        [ -z "$left" ]
    then ok "$name"
    else bad "$name: left:$left"; fi
}
# The staging folder just made (ms_report_dir_path is first called as it is
# armed, before the run writes anything).
held sigterm-while-the-folder-is-made-leaves-nothing "break ms_report_dir_path; run" \
    "$work/held" "$work/.held.memsim-tmp-*" -- run $tiny --set steps=1 --out "$work/held" --quiet

# ---- compare and sweep ----------------------------------------------------------
expect compare 0 "<- best that fits" \
    compare $tiny --policies none,full_recompute --out "$work/cmp2"
expect sweep 0 "<- best that fits" \
    sweep $tiny --vary parallel.micro_batch_size=1,2 --vary model.seq_length=512,1024 \
    --policies none,full_recompute -j 2 --out "$work/sw2"
ms sweep $tiny --vary parallel.micro_batch_size=1,2 --vary model.seq_length=512,1024 \
    --policies none,full_recompute -j 1 --out "$work/sw1" --quiet
if cmp -s "$work/sw1/sweep.csv" "$work/sw2/sweep.csv"; then ok sweep-jobs-agree
else bad "sweep-jobs-agree: -j 1 and -j 2 wrote different sweep.csv"; fi
if [ "$(grep -c ',true,true,' "$work/sw1/sweep.csv")" -eq 1 ] &&
   head -n 1 "$work/sw1/sweep.csv" | grep -q '^config,policy,parallel.micro_batch_size,model.seq_length,overrides,'
then ok sweep-csv-has-overrides-and-one-best
else bad "sweep-csv-has-overrides-and-one-best"; fi
expect sweep-nothing-fits 3 "no configuration fits" \
    sweep $tiny --vary model.seq_length=262144,524288 -j 1 --out "$work/sw3"

# ---- --snapshot: Python's pickle reads it, memsim replays it 100% ---------------
expect snapshot 0 "PyTorch memory snapshot" \
    run scenarios/llama2-7b.lua --set steps=1 --snapshot "$work/s.pickle" --out "$work/snap"
if command -v python3 >/dev/null 2>&1; then
    if python3 - "$work/s.pickle" >"$work/err" 2>&1 <<'EOF'
import pickle, sys
s = pickle.load(open(sys.argv[1], "rb"))
assert isinstance(s, dict) and "segments" in s and "device_traces" in s, s.keys()
assert len(s["segments"]) > 0 and len(s["device_traces"][0]) > 0
e = s["device_traces"][0][1]
assert {"action", "addr", "size", "stream", "time_us", "frames"} <= e.keys(), e
b = s["segments"][0]["blocks"][0]
assert {"address", "size", "requested_size", "state"} <= b.keys(), b
EOF
    then ok snapshot-loads-in-python
    else bad "snapshot-loads-in-python"; fi
elif [ "${CI:-}" = true ]; then
    bad "snapshot-loads-in-python: no python3 in CI (bootstrap installs it when CI=true)"
else
    echo "skip snapshot-loads-in-python: no python3"
fi
expect snapshot-replays-fully 0 "agreement: 100.00% (371 of 371" replay "$work/s.pickle"
if grep -qF "allocs at the recorded address: 5698 of 5698 (100.00%)" "$work/out"
then ok snapshot-replays-every-address
else bad "snapshot-replays-every-address"; fi
# A pipeline's stages free receive and send buffers through record_stream,
# and their events come back out of order: every stage replays every address
# (with one side stream for every deferred free, stages 1 and 2 placed 94%
# and 84% of their allocs where the run had).
expect pipeline-snapshot 0 "" run scenarios/llama2-70b.lua --set parallel.global_batch_size=8 \
    --set steps=1 --snapshot "$work/p.pickle" --out "$work/psnap" --quiet
ms replay "$work/p.pickle"
if [ "$(grep -c 'allocs at the recorded address: .*(100.00%)' "$work/out")" -eq 4 ] &&
    [ "$(grep -c 'allocs at the recorded address' "$work/out")" -eq 4 ]
then ok pipeline-snapshot-replays-every-address
else bad "pipeline-snapshot-replays-every-address: $(grep 'allocs at' "$work/out" | tr '\n' ' ')"; fi
expect snapshot-oom-reproduced 3 "" \
    run scenarios/llama2-smartswap-tp1.lua --policy none --no-advice --snapshot "$work/o.pickle" \
    --out "$work/snap2" --quiet
expect snapshot-oom-replays 0 "predicted at event 1236: reproduced" replay "$work/o.pickle"
# --snapshot FILE written as FILE.tmp, stopped at its rename into place: the
# .tmp and the run's staging folder (both armed then) go.
held sigterm-before-the-snapshot-is-renamed-leaves-nothing \
    "break ms_report_write_snapshot; run; break rename; continue" \
    "$work/h.pickle" "$work/h.pickle.tmp" "$work/hsnap" "$work/.hsnap.memsim-tmp-*" -- \
    run $tiny --set steps=1 --snapshot "$work/h.pickle" --out "$work/hsnap" --quiet
# replay --csv OUT written as OUT.tmp across every replay: stopped as the
# second replay starts, the first one's rows in OUT.tmp.
held sigterm-between-replays-leaves-no-csv \
    "break ms_replay_run; run; continue" "$work/r.csv" "$work/r.csv.tmp" -- \
    replay "$work/s.pickle" --compare expandable_segments:True --csv "$work/r.csv"

echo "$cases checks, $fails failed"
[ $fails -eq 0 ]
