/* communicator.c - a group of ranks for the exchange (see communicator.h). */
#include "communicator.h"
#include "mpi_check.h" /* defines: MPI_CHECK */
#include "clock.h"     /* defines: dt_now */

void communicator_init(Communicator *c, MPI_Comm comm, const Topology *job) {
    c->comm = comm;
    MPI_CHECK(MPI_Comm_rank(comm, &c->rank));
    MPI_CHECK(MPI_Comm_size(comm, &c->size));
    topology_derive(&c->topo, comm, job);
}

void communicator_free(Communicator *c) {
    topology_free(&c->topo);
}

double communicator_vote(MPI_Comm comm, int mine, int *any) {
    double t = dt_now();
    MPI_CHECK(MPI_Allreduce(&mine, any, 1, MPI_INT, MPI_MAX, comm));
    return dt_now() - t;
}

void communicator_average(MPI_Comm comm, float *buf, size_t n, size_t bucket) {
    int size;
    MPI_CHECK(MPI_Comm_size(comm, &size));
    if (size < 2) return;
    float scale = 1.0f / (float)size;
    for (size_t off = 0; off < n; off += bucket) {
        size_t count = n - off < bucket ? n - off : bucket; /* buf[off .. off+count) */
        MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, buf + off, (int)count, MPI_FLOAT, MPI_SUM, comm));
        for (size_t i = off; i < off + count; i++) /* while the bucket is in cache */
            buf[i] *= scale;
    }
}

/* MPI counts are ints: a whole number of floats goes as MPI_FLOAT (parameter buffers up to 8 GiB),
 * anything else as bytes (up to 2 GiB). */
static void count_type(size_t bytes, int *count, MPI_Datatype *type) {
    if (bytes % 4 == 0) {
        *count = (int)(bytes / 4), *type = MPI_FLOAT;
    } else {
        *count = (int)bytes, *type = MPI_BYTE;
    }
}

void communicator_isend(MPI_Comm comm, const void *buf, size_t bytes, int to, int tag,
                        MPI_Request *req) {
    int count;
    MPI_Datatype type;
    count_type(bytes, &count, &type);
    MPI_CHECK(MPI_Isend(buf, count, type, to, tag, comm, req));
}

void communicator_irecv(MPI_Comm comm, void *buf, size_t bytes, int from, int tag,
                        MPI_Request *req) {
    int count;
    MPI_Datatype type;
    count_type(bytes, &count, &type);
    MPI_CHECK(MPI_Irecv(buf, count, type, from, tag, comm, req));
}
