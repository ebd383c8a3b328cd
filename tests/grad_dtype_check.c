/* grad_dtype_check.c - the gradient exchange in a 2-byte wire type (--grad-dtype) gives what
 * rounding to that type predicts, on CPU ranks, for every strategy and the transports mpi and hier.
 *
 *   mpirun -np P grad_dtype_check STRATEGY TRANSPORT DTYPE RANKS_PER_NODE [--overlap]
 *                                 [--nparams N] [--bucket FLOATS] [--device cuda]
 *
 * Gradients: seeded multiples of 2^-12 in (-1, 1), scaled by 2^-s (s in 0..3): more significant
 * bits than bf16 (8) or fp16 (11) keep, so the wire type must round them.
 *   sync, ssp (S = 1), mixed (one node: the node's average; several: each node's): the averaged
 *   gradients must be bitwise equal on every rank that averaged together; with 2 ranks in the
 *   group, bit for bit r(r(g0) + r(g1)) x 1/2 (r: rounding to the wire type, from grad_cast.h,
 *   itself checked by test_grad_cast); with more, within the rounding bound
 *   u (sum_r |g_r| + 2 |avg|) (u = 2^-8 bf16, 2^-11 fp16: each input, each partial sum and a last
 *   re-rounding of the average in the hierarchical all-gather round by at most u of what they
 *   hold). And the wire type must show: some averages differ from fp32's.
 *   async (1 server, lr 1, momentum 0; run it with W = P - 1 a power of two, gradients q/4096):
 *   the final parameters are p0 - sum over pushes of r(g)/W exactly (every partial sum exact),
 *   which fails if the server applies unrounded gradients or misreads the 2-byte push.
 * --device cuda (sync only; transports mpi, hier, nccl): the same on GPU buffers, NCCL reducing
 * in ncclBfloat16/ncclFloat16 with the casts on the GPU; exit 77 when no GPU (or NCCL) is here.
 * Prints one line per check from rank 0; exit 0 pass, 1 fail. */
#include "mpi_check.h" /* defines: MPI_CHECK, check_fail */
#include "exchange.h"
#include "grad_cast.h"
#include "parts.h" /* defines: registry_backend, registry_exchange, registry_transport ... */
#include "topology.h"
#include "alloc.h" /* defines: xmalloc, xcalloc */
#include "rng.h"   /* defines: rng_mix */

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int spread = 4; /* scales 2^0 .. 2^-(spread-1); async: 1 (sums stay exact in fp32) */

static float grad_of(int rank, size_t i, int it) {
    uint64_t h = rng_mix(((uint64_t)it << 48) ^ ((uint64_t)rank << 36) ^ i);
    int q = (int)(h % 8191) - 4095; /* q / 4096 in (-1, 1) */
    return ldexpf((float)q / 4096.0f, -(int)((h >> 20) % (uint64_t)spread));
}

static float round_to(GradDtype dt, float x) {
    grad_round(dt, &x, 1);
    return x;
}

static int all_ok(int mine) {
    int all = 0;
    MPI_CHECK(MPI_Allreduce(&mine, &all, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD));
    return all;
}

/* The ranks of `group` hold bitwise the same n floats. */
static int same_on_group(MPI_Comm group, const float *x, size_t n) {
    uint64_t h = 1469598103934665603ull, lo, hi;
    for (size_t i = 0; i < n; i++) {
        uint32_t u;
        memcpy(&u, &x[i], sizeof u);
        h = rng_mix(h ^ u);
    }
    MPI_CHECK(MPI_Allreduce(&h, &lo, 1, MPI_UINT64_T, MPI_MIN, group));
    MPI_CHECK(MPI_Allreduce(&h, &hi, 1, MPI_UINT64_T, MPI_MAX, group));
    return lo == hi;
}

