/* overlap_progress.c - how to progress gradient buckets while backward runs, in plain MPI (no
 * dtbench code): polling between layers against a progress thread, each against no overlap.
 *
 *   mpirun -np P overlap_progress LAYER_PARAMS BWD_MS BUCKET_FLOATS REPS [single]
 *     LAYER_PARAMS  comma-separated parameters per layer, first layer first (e.g. LeNet's
 *                   520,25050,400500,5010); the gradient buffer is their concatenation
 *     BWD_MS        the whole backward's compute, CPU time, shared by the layers in proportion
 *                   to their parameters, run last layer first (a layer writes its gradients,
 *                   then works for the rest of its share; a layer whose write alone takes
 *                   longer takes longer)
 *
 * Buckets are cut from the END of the buffer, as dtbench cuts them; a bucket is ready once
 * backward has passed the first layer it touches. Modes, alternating within each repetition:
 *   none    backward, then MPI_Allreduce of every bucket (dtbench without --overlap)
 *   poll    MPI_Iallreduce of each bucket when ready, MPI_Testall between layers; at the end of
 *           backward those are waited for and the rest use MPI_Allreduce (dtbench --overlap)
 *   thread  a progress thread (MPI_THREAD_MULTIPLE) runs MPI_Allreduce of each bucket as it
 *           becomes ready, on its own communicator, while backward computes (Horovod's
 *           background thread); the main thread hands it the rest at the end and waits
 * Compute is CPU time of the computing thread: when another thread or process takes its core,
 * backward takes longer in wall time, as real compute does. Per mode, from rank 0, medians over
 * repetitions of the mean over ranks, ms:
 *   MODE bwd B exposed E total T
 * bwd: backward's wall time; exposed: from the end of backward until every bucket is averaged
 * (what dtbench records as exchange); total: their sum (median of the sums). Also printed: the
 * MPI thread level granted. `single`: MPI_Init (no thread support asked, as dtbench), none and
 * poll only: what MPI_THREAD_MULTIPLE itself costs. Exit 77 when MPI_THREAD_MULTIPLE was asked
 * for and not granted (none and poll still run). */
#include <mpi.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

enum { NONE, POLL, THREAD, NMODES };
static const char *mode_name[NMODES] = {"none", "poll", "thread"};

static int nlayers, nbuckets;
static size_t layer_off[65], layer_n[64], bucket_lo_[4096], bucket_hi_[4096];
static double layer_ms[64];
static float *grads, *scratch;
static volatile float sink;

/* ---- the progress thread: a queue of buckets to allreduce ---------------------------------- */
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER, done_cv = PTHREAD_COND_INITIALIZER;
static int queued, reduced, quit;
static MPI_Comm thread_comm;

static void *progress_thread(void *arg) {
    (void)arg;
    pthread_mutex_lock(&mu);
    for (;;) {
        while (reduced == queued && !quit)
            pthread_cond_wait(&cv, &mu);
        if (reduced == queued && quit) break;
        int k = reduced;
        pthread_mutex_unlock(&mu);
        MPI_Allreduce(MPI_IN_PLACE, grads + bucket_lo_[k], (int)(bucket_hi_[k] - bucket_lo_[k]),
                      MPI_FLOAT, MPI_SUM, thread_comm);
        pthread_mutex_lock(&mu);
        reduced++;
        pthread_cond_broadcast(&done_cv);
    }
    pthread_mutex_unlock(&mu);
    return NULL;
}

static void enqueue_upto(int k) {
    pthread_mutex_lock(&mu);
    if (k > queued) queued = k, pthread_cond_signal(&cv);
    pthread_mutex_unlock(&mu);
}

static double cpu_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* One layer's backward: ms of this thread's CPU time, writing the layer's gradients and then
 * working over a 256 KiB scratch for the rest of the time. */
static void compute(int l) {
    double c = cpu_now();
    for (size_t i = layer_off[l]; i < layer_off[l] + layer_n[l]; i++)
        grads[i] = 1e-3f * (float)(i & 255);
    while (cpu_now() - c < layer_ms[l] * 1e-3)
        for (int i = 0; i < 65536; i++)
            scratch[i] = scratch[i] * 0.999f + 1e-3f;
    sink = scratch[7];
}

/* Buckets 0 .. ready-1 lie entirely at or above offset `first`. */
static int buckets_ready(size_t first) {
    int k = 0;
    while (k < nbuckets && bucket_lo_[k] >= first)
        k++;
    return k;
}

