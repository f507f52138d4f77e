#!/bin/sh
# The house rules of DESIGN.md's Layout, checked on the tree and the built
# library (run by make check; MEMSIM_SRCDIR and MEMSIM_BUILDDIR from the
# test environment):
#  - libmemsim.so exports exactly the functions include/memsim/ declares;
#  - nothing outside backend_mock/, sim/, tests/ and bench/ includes the
#    mock's or the simulator's headers (lib/ reaches devices through
#    backend.h and the registry);
#  - no folder of product code holds more than 15 C files.
set -u
src=${MEMSIM_SRCDIR:-.}
build=${MEMSIM_BUILDDIR:-.}
fail=0

so=$build/.libs/libmemsim.so
if [ ! -f "$so" ]; then
    echo "SKIP: $so not built (static-only build)"
    exit 77
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
nm -D --defined-only "$so" | awk '{print $3}' | sort -u > "$tmp/exported"
# Every function declared at the start of a line (typedefs aside), MS_API or
# not: one that lacks MS_API is hidden and shows as "declared only".
grep -hE '^[A-Za-z]' "$src"/include/memsim/*.h | grep -v '^typedef' |
    grep -oE '\bms_[a-z0-9_]+\(' | tr -d '(' | sort -u > "$tmp/declared"
if ! cmp -s "$tmp/exported" "$tmp/declared"; then
    echo "FAIL: exported symbols differ from include/memsim/ (< exported only, > declared only):"
    diff "$tmp/exported" "$tmp/declared" | grep '^[<>]'
    fail=1
fi
if [ ! -s "$tmp/declared" ]; then
    echo "FAIL: no MS_API declarations found under $src/include/memsim"
    fail=1
fi

# The allocator plugin exports its memsim_* functions and nothing else (it
# carries its own hidden copy of memsim's parts).
plugin=$build/bridge_torch/.libs/libmemsim_alloc.so
if [ -f "$plugin" ]; then
    other=$(nm -D --defined-only "$plugin" | awk '{print $3}' | grep -v '^memsim_')
    if [ -n "$other" ]; then
        echo "FAIL: libmemsim_alloc.so exports more than memsim_*:"
        echo "$other"
        fail=1
    fi
fi

leaks=$(cd "$src" && grep -rlE '#include "(sim/|backend_mock/)' --include='*.c' --include='*.h' \
    include lib cli bridge_torch backend_npu 2>/dev/null)
if [ -n "$leaks" ]; then
    echo "FAIL: these include the mock's or the simulator's headers:"
    echo "$leaks"
    fail=1
fi

for dir in $(cd "$src" && find lib sim backend_mock backend_npu bridge_torch cli -type d 2>/dev/null); do
    n=$(find "$src/$dir" -maxdepth 1 -name '*.c' | wc -l)
    if [ "$n" -gt 15 ]; then
        echo "FAIL: $dir holds $n C files (at most 15: split the concept)"
        fail=1
    fi
done
[ $fail -eq 0 ] && echo "PASS: $(wc -l < "$tmp/declared") exported symbols, all declared; layout rules hold"
exit $fail
