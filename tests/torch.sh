#!/bin/sh
# memsim_torch's tests on CPU tensors (tests/python/test_memsim_torch.py)
# with a Python that has torch: $PYTHON, else Debian's /usr/bin/python3
# (bootstrap installs python3-torch), else python3.  Without one the test
# skips (77), unless MEMSIM_REQUIRE_TORCH=1 (CI), where that is a failure.
set -u
src=${MEMSIM_SRCDIR:-.}
build=${MEMSIM_BUILDDIR:-.}
# A sanitizer build's libmemsim needs the ASan runtime loaded first, which
# a Python process has not: the hooks are tested in the plain build (.ci/run
# runs both).
if [ -f "$build/.libs/libmemsim.so" ] && ldd "$build/.libs/libmemsim.so" 2>/dev/null | grep -q libasan; then
    echo "SKIP: $build/.libs/libmemsim.so is built with AddressSanitizer; Python cannot load it"
    exit 77
fi
py=""
for cand in ${PYTHON:-} /usr/bin/python3 python3; do
    if "$cand" -c 'import torch.autograd.graph as g; g.saved_tensors_hooks' >/dev/null 2>&1; then
        py=$cand
        break
    fi
done
if [ -z "$py" ]; then
    echo "no Python with torch (apt-get install python3-torch)"
    [ "${MEMSIM_REQUIRE_TORCH:-0}" = 1 ] && exit 1
    exit 77
fi
if [ ! -f "$build/.libs/libmemsim.so" ]; then
    echo "SKIP: $build/.libs/libmemsim.so not built (static-only build)"
    exit 77
fi
export MEMSIM_LIB="$build/.libs/libmemsim.so"
export PYTHONPATH="$src/bridge_torch/python${PYTHONPATH:+:$PYTHONPATH}"
export MEMSIM_SRCDIR="$src"
"$py" -c 'import torch; print("torch", torch.__version__)'
exec "$py" "$src/tests/python/test_memsim_torch.py"
