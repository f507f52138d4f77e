/* A sweep across MPI ranks (cli/sweep.h): Open MPI, the engine HPC clusters
 * already schedule (DESIGN.md, "scale-out").  Built --with-mpi; launched by
 * mpirun (Open MPI sets OMPI_COMM_WORLD_SIZE, PMIx sets PMIX_RANK) each rank
 * runs its share of the configurations and rank 0 collects the results.
 * A build without MPI, or a process not started by mpirun, is one rank. */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "sweep.h"

#ifdef HAVE_MPI
#include <mpi.h>

static bool launched_by_mpirun(void)
{
    return getenv("OMPI_COMM_WORLD_SIZE") != NULL || getenv("PMIX_RANK") != NULL ||
           getenv("PMI_SIZE") != NULL;
}

ms_status cli_mpi_init(cli_mpi *m, ms_diag *d)
{
    *m = (cli_mpi){.rank = 0, .size = 1};
    if (!launched_by_mpirun())
        return MS_OK;
    if (MPI_Init(NULL, NULL) != MPI_SUCCESS)
        return ms_diag_set(d, MS_EIO, "MPI_Init failed");
    m->active = true;
    MPI_Comm_rank(MPI_COMM_WORLD, &m->rank);
    MPI_Comm_size(MPI_COMM_WORLD, &m->size);
    return MS_OK;
}

/* Rank r's configurations are i = r, r + size, ...: it sends their results
 * in that order, as bytes (cli_result is a plain struct and every rank runs
 * the same build). */
ms_status cli_mpi_gather(const cli_mpi *m, ms_status local, cli_result *res, size_t n, ms_diag *d)
{
    if (!m->active || m->size == 1)
        return local;
    size_t per = n / (size_t)m->size + 1;
    cli_result *buf = malloc(per * sizeof *buf);
    /* Every rank takes part, whatever its own outcome, or the others would
     * wait for it forever. */
    int ok = buf != NULL && local == MS_OK, all_ok = 0;
    MPI_Allreduce(&ok, &all_ok, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    if (!all_ok) {
        free(buf);
        return local != MS_OK ? local
                              : ms_diag_set(d, MS_EIO,
                                            "a rank failed before the results "
                                            "were gathered");
    }
    if (m->rank != 0) {
        size_t k = 0;
        for (size_t i = (size_t)m->rank; i < n; i += (size_t)m->size)
            buf[k++] = res[i];
        MPI_Send(buf, (int)(k * sizeof *buf), MPI_BYTE, 0, 0, MPI_COMM_WORLD);
    } else {
        for (int r = 1; r < m->size; r++) {
            MPI_Status status;
            MPI_Recv(buf, (int)(per * sizeof *buf), MPI_BYTE, r, 0, MPI_COMM_WORLD, &status);
            size_t k = 0;
            for (size_t i = (size_t)r; i < n; i += (size_t)m->size)
                res[i] = buf[k++];
        }
    }
    free(buf);
    return MS_OK;
}

int cli_mpi_finish(cli_mpi *m, int rc)
{
    if (!m->active)
        return rc;
    MPI_Bcast(&rc, 1, MPI_INT, 0, MPI_COMM_WORLD);
    MPI_Finalize();
    m->active = false;
    return rc;
}

#else

ms_status cli_mpi_init(cli_mpi *m, ms_diag *d)
{
    (void)d;
    *m = (cli_mpi){.rank = 0, .size = 1};
    return MS_OK;
}

ms_status cli_mpi_gather(const cli_mpi *m, ms_status local, cli_result *res, size_t n, ms_diag *d)
{
    (void)m;
    (void)res;
    (void)n;
    (void)d;
    return local;
}

int cli_mpi_finish(cli_mpi *m, int rc)
{
    (void)m;
    return rc;
}

#endif
