/* pipeline_p2p.c - MPI transport of the pipeline (see pipeline_p2p.h): MPI_Irecv / MPI_Isend of a
 * 32-byte header and a float payload per micro-batch and direction. */
#include "pipeline_p2p.h"
#include "mpi_check.h"

#include <limits.h>

int p2p_tag(int backward, int microbatch, int payload) {
    return (microbatch * 2 + (backward != 0)) * 2 + (payload != 0);
}

static int count_of(size_t floats) {
    if (floats > INT_MAX) check_fail(__FILE__, __LINE__, "pipeline message", "over 2^31 floats");
    return (int)floats;
}

void p2p_post_recv(P2pMessage *msg, float *buf, size_t floats, int peer, int backward,
                   int microbatch, MPI_Comm comm) {
    msg->bytes = floats * sizeof(float);
    MPI_CHECK(MPI_Irecv(&msg->header, 4, MPI_DOUBLE, peer, p2p_tag(backward, microbatch, 0), comm,
                        &msg->req[0]));
    MPI_CHECK(MPI_Irecv(buf, count_of(floats), MPI_FLOAT, peer, p2p_tag(backward, microbatch, 1),
                        comm, &msg->req[1]));
}

void p2p_send(P2pMessage *msg, const float *buf, size_t floats, int peer, int backward,
              int microbatch, MPI_Comm comm) {
    msg->bytes = floats * sizeof(float);
    MPI_CHECK(MPI_Isend(&msg->header, 4, MPI_DOUBLE, peer, p2p_tag(backward, microbatch, 0), comm,
                        &msg->req[0]));
    MPI_CHECK(MPI_Isend(buf, count_of(floats), MPI_FLOAT, peer, p2p_tag(backward, microbatch, 1),
                        comm, &msg->req[1]));
}

void p2p_wait(P2pMessage *msg) {
    MPI_CHECK(MPI_Waitall(2, msg->req, MPI_STATUSES_IGNORE));
}

void p2p_progress(P2pMessage *msgs, int n) {
    for (int i = 0; i < n; i++) {
        int done = 0;
        MPI_CHECK(MPI_Testall(2, msgs[i].req, &done, MPI_STATUSES_IGNORE));
    }
}
