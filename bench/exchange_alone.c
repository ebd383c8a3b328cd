/* exchange_alone.c - the library's collective alone, the peer of bench/exchange_vs_mpi.sh:
 *
 *   mpirun -np P exchange_alone NPARAMS BUCKET_FLOATS REPS [BUSY_MS]
 *
 * Times MPI_Allreduce (in place, MPI_SUM, floats) over NPARAMS floats cut in buckets of
 * BUCKET_FLOATS from the end, as dtbench's sync exchange cuts them, after a barrier, REPS times
 * (one unmeasured repetition first), and prints from rank 0 one line:
 *   alone_ms MEDIAN_ALLREDUCE iallreduce_ms MEDIAN_IALLREDUCE_WAITALL
 * (medians over repetitions of the mean over ranks).
 *
 * BUSY_MS: instead, REPS "iterations" shaped as dtbench's: BUSY_MS of this thread's CPU time
 * (not wall time: a rank that loses its core to another takes longer, as a computing rank does)
 * streaming over 2 x NPARAMS floats (parameters and momentum; at most 32 MiB), ending with a write
 * of the whole gradient buffer (backward writes it last), then a one-int MPI_Allreduce (the stop
 * vote: its time is the arrival wait), then MPI_Allreduce of every bucket (the transfer). Prints
 *   train_exch_ms E train_wait_ms W train_xfer_ms X train_iter_ms I
 * pooled medians over ranks x repetitions, as dtbench's `exchange`, `exchange_wait` and
 * `exchange - exchange_wait` medians are; train_iter_ms: the whole iteration (compute, vote and
 * buckets), as dtbench's `total`. On a shared, oversubscribed machine these ranks are
 * scheduled as dtbench's are: the peer that says what the machine, not dtbench, costs.
 *
 * Plain MPI on purpose: it shares no code with dtbench, so it checks dtbench's own calibration
 * too. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static int cmp(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static volatile float sink;

static double cpu_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void allreduce_buckets(float *g, size_t n, size_t b, int nonblocking, MPI_Request *rq) {
    int k = 0;
    for (size_t hi = n; hi > 0; k++) {
        size_t lo = hi > b ? hi - b : 0;
        if (nonblocking)
            MPI_Iallreduce(MPI_IN_PLACE, g + lo, (int)(hi - lo), MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD,
                           &rq[k]);
        else
            MPI_Allreduce(MPI_IN_PLACE, g + lo, (int)(hi - lo), MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
        hi = lo;
    }
    if (nonblocking) MPI_Waitall(k, rq, MPI_STATUSES_IGNORE);
}

static double pass(float *g, size_t n, size_t b, int nonblocking, MPI_Request *rq) {
    MPI_Barrier(MPI_COMM_WORLD);
    double t0 = MPI_Wtime();
    allreduce_buckets(g, n, b, nonblocking, rq);
    double t = MPI_Wtime() - t0, sum = 0.0;
    int P;
    MPI_Comm_size(MPI_COMM_WORLD, &P);
    MPI_Allreduce(&t, &sum, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    return sum / P;
}

/* 2n floats, at most 32 MiB (beyond the caches, more changes nothing). */
static size_t state_floats(size_t n) {
    return 2 * n < (8u << 20) ? 2 * n + 1 : (8u << 20);
}

/* One dtbench-shaped iteration: compute, vote, buckets. wait/xfer: this rank's seconds. The
 * compute streams over `state` (2n floats: what the update reads besides the gradient, the
 * parameters and the momentum) so that the caches hold what they hold in training. */