/* async: final parameters against p0 - sum of rounded pushes / W. */
static int check_async(const ExchangeOps *x, ExchangeConfig *cfg, GradDtype dt, int iters) {
    size_t n = cfg->nparams;
    float *p = xcalloc(n, sizeof(float)), *g = xmalloc(n * sizeof(float));
    double *want = xcalloc(n, sizeof(double));
    char err[256] = "";
    ExchangeState *st = x->create(cfg, err, sizeof err);
    if (!st) check_fail(__FILE__, __LINE__, "create", err);
    int wi = 0, W = 0, role = x->role(st, &wi, &W);
    if (role == EXCHANGE_SERVER) {
        x->serve(st, p);
    } else {
        for (int it = 0; it < iters; it++) {
            for (size_t i = 0; i < n; i++)
                g[i] = grad_of(wi, i, it);
            ExchangeStep step = {.iteration = it};
            x->exchange(st, p, g, &step);
        }
    }
    x->finish(st, p);
    x->destroy(st);
    for (int w = 0; w < W; w++)
        for (int it = 0; it < iters; it++)
            for (size_t i = 0; i < n; i++)
                want[i] -= (double)round_to(dt, grad_of(w, i, it)) / W;
    size_t bad = 0, changed = 0;
    for (size_t i = 0; i < n; i++) {
        bad += (double)p[i] != want[i];
        double fp32 = 0;
        for (int w = 0; w < W; w++)
            for (int it = 0; it < iters; it++)
                fp32 -= (double)grad_of(w, i, it) / W;
        changed += (double)p[i] != fp32;
    }
    int ok = all_ok(bad == 0 && (dt == GRAD_FP32 || changed > 0));
    int rank;
    MPI_CHECK(MPI_Comm_rank(MPI_COMM_WORLD, &rank));
    if (rank == 0)
        printf("%s: async %s, %d workers: %zu of %zu parameters differ from p0 - sum r(g)/W; "
               "%zu differ from fp32's\n",
               ok ? "ok" : "FAIL", grad_dtype_name(dt), W, bad, n, changed);
    free(p), free(g), free(want);
    return ok;
}

/* The averages of the group first .. first+G-1 for iteration src in grads[n] against the
 * rounding (see the header); returns the values outside, sets the largest difference from the
 * exact average and how many differ from it by more than fp32's rounding. */
static size_t check_average(GradDtype dt, const float *grads, size_t n, int first, int G, int src,
                            double *worst, size_t *rounded) {
    double u = dt == GRAD_BF16 ? 0x1p-8 : dt == GRAD_FP16 ? 0x1p-11 : 0x1p-24;
    size_t bad = 0;
    for (size_t i = 0; i < n; i++) {
        double sum = 0.0, sabs = 0.0;
        for (int r = first; r < first + G; r++) {
            double g = grad_of(r, i, src);
            sum += g, sabs += fabs(g);
        }
        double avg = sum / G, d = fabs((double)grads[i] - avg);
        *rounded += d > 0x1p-24 * sabs;
        if (G == 2) { /* one rounded sum of the two rounded inputs, halved: exact (or that half
                         rounded once more, by hier's all-gather after the scale) */
            double want = 0.5 * round_to(dt, round_to(dt, grad_of(first, i, src)) +
                                                 round_to(dt, grad_of(first + 1, i, src)));
            bad += (double)grads[i] != want && grads[i] != round_to(dt, (float)want);
        } else {
            bad += !(d <= u * (sabs + 2.0 * fabs(avg)) + G * 0x1p-24);
        }
        if (d > *worst) *worst = d;
    }
    return bad;
}

typedef struct {
    const char *xname, *tname;
    const ExchangeOps *x;
    const TransportOps *tp;
    const BackendOps *be;
    GradDtype dt;
    int rpn, overlap;
    size_t nparams, bucket;
} Args;

