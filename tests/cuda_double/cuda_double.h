/* The CUDA test double's control and accounting (tests only): how many
 * devices it pretends to have, their memory and compute capability, and
 * what the code under test did with them, so that a test can check that
 * every byte, stream, event, handle and descriptor it made was given back.
 *
 * backend_npu/cuda.c loads the double with dlopen(RTLD_LOCAL) in place of
 * libcudart, libcublas and libcublasLt, so a test does not link it: it
 * reaches these functions with dlopen of the same path (the loader hands
 * back the instance already loaded) and dlsym, through the _fn types.
 * Nothing here needs the CUDA headers. */
#ifndef MEMSIM_TEST_CUDA_DOUBLE_H
#define MEMSIM_TEST_CUDA_DOUBLE_H

#include <stdint.h>

/* GEMMs by the type of their operands: cublasGemmStridedBatchedEx's
 * three, and cublasLtMatmul's FP8 (E4M3) ones. */
typedef enum cuda_double_type {
    CUDA_DOUBLE_FP32,
    CUDA_DOUBLE_FP16,
    CUDA_DOUBLE_BF16,
    CUDA_DOUBLE_FP8,
    CUDA_DOUBLE_TYPES
} cuda_double_type;

/* cudaMemcpyKind's values for the three copies the double runs. */
typedef enum cuda_double_copy {
    CUDA_DOUBLE_H2D = 1,
    CUDA_DOUBLE_D2H = 2,
    CUDA_DOUBLE_D2D = 3
} cuda_double_copy;

typedef struct cuda_double_stats {
    /* Live now. */
    uint64_t device_bytes, device_allocs; /* all devices */
    uint64_t host_bytes, host_allocs;     /* cudaHostAlloc's */
    uint64_t streams, events;
    uint64_t blas_handles, lt_handles;
    uint64_t lt_descs, lt_layouts, lt_prefs;
    /* Since the last cuda_double_configure. */
    uint64_t host_allocs_made;                /* cudaHostAlloc calls that succeeded */
    uint64_t gemms[CUDA_DOUBLE_TYPES];        /* run */
    double flops[CUDA_DOUBLE_TYPES];          /* 2 m n k batch summed over them */
    uint64_t blas_own_workspace;              /* cuBLAS GEMMs with no workspace set */
    uint64_t lt_heuristics;                   /* cublasLtMatmulAlgoGetHeuristic calls */
    uint64_t bytes_h2d, bytes_d2h, bytes_d2d; /* copied */
    uint64_t faults_fired;                    /* cuda_double_fail_next's */
    uint64_t rejected;                        /* calls refused for bad arguments */
    char why[256];                            /* the last refusal: call and reason */
} cuda_double_stats;

/* Pretend to have n_devices devices (0: none; cudaGetDeviceCount says
 * cudaErrorNoDevice) of hbm_bytes each, of compute capability
 * cc_major.cc_minor (FP8 cuBLASLt matmuls need 8.9).  Clears the counters
 * of what happened, the copy delays and any armed fault; what is live
 * stays counted. */
void cuda_double_configure(int n_devices, uint64_t hbm_bytes, int cc_major, int cc_minor);
cuda_double_stats cuda_double_get_stats(void);
/* Make every stream pause a random 0 .. max_us microseconds before each of
 * its tasks (0: none), each stream with its own sequence from seed, so that
 * work on different streams interleaves in orders a loaded machine shows
 * only now and then.  CUDA_DOUBLE_JITTER=MAX_US[:SEED] sets it at load. */
void cuda_double_set_jitter(unsigned max_us, unsigned seed);
/* Make every copy of one kind wait us microseconds on its stream before it
 * moves its bytes, as one direction of a busy copy engine does (0: none). */
void cuda_double_set_copy_delay(cuda_double_copy kind, unsigned us);
/* The next call of the entry point named (its symbol: "cublasCreate_v2")
 * fails as out of memory (cudaErrorMemoryAllocation,
 * CUBLAS_STATUS_ALLOC_FAILED); NULL or "" disarms it. */
void cuda_double_fail_next(const char *symbol);

typedef void cuda_double_configure_fn(int, uint64_t, int, int);
typedef cuda_double_stats cuda_double_get_stats_fn(void);
typedef void cuda_double_set_jitter_fn(unsigned, unsigned);
typedef void cuda_double_set_copy_delay_fn(cuda_double_copy, unsigned);
typedef void cuda_double_fail_next_fn(const char *);

#endif
