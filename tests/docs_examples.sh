#!/bin/sh
# Every example command of the documentation runs and exits 0: the fenced
# code blocks of README.md, docs/*.md and bench/README.md, the commands
# quoted inline there (`memsim run scenarios/...`), the Examples of each
# `memsim COMMAND --help` and the EXAMPLES of the man page.
#
# To keep make check short, a run simulates one step (--set steps=1 unless
# the example sets steps), the two 70B scenarios a smaller global batch,
# benchmarks fewer pairs and one repeat; each change is printed.
# MEMSIM_DOCS_AS_WRITTEN=1 runs the examples exactly as written.  Names that
# stand for the user's own files (my-scenario.lua, my_policy.lua,
# snapshot.pickle, the alloc.csv a GPU job writes through libmemsim_alloc)
# get shipped ones; paths under /tmp go to a scratch
# folder; the public PyTorch snapshots outside the repository
# (../shared/traces, or $MEMSIM_TRACES) are used where present, and the
# examples that need them are skipped, and said so, where not.  A
# synopsis (a line with [options] or an UPPER-CASE placeholder) is no
# example.
set -u
src=${MEMSIM_SRCDIR:-$(cd "$(dirname "$0")/.." && pwd)}
build=${MEMSIM_BUILDDIR:-$src}
traces=${MEMSIM_TRACES:-$src/../shared/traces}
as_written=${MEMSIM_DOCS_AS_WRITTEN:-0}
work=$(mktemp -d /tmp/memsim-docs-XXXXXX)
trap 'rm -rf "$work"' EXIT
# Run where files may be written (distcheck's source tree is read-only),
# with the source tree's scenarios, policies and test data at hand.
run_dir=$work/cwd
mkdir -p "$run_dir/tmp" && ln -s "$src/scenarios" "$src/tests" "$src/policies_lua" \
    "$src/bridge_torch" "$run_dir/"
tab=$(printf '\t')
mpi=no
grep -q '^#define HAVE_MPI 1' "$build/config.h" 2>/dev/null && mpi=yes