static void iteration(int mode, double *bwd, double *exposed) {
    MPI_Request rq[4096];
    int started = 0;
    MPI_Barrier(MPI_COMM_WORLD);
    double t0 = MPI_Wtime();
    for (int l = nlayers - 1; l >= 0; l--) {
        compute(l);
        int ready = l > 0 ? buckets_ready(layer_off[l]) : started; /* the last: after backward */
        if (mode == POLL) {
            for (; started < ready; started++)
                MPI_Iallreduce(MPI_IN_PLACE, grads + bucket_lo_[started],
                               (int)(bucket_hi_[started] - bucket_lo_[started]), MPI_FLOAT, MPI_SUM,
                               MPI_COMM_WORLD, &rq[started]);
            int flag;
            if (started) MPI_Testall(started, rq, &flag, MPI_STATUSES_IGNORE);
        } else if (mode == THREAD) {
            enqueue_upto(ready);
        }
    }
    double t1 = MPI_Wtime();
    if (mode == THREAD) {
        enqueue_upto(nbuckets);
        pthread_mutex_lock(&mu);
        while (reduced < nbuckets)
            pthread_cond_wait(&done_cv, &mu);
        queued = reduced = 0;
        pthread_mutex_unlock(&mu);
    } else {
        if (started) MPI_Waitall(started, rq, MPI_STATUSES_IGNORE);
        for (int k = started; k < nbuckets; k++)
            MPI_Allreduce(MPI_IN_PLACE, grads + bucket_lo_[k], (int)(bucket_hi_[k] - bucket_lo_[k]),
                          MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    }
    *bwd = t1 - t0, *exposed = MPI_Wtime() - t1;
}

static int cmp(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static void parse(const char *params, double bwd_ms, size_t bucket) {
    char *s = strdup(params), *save = NULL;
    size_t total = 0;
    for (char *t = strtok_r(s, ",", &save); t && nlayers < 64; t = strtok_r(NULL, ",", &save)) {
        layer_off[nlayers] = total;
        layer_n[nlayers] = strtoull(t, NULL, 10);
        total += layer_n[nlayers++];
    }
    layer_off[nlayers] = total;
    free(s);
    for (int l = 0; l < nlayers; l++)
        layer_ms[l] = bwd_ms * (double)layer_n[l] / (double)total;
    for (size_t hi = total; hi > 0 && nbuckets < 4096; nbuckets++) {
        size_t lo = hi > bucket ? hi - bucket : 0;
        bucket_lo_[nbuckets] = lo, bucket_hi_[nbuckets] = hi;
        hi = lo;
    }
    grads = calloc(total, sizeof(float));
    scratch = calloc(65536, sizeof(float));
    if (!grads || !scratch) MPI_Abort(MPI_COMM_WORLD, 1);
}

int main(int argc, char **argv) {
    int provided = MPI_THREAD_SINGLE, rank, P;
    int single = argc > 5 && !strcmp(argv[5], "single");
    if (single)
        MPI_Init(&argc, &argv);
    else
        MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &P);
    if (argc < 5) {
        if (rank == 0)
            fprintf(stderr, "usage: overlap_progress LAYER_PARAMS BWD_MS BUCKET_FLOATS REPS\n");
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    parse(argv[1], atof(argv[2]), strtoull(argv[3], NULL, 10));
    int reps = atoi(argv[4]);
    int modes = provided == MPI_THREAD_MULTIPLE ? NMODES : THREAD;
    if (!single && modes < NMODES && rank == 0)
        printf("MPI_THREAD_MULTIPLE not granted: no thread mode\n");
    pthread_t th;
    if (modes == NMODES) {
        MPI_Comm_dup(MPI_COMM_WORLD, &thread_comm);
        pthread_create(&th, NULL, progress_thread, NULL);
    }
    double *t[NMODES][3];
    for (int m = 0; m < NMODES; m++)
        for (int k = 0; k < 3; k++)
            t[m][k] = calloc((size_t)reps, sizeof(double));
    double b, e;
    for (int m = 0; m < modes; m++)
        iteration(m, &b, &e); /* warm-up */
    for (int r = 0; r < reps; r++)
        for (int m = 0; m < modes; m++) {
            iteration(m, &b, &e);
            double v[2] = {b, e};
            MPI_Allreduce(MPI_IN_PLACE, v, 2, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
            t[m][0][r] = v[0] / P, t[m][1][r] = v[1] / P, t[m][2][r] = (v[0] + v[1]) / P;
        }
    if (rank == 0) {
        printf("thread level %s, %d buckets, %d layers\n",
               single                            ? "MPI_Init"
               : provided == MPI_THREAD_MULTIPLE ? "MPI_THREAD_MULTIPLE"
                                                 : "below MULTIPLE",
               nbuckets, nlayers);
        for (int m = 0; m < modes; m++) {
            for (int k = 0; k < 3; k++)
                qsort(t[m][k], (size_t)reps, sizeof(double), cmp);
            printf("%-6s bwd %.3f exposed %.3f total %.3f\n", mode_name[m], t[m][0][reps / 2] * 1e3,
                   t[m][1][reps / 2] * 1e3, t[m][2][reps / 2] * 1e3);
        }
    }
    if (modes == NMODES) {
        pthread_mutex_lock(&mu);
        quit = 1;
        pthread_cond_signal(&cv);
        pthread_mutex_unlock(&mu);
        pthread_join(th, NULL);
        MPI_Comm_free(&thread_comm);
    }
    MPI_Finalize();
    return modes == NMODES || single ? 0 : 77;
}
