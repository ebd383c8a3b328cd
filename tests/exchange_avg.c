/* exchange_avg.c - the gradient exchange (comm/sync.c over a transport) averages exactly.
 *
 *   mpirun -np P exchange_avg TRANSPORT RANKS_PER_NODE [--device D] [--overlap] [--nparams N]
 *                              [--bucket FLOATS] [--iters K] [--progress-thread]
 *
 * Each rank fills its gradients with k(rank, i, iteration) / 1024, k a seeded integer in
 * [-1024, 1023]: every partial sum is exact in float, so the average is known exactly (computed
 * by every rank in double from everybody's k). The check is exact (tolerance 0) when P is a power
 * of two and the transport sums before it scales (mpi, hier); otherwise 1e-6 absolute (|g| <= 1):
 * a scale by fl(1/P), or NCCL's pre-multiplied average, rounds. With --overlap, backward is
 * simulated: grads_ready() is called at five decreasing layer boundaries before the exchange, as
 * model_backward_hook does. The last iteration also checks the stop vote: the last rank asks to
 * stop, every rank must see stop set then and only then.
 * --device staged: the CPU posing as a device (comm/as_device.h: CPU memory declared device
 * memory), so the MPI transports stage every bucket through host copies as they do on a GPU
 * without a CUDA-aware MPI. Before the iterations the strategy's calibrate(iters 0) runs, as
 * dtbench's setup does: it must leave the transport holding everything it keeps across iterations,
 * so iteration 0's exchange may not grow the heap by more than a bucket and 256 KiB (glibc
 * mallinfo2: staging buffers of a gradient of 400k floats would; Open MPI grows free lists of
 * requests when more non-blocking collectives are in flight than before, by up to ~140 KB on 4
 * ranks here, at any iteration).
 * --progress-thread: the MPI collectives' non-blocking operations run on progress threads
 * (dtbench --progress thread; MPI_THREAD_MULTIPLE is asked for). With the flat mpi transport on
 * host memory and --overlap, the first bucket started must then be summed while this thread makes
 * no MPI call at all (it watches the buffer for up to 20 s): polled MPI_Iallreduce never would.
 * Prints one line per iteration from rank 0; exit status 0 pass, 1 fail, 77 when the backend or
 * transport is not available here (e.g. --device cuda without a GPU). */
#include "calibrate.h" /* bucket_lo */
#include "mpi_check.h" /* defines: MPI_CHECK, check_fail */
#include "as_device.h" /* defines: as_device_backend */
#include "exchange.h"
#include "parts.h" /* defines: registry_backend, registry_transport, registry_coll ... */
#include "topology.h"
#include "alloc.h" /* defines: xmalloc, xcalloc */
#include "clock.h" /* defines: dt_now */
#include "rng.h"   /* defines: rng_mix */

#include <malloc.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* --device staged: the CPU posing as a device (comm/as_device.h); else the registry's backend. */
static const BackendOps *backend_named(const char *name) {
    return !strcmp(name, "staged") ? as_device_backend(0) : registry_backend(name);
}

static int k_of(int rank, size_t i, int it);

/* --progress-thread: waits, making no MPI call, until buf[lo .. hi) holds the sums over the
 * ranks (exact: k / 1024 with |k| <= 1024); 1 when it did within 20 s. */
static int summed_without_caller(volatile const float *buf, size_t lo, size_t hi, int P, int it) {
    double until = dt_now() + 20.0;
    for (;;) {
        size_t i = lo;
        for (; i < hi; i++) {
            long sum = 0;
            for (int r = 0; r < P; r++)
                sum += k_of(r, i, it);
            if (buf[i] != (float)((double)sum / 1024.0)) break;
        }
        if (i == hi) return 1;
        if (dt_now() > until) return 0;
        struct timespec ms = {0, 1000000};
        nanosleep(&ms, NULL);
    }
}

static int k_of(int rank, size_t i, int it) {
    return (int)(rng_mix(((uint64_t)it << 48) ^ ((uint64_t)rank << 36) ^ i) % 2048) - 1024;
}

/* The run: its options, and what every iteration uses. */
typedef struct {
    const char *tname, *device;
    int rpn, overlap, iters, thread, P, me;
    size_t nparams, bucket;
    Topology *topo;
    const BackendOps *be;
    const TransportOps *tp;
    BackendCtx *ctx;
    const ExchangeOps *x;
    ExchangeState *st;
    float *grads, *host, *want;
    double tol;
} Run;

/* MPI, at the thread level --progress-thread needs (*thread); 77 when it was not granted (MPI
 * finalized), else 0. */
static int start_mpi(int *argc, char ***argv, int *thread) {
    int provided;
    *thread = 0;
    for (int a = 3; a < *argc; a++)
        *thread |= !strcmp((*argv)[a], "--progress-thread");
    MPI_CHECK(
        MPI_Init_thread(argc, argv, *thread ? MPI_THREAD_MULTIPLE : MPI_THREAD_SINGLE, &provided));
    if (*thread && provided < MPI_THREAD_MULTIPLE) {
        printf("SKIP: MPI_THREAD_MULTIPLE not granted (%d)\n", provided);
        MPI_Finalize();
        return 77;
    }
    return 0;
}

