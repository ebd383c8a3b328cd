/* staged_check.c - host-memory strategies on device memory (comm/staged.c, and mixed's own host
 * copy) give the parameters the unwrapped strategy gives on the host, without a GPU.
 *
 *   mpirun -np 2 staged_check STRATEGY RANKS_PER_NODE [ITERS [sgd|adamw]]
 *
 * The "device" is the CPU posing as one, sealed (comm/as_device.h): its buffers hold every float
 * byte-swapped, reached only through its upload/download (which count the bytes they move) and
 * its sgd_update and adamw_update (decode, the CPU backend's step, encode). A strategy that read or
 * wrote a device buffer directly would see garbage. Both runs do what the driver does: gradients
 * that depend on the parameters (so every update's order matters), the strategy's exchange, the
 * optimizer step when the strategy asks for it (grad_scale folded in as src/run/driver.c does;
 * AdamW: its step counted with the strategy's, its decay on some runs of the layout), then
 * finish(). The
 * final parameters must be equal bit for bit, and the wrapped run must move exactly the copies
 * the design says (per iteration: 2 downloads and 1 upload of the parameter buffer through the
 * wrapper; mixed: none outside finish with a period longer than the run).
 * Exit 0 pass, 1 fail. */
#include "mpi_check.h" /* defines: MPI_CHECK */
#include "as_device.h" /* defines: as_device_backend, as_device_traffic */
#include "exchange.h"
#include "parts.h" /* defines: registry_exchange, registry_host_backend */
#include "topology.h"
#include "alloc.h" /* defines: xmalloc, xcalloc */

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- one run, as the driver runs it ---------------------------------------------------------- */
enum { N = 1000 };
static const float LR = 0.05f, MOM = 0.9f, WD = 1e-3f;
/* AdamW: decay on [0, 600) and [850, 1000), none on [600, 850) */
static const DecayRange RUNS[] = {{0, 600, 1}, {600, 250, 0}, {850, 150, 1}};

/* The driver's update (src/run/driver.c): SGD with grad_scale folded into lr and weight decay,
 * AdamW with it folded into eps. */
static void update(const BackendOps *be, const Optimizer *o, int64_t *steps, double gs, float *p,
                   const float *g, float *v, float *s) {
    if (o->kind == OPTIMIZER_ADAMW) {
        AdamWStep a = optimizer_adamw_step(o, ++*steps);
        a.eps = (float)(o->eps / gs);
        optimizer_adamw_ranges(be, NULL, &a, o->ranges, o->nranges, 0, N, p, g, v, s);
    } else {
        be->sgd_update(NULL, N, p, g, v, (float)(o->lr * gs), o->momentum,
                       (float)(o->weight_decay / gs));
    }
}

/* Gradients from the parameters, the rank and the iteration. */
static void gradients(const float *p, float *g, int rank, int64_t it) {
    for (size_t i = 0; i < N; i++)
        g[i] = sinf(p[i] * (float)(rank + 1)) + 0.01f * (float)((int64_t)i % 7 - it);
}

/* Trains `iters` iterations; returns the final parameters (host) in out. */
static void run(const ExchangeOps *x, const BackendOps *be, const Topology *topo, int iters,
                int staleness, int period, int adamw, float *out) {
    int rank = topo->rank;
    float *hp = xmalloc(N * 4), *hg = xmalloc(N * 4);
    for (size_t i = 0; i < N; i++)
        hp[i] = 0.001f * (float)((int)(i * 37 % 101) - 50);
    float *p = be->alloc(NULL, N * 4), *g = be->alloc(NULL, N * 4), *v = be->alloc(NULL, N * 4);
    float *s = adamw ? be->alloc(NULL, N * 4) : NULL;
    be->upload(NULL, p, hp, N * 4);
    int64_t steps = 0;
    const Optimizer sgd = {.lr = LR, .momentum = MOM, .weight_decay = WD};
    const Optimizer adam = {.kind = OPTIMIZER_ADAMW,
                            .lr = 1e-3f,
                            .weight_decay = 0.1f,
                            .beta1 = 0.9f,
                            .beta2 = 0.95f,
                            .eps = 1e-8f,
                            .ranges = RUNS,
                            .nranges = 3};
    ExchangeConfig cfg = {.comm = MPI_COMM_WORLD,
                          .topo = topo,
                          .nparams = N,
                          .bucket_floats = 300,
                          .be = be,
                          .host_be = registry_host_backend(),
                          .optim = adamw ? adam : sgd,
                          .velocity = v,
                          .variance = s,
                          .steps = &steps,
                          .staleness = staleness,
                          .ps_ranks = 1,
                          .sync_period = period};
    char err[256] = "";
    ExchangeState *st = x->create(&cfg, err, sizeof err);
    if (!st) fprintf(stderr, "create: %s\n", err), exit(1);
    int index, count;
    if (x->role(st, &index, &count) == EXCHANGE_SERVER) {
        x->serve(st, p);
    } else {
        for (int64_t it = 0; it < iters; it++) {
            be->download(NULL, hp, p, N * 4);
            gradients(hp, hg, rank, it);
            be->upload(NULL, g, hg, N * 4);
            ExchangeStep xs = {.iteration = it};
            if (x->exchange(st, p, g, &xs) == EXCHANGE_APPLY_UPDATE)
                update(be, &cfg.optim, &steps, xs.grad_scale > 0 ? xs.grad_scale : 1.0, p, g, v, s);
        }
    }
    x->finish(st, p);
    x->destroy(st);
    be->download(NULL, out, p, N * 4);
    be->free(NULL, p), be->free(NULL, g), be->free(NULL, v), be->free(NULL, s);
    free(hp), free(hg);
}

