/* exchange_alone.c - the library's collective alone, the peer of bench/exchange_vs_mpi.sh:
 *
 *   mpirun -np P exchange_alone NPARAMS BUCKET_FLOATS REPS [BUSY_MS]
 *
 * Times MPI_Allreduce (in place, MPI_SUM, floats) over NPARAMS floats cut in buckets of
 * BUCKET_FLOATS from the end, as dtbench's sync exchange cuts them, after a barrier, REPS times
 * (one unmeasured repetition first), and prints from rank 0 one line:
 *   alone_ms MEDIAN_ALLREDUCE iallreduce_ms MEDIAN_IALLREDUCE_WAITALL
 * (medians over repetitions of the mean over ranks). BUSY_MS: that much computation (a busy loop
 * over a buffer) before each repetition's barrier, as training computes between exchanges: on a
 * shared, oversubscribed machine the scheduler then treats the ranks as it does dtbench's.
 * Plain MPI on purpose: it shares no code
 * with dtbench, so it checks dtbench's own calibration too. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

static int cmp(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double busy_ms = 0.0;
static volatile float sink;

static double pass(float *g, size_t n, size_t b, int nonblocking, MPI_Request *rq) {
    for (double t = MPI_Wtime(); MPI_Wtime() - t < busy_ms * 1e-3;) {
        float s = 0;
        for (int i = 0; i < 4096; i++)
            s += (float)i * 1e-3f;
        sink = s;
    }
    MPI_Barrier(MPI_COMM_WORLD);
    double t0 = MPI_Wtime();
    int k = 0;
    for (size_t hi = n; hi > 0; k++) {
        size_t lo = hi > b ? hi - b : 0;
        if (nonblocking)
            MPI_Iallreduce(MPI_IN_PLACE, g + lo, (int)(hi - lo), MPI_FLOAT, MPI_SUM,
                           MPI_COMM_WORLD, &rq[k]);
        else
            MPI_Allreduce(MPI_IN_PLACE, g + lo, (int)(hi - lo), MPI_FLOAT, MPI_SUM,
                          MPI_COMM_WORLD);
        hi = lo;
    }
    if (nonblocking) MPI_Waitall(k, rq, MPI_STATUSES_IGNORE);
    double t = MPI_Wtime() - t0, sum = 0.0;
    int P;
    MPI_Comm_size(MPI_COMM_WORLD, &P);
    MPI_Allreduce(&t, &sum, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    return sum / P;
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    if (argc < 4) {
        fprintf(stderr, "usage: exchange_alone NPARAMS BUCKET_FLOATS REPS\n");
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    size_t n = strtoull(argv[1], NULL, 10), b = strtoull(argv[2], NULL, 10);
    int reps = atoi(argv[3]), rank;
    if (argc > 4) busy_ms = atof(argv[4]);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    float *g = calloc(n, sizeof(float));
    MPI_Request *rq = malloc((n / b + 2) * sizeof(MPI_Request));
    double *t[2] = {malloc((size_t)reps * sizeof(double)), malloc((size_t)reps * sizeof(double))};
    if (!g || !rq || !t[0] || !t[1]) MPI_Abort(MPI_COMM_WORLD, 1);
    pass(g, n, b, 0, rq), pass(g, n, b, 1, rq);
    for (int r = 0; r < reps; r++) /* alternating */
        for (int m = 0; m < 2; m++)
            t[m][r] = pass(g, n, b, m, rq);
    qsort(t[0], (size_t)reps, sizeof(double), cmp);
    qsort(t[1], (size_t)reps, sizeof(double), cmp);
    if (rank == 0)
        printf("alone_ms %.4f iallreduce_ms %.4f\n", t[0][reps / 2] * 1e3, t[1][reps / 2] * 1e3);
    MPI_Finalize();
    return 0;
}
