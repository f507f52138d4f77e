#!/bin/sh
# Does the simulator's state repeat from one micro-batch to the next inside a
# step?  Intra-step fast-forward (issue 13) can skip only a stretch whose
# starting state equals an earlier one, so this measures the part of the state
# that decides it: at the first op of every unit (one model chunk's forward or
# backward of one micro-batch) each stage prints a hash of its allocator's
# block layout (every block's place, size and whether allocated), and the
# summary says, stage by stage, how many unit starts found a layout the stage
# had at an earlier one.  A state whose layout differs differs, so a stage
# whose layout never repeats never repeats, and neither does its group.
#
# The probe is a patch (bench/layout_period.patch), not product code: it is
# applied to a scratch clone of the commit it was written against, built there
# (about a minute), and the run goes through that build.
#
# usage: bench/layout_period.sh SCENARIO [KEY=VALUE...]   (steps=1 is added)
# With LAYOUT_PROBE_BLOCKS=STAGE in the environment, every block of that stage
# at every unit start goes to ./layout_blocks.txt, one a line: "layout_block
# STAGE OP SEGMENT ADDR SIZE ALLOCATED" (OP: the unit's first op).
set -eu
[ $# -ge 1 ] || { echo "usage: $0 SCENARIO [KEY=VALUE...]" >&2; exit 2; }
top=$(cd "$(dirname "$0")/.." && pwd)
base=a6db238 # the commit bench/layout_period.patch applies to
work=${TMPDIR:-/tmp}/memsim-layout-probe
if ! cmp -s "$top/bench/layout_period.patch" "$work/.probe.patch"; then
    rm -rf "$work"
    git clone -q --no-checkout "$top" "$work"
    git -C "$work" checkout -q --detach "$base"
    git -C "$work" apply "$top/bench/layout_period.patch"
    (cd "$work" && autoreconf -fi >/dev/null 2>&1 && ./configure -q >/dev/null &&
        make -j"$(nproc 2>/dev/null || echo 2)" >/dev/null)
    cp "$top/bench/layout_period.patch" "$work/.probe.patch"
fi
scenario=$1
shift
sets=""
for kv in "$@" steps=1 report.detail=none; do sets="$sets --set $kv"; done
case $scenario in /*) ;; *) scenario=$PWD/$scenario ;; esac
log=$(mktemp)
trap 'rm -rf "$log" "$log.err" "$log.out"' EXIT
rc=0
# shellcheck disable=SC2086
"$work/memsim" run "$scenario" $sets --quiet --no-advice -o "$log.out" >/dev/null 2>"$log.err" || rc=$?
if [ "$rc" -ne 0 ]; then
    grep -v '^layout_' "$log.err" >&2
    echo "$0: memsim run failed (exit status $rc)" >&2
    exit 1
fi
grep '^layout_probe ' "$log.err" >"$log" || true
if [ -n "${LAYOUT_PROBE_BLOCKS:-}" ]; then
    grep '^layout_block ' "$log.err" >layout_blocks.txt || true
    echo "blocks of stage $LAYOUT_PROBE_BLOCKS: layout_blocks.txt" >&2
fi
[ -s "$log" ] || { echo "$0: the run printed no probe lines (one micro-batch?)" >&2; exit 1; }
awk '
{ dev = $3; k = n[dev]++
  key = $8 "@" dev
  if (key in last) { seen[dev]++; gap[dev "@" (k - last[key])]++ } else distinct[dev]++
  last[key] = k }
END {
  for (g in gap) { split(g, p, "@"); if (gap[g] > best[p[1]]) { best[p[1]] = gap[g]; period[p[1]] = p[2] } }
  printf "%-6s %-12s %-16s %-22s %s\n", "stage", "unit starts", "distinct layouts",
         "layout seen before", "commonest distance (unit starts)"
  for (d in n) stages++
  for (d = 0; d < stages; d++) {
    printf "%-6d %-12d %-16d %-22d %s\n", d, n[d], distinct[d], seen[d] + 0,
           seen[d] ? period[d] " (" best[d] " times)" : "-"
    if (!seen[d]) never++
  }
  printf "stages whose block layout never repeats inside the step: %d of %d\n", never, stages
}' "$log"