/* The options after TRANSPORT RANKS_PER_NODE (see the top of this file). */
static void parse_options(int argc, char **argv, Run *r) {
    for (int a = 3; a < argc; a++) {
        if (!strcmp(argv[a], "--overlap"))
            r->overlap = 1;
        else if (!strcmp(argv[a], "--device") && a + 1 < argc)
            r->device = argv[++a];
        else if (!strcmp(argv[a], "--nparams") && a + 1 < argc)
            r->nparams = strtoul(argv[++a], 0, 10);
        else if (!strcmp(argv[a], "--bucket") && a + 1 < argc)
            r->bucket = strtoul(argv[++a], 0, 10);
        else if (!strcmp(argv[a], "--iters") && a + 1 < argc)
            r->iters = atoi(argv[++a]);
    }
}

/* The topology, the backend and the transport; 0 when some rank cannot have them (rank 0 says
 * so, MPI finalized), else 1. */
static int start_backend(Run *r) {
    topology_init(r->topo, r->rpn);
    r->P = r->topo->nranks, r->me = r->topo->rank;
    r->be = backend_named(r->device);
    r->tp = registry_transport(r->tname);
    BackendConfig bcfg = {.threads = 1, .local_rank = r->topo->host_local_rank, .gpus_per_node = 0};
    int ok_here = r->be && r->tp && r->be->init(&bcfg, &r->ctx) == 0, ok_all = 0;
    MPI_CHECK(MPI_Allreduce(&ok_here, &ok_all, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD));
    if (!ok_all) {
        if (r->me == 0)
            printf("SKIP: device %s / transport %s not available here %s\n", r->device, r->tname,
                   registry_load_error());
        MPI_Finalize();
        return 0;
    }
    return 1;
}

/* The sync strategy over the transport, its buffers, and its calibration. */
static void create_exchange(Run *r) {
    const BackendOps *be = r->be;
    ExchangeConfig cfg = {.comm = MPI_COMM_WORLD,
                          .topo = r->topo,
                          .nparams = r->nparams,
                          .bucket_floats = r->bucket,
                          .be = be,
                          .ctx = r->ctx,
                          .transport = r->tp,
                          .device_coll = be != as_device_backend(0) ? registry_coll("nccl") : NULL,
                          .overlap = r->overlap,
                          .progress_thread = r->thread};
    r->x = registry_exchange("sync");
    char err[256] = "";
    r->st = r->x->create(&cfg, err, sizeof err);
    if (!r->st) check_fail(__FILE__, __LINE__, "create", err);
    r->grads = be->alloc(r->ctx, r->nparams * sizeof(float));
    r->host = xmalloc(r->nparams * sizeof(float)), r->want = xmalloc(r->nparams * sizeof(float));
    int exact = (r->P & (r->P - 1)) == 0 && strcmp(r->tname, "nccl") != 0;
    r->tol = exact ? 0.0 : 1e-6;
    ExchangeCalibration cal;
    r->x->calibrate(r->st, r->grads, 0, &cal); /* setup, as dtbench's (src/run/main.c) */
}

/* Iteration it's gradients, k(me, i, it) / 1024, uploaded; want: their exact average. */
static void fill_grads(const Run *r, int it) {
    for (size_t i = 0; i < r->nparams; i++) {
        long sum = 0;
        for (int p = 0; p < r->P; p++)
            sum += k_of(p, i, it);
        r->host[i] = (float)k_of(r->me, i, it) / 1024.0f;
        r->want[i] = (float)((double)sum / 1024.0 / r->P);
    }
    r->be->upload(r->ctx, r->grads, r->host, r->nparams * sizeof(float));
}

/* --overlap: backward, simulated with grads_ready(); 0 when --progress-thread's first bucket was
 * not summed without MPI calls from this thread (said on stderr), else 1. */
static int backward(const Run *r, int it) {
    const size_t nparams = r->nparams;
    int unaided = 1; /* --progress-thread: the first bucket summed without MPI calls here */
    if (r->overlap)  /* backward: the last layers' gradients are final first */
        for (int cut = 4; cut >= 0; cut--) {
            size_t first = nparams * (size_t)cut / 5 + (cut ? 3 : 0);
            r->x->grads_ready(r->st, r->grads, first < nparams ? first : nparams);
            size_t lo = bucket_lo(nparams, r->bucket);
            if (cut == 4 && r->thread && r->P > 1 && !strcmp(r->tname, "mpi") &&
                r->be == &cpu_backend && lo >= first)
                unaided = summed_without_caller(r->grads, lo, nparams, r->P, it);
        }
    if (!unaided)
        fprintf(stderr,
                "rank %d: iteration %d: the first bucket was not summed in 20 s "
                "without MPI calls from this thread (no progress thread?)\n",
                r->me, it);
    return unaided;
}

