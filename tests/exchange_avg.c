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

int main(int argc, char **argv) {
    int thread = 0, provided;
    for (int a = 3; a < argc; a++)
        thread |= !strcmp(argv[a], "--progress-thread");
    MPI_CHECK(
        MPI_Init_thread(&argc, &argv, thread ? MPI_THREAD_MULTIPLE : MPI_THREAD_SINGLE, &provided));
    if (thread && provided < MPI_THREAD_MULTIPLE) {
        printf("SKIP: MPI_THREAD_MULTIPLE not granted (%d)\n", provided);
        MPI_Finalize();
        return 77;
    }
    MPI_CHECK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
    if (argc < 3) {
        fprintf(stderr, "usage: exchange_avg TRANSPORT RANKS_PER_NODE [options]\n");
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    const char *tname = argv[1], *device = "cpu";
    int rpn = atoi(argv[2]), overlap = 0, iters = 3;
    size_t nparams = 10007, bucket = 1000;
    for (int a = 3; a < argc; a++) {
        if (!strcmp(argv[a], "--overlap"))
            overlap = 1;
        else if (!strcmp(argv[a], "--device") && a + 1 < argc)
            device = argv[++a];
        else if (!strcmp(argv[a], "--nparams") && a + 1 < argc)
            nparams = strtoul(argv[++a], 0, 10);
        else if (!strcmp(argv[a], "--bucket") && a + 1 < argc)
            bucket = strtoul(argv[++a], 0, 10);
        else if (!strcmp(argv[a], "--iters") && a + 1 < argc)
            iters = atoi(argv[++a]);
    }

    Topology topo;
    topology_init(&topo, rpn);
    const int P = topo.nranks, me = topo.rank;
    const BackendOps *be = backend_named(device);
    const TransportOps *tp = registry_transport(tname);
    BackendCtx *ctx = NULL;
    BackendConfig bcfg = {.threads = 1, .local_rank = topo.host_local_rank, .gpus_per_node = 0};
    int ok_here = be && tp && be->init(&bcfg, &ctx) == 0, ok_all = 0;
    MPI_CHECK(MPI_Allreduce(&ok_here, &ok_all, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD));
    if (!ok_all) {
        if (me == 0)
            printf("SKIP: device %s / transport %s not available here %s\n", device, tname,
                   registry_load_error());
        MPI_Finalize();
        return 77;
    }

    ExchangeConfig cfg = {.comm = MPI_COMM_WORLD,
                          .topo = &topo,
                          .nparams = nparams,
                          .bucket_floats = bucket,
                          .be = be,
                          .ctx = ctx,
                          .transport = tp,
                          .device_coll = be != as_device_backend(0) ? registry_coll("nccl") : NULL,
                          .overlap = overlap,
                          .progress_thread = thread};
    const ExchangeOps *x = registry_exchange("sync");
    char err[256] = "";
    ExchangeState *st = x->create(&cfg, err, sizeof err);
    if (!st) check_fail(__FILE__, __LINE__, "create", err);
    float *grads = be->alloc(ctx, nparams * sizeof(float));
    float *host = xmalloc(nparams * sizeof(float)), *want = xmalloc(nparams * sizeof(float));
    int exact = (P & (P - 1)) == 0 && strcmp(tname, "nccl") != 0, failures = 0;
    double tol = exact ? 0.0 : 1e-6;
    ExchangeCalibration cal;
    x->calibrate(st, grads, 0, &cal); /* setup, as dtbench's (src/main.c) */

    for (int it = 0; it < iters; it++) {
        for (size_t i = 0; i < nparams; i++) {
            long sum = 0;
            for (int r = 0; r < P; r++)
                sum += k_of(r, i, it);
            host[i] = (float)k_of(me, i, it) / 1024.0f;
            want[i] = (float)((double)sum / 1024.0 / P);
        }
        be->upload(ctx, grads, host, nparams * sizeof(float));
        int unaided = 1; /* --progress-thread: the first bucket summed without MPI calls here */
        if (overlap)     /* backward: the last layers' gradients are final first */
            for (int cut = 4; cut >= 0; cut--) {
                size_t first = nparams * (size_t)cut / 5 + (cut ? 3 : 0);
                x->grads_ready(st, grads, first < nparams ? first : nparams);
                size_t lo = bucket_lo(nparams, bucket);
                if (cut == 4 && thread && P > 1 && !strcmp(tname, "mpi") && be == &cpu_backend &&
                    lo >= first)
                    unaided = summed_without_caller(grads, lo, nparams, P, it);
            }
        if (!unaided)
            fprintf(stderr,
                    "rank %d: iteration %d: the first bucket was not summed in 20 s "
                    "without MPI calls from this thread (no progress thread?)\n",
                    me, it);
        ExchangeStep step = {.iteration = it, .stop_requested = it == iters - 1 && me == P - 1};
        struct mallinfo2 m0 = mallinfo2();
        int rc = x->exchange(st, NULL, grads, &step);
        struct mallinfo2 m1 = mallinfo2();
        double grew =
            ((double)m1.uordblks + (double)m1.hblkhd) - ((double)m0.uordblks + (double)m0.hblkhd);
        int alloc_ok = it > 0 || be != as_device_backend(0) ||
                       grew <= 262144.0 + (double)bucket * sizeof(float); /* MPI's free lists */
        if (!alloc_ok)
            fprintf(stderr, "rank %d: iteration %d's exchange grew the heap by %.0f bytes\n", me,
                    it, grew);
        x->report(st, &step);
        be->download(ctx, host, grads, nparams * sizeof(float));
        if (step.grad_scale > 0 && step.grad_scale != 1.0) /* sums left for the update */
            for (size_t i = 0; i < nparams; i++)
                host[i] *= (float)step.grad_scale;

        double worst = 0.0;
        size_t bad = 0;
        for (size_t i = 0; i < nparams; i++) {
            double d = fabs((double)host[i] - (double)want[i]);
            if (!(d <= tol)) bad++;
            if (!(d <= worst)) worst = d;
        }
        int stop_ok = step.stop == (it == iters - 1);
        int hidden_ok = isfinite(step.hidden) && step.hidden >= 0.0 &&
                        (overlap || P == 1 || step.hidden == 0.0);
        int mine = bad != 0 || !stop_ok || !hidden_ok || !alloc_ok || !unaided ||
                   rc != EXCHANGE_APPLY_UPDATE;
        double worst_all = 0.0;
        int bad_all = 0;
        MPI_CHECK(MPI_Reduce(&worst, &worst_all, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD));
        MPI_CHECK(MPI_Allreduce(&mine, &bad_all, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD));
        failures += bad_all;
        if (me == 0)
            printf("%s: %s on %d ranks as %d node(s) of %d, %zu floats in buckets of %zu%s, "
                   "iteration %d: max |avg - exact| %.3g (tolerance %g); stop %d; hidden %.3g s\n",
                   bad_all ? "FAIL" : "ok", tname, P, topo.nnodes, topo.local_size, nparams, bucket,
                   overlap ? (thread ? ", overlapped (progress thread)" : ", overlapped") : "", it,
                   worst_all, tol, step.stop, step.hidden);
        if (bad && bad_all)
            fprintf(stderr, "rank %d: %zu of %zu values wrong, stop %d, hidden %g\n", me, bad,
                    nparams, step.stop, step.hidden);
    }
    x->finish(st, NULL);
    x->destroy(st);
    be->free(ctx, grads);
    be->finalize(ctx);
    free(host), free(want);
    topology_free(&topo);
    MPI_Finalize();
    return failures ? 1 : 0;
}