static Args parse(int argc, char **argv) {
    if (argc < 5) {
        fprintf(stderr, "usage: grad_dtype_check STRATEGY TRANSPORT DTYPE RANKS_PER_NODE ...\n");
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    Args a = {.xname = argv[1],
              .tname = argv[2],
              .rpn = atoi(argv[4]),
              .nparams = 4099,
              .bucket = 1000,
              .be = registry_host_backend()};
    for (int i = 5; i < argc; i++) {
        if (!strcmp(argv[i], "--overlap"))
            a.overlap = 1;
        else if (!strcmp(argv[i], "--nparams") && i + 1 < argc)
            a.nparams = strtoul(argv[++i], 0, 10);
        else if (!strcmp(argv[i], "--bucket") && i + 1 < argc)
            a.bucket = strtoul(argv[++i], 0, 10);
        else if (!strcmp(argv[i], "--device") && i + 1 < argc)
            a.be = registry_backend(argv[++i]); /* NULL: not built here */
    }
    a.x = registry_exchange(a.xname);
    a.tp = registry_transport(a.tname); /* NULL: not built here (nccl) */
    int dtv = grad_dtype_parse(argv[3]);
    if (!a.x || dtv < 0 || (a.be && a.be->device_memory && strcmp(a.xname, "sync"))) {
        fprintf(stderr, "grad_dtype_check: strategy %s, type %s: not accepted\n", a.xname, argv[3]);
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    a.dt = (GradDtype)dtv;
    return a;
}

int main(int argc, char **argv) {
    MPI_CHECK(MPI_Init(&argc, &argv));
    mpi_check_start();
    Args a = parse(argc, argv);
    const ExchangeOps *x = a.x;
    const GradDtype dt = a.dt;
    const size_t nparams = a.nparams;
    const int iters = 3;
    Topology topo;
    topology_init(&topo, a.rpn);
    const int P = topo.nranks, me = topo.rank;
    BackendCtx *ctx = NULL;
    BackendConfig bcfg = {.threads = 1, .local_rank = topo.host_local_rank};
    int here = a.be && a.tp && a.be->init(&bcfg, &ctx) == 0;
    if (!all_ok(here)) { /* no GPU, or NCCL not built */
        if (me == 0)
            printf("SKIP: device or transport %s not available here %s\n", a.tname,
                   registry_load_error());
        MPI_Finalize();
        return 77;
    }
    const BackendOps *be = a.be;
    float *velocity = be->alloc(ctx, nparams * sizeof(float));
    ExchangeConfig cfg = {.comm = MPI_COMM_WORLD,
                          .topo = &topo,
                          .nparams = nparams,
                          .bucket_floats = a.bucket,
                          .be = be,
                          .ctx = ctx,
                          .host_be = registry_host_backend(),
                          .transport = a.tp,
                          .overlap = a.overlap,
                          .optim = {.lr = 1.0f},
                          .velocity = velocity,
                          .staleness = 1,
                          .ps_ranks = 1,
                          .sync_period = 1,
                          .grad_dtype = dt,
                          .device_coll = registry_coll("nccl")};
    if (!strcmp(x->name, "async")) { /* W a power of two: 1/W exact */
        spread = 1;
        int ok = check_async(x, &cfg, dt, iters);
        MPI_Finalize();
        return ok ? 0 : 1;
    }
    if (!strcmp(x->name, "ssp")) cfg.overlap = 0;

    /* the group that averages: everybody, or (mixed) the node */
    int in_node = !strcmp(x->name, "mixed");
    int G = in_node ? topo.local_size : P, first = in_node ? me - topo.local_rank : 0;
    MPI_Comm group = in_node ? topo.node_comm : MPI_COMM_WORLD;
    char err[256] = "";
    ExchangeState *st = x->create(&cfg, err, sizeof err);
    if (!st) check_fail(__FILE__, __LINE__, "create", err);
    float *grads = xmalloc(nparams * sizeof(float)), *dgrads = be->alloc(ctx, nparams * 4);
    float *params = be->alloc(ctx, nparams * sizeof(float));
    int failures = 0, lag = !strcmp(x->name, "ssp");
    for (int it = 0; it < iters; it++) {
        for (size_t i = 0; i < nparams; i++)
            grads[i] = grad_of(me, i, it);
        be->upload(ctx, dgrads, grads, nparams * sizeof(float));
        if (cfg.overlap && x->grads_ready)
            for (int cut = 4; cut >= 0; cut--)
                x->grads_ready(st, dgrads, nparams * (size_t)cut / 5 + (cut ? 3 : 0));
        ExchangeStep step = {.iteration = it};
        int rc = x->exchange(st, params, dgrads, &step);
        if (x->report) x->report(st, &step);
        be->download(ctx, grads, dgrads, nparams * sizeof(float));
        if (rc != EXCHANGE_APPLY_UPDATE) continue; /* ssp: nothing old enough yet */
        if (step.grad_scale > 0 && step.grad_scale != 1.0)
            for (size_t i = 0; i < nparams; i++)
                grads[i] *= (float)step.grad_scale;
        double worst = 0.0;
        size_t rounded = 0,
               bad = check_average(dt, grads, nparams, first, G, it - lag, &worst, &rounded);
        int same = same_on_group(group, grads, nparams);
        int ok = all_ok(bad == 0 && same && (dt == GRAD_FP32 || rounded > 0));
        failures += !ok;
        double worst_all = 0.0;
        MPI_CHECK(MPI_Reduce(&worst, &worst_all, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD));
        if (me == 0)
            printf("%s: %s over %s in %s, %d ranks as %d node(s) of %d%s, iteration %d: "
                   "%zu outside %s, max |avg - fp32 avg| %.3g, %zu rounded, equal on the "
                   "group: %s\n",
                   ok ? "ok" : "FAIL", a.xname, a.tname, grad_dtype_name(dt), P, topo.nnodes,
                   topo.local_size, cfg.overlap ? ", overlapped" : "", it, bad,
                   G == 2 ? "r(r(g0)+r(g1))/2" : "the rounding bound", worst_all, rounded,
                   same ? "yes" : "NO");
    }
    x->finish(st, params);
    x->destroy(st);
    be->free(ctx, dgrads), be->free(ctx, params), be->free(ctx, velocity);
    be->finalize(ctx);
    free(grads);
    topology_free(&topo);
    MPI_Finalize();
    return failures ? 1 : 0;
}
