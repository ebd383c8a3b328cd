/* clocksync.c - clock offsets to rank 0 by ping-pong (see clocksync.h). Rank 0 serves each
 * other rank in turn: the rank sends t1, rank 0 answers with its time t0, the rank reads t2;
 * offset = (t1 + t2)/2 - t0 from the round with the smallest t2 - t1. */
#include "clocksync.h"
#include "mpi_check.h"
#include "clock.h" /* defines: dt_now */

ClockOffset clocksync_measure(MPI_Comm comm, int rounds) {
    int rank, nranks;
    MPI_CHECK(MPI_Comm_rank(comm, &rank));
    MPI_CHECK(MPI_Comm_size(comm, &nranks));
    ClockOffset best = {0.0, 0.0};
    MPI_CHECK(MPI_Barrier(comm));
    for (int peer = 1; peer < nranks; peer++) {
        if (rank == 0) {
            for (int i = 0; i < rounds; i++) {
                double dummy, t0;
                MPI_CHECK(MPI_Recv(&dummy, 1, MPI_DOUBLE, peer, 7001, comm, MPI_STATUS_IGNORE));
                t0 = dt_now();
                MPI_CHECK(MPI_Send(&t0, 1, MPI_DOUBLE, peer, 7002, comm));
            }
        } else if (rank == peer) {
            best.rtt = 1e30;
            for (int i = 0; i < rounds; i++) {
                double t0, t1 = dt_now();
                MPI_CHECK(MPI_Send(&t1, 1, MPI_DOUBLE, 0, 7001, comm));
                MPI_CHECK(MPI_Recv(&t0, 1, MPI_DOUBLE, 0, 7002, comm, MPI_STATUS_IGNORE));
                double t2 = dt_now();
                if (t2 - t1 < best.rtt) {
                    best.rtt = t2 - t1;
                    best.offset = 0.5 * (t1 + t2) - t0;
                }
            }
        }
    }
    MPI_CHECK(MPI_Barrier(comm));
    return best;
}
