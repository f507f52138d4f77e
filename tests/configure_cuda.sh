#!/bin/sh
# configure's CUDA switches, as a user meets them (issue 9): the toolkit is
# found by default (nvcc on PATH, else /usr/local/cuda), --with-cuda=DIR uses
# DIR, --without-cuda builds without it, and a --with-cuda that finds no
# toolkit stops with an error that says what is missing.  Each case runs
# configure in a scratch copy of what configure reads (a configured source
# tree refuses a second build directory) and checks config.h for what
# lib/backend/registry.c tests (MS_WITH_CUDA) and what backend_npu/cuda.c
# loads (MS_CUDART_SONAME, MS_CUBLAS_SONAME, MS_CUBLASLT_SONAME from
# MS_CUDA_LIBDIR).
#
# Usage: tests/configure_cuda.sh [SRCDIR]   (SRCDIR must hold a generated
# configure, i.e. after ./bootstrap or autoreconf).  CI runs it (.ci/run);
# on a machine with the CUDA toolkit, configure not finding it is a failure.
set -eu
src=$(cd "${1:-$(dirname "$0")/..}" && pwd)
tmp=$(mktemp -d /tmp/memsim-configure-cuda-XXXXXX)
trap 'rm -rf "$tmp"' EXIT
fail=0

# The toolkit a default configure must find, if this machine has one.  The
# nvcc on PATH may be a wrapper script far from its toolkit (Debian-style
# /usr/local/bin/nvcc that execs /usr/local/cuda-13.0/bin/nvcc), so the
# toolkit is the folder that holds the headers, not nvcc's parent.
toolkit=""
real_nvcc=""
for dir in "$(dirname "$(dirname "$(command -v nvcc || echo /none/bin/nvcc)")")" \
           /usr/local/cuda; do
    if [ -f "$dir/include/cuda_runtime_api.h" ] && [ -x "$dir/bin/nvcc" ]; then
        toolkit=$(cd "$dir" && pwd)
        real_nvcc=$toolkit/bin/nvcc
        break
    fi
done

# run_configure NAME PATH_FOR_CONFIGURE ARGS...: configure in a fresh copy;
# leaves its exit status in $tmp/NAME.rc and its output in $tmp/NAME.log.
run_configure() {
    name=$1 path=$2
    shift 2
    dir=$tmp/$name
    mkdir -p "$dir/cli"
    (cd "$src" && cp -p configure config.h.in Makefile.in memsim.pc.in "$dir/" &&
        cp -pR build-aux "$dir/" && cp -p cli/main.c "$dir/cli/")
    rc=0
    (cd "$dir" && PATH=$path ./configure "$@") >"$tmp/$name.log" 2>&1 || rc=$?
    echo "$rc" >"$tmp/$name.rc"
}

with_cuda() { grep -q '^#define MS_WITH_CUDA 1' "$tmp/$1/config.h"; }

# defined NAME MACRO: the string config.h defines MACRO to.
defined() { sed -n "s/^#define $2 \"\(.*\)\"\$/\1/p" "$tmp/$1/config.h"; }

# loads_at_run_time NAME: the CUDA libraries are not linked (cuda.c loads
# them with dlopen on the first --backend cuda): CUDA_LIBS has no -lcudart,
# -lcublas or -lcublasLt, and config.h names their versioned SONAMEs, files
# of the lib directory it records.
loads_at_run_time() {
    libdir=$(defined "$1" MS_CUDA_LIBDIR)
    cudart=$(defined "$1" MS_CUDART_SONAME)
    cublas=$(defined "$1" MS_CUBLAS_SONAME)
    cublaslt=$(defined "$1" MS_CUBLASLT_SONAME)
    ! grep -q '^CUDA_LIBS = .*-lcu' "$tmp/$1/Makefile" &&
        case $cudart in libcudart.so.[0-9]*) ;; *) false ;; esac &&
        case $cublas in libcublas.so.[0-9]*) ;; *) false ;; esac &&
        case $cublaslt in libcublasLt.so.[0-9]*) ;; *) false ;; esac &&
        [ -e "$libdir/$cudart" ] && [ -e "$libdir/$cublas" ] && [ -e "$libdir/$cublaslt" ]
}