# The examples, one a line: "SOURCE<TAB>COMMAND".
extract() {
    for path in "$src/README.md" "$src"/docs/*.md "$src/bench/README.md"; do
        awk -v F="${path#"$src"/}" '
            /^ *```/ { fenced = !fenced; next }
            fenced {
                line = $0
                while (line ~ /\\$/ && (getline more) > 0) {
                    sub(/\\$/, "", line); line = line " " more
                }
                print F ":" FNR "\t" line
                next
            }
            {
                rest = $0
                while (match(rest, /`(\.\/)?memsim [a-z]+ [^`]*`/)) {
                    print F ":" FNR "\t" substr(rest, RSTART + 1, RLENGTH - 2)
                    rest = substr(rest, RSTART + RLENGTH)
                }
            }' "$path"
    done
    for cmd in run compare sweep replay list; do
        "$build/memsim" "$cmd" --help 2>&1 | awk -v F="memsim $cmd --help" '
            /^Examples:/ { on = 1; next }
            on && /^ *$/ { on = 0 }
            on {
                line = $0
                while (line ~ /\\$/ && (getline more) > 0) { sub(/\\$/, "", line); line = line " " more }
                print F "\t" line
            }'
    done
    awk '/^\.SH EXAMPLES/ { on = 1; next } on && /^\.fi/ { on = 0 }
         on && !/^\./ {
             line = $0
             while (line ~ /\\e$/ && (getline more) > 0) { sub(/\\e$/, "", line); line = line " " more }
             gsub(/\\-/, "-", line)
             print "memsim.1\t" line
         }' "$src/cli/memsim.1"
}

# Keep the commands: memsim, the benchmarks, mpirun memsim; drop prompts,
# trailing comments, and what comes before `&&` when that is no example
# (./bootstrap).
extract | sed -e 's/\t *\$ /\t/' -e 's/\t */\t/' -e 's/  *# .*$//' \
    -e 's/\t\.\/bootstrap && /\t/' \
    | grep -E "$tab"'((\./)?memsim (run|compare|sweep|replay|list)( |$)|\./bench/bench_[a-z]+ |mpirun )' \
    | grep -vE "$tab"'.*(\[|\.\.\.|\b[A-Z][A-Z_]{2,}\b)' >"$work/examples"

fails=0
cases=0
skips=0

# The command of one example, made runnable here; "skip: WHY" when it
# cannot run in this checkout.
adapt() {
    # Output paths under /tmp go to the scratch folder (before any path of
    # this checkout, which may itself be under /tmp, is put in).
    cmd=$(printf ' %s \n' "$1" | sed 's# /tmp/# tmp/#g')
    case $cmd in
    *" ../shared/traces/"* | *" pytorch-"*".pickle "*)
        name=$(printf '%s\n' "$cmd" | sed -n 's/.* \(\.\.\/shared\/traces\/\)\{0,1\}\(pytorch-[a-z0-9-]*\.pickle\) .*/\2/p')
        [ -f "$traces/$name" ] || { echo "skip: $name is not in this checkout ($traces)"; return; }
        cmd=$(printf '%s\n' "$cmd" | sed "s# \(\.\./shared/traces/\)\{0,1\}$name # $traces/$name #g") ;;
    esac
    cmd=$(printf '%s\n' "$cmd" | sed \
        -e 's# \(\./\)\{0,1\}memsim # '"$build"'/memsim #g' \
        -e 's# \./bench/# '"$build"'/bench/#g' \
        -e 's# my-scenario\.lua # tests/data/cli/tiny-gpt.lua #g' \
        -e 's# scenario\.lua # tests/data/cli/tiny-gpt.lua #g' \
        -e 's# \(\./\|path/to/\)my_policy\.lua # policies_lua/full_recompute.lua #g' \
        -e 's# snapshot\.pickle # tests/data/traces/small.pickle #g' \
        -e 's# trace\.pickle # tests/data/traces/small.pickle #g' \
        -e 's# \([a-z-]*/\)\{0,1\}\(memsim-\)\{0,1\}alloc\.csv # tests/data/traces/basic.csv #g')
    if [ "$as_written" != 1 ]; then
        case $cmd in
        *"/memsim run "* | *"/memsim compare "* | *"/memsim sweep "*)
            case $cmd in *" steps="*) ;; *) cmd="$cmd --set steps=1" ;; esac
            case $cmd in
            *" scenarios/llama2-70b.lua "*) cmd="$cmd --set parallel.global_batch_size=16" ;;
            *" scenarios/llama3-70b.lua "*) cmd="$cmd --set parallel.global_batch_size=8" ;;
            esac ;;
        esac
        cmd=$(printf '%s\n' "$cmd" | sed -e 's#\(bench_alloc [a-z]* \)5000000 #\120000 #' \
            -e 's# --repeat [0-9]*# --repeat 1#')
        case $cmd in
        *"mpirun "*) cmd=$(printf '%s\n' "$cmd" | sed 's#mpirun -np [0-9]*#mpirun --oversubscribe -np 2#') ;;
        esac
    fi
    case $cmd in
    *"mpirun "*) [ "$mpi" = yes ] || { echo "skip: built without --with-mpi"; return; } ;;
    *" --backend cuda"* | *" --backend npu"*)
        [ "${MEMSIM_DOCS_DEVICE:-0}" = 1 ] ||
            { echo "skip: needs a real device (MEMSIM_DOCS_DEVICE=1 runs it)"; return; } ;;
    *"/bench/"*) [ -x "$build/bench/bench_run" ] || { echo "skip: benchmarks not built"; return; } ;;
    esac
    echo "$cmd"
}

# CI runs as root in a container: Open MPI refuses that unless told.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
while IFS="$tab" read -r where example; do
    cases=$((cases + 1))
    cmd=$(adapt "$example")
    case $cmd in
    skip:*)
        echo "skip $where: $example (${cmd#skip: })"
        skips=$((skips + 1))
        continue ;;
    esac
    (cd "$run_dir" && eval "$cmd") >"$work/out" 2>&1 </dev/null
    rc=$?
    if [ $rc -ne 0 ]; then
        echo "FAIL $where: $example"
        echo "     ran: $cmd"
        echo "     exit status $rc:"
        tail -n 5 "$work/out" | sed 's/^/     /'
        fails=$((fails + 1))
    else
        echo "ok   $where: $example"
        echo "     ran: $cmd"
    fi
done <"$work/examples"

echo "$cases examples, $fails failed, $skips skipped"
# Each source gives examples: an extraction that finds none is broken.
for where in README.md docs/ bench/README.md "--help" memsim.1; do
    if ! grep -qF -- "$where" "$work/examples"; then
        echo "FAIL: no example found in $where: is the extraction broken?"
        fails=$((fails + 1))
    fi
done
[ $fails -eq 0 ]
