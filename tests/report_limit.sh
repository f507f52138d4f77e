#!/bin/sh
# Reports sized for the step, as a user of `memsim run` meets them: detail
# over report.max_bytes is cut to the last step (or to summary.csv), said on
# stderr and in detail_limited.txt, with exit status 0; bad values of the
# key are errors; progress goes to stderr only (lines when stderr is no
# terminal, a bar when it is one, nothing with --quiet), never to stdout or
# the folder.
set -u
src=${MEMSIM_SRCDIR:-$(cd "$(dirname "$0")/.." && pwd)}
build=${MEMSIM_BUILDDIR:-$src}
memsim=$build/memsim
work=$(mktemp -d /tmp/memsim-limit-XXXXXX)
trap 'rm -rf "$work"' EXIT
run_dir=$work/cwd
mkdir -p "$run_dir" && ln -s "$src/scenarios" "$src/tests" "$run_dir/"
tiny=tests/data/cli/tiny-gpt.lua
fails=0
cases=0

ok() { echo "ok   $1"; cases=$((cases + 1)); }
bad() {
    echo "FAIL $1"
    sed 's/^/    /' "$work/err" | head -5
    cases=$((cases + 1))
    fails=$((fails + 1))
}
# The progress threshold is set on every run, so a slow machine changes
# nothing: 0 where a test wants progress, a minute where it wants none.
ms() {
    after=$1
    shift
    (cd "$run_dir" && MEMSIM_PROGRESS_AFTER_MS=$after exec "$memsim" "$@") \
        >"$work/out" 2>"$work/err"
}
files() { (cd "$1" && ls | tr '\n' ' '); }
detail_files="memory.csv memory.svg ops.csv segments.csv summary.csv tensors.csv timeline.svg \
trace.json "

# ---- report.max_bytes --------------------------------------------------------
# 300 KiB: under the three steps' detail, over the last step's.
ms 60000 run $tiny --set report.max_bytes=300KiB --out "$work/last"
rc=$?
if [ $rc -eq 0 ] &&
   grep -q 'report.detail = "all" asks for about .* over report.max_bytes = 300.0 KiB: the detail is of the last step only (step 2' "$work/err" &&
   grep -q -- '--set report.max_bytes=[0-9]*KiB (or =unlimited) writes it all' "$work/err" &&
   grep -q 'last step: report.max_bytes, see detail_limited.txt' "$work/out"
then ok limit-all-to-last-says-so
else bad "limit-all-to-last-says-so: exit $rc"; fi

if [ "$(files "$work/last")" = "detail_limited.txt $detail_files" ] &&
   grep -q 'over report.max_bytes = 300.0 KiB: the detail is of the last step only' \
       "$work/last/detail_limited.txt"
then ok limit-all-to-last-notes-it-in-the-folder
else bad "limit-all-to-last-notes-it-in-the-folder: $(files "$work/last")"; fi

# The detail written is exactly report.detail=last's (summary.csv differs
# in its overrides column only).
ms 60000 run $tiny --set report.detail=last --out "$work/asked-last"
same=true
for f in ops.csv memory.csv tensors.csv segments.csv trace.json memory.svg timeline.svg; do
    cmp -s "$work/last/$f" "$work/asked-last/$f" || same=false
done
steps=$(tail -n +2 "$work/last/ops.csv" | cut -d, -f1 | sort -u | tr '\n' ' ')
if $same && [ "$steps" = "2 " ]
then ok limit-all-to-last-writes-the-last-step
else bad "limit-all-to-last-writes-the-last-step: steps in ops.csv: $steps"; fi

# The same limit as a number of bytes (a number in the file reads the same).
ms 60000 run $tiny --set report.max_bytes=307200 --out "$work/bytes"
rc=$?
if [ $rc -eq 0 ] && [ -f "$work/bytes/detail_limited.txt" ] &&
   cmp -s "$work/bytes/ops.csv" "$work/last/ops.csv"
then ok limit-in-bytes
else bad "limit-in-bytes: exit $rc"; fi

# 1 KiB: even the last step's detail is over; summary.csv alone.
ms 60000 run $tiny --set report.max_bytes=1KiB --out "$work/none"
rc=$?
if [ $rc -eq 0 ] && [ "$(files "$work/none")" = "detail_limited.txt summary.csv " ] &&
   grep -q "even the last step's (step 2) alone would be about .* so only summary.csv is written" \
       "$work/none/detail_limited.txt" &&
   grep -q 'only summary.csv is written' "$work/err" &&
   grep -q 'summary.csv (the detail is over report.max_bytes' "$work/out"
then ok limit-to-summary-alone
else bad "limit-to-summary-alone: exit $rc, $(files "$work/none" 2>&1)"; fi

ms 60000 run $tiny --set report.detail=last --set report.max_bytes=1KiB --out "$work/none2"
rc=$?
if [ $rc -eq 0 ] && [ "$(files "$work/none2")" = "detail_limited.txt summary.csv " ] &&
   grep -q 'report.detail = "last" asks for about .* only summary.csv is written' "$work/err"
then ok limit-last-to-summary-alone
else bad "limit-last-to-summary-alone: exit $rc"; fi