# cppflags_hold_toolkit NAME: the include folder configure chose (as a
# system folder: its headers are not held to -Werror) holds the CUDA
# runtime's header.
cppflags_hold_toolkit() {
    inc=$(sed -n 's/^CUDA_CPPFLAGS = -isystem \([^ ]*\).*/\1/p' "$tmp/$1/Makefile")
    [ -n "$inc" ] && [ -f "$inc/cuda_runtime_api.h" ]
}

check() {
    if eval "$2"; then
        echo "ok: $1"
    else
        echo "FAIL: $1 (configure output: $tmp/$3.log)"
        sed 's/^/    /' "$tmp/$3.log" | tail -n 15
        fail=1
    fi
}

# A PATH without nvcc, so that only the argument can point at a toolkit.
bare_path=/usr/bin:/bin

run_configure default "$PATH"
if [ -n "$toolkit" ]; then
    check "default configure finds the CUDA toolkit (headers under its CUDA_CPPFLAGS)" \
        '[ "$(cat $tmp/default.rc)" = 0 ] && with_cuda default && cppflags_hold_toolkit default' default
    # What CI's machine has: nvcc on PATH is a wrapper script whose folder
    # holds no toolkit; configure must still find one (asking nvcc, then
    # /usr/local/cuda) rather than give up on the wrapper's parent.
    mkdir -p "$tmp/wrapper/bin"
    printf '#!/bin/sh\nexec %s "$@"\n' "$real_nvcc" >"$tmp/wrapper/bin/nvcc"
    chmod +x "$tmp/wrapper/bin/nvcc"
    run_configure wrapper "$tmp/wrapper/bin:$bare_path"
    check "a wrapper nvcc on PATH, far from its toolkit, still finds the toolkit" \
        '[ "$(cat $tmp/wrapper.rc)" = 0 ] && with_cuda wrapper && cppflags_hold_toolkit wrapper &&
         loads_at_run_time wrapper' wrapper
    check "the CUDA libraries are loaded at run time: SONAMEs and lib directory recorded, not linked" \
        'loads_at_run_time default' default
    run_configure with_dir "$bare_path" --with-cuda="$toolkit"
    check "--with-cuda=$toolkit builds the CUDA backend with nvcc off PATH" \
        '[ "$(cat $tmp/with_dir.rc)" = 0 ] && with_cuda with_dir &&
         grep -q "^CUDA_CPPFLAGS = -isystem $toolkit/include" $tmp/with_dir/Makefile &&
         loads_at_run_time with_dir && defined with_dir MS_CUDA_LIBDIR | grep -q "^$toolkit/"' \
        with_dir
else
    check "default configure without a CUDA toolkit builds without it, saying so" \
        '[ "$(cat $tmp/default.rc)" = 0 ] && ! with_cuda default &&
         grep -q "CUDA toolkit not found: building without the cuda backend" $tmp/default.log' \
        default
fi

run_configure without "$PATH" --without-cuda
check "--without-cuda builds without the CUDA backend" \
    '[ "$(cat $tmp/without.rc)" = 0 ] && ! with_cuda without &&
     ! grep -q "^CUDA_LIBS = ." $tmp/without/Makefile' without

run_configure missing "$bare_path" --with-cuda=/nonexistent/cuda
check "--with-cuda=/nonexistent/cuda stops with an error naming the directory" \
    '[ "$(cat $tmp/missing.rc)" != 0 ] &&
     grep -q "error: --with-cuda: no CUDA toolkit with cuda_runtime_api.h" $tmp/missing.log &&
     grep -q "/nonexistent/cuda" $tmp/missing.log' missing

if [ "$fail" -ne 0 ]; then
    trap - EXIT
    echo "configure_cuda: failures above; scratch trees kept in $tmp"
fi
exit "$fail"
