/* fail_report.c - the failure report every MPI program shares (base/fail.c, comm/mpi_check.c),
 * driven by tests/test_fail_report.sh on 2 ranks:
 *   fail_report mpi      rank 1 makes an MPI call that fails (a send to a rank that does not
 *                        exist) under MPI_CHECK while rank 0 waits in a barrier;
 *   fail_report check    rank 1 calls check_fail directly (as ALLOC_CHECK and the library checks
 *                        of the kernels do) while rank 0 waits in a barrier.
 * Either way rank 1 must print "dtbench: rank 1 on HOST: tests/fail_report.c:LINE: CALL: MESSAGE"
 * and end the job: rank 0 never leaves its barrier on its own. */
#include "mpi_check.h"

#include <stdio.h>
#include <string.h>

int main(int argc, char **argv) {
    MPI_CHECK(MPI_Init(&argc, &argv));
    mpi_check_start();
    int rank = 0, nranks = 1;
    MPI_CHECK(MPI_Comm_rank(MPI_COMM_WORLD, &rank));
    MPI_CHECK(MPI_Comm_size(MPI_COMM_WORLD, &nranks));
    const int mpi = argc > 1 && !strcmp(argv[1], "mpi");
    if (rank == 1) {
        int x = 0;
        if (mpi) MPI_CHECK(MPI_Send(&x, 1, MPI_INT, nranks + 3, 0, MPI_COMM_WORLD));
        else check_fail(__FILE__, __LINE__, "probe", "the message of the library");
    }
    MPI_CHECK(MPI_Barrier(MPI_COMM_WORLD));
    if (rank == 0) printf("rank 0 left the barrier: the job was not ended\n");
    MPI_Finalize();
    return 0;
}