# Under the limit (the default, or none): the folder of main, no note.
ms 60000 run $tiny --set report.max_bytes=unlimited --out "$work/all"
rc=$?
if [ $rc -eq 0 ] && [ "$(files "$work/all")" = "$detail_files" ] && [ ! -s "$work/err" ]
then ok unlimited-writes-every-step
else bad "unlimited-writes-every-step: exit $rc, $(files "$work/all" 2>&1)"; fi
ms 60000 run $tiny --out "$work/default"
if [ "$(files "$work/default")" = "$detail_files" ] && cmp -s "$work/default/ops.csv" "$work/all/ops.csv"
then ok default-limit-keeps-small-runs-whole
else bad "default-limit-keeps-small-runs-whole"; fi

# --quiet: nothing on stderr, progress and the limit's warning included; the
# note is still in the folder.
ms 0 run $tiny --set report.max_bytes=1KiB --quiet --out "$work/quiet"
rc=$?
if [ $rc -eq 0 ] && [ ! -s "$work/err" ] && [ ! -s "$work/out" ] &&
   [ -f "$work/quiet/detail_limited.txt" ]
then ok quiet-prints-nothing
else bad "quiet-prints-nothing: exit $rc, stderr $(wc -c <"$work/err") bytes"; fi

# Bad values: the field, what it takes, exit status 1 and no folder.
for v in lots -5 2e3 '12 MB' ''; do
    ms 60000 run $tiny --set "report.max_bytes=$v" --out "$work/badv"
    rc=$?
    if [ $rc -eq 1 ] && [ ! -e "$work/badv" ] &&
       grep -q "tiny-gpt.lua: field 'report.max_bytes' must be a byte count (bytes, a size such as \"512MiB\" or \"2GB\", or \"unlimited\")" "$work/err"
    then ok "bad-max-bytes-'$v'"
    else bad "bad-max-bytes-'$v': exit $rc"; fi
done

# ---- progress ----------------------------------------------------------------
# On a stderr that is no terminal: a line a state, in order; stdout and the
# folder are those of a run without progress.  tiny-gpt's cache settles in
# its first step, so its third repeats its second exactly (fast-forward).
ms 0 run $tiny --out "$work/p1"
cp "$work/out" "$work/p1.out"
cat >"$work/want" <<'EOF'
memsim run: tiny-gpt: setting up (3 steps to run)
memsim run: tiny-gpt: step 1 of 3, planning
memsim run: tiny-gpt: step 1 of 3, simulating
memsim run: tiny-gpt: step 2 of 3, planning
memsim run: tiny-gpt: step 2 of 3, simulating
memsim run: tiny-gpt: step 3 of 3, planning
memsim run: tiny-gpt: step 3 of 3, repeating the step before (fast-forward)
memsim run: tiny-gpt: 3 of 3 steps run, 1 replayed by fast-forward
EOF
sed 's/ ([0-9.]* s)$//' "$work/err" >"$work/got"
if cmp -s "$work/got" "$work/want" && ! grep -q "$(printf '\r')" "$work/err"
then ok progress-lines-off-a-terminal
else bad "progress-lines-off-a-terminal: $(head -3 "$work/err")"; fi

ms 60000 run $tiny --out "$work/p2"
sed "s#$work/p2#$work/p1#" "$work/out" >"$work/p2.out"
if [ ! -s "$work/err" ] && cmp -s "$work/p1.out" "$work/p2.out" && diff -r "$work/p1" "$work/p2" >/dev/null
then ok progress-touches-neither-stdout-nor-folder
else bad "progress-touches-neither-stdout-nor-folder"; fi

ms 0 run $tiny --policy full_recompute --out "$work/p3"
if grep -q '^memsim run: tiny-gpt under full_recompute: step 1 of 3, planning' "$work/err"
then ok progress-names-the-policy
else bad "progress-names-the-policy"; fi

ms x run $tiny --out "$work/p4"
rc=$?
if [ $rc -eq 0 ] && grep -q "MEMSIM_PROGRESS_AFTER_MS='x': expected milliseconds" "$work/err" &&
   ! grep -q 'step 1 of 3' "$work/err"
then ok progress-threshold-checked
else bad "progress-threshold-checked: exit $rc"; fi

# On a terminal (util-linux's script gives the run one): a bar redrawn in
# place, ending its line at the end.
if command -v script >/dev/null 2>&1 && script -qec true /dev/null >/dev/null 2>&1 </dev/null; then
    (cd "$run_dir" && MEMSIM_PROGRESS_AFTER_MS=0 script -qec \
        "'$memsim' run $tiny --out '$work/tty' >/dev/null" /dev/null) >"$work/err" 2>&1 </dev/null
    rc=$?
    cr=$(printf '\r')
    if [ $rc -eq 0 ] && grep -q "${cr}\[\.*\] tiny-gpt: setting up (3 steps to run)" "$work/err" &&
       grep -q "${cr}\[#*\] tiny-gpt: 3 of 3 steps run" "$work/err" &&
       ! grep -q '^memsim run: ' "$work/err"
    then ok progress-bar-on-a-terminal
    else bad "progress-bar-on-a-terminal: exit $rc"; fi
else
    echo "skip progress-bar-on-a-terminal: no util-linux script here"
fi

echo "$cases cases, $fails failed"
[ $fails -eq 0 ]
