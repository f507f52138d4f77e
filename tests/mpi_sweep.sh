#!/bin/sh
# memsim sweep on MPI: `mpirun -np 2 memsim sweep ...` (two local ranks)
# splits the configurations and rank 0 writes a sweep.csv equal, byte for
# byte, to the one a single process writes.  Runs in builds --with-mpi.
set -u
src=${MEMSIM_SRCDIR:-$(cd "$(dirname "$0")/.." && pwd)}
build=${MEMSIM_BUILDDIR:-$src}
work=$(mktemp -d /tmp/memsim-mpi-XXXXXX)
trap 'rm -rf "$work"' EXIT
command -v mpirun >/dev/null 2>&1 || { echo "mpirun not found: install openmpi-bin"; exit 1; }
# CI runs as root in a container: Open MPI refuses that unless told.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
# 12 configurations of a 2-stage pipeline: both ranks get work of both
# kinds (policies, sizes), one of them out of memory.
set -- sweep tests/data/cli/tiny-gpt.lua --set parallel.pipeline_model_parallel_size=2 \
    --set parallel.world_size=4 --vary parallel.micro_batch_size=1,2 \
    --vary model.seq_length=512,2048,65536 --policies none,full_recompute -j 1 --quiet
cd "$src" || exit 1
"$build/memsim" "$@" --out "$work/one" || exit 1
timeout 300 mpirun --oversubscribe -np 2 "$build/memsim" "$@" --out "$work/two" || exit 1
lines=$(wc -l <"$work/one/sweep.csv")
if [ "$lines" -ne 13 ]; then
    echo "FAIL: the single-process sweep.csv has $lines lines, expected 13"
    exit 1
fi
if ! cmp "$work/one/sweep.csv" "$work/two/sweep.csv"; then
    echo "FAIL: the merged sweep.csv differs from the single-process one"
    diff "$work/one/sweep.csv" "$work/two/sweep.csv" | head
    exit 1
fi
echo "ok: 2 ranks merged the same sweep.csv ($lines lines) as one process"
