#!/bin/sh
# memsim reproduce as an installed memsim runs it: the shipped scenarios,
# policies and notes found through the data directory alone (a layout like
# $(pkgdatadir), from a folder with nothing in it), the quick set of seed
# configurations (the llama2-70B rows take minutes), tables whose derived
# columns follow from the measured ones, measured columns equal to what
# memsim run reports for the same configuration, the seed section spliced
# into a document, and a clear error, with nothing written, when a shipped
# file is missing.
set -u
src=${MEMSIM_SRCDIR:-$(cd "$(dirname "$0")/.." && pwd)}
build=${MEMSIM_BUILDDIR:-$src}
memsim=$build/memsim
work=$(mktemp -d /tmp/memsim-reproduce-XXXXXX)
trap 'rm -rf "$work"' EXIT
fails=0
ok() { echo "ok   $1"; }
bad() { echo "FAIL $1"; fails=$((fails + 1)); }
check() { if eval "$2"; then ok "$1"; else bad "$1"; fi; }

# The installed layout: scenarios/, policies_lua/, results/reference/notes.md.
data=$work/data
mkdir -p "$data/results/reference" "$work/cwd"
ln -s "$src/scenarios" "$src/policies_lua" "$data/"
cp "$src/results/reference/notes.md" "$data/results/reference/"
printf 'intro\n<!-- seed section: old -->\nstale table\n<!-- end of seed section -->\noutro\n' \
    >"$work/doc.md"
ms() { (cd "$work/cwd" && MEMSIM_DATADIR=$data exec "$memsim" "$@"); }

ms reproduce --quick --quiet --out "$work/ref" --doc "$work/doc.md" >"$work/out" 2>"$work/err"
check "reproduce --quick exits 0" '[ $? -eq 0 ]'
# (A sanitizer build's runtime warns once that it cannot follow the mock's
# coroutines (swapcontext): that line is the sanitizer's, not memsim's.)
check "--quiet prints nothing on stderr" \
    '[ -z "$(grep -v "^==[0-9]*==WARNING: ASan doesn.t fully support makecontext" "$work/err")" ]'
check "it says what it wrote" 'grep -q "seed-section.md" "$work/out"'
for f in seed000_adaptive_memory seed001_fragmentation seed002_smart_swap; do
    check "$f.csv written" '[ -s "$work/ref/$f.csv" ]'
done
rows() { tail -n +2 "$work/ref/$1.csv" | wc -l | tr -d ' '; }
check "seed 000: three rows" '[ "$(rows seed000_adaptive_memory)" = 3 ]'
check "seed 002: two rows" '[ "$(rows seed002_smart_swap)" = 2 ]'
check "seed 001: six rows without the 70B ones" '[ "$(rows seed001_fragmentation)" = 6 ]'
check "seed 000 header" \
    '[ "$(head -1 "$work/ref/seed000_adaptive_memory.csv")" = "scenario,full_recompute_ms,adaptive_memory_ms,measured_gain_pct,published_gain_pct,gap_points" ]'

# Gain and gap follow from the measured columns beside them.
gains=$(awk -F, 'NR > 1 { g = sprintf("%.2f", ($2 / $3 - 1) * 100); d = g - $5
    if (g != $4 || sprintf("%.2f", d < 0 ? -d : d) != $6) print "row " NR ": " $0 }' \
    "$work/ref/seed000_adaptive_memory.csv")
check "seed 000: gains and gaps computed from the row" '[ -z "$gains" ]'
check "seed 000: the published gains" \
    '[ "$(cut -d, -f5 "$work/ref/seed000_adaptive_memory.csv" | tail -n +2 | tr "\n" " ")" = "13.68 14.17 14.65 " ]'
check "seed 002: the published gains, labels quoted as CSV" \
    'grep -q "^\"TP8 -> TP1 (llama2-smartswap-tp1)\",\"none at TP8\",.*,25," "$work/ref/seed002_smart_swap.csv"'

# The measured columns are memsim run's figures for the same configuration.
summary_field() { # DIR FIELD: the largest over the stages, as the table takes it
    awk -F, -v f="$2" 'NR == 1 { for (i = 1; i <= NF; i++) if ($i == f) c = i; next }
        { if (v == "" || $c + 0 > v + 0) v = $c } END { print v }' "$1/summary.csv"
}
(cd "$src" && "$memsim" run scenarios/gpt-175b-trimmed-tp8.lua --policy full_recompute \
    --set report.detail=none --quiet --out "$work/run-full" >/dev/null 2>&1)
check "seed 000: full_recompute_ms is memsim run's step time" \
    '[ "$(sed -n 2p "$work/ref/seed000_adaptive_memory.csv" | cut -d, -f2)" = "$(summary_field "$work/run-full" step_time_ms)" ]'
(cd "$src" && "$memsim" run scenarios/llama2-7b.lua --policy lifetime_pools \
    --set report.detail=none --quiet --out "$work/run-pools" >/dev/null 2>&1)
