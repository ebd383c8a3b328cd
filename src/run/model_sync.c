/* model_sync.c - averaging the batch-norm running statistics over replicas (see model_sync.h),
 * through host memory like the sync exchange. */
#include "model_sync.h"
#include "mpi_check.h"
#include "alloc.h" /* defines: xmalloc */

#include <stdlib.h>

void model_average_buffers(Model *m, MPI_Comm comm) {
    int size = 1;
    MPI_CHECK(MPI_Comm_size(comm, &size));
    if (!m->nbuffers || size == 1) return;
    float *host = xmalloc(m->nbuffers * sizeof(float));
    m->be->download(m->ctx, host, m->buffers, m->nbuffers * sizeof(float));
    MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, host, (int)m->nbuffers, MPI_FLOAT, MPI_SUM, comm));
    for (size_t i = 0; i < m->nbuffers; i++)
        host[i] /= (float)size;
    m->be->upload(m->ctx, m->buffers, host, m->nbuffers * sizeof(float));
    free(host);
}
