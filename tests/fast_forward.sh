#!/bin/bash
# Fast-forward's contract (issue 13): every report is the same bytes with and
# without it.  Each shipped scenario runs 5 steps (its caches settle in the
# first one or two, so the last ones repeat and are skipped) twice, once with
# --no-fast-forward, and the two output folders, stdout and exit statuses
# must be identical.
#
#   tests/fast_forward.sh          every shipped scenario under its own policy
#                                  (make check)
#   tests/fast_forward.sh --all    every shipped scenario under every shipped
#                                  policy too (make check-fast-forward; .ci/run)
#
# The 70B scenarios run 8 or 16 micro-batches instead of 512
# (parallel.global_batch_size=16): the same model, parallelism and schedule
# shape at a 32nd of the cost; bench/README.md times them in full.
set -u
src=${MEMSIM_SRCDIR:-$(cd "$(dirname "$0")/.." && pwd)}
build=${MEMSIM_BUILDDIR:-$src}
memsim=$build/memsim
work=$(mktemp -d /tmp/memsim-ff-XXXXXX)
trap 'rm -rf "$work"' EXIT
jobs=$(nproc 2>/dev/null || echo 2)

pairs() {
    for s in "$src"/scenarios/*.lua; do
        echo "$s scenario"
        [ "${1:-}" = --all ] || continue
        for p in "$src"/policies_lua/*.lua; do echo "$s $(basename "$p" .lua)"; done
    done
}

# One pair, both ways: prints "ok ..." or "FAIL ..." with the first difference.
compare_pair() {
    s=$1 p=$2
    name=$(basename "$s" .lua)-$p
    set -- --set steps=5 --no-advice --quiet
    [ "$p" = scenario ] || set -- "$@" --policy "$p"
    case $s in *70b*) set -- "$@" --set parallel.global_batch_size=16 ;; esac
    for mode in ff noff; do
        flag=
        [ $mode = noff ] && flag=--no-fast-forward
        out=$work/$mode/$name
        mkdir -p "$work/$mode"
        "$memsim" run "$s" "$@" $flag --out "$out" >"$out.stdout" 2>"$out.stderr"
        echo $? >"$out.rc"
        # A sanitizer build's runtime warns once, with its process id, that it
        # cannot follow the mock's coroutines: the sanitizer's line, not memsim's.
        sed -i -e "s|$out|OUT|g" -e '/^==[0-9]*==WARNING: ASan doesn.t fully support makecontext/d' \
            "$out.stdout" "$out.stderr"
    done
    a=$work/ff/$name b=$work/noff/$name
    if ! cmp -s "$a.rc" "$b.rc" || ! cmp -s "$a.stdout" "$b.stdout" ||
        ! cmp -s "$a.stderr" "$b.stderr"; then
        echo "FAIL $name: exit status or output differs (rc $(cat "$a.rc") vs $(cat "$b.rc"))"
    elif [ -d "$a" ] || [ -d "$b" ]; then
        if d=$(diff -rq "$a" "$b" 2>&1); then
            echo "ok   $name (rc $(cat "$a.rc"))"
        else
            echo "FAIL $name: $(echo "$d" | head -3)"
        fi
    else
        echo "ok   $name (rc $(cat "$a.rc"), no reports either way)"
    fi
    rm -rf "$a" "$b"
}

export memsim work
export -f compare_pair
pairs "${1:-}" | xargs -P "$jobs" -L 1 bash -c 'compare_pair "$0" "$1"' >"$work/results"
sort "$work/results"
n=$(grep -c . "$work/results")
fails=$(grep -c '^FAIL' "$work/results")
echo "fast-forward: $n scenario x policy pairs, $fails differ"
[ "$n" -gt 0 ] && [ "$fails" -eq 0 ]
