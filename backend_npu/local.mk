# backend_npu: backend.h on a real device runtime.  runtime.h is the thin
# layer each runtime implements (cuda.c: CUDA runtime + cuBLAS, cuda_fp8.c:
# cuBLASLt's FP8 GEMMs; acl.c:
# Ascend ACL + aclnn), chosen by configure as Redis's ae.c picks
# ae_epoll.c or ae_kqueue.c; device.c, proxy.c, pinned.c and group.c sit on
# it whatever the runtime.  Each runtime builds as its own library so that
# only its file sees the runtime's headers.
noinst_LTLIBRARIES += backend_npu/libms_npu.la
backend_npu_libms_npu_la_SOURCES = backend_npu/runtime.h backend_npu/device.c \
	backend_npu/proxy.c backend_npu/pinned.c backend_npu/group.c
backend_npu_libms_npu_la_LIBADD = -lm
MS_PARTS += backend_npu/libms_npu.la
NPU_RUNTIME_PARTS =
if WITH_CUDA
noinst_LTLIBRARIES += backend_npu/libms_npu_cuda.la
backend_npu_libms_npu_cuda_la_SOURCES = backend_npu/cuda_private.h backend_npu/cuda.c \
	backend_npu/cuda_fp8.c
backend_npu_libms_npu_cuda_la_CPPFLAGS = $(AM_CPPFLAGS) $(CUDA_CPPFLAGS)
# libcudart, libcublas and libcublasLt are dlopened (cuda.c), not linked: CUDA_LIBS is
# only -ldl where the C library lacks dlopen.
backend_npu_libms_npu_cuda_la_LIBADD = $(CUDA_LIBS)
NPU_RUNTIME_PARTS += backend_npu/libms_npu_cuda.la
endif
if WITH_ASCEND
noinst_LTLIBRARIES += backend_npu/libms_npu_acl.la
backend_npu_libms_npu_acl_la_SOURCES = backend_npu/acl.c
backend_npu_libms_npu_acl_la_CPPFLAGS = $(AM_CPPFLAGS) $(ASCEND_CPPFLAGS)
backend_npu_libms_npu_acl_la_LIBADD = $(ASCEND_LIBS)
NPU_RUNTIME_PARTS += backend_npu/libms_npu_acl.la
endif
MS_PARTS += $(NPU_RUNTIME_PARTS)
