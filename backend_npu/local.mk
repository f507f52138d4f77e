# backend_npu: backend.h on a real device runtime (runtime.h, one file per
# runtime: CUDA, Ascend ACL), built where configure found one.
