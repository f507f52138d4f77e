#!/bin/sh
# memsim_optimal against every other shipped policy on the seed 001
# llama2-70B rows as shipped (issue 12: memsim_optimal at least as fast as
# each wherever it fits, and fitting wherever one of them does).
# test_run's memsim_optimal_beats_every_shipped_policy covers every other
# seed scenario; these three take about 15 minutes on 2 cores (smart_swap's
# rescued WARMUP steps most), so they run as `make check-optimal-70b`, not
# in `make check`.  Prints one line per run and exits 1 on a violation.
# MEMSIM_OPTIMAL_SCENARIOS names other shipped scenarios to check instead.
set -u
src=${MEMSIM_SRCDIR:-$(cd "$(dirname "$0")/.." && pwd)}
build=${MEMSIM_BUILDDIR:-$src}
work=$(mktemp -d /tmp/memsim-optimal-XXXXXX)
trap 'rm -rf "$work"' EXIT
fails=0
others="none full_recompute lifetime_pools smart_swap adaptive_memory selective_recompute
        offload_layers swap_attention dtr"

# The slowest stage's step time, or "oom" when a stage ran out of memory
# (a run that stopped there has no step to compare).
step_of() { # SCENARIO POLICY
    out=$work/$1-$2
    (cd "$src" && "$build/memsim" run "scenarios/$1.lua" --policy "$2" \
        --set report.detail=none --out "$out" --quiet --no-advice) >/dev/null 2>&1
    awk -F, 'NR == 1 { for (i = 1; i <= NF; i++) { if ($i == "step_time_ms") c = i
                                                    if ($i == "oom") o = i }; next }
             { if ($o == "true") oom = 1; if ($c + 0 > t) t = $c + 0 }
             END { if (oom || NR < 2) print "oom"; else printf "%.3f\n", t }' "$out/summary.csv"
}

for s in ${MEMSIM_OPTIMAL_SCENARIOS:-llama2-70b llama2-70b-seq6144 llama2-70b-seq8192}; do
    best=$(step_of "$s" memsim_optimal)
    echo "$s memsim_optimal $best"
    for p in $others; do
        t=$(step_of "$s" "$p")
        echo "$s $p $t"
        [ "$t" = oom ] && continue
        if [ "$best" = oom ]; then
            echo "FAIL $s: memsim_optimal runs out of memory, $p fits"
            fails=$((fails + 1))
        elif awk -v b="$best" -v t="$t" 'BEGIN { exit !(b > t * (1 + 1e-9)) }'; then
            echo "FAIL $s: memsim_optimal $best ms, $p $t ms"
            fails=$((fails + 1))
        fi
    done
done
[ $fails -eq 0 ] || { echo "$fails failed"; exit 1; }
echo "ok: memsim_optimal is at least as fast as every shipped policy wherever one fits"
