#!/bin/sh
# Hostile input: every case must stop with a clear error (the exit status and
# message asserted here) within 20 seconds and 2 GiB of address space
# (ulimit -v; skipped when the build is sanitized, whose shadow memory needs
# more), never hang, never crash.  Fixtures: tests/data/hostile/.
set -u
src=${MEMSIM_SRCDIR:-$(cd "$(dirname "$0")/.." && pwd)}
build=${MEMSIM_BUILDDIR:-$src}
memsim=$build/memsim
work=$(mktemp -d /tmp/memsim-hostile-XXXXXX)
trap 'rm -rf "$work"' EXIT
# Run where files may be written (distcheck's source tree is read-only),
# with the source tree's scenarios and test data at hand.
run_dir=$work/cwd
mkdir -p "$run_dir" && ln -s "$src/scenarios" "$src/tests" "$run_dir/"
h=tests/data/hostile
tiny=tests/data/cli/tiny-gpt.lua
fails=0
cases=0

# 2 GiB of address space, if this build can live in it (ASan cannot).
mem_kb=2097152
if ! (ulimit -v $mem_kb && "$memsim" --version) >/dev/null 2>&1; then
    echo "note: sanitized build, no address-space limit (the time limit still holds)"
    mem_kb=unlimited
fi

# check NAME WANT_STATUS 'WANTED TEXT' ARGS...
check() {
    name=$1 want=$2 text=$3
    shift 3
    cases=$((cases + 1))
    start=$(date +%s)
    (cd "$run_dir" && ulimit -v $mem_kb && exec timeout 20 "$memsim" "$@") \
        >"$work/out" 2>"$work/err"
    rc=$?
    secs=$(($(date +%s) - start))
    if [ $rc -eq 124 ]; then
        echo "FAIL $name: still running after 20 s"
        fails=$((fails + 1))
    elif [ $rc -ne "$want" ]; then
        echo "FAIL $name: exit status $rc, expected $want"
        sed 's/^/    /' "$work/err" | head -5
        fails=$((fails + 1))
    elif ! grep -qF -- "$text" "$work/out" "$work/err"; then
        echo "FAIL $name: no '$text' in its output:"
        sed 's/^/    /' "$work/err" "$work/out" | head -5
        fails=$((fails + 1))
    else
        echo "ok   $name (${secs} s)"
    fi
}

# Finalizers run with Lua's hook off: refused in every kind of script.
check policy-finalizer 1 "a metatable with __gc (a finalizer) is not allowed" \
    run $tiny --policy $h/gc_policy.lua --out "$work/o" --quiet
check scenario-finalizer 1 "gc_scenario.lua:10: setmetatable: a metatable with __gc" \
    run $h/gc_scenario.lua --out "$work/o" --quiet
check device-finalizer 1 "devices/gc-device.lua:1: setmetatable: a metatable with __gc" \
    run $h/gc_device.lua --out "$work/o" --quiet
# __close and a loop: the budget still stops both.
check close-runaway 1 "runaway_gc_close.lua:5: instruction budget of 200000000 exceeded" \
    run $tiny --policy $h/runaway_gc_close.lua --out "$work/o" --quiet
check scenario-runaway 1 "instruction budget" run tests/data/scenarios/runaway.lua --quiet
check memory-bomb 1 "memory_bomb.lua: memory cap of 64 MiB exceeded" \
    run $h/memory_bomb.lua --quiet
# Work inside one C call (pattern matching, regex compilation).
check pattern-bomb 1 "could take 4e+10 steps (repetitions backtrack): refused" \
    run $h/pattern_bomb.lua --quiet
check regex-bomb 1 "its bounded repetitions ({m,n}) multiply to more than 1024" \
    run $h/regex_bomb.lua --quiet
# The same verdict on every run, whatever order next() visits the pools in.
for i in 1 2 3; do
    check pool-table-$i 1 "pools: keys must be pool names (strings); 1 key is not" \
        run $tiny --policy $h/pool_table.lua --out "$work/o" --quiet
done
check swap-twice 1 "swapped twice: first at tests/data/hostile/swap_twice.lua:6, again at tests/data/hostile/swap_twice.lua:7" \
    run $tiny --policy $h/swap_twice.lua --out "$work/o" --quiet

# Replay input that is no snapshot says what it is.
: >"$work/empty.pickle"
printf '\023\067\300\336\001\002\003\004\005' >"$work/random.pickle"
printf '{"segments": [], "device_traces": []}\n' >"$work/trace.pickle"
cp "$work/trace.pickle" "$work/trace.json"
check replay-empty 1 "not a pickle: the input is empty" replay "$work/empty.pickle"
check replay-random 1 "not a pickle: a pickle starts with the PROTO opcode 0x80, this input with the bytes 13 37 c0 de" \
    replay "$work/random.pickle"
check replay-json-named-pickle 1 "not a pickle: the input looks like JSON" \
    replay "$work/trace.pickle"
check replay-json 1 "the file looks like JSON (it starts with '{')" replay "$work/trace.json"
# A user's empty_cache() is not the allocator's retry, capacity or not.
check replay-empty-cache 0 "agreement: 100.00% (3 of 3" \
    replay tests/data/traces/empty-cache.csv --capacity 80G
check replay-assumed-capacity 0 "(assumed: the trace has no oom that tells the device's capacity" \
    replay tests/data/traces/basic.csv --compare expandable_segments:True

# A run that runs out of memory is no success.
check oom-exit-status 3 "the run ran out of memory (exit status 3)" \
    run scenarios/llama2-smartswap-tp1.lua --policy none --no-advice --out "$work/oom" --quiet

echo "$cases cases, $fails failed"
[ $fails -eq 0 ]