pools_gb=$(awk -v v="$(summary_field "$work/run-pools" peak_reserved_bytes)" \
    'BEGIN { printf "%.3f", v / 1e9 }')
check "seed 001: pools peak reserved is memsim run's" \
    '[ "$(grep "^llama2-7b," "$work/ref/seed001_fragmentation.csv" | cut -d, -f3)" = "$pools_gb" ]'
(cd "$src" && "$memsim" run scenarios/llama2-7b.lua --policy lifetime_pools \
    --set report.detail=none --set device_memory=unlimited --quiet --out "$work/run-pools-u" \
    >/dev/null 2>&1)
pools_u_gb=$(awk -v v="$(summary_field "$work/run-pools-u" peak_reserved_bytes)" \
    'BEGIN { printf "%.3f", v / 1e9 }')
check "seed 001: the demand run is on a device of 2^43 bytes" \
    '[ "$(summary_field "$work/run-pools-u" capacity_bytes)" = 8796093022208 ]'
check "seed 001: pools demand is memsim run's on that device" \
    '[ "$(grep "^llama2-7b," "$work/ref/seed001_fragmentation.csv" | cut -d, -f10)" = "$pools_u_gb" ]'
# Both savings follow from the printed columns; a row that ran out of
# memory has none.
savings=$(awk -F, 'NR > 1 { d = sprintf("%.3f", $9 - $10)
    s = ($6 == "true" || $7 == "true") ? "n/a (out of memory)" : sprintf("%.3f", $2 - $3)
    if ($11 != d || $8 != s) print "row " NR ": " $0 }' "$work/ref/seed001_fragmentation.csv")
check "seed 001: savings computed from the row" '[ -z "$savings" ]'

# A row that runs out of memory: llama2-7b given 16 GiB in its own file.
# Its demand is still the full device's, what the shipped row reserves.
small=$work/small
mkdir -p "$small/scenarios" "$small/results/reference"
cp -R "$src/scenarios/." "$small/scenarios/"
sed 's/^  device = "ascend-910b",$/  device = "ascend-910b", device_memory = "16GiB",/' \
    "$src/scenarios/llama2-7b.lua" >"$small/scenarios/llama2-7b.lua"
ln -s "$src/policies_lua" "$small/"
cp "$src/results/reference/notes.md" "$small/results/reference/"
(cd "$work/cwd" && MEMSIM_DATADIR=$small "$memsim" reproduce --quick --quiet --out "$work/small-ref") \
    >/dev/null 2>&1
small_row=$(grep "^llama2-7b," "$work/small-ref/seed001_fragmentation.csv")
shipped_row=$(grep "^llama2-7b," "$work/ref/seed001_fragmentation.csv")
check "seed 001: a row out of memory says so" \
    '[ "$(echo "$small_row" | cut -d, -f6,7,8)" = "true,true,\"n/a (out of memory)\"" ]'
check "seed 001: its demand is the unlimited device's" \
    '[ "$(echo "$small_row" | cut -d, -f9-11)" = "$(echo "$shipped_row" | cut -d, -f9-11)" ]'

# The seed section: the tables and the notes, spliced between the markers.
check "the section has the seed 001 rows" \
    'grep -q "^| llama2-13b-16dev-seq8192 | " "$work/ref/seed-section.md"'
check "the section ends with the notes" \
    'grep -qF "$(head -1 "$src/results/reference/notes.md")" "$work/ref/seed-section.md"'
check "--doc keeps what is around the section" \
    '[ "$(head -1 "$work/doc.md")" = intro ] && [ "$(tail -1 "$work/doc.md")" = outro ]'
check "--doc replaces the old section" \
    '! grep -q "stale table" "$work/doc.md" && grep -q "^| llama2-7b | " "$work/doc.md"'

# A shipped file missing: a clear error, exit 1, nothing written.
broken=$work/broken
mkdir -p "$broken/scenarios" "$broken/results/reference"
cp -R "$src/scenarios/." "$broken/scenarios/"
rm "$broken/scenarios/llama2-13b-seq8192.lua"
ln -s "$src/policies_lua" "$broken/"
cp "$src/results/reference/notes.md" "$broken/results/reference/"
(cd "$work/cwd" && MEMSIM_DATADIR=$broken "$memsim" reproduce --quick --out "$work/none") \
    >"$work/out" 2>"$work/err"
check "a missing scenario exits 1" '[ $? -eq 1 ]'
check "the error names the missing file" \
    'grep -q "missing $broken/scenarios/llama2-13b-seq8192.lua" "$work/err"'
check "nothing written after the error" '[ ! -e "$work/none" ]'
ms reproduce --bogus >/dev/null 2>"$work/err"
check "an unknown option is a usage error" '[ $? -eq 2 ]'

[ $fails -eq 0 ] || { echo "$fails failed"; exit 1; }