/* The exchange of iteration it, its report, and the averages downloaded into host (times the
 * step's grad_scale); *alloc_ok: the heap grew no more than allowed. Returns exchange()'s code. */
static int exchange(const Run *r, ExchangeStep *step, int it, int *alloc_ok) {
    struct mallinfo2 m0 = mallinfo2();
    int rc = r->x->exchange(r->st, NULL, r->grads, step);
    struct mallinfo2 m1 = mallinfo2();
    double grew =
        ((double)m1.uordblks + (double)m1.hblkhd) - ((double)m0.uordblks + (double)m0.hblkhd);
    *alloc_ok = it > 0 || r->be != as_device_backend(0) ||
                grew <= 262144.0 + (double)r->bucket * sizeof(float); /* MPI's free lists */
    if (!*alloc_ok)
        fprintf(stderr, "rank %d: iteration %d's exchange grew the heap by %.0f bytes\n", r->me, it,
                grew);
    r->x->report(r->st, step);
    r->be->download(r->ctx, r->host, r->grads, r->nparams * sizeof(float));
    if (step->grad_scale > 0 && step->grad_scale != 1.0) /* sums left for the update */
        for (size_t i = 0; i < r->nparams; i++)
            r->host[i] *= (float)step->grad_scale;
    return rc;
}

/* Iteration it's averages against the exact ones, its stop vote and hidden time, and others_ok
 * (this rank's heap, progress thread and exchange's code); rank 0 prints the line. Returns 1 when
 * some rank failed, else 0. */
static int judge(const Run *r, const ExchangeStep *step, int it, int others_ok) {
    const size_t nparams = r->nparams;
    double worst = 0.0;
    size_t bad = 0;
    for (size_t i = 0; i < nparams; i++) {
        double d = fabs((double)r->host[i] - (double)r->want[i]);
        if (!(d <= r->tol)) bad++;
        if (!(d <= worst)) worst = d;
    }
    int stop_ok = step->stop == (it == r->iters - 1);
    int hidden_ok = isfinite(step->hidden) && step->hidden >= 0.0 &&
                    (r->overlap || r->P == 1 || step->hidden == 0.0);
    int mine = bad != 0 || !stop_ok || !hidden_ok || !others_ok;
    double worst_all = 0.0;
    int bad_all = 0;
    MPI_CHECK(MPI_Reduce(&worst, &worst_all, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD));
    MPI_CHECK(MPI_Allreduce(&mine, &bad_all, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD));
    if (r->me == 0)
        printf("%s: %s on %d ranks as %d node(s) of %d, %zu floats in buckets of %zu%s, "
               "iteration %d: max |avg - exact| %.3g (tolerance %g); stop %d; hidden %.3g s\n",
               bad_all ? "FAIL" : "ok", r->tname, r->P, r->topo->nnodes, r->topo->local_size,
               nparams, r->bucket,
               r->overlap ? (r->thread ? ", overlapped (progress thread)" : ", overlapped") : "",
               it, worst_all, r->tol, step->stop, step->hidden);
    if (bad && bad_all)
        fprintf(stderr, "rank %d: %zu of %zu values wrong, stop %d, hidden %g\n", r->me, bad,
                nparams, step->stop, step->hidden);
    return bad_all;
}

/* One iteration: the gradients, backward, the exchange, the check; 1 when some rank failed. */
static int iteration(const Run *r, int it) {
    fill_grads(r, it);
    int unaided = backward(r, it);
    ExchangeStep step = {.iteration = it,
                         .stop_requested = it == r->iters - 1 && r->me == r->P - 1};
    int alloc_ok, rc = exchange(r, &step, it, &alloc_ok);
    return judge(r, &step, it, alloc_ok && unaided && rc == EXCHANGE_APPLY_UPDATE);
}

int main(int argc, char **argv) {
    Topology topo;
    Run r = {.device = "cpu", .iters = 3, .nparams = 10007, .bucket = 1000, .topo = &topo};
    if (start_mpi(&argc, &argv, &r.thread)) return 77;
    mpi_check_start();
    if (argc < 3) {
        fprintf(stderr, "usage: exchange_avg TRANSPORT RANKS_PER_NODE [options]\n");
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    r.tname = argv[1], r.rpn = atoi(argv[2]);
    parse_options(argc, argv, &r);
    if (!start_backend(&r)) return 77;
    create_exchange(&r);

    int failures = 0;
    for (int it = 0; it < r.iters; it++)
        failures += iteration(&r, it);
    r.x->finish(r.st, NULL);
    r.x->destroy(r.st);
    r.be->free(r.ctx, r.grads);
    r.be->finalize(r.ctx);
    free(r.host), free(r.want);
    topology_free(&topo);
    MPI_Finalize();
    return failures ? 1 : 0;
}