int main(int argc, char **argv) {
    MPI_CHECK(MPI_Init(&argc, &argv));
    mpi_check_start();
    if (argc < 3)
        fprintf(stderr, "usage: staged_check STRATEGY RANKS_PER_NODE [ITERS [sgd|adamw]]\n"),
            exit(2);
    const char *name = argv[1];
    int iters = argc > 3 ? atoi(argv[3]) : 6;
    const int adamw = argc > 4 && !strcmp(argv[4], "adamw"); /* a: its second moment */
    const ExchangeOps *x = registry_exchange(name);
    if (!x || !strcmp(name, "sync"))
        fprintf(stderr, "staged_check: %s: no such strategy\n", name), exit(2);
    Topology topo;
    topology_init(&topo, atoi(argv[2]));
    int staleness = 2, period = iters + 1; /* mixed: the ring never runs (its timing is free) */

    float ref[N], dev[N];
    run(x, registry_host_backend(), &topo, iters, staleness, period, adamw, ref);
    /* the wrapper where the resolver picks it (device_ok 0), the strategy itself otherwise */
    const ExchangeOps *wx = x->device_ok ? x : exchange_staged(x);
    double up0, down0, up_bytes, down_bytes;
    as_device_traffic(&up0, &down0);
    run(wx, as_device_backend(1), &topo, iters, staleness, period, adamw, dev);
    as_device_traffic(&up_bytes, &down_bytes);
    up_bytes -= up0, down_bytes -= down0;

    int bad = 0;
    for (int i = 0; i < N; i++)
        bad += memcmp(&ref[i], &dev[i], 4) != 0;
    double moved = 0;
    for (int i = 0; i < N; i++)
        moved += fabs((double)dev[i] - (0.001 * (double)((int)(i * 37 % 101) - 50)));
    /* copies beyond the driver's own (per worker iteration: params down, grads up; an update
     * on the device moves nothing) and the run's set-up (params up, final params down) */
    double per = (double)N * 4, extra_down, extra_up;
    int server = x->serve != NULL && topo.rank >= topo.nranks - 1; /* --ps-ranks 1: the last */
    double worker_iters = server ? 0 : iters;
    extra_down = down_bytes - per * (worker_iters + 1);
    extra_up = up_bytes - per * (worker_iters + 1);
    double want_down, want_up;
    if (x->device_ok) { /* mixed: one node's average through the transport, the ring in finish */
        want_down = topo.nnodes > 1 ? per : 0;
        want_up = topo.nnodes > 1 ? per : 0;
        if (topo.local_size > 1) /* mpi transport on device memory: buckets down and up */
            want_down += per * worker_iters, want_up += per * worker_iters;
    } else {
        /* create: velocity (AdamW: and variance) down; each iteration: params and grads down,
         * one of them up; finish (and serve): params and velocity (and variance) down and up */
        want_down = per * (1 + adamw + 2 * worker_iters + (2 + adamw) * (1 + server));
        want_up = per * (worker_iters + (2 + adamw) * (1 + server));
    }
    int copies_ok = extra_down == want_down && extra_up == want_up;
    printf("rank %d %s%s%s (%d nodes of %d): %d of %d parameters differ, moved %.3g; copies down "
           "%.0f (expected %.0f), up %.0f (expected %.0f) buffers\n",
           topo.rank, name, x->device_ok ? "" : " staged", adamw ? " adamw" : "", topo.nnodes,
           topo.local_size, bad, N, moved, extra_down / per, want_down / per, extra_up / per,
           want_up / per);
    int ok = bad == 0 && moved > 0 && copies_ok;
    MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, &ok, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD));
    topology_free(&topo);
    MPI_CHECK(MPI_Finalize());
    return ok ? 0 : 1;
}