static void train_pass(float *g, float *state, size_t n, size_t b, double busy_ms, double *wait,
                       double *xfer, double *iter) {
    size_t at = 0, m = state_floats(n);
    double start = MPI_Wtime();
    for (double c = cpu_now(); cpu_now() - c < busy_ms * 1e-3;) {
        for (int i = 0; i < 4096; i++, at = at + 1 < m ? at + 1 : 0)
            state[at] = state[at] * 0.999f + 1e-3f;
        sink = state[at];
    }
    for (size_t i = 0; i < n; i++) /* the gradient, written last by backward */
        g[i] = 1e-3f * (float)(i & 1023);
    int stop = 0, any;
    double t0 = MPI_Wtime();
    MPI_Allreduce(&stop, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    double t1 = MPI_Wtime();
    allreduce_buckets(g, n, b, 0, NULL);
    double end = MPI_Wtime();
    *wait = t1 - t0, *xfer = end - t1, *iter = end - start;
}

static double median(double *x, int n) {
    qsort(x, (size_t)n, sizeof(double), cmp);
    return n % 2 ? x[n / 2] : 0.5 * (x[n / 2 - 1] + x[n / 2]);
}

static void train(float *g, size_t n, size_t b, int reps, double busy_ms, int rank, int P) {
    double *w = malloc(4 * (size_t)reps * sizeof(double)), *all = NULL;
    float *state = calloc(state_floats(n), sizeof(float));
    if (!w || !state) MPI_Abort(MPI_COMM_WORLD, 1);
    double dummy;
    train_pass(g, state, n, b, busy_ms, &dummy, &dummy, &dummy); /* unmeasured */
    for (int r = 0; r < reps; r++) {
        train_pass(g, state, n, b, busy_ms, &w[r], &w[reps + r], &w[3 * reps + r]);
        w[2 * reps + r] = w[r] + w[reps + r];
    }
    if (rank == 0) all = malloc(4 * (size_t)reps * (size_t)P * sizeof(double));
    if (rank == 0 && !all) MPI_Abort(MPI_COMM_WORLD, 1);
    MPI_Gather(w, 4 * reps, MPI_DOUBLE, all, 4 * reps, MPI_DOUBLE, 0, MPI_COMM_WORLD);
    if (rank == 0) {
        double *col[4];
        for (int k = 0; k < 4; k++) { /* column k of every rank, pooled */
            col[k] = malloc((size_t)reps * (size_t)P * sizeof(double));
            if (!col[k]) MPI_Abort(MPI_COMM_WORLD, 1);
            for (int p = 0; p < P; p++)
                for (int r = 0; r < reps; r++)
                    col[k][p * reps + r] = all[(size_t)p * 4 * reps + k * reps + r];
        }
        printf("train_exch_ms %.4f train_wait_ms %.4f train_xfer_ms %.4f train_iter_ms %.4f\n",
               median(col[2], reps * P) * 1e3, median(col[0], reps * P) * 1e3,
               median(col[1], reps * P) * 1e3, median(col[3], reps * P) * 1e3);
        for (int k = 0; k < 4; k++)
            free(col[k]);
        free(all);
    }
    free(w), free(state);
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    if (argc < 4) {
        fprintf(stderr, "usage: exchange_alone NPARAMS BUCKET_FLOATS REPS [BUSY_MS]\n");
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    size_t n = strtoull(argv[1], NULL, 10), b = strtoull(argv[2], NULL, 10);
    int reps = atoi(argv[3]), rank, P;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &P);
    float *g = calloc(n, sizeof(float));
    MPI_Request *rq = malloc((n / b + 2) * sizeof(MPI_Request));
    double *t[2] = {malloc((size_t)reps * sizeof(double)), malloc((size_t)reps * sizeof(double))};
    if (!g || !rq || !t[0] || !t[1] || reps < 1) MPI_Abort(MPI_COMM_WORLD, 1);
    if (argc > 4) {
        train(g, n, b, reps, atof(argv[4]), rank, P);
    } else {
        pass(g, n, b, 0, rq), pass(g, n, b, 1, rq);
        for (int r = 0; r < reps; r++) /* alternating */
            for (int m = 0; m < 2; m++)
                t[m][r] = pass(g, n, b, m, rq);
        if (rank == 0)
            printf("alone_ms %.4f iallreduce_ms %.4f\n", median(t[0], reps) * 1e3,
                   median(t[1], reps) * 1e3);
    }
    free(g), free(rq), free(t[0]), free(t[1]);
    MPI_Finalize();
    return 0;
}
