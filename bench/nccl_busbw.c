/* nccl_busbw.c - NCCL allreduce bandwidth for the gradient sizes of dtbench's models, measured as
 * nccl-tests measures it: one rank per GPU, in-place ncclAllReduce(sum) of S bytes, CUDA events
 * around `iters` back-to-back calls after `warmup` untimed ones; algbw = S / t,
 * busbw = algbw * 2(n-1)/n (the bandwidth each link must carry in a ring, comparable across
 * rank counts). Inputs are seeded so that the result is known exactly: #wrong is printed next to
 * every timing (an element is wrong when it differs from the exact sum at all).
 *
 *   mpirun -np NGPUS bench/nccl_busbw [--warmup 5] [--iters 20] [--bucket-mb 25]
 *                                     [NAME=FLOATS ...]
 * NAME=FLOATS: a model's gradient (bench/gpu_bench.sh passes every model's parameter count as
 * `dtbench --dry-run` prints it); always also bucket=FLOATS of --bucket-mb (dtbench's default
 * bucket), the only size without NAME=FLOATS. For each model size it also times
 * the whole gradient cut into --bucket-mb buckets, one allreduce each, as dtbench's exchange does.
 * One line per size (rank 0), then the same as JSON lines when --json is given.
 * Built with the CUDA backend and NCCL (bench/README.md); needs one GPU per rank. */
#include <config.h>
#include "cuda.h"
#include "mpi_check.h" /* defines: MPI_CHECK (no longer through cuda_check.h) */
#include "cuda_check.h" /* defines: CUDA_CHECK */
#include "nccl_check.h" /* defines: NCCL_CHECK */
#include "alloc.h"      /* defines: xmalloc */

#include <nccl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    char name[64];
    size_t floats;
} Size;

/* (rank + 1) * (i % 7 + 1) / 8: small integers over 8, so every partial sum is exact in float */
static float value(int rank, size_t i) {
    return (float)((rank + 1) * (int)(i % 7 + 1)) / 8.0f;
}

/* What every measurement uses: the options, the ranks, NCCL (its version nv), the stream and the
 * timing events. */
typedef struct {
    int rank, n, warmup, iters, json, nv;
    double bucket_mb;
    ncclComm_t comm;
    cudaStream_t stream;
    cudaEvent_t t0, t1;
} Bench;

/* The options and the NAME=FLOATS sizes; 1 on an unknown argument (rank 0 says so), else 0. */
static int parse_args(int argc, char **argv, Bench *b, Size *sizes, int *nsizes) {
    for (int a = 1; a < argc; a++) {
        if (!strcmp(argv[a], "--warmup") && a + 1 < argc)
            b->warmup = atoi(argv[++a]);
        else if (!strcmp(argv[a], "--iters") && a + 1 < argc)
            b->iters = atoi(argv[++a]);
        else if (!strcmp(argv[a], "--bucket-mb") && a + 1 < argc)
            b->bucket_mb = atof(argv[++a]);
        else if (!strcmp(argv[a], "--json"))
            b->json = 1;
        else if (strchr(argv[a], '=') && *nsizes < 32) {
            char *eq = strchr(argv[a], '=');
            snprintf(sizes[*nsizes].name, sizeof sizes[*nsizes].name, "%.*s", (int)(eq - argv[a]),
                     argv[a]);
            sizes[(*nsizes)++].floats = strtoull(eq + 1, NULL, 10);
        } else {
            if (b->rank == 0) fprintf(stderr, "nccl_busbw: unknown argument %s\n", argv[a]);
            return 1;
        }
    }
    return 0;
}

/* One GPU per rank, by local rank; NCCL's communicator, the stream, the events. 1 when no GPU is
 * visible (rank 0 says so), else 0. */
static int start_nccl(Bench *b, MPI_Comm *node) {
    int local;
    MPI_CHECK(
        MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, b->rank, MPI_INFO_NULL, node));
    MPI_CHECK(MPI_Comm_rank(*node, &local));
    int gpus = cuda_device_count();
    if (gpus == 0) {
        if (b->rank == 0) fprintf(stderr, "nccl_busbw: no CUDA device visible\n");
        return 1;
    }
    CUDA_CHECK(cudaSetDevice(local % gpus));
    ncclUniqueId id;
    if (b->rank == 0) NCCL_CHECK(ncclGetUniqueId(&id));
    MPI_CHECK(MPI_Bcast(&id, (int)sizeof id, MPI_BYTE, 0, MPI_COMM_WORLD));
    NCCL_CHECK(ncclCommInitRank(&b->comm, b->n, id, b->rank));
    CUDA_CHECK(cudaStreamCreateWithFlags(&b->stream, cudaStreamNonBlocking));
    CUDA_CHECK(cudaEventCreate(&b->t0));
    CUDA_CHECK(cudaEventCreate(&b->t1));
    return 0;
}

/* In-place ncclAllReduce(sum) of dev[0 .. count) in pieces of `piece` floats, on the stream. */
static void allreduce_pieces(const Bench *b, float *dev, size_t count, size_t piece) {
    for (size_t off = 0; off < count; off += piece) {
        size_t c = count - off < piece ? count - off : piece;
        NCCL_CHECK(
            ncclAllReduce(dev + off, dev + off, c, ncclFloat32, ncclSum, b->comm, b->stream));
    }
}

/* Rank 0's line (and JSON line) of one measurement: t seconds per call of `bytes`. */
static void print_result(const Bench *b, const char *name, size_t bytes, double t, size_t count,
                         size_t piece, long long wrong_all) {
    const int n = b->n;
    double alg = t > 0 ? bytes / t / 1e9 : 0, bus = alg * 2.0 * (n - 1) / n;
    size_t nb = (count + piece - 1) / (piece ? piece : 1);
    printf("  %-10s %14zu %12.1f %10.2f %10.2f %10zu %8lld\n", name, bytes, t * 1e6, alg, bus, nb,
           wrong_all);
    if (b->json)
        printf("{\"size\": \"%s\", \"bytes\": %zu, \"ranks\": %d, \"time_s\": %.9g, "
               "\"algbw_GBps\": %.6g, \"busbw_GBps\": %.6g, \"buckets\": %zu, "
               "\"wrong\": %lld, \"nccl\": %d}\n",
               name, bytes, n, t, alg, bus, nb, wrong_all, b->nv);
    fflush(stdout);
}

/* count floats in pieces of `piece`: #wrong after one call on the seeded input, then the time per
 * call of the slowest rank; printed by rank 0. */
static void measure(const Bench *b, const char *name, float *host, float *dev, size_t count,
                    size_t piece) {
    const int n = b->n;
    size_t bytes = count * sizeof(float);
    for (size_t i = 0; i < count; i++)
        host[i] = value(b->rank, i);
    CUDA_CHECK(cudaMemcpy(dev, host, bytes, cudaMemcpyHostToDevice));
    /* correctness: one call on the seeded input */
    allreduce_pieces(b, dev, count, piece);
    CUDA_CHECK(cudaStreamSynchronize(b->stream));
    CUDA_CHECK(cudaMemcpy(host, dev, bytes, cudaMemcpyDeviceToHost));
    long long wrong = 0;
    float factor = (float)(n * (n + 1) / 2); /* sum over ranks of (rank + 1) */
    for (size_t i = 0; i < count; i++)
        wrong += host[i] != factor * (float)(int)(i % 7 + 1) / 8.0f;
    /* timing (values grow, which does not change the time) */
    for (int it = 0; it < b->warmup + b->iters; it++) {
        if (it == b->warmup) CUDA_CHECK(cudaEventRecord(b->t0, b->stream));
        allreduce_pieces(b, dev, count, piece);
    }
    CUDA_CHECK(cudaEventRecord(b->t1, b->stream));
    CUDA_CHECK(cudaEventSynchronize(b->t1));
    float ms = 0;
    CUDA_CHECK(cudaEventElapsedTime(&ms, b->t0, b->t1));
    double t = 0, mine = b->iters > 0 ? 1e-3 * ms / b->iters : 0; /* per call; slowest rank */
    MPI_CHECK(MPI_Reduce(&mine, &t, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD));
    long long wrong_all = 0;
    MPI_CHECK(MPI_Reduce(&wrong, &wrong_all, 1, MPI_LONG_LONG, MPI_SUM, 0, MPI_COMM_WORLD));
    if (b->rank == 0) print_result(b, name, bytes, t, count, piece, wrong_all);
}

/* One size of the list: its buffers, and the measurements on them. */
static void measure_size(const Bench *b, const Size *size, size_t bucket) {
    size_t count = size->floats, bytes = count * sizeof(float);
    float *host = xmalloc(bytes ? bytes : 4), *dev = NULL;
    CUDA_CHECK(cudaMalloc((void **)&dev, bytes ? bytes : 4));
    /* whole buffer in one call, then (model sizes) in dtbench's buckets */
    for (int bucketed = 0; bucketed < 2; bucketed++) {
        size_t piece = bucketed ? bucket : count;
        if (bucketed && (piece == 0 || piece >= count)) continue;
        measure(b, size->name, host, dev, count, piece);
    }
    CUDA_CHECK(cudaFree(dev));
    free(host);
}

int main(int argc, char **argv) {
    MPI_CHECK(MPI_Init(&argc, &argv));
    mpi_check_start();
    Bench b = {.warmup = 5, .iters = 20, .bucket_mb = 25.0};
    MPI_CHECK(MPI_Comm_rank(MPI_COMM_WORLD, &b.rank));
    MPI_CHECK(MPI_Comm_size(MPI_COMM_WORLD, &b.n));
    Size sizes[32];
    int nsizes = 0;
    if (parse_args(argc, argv, &b, sizes, &nsizes)) {
        MPI_Finalize();
        return 2;
    }
    size_t bucket = (size_t)(b.bucket_mb * 1048576.0 / sizeof(float));
    if (nsizes < (int)(sizeof sizes / sizeof sizes[0])) sizes[nsizes++] = (Size){"bucket", bucket};

    MPI_Comm node;
    if (start_nccl(&b, &node)) {
        MPI_Finalize();
        return 77;
    }
    NCCL_CHECK(ncclGetVersion(&b.nv));
    if (b.rank == 0) {
        printf("# nccl_busbw: %d rank(s), NCCL %d.%d.%d, in-place ncclAllReduce(float, sum), "
               "%d warm-up + %d timed calls per size\n",
               b.n, b.nv / 10000, b.nv / 100 % 100, b.nv % 100, b.warmup, b.iters);
        printf("# %-10s %14s %12s %10s %10s %10s %8s\n", "size", "bytes", "time_us", "algbw_GB/s",
               "busbw_GB/s", "buckets", "#wrong");
    }

    for (int s = 0; s < nsizes; s++)
        measure_size(&b, &sizes[s], bucket);
    if (b.rank == 0 && b.n == 1)
        printf("# one rank: busbw = algbw * 2(n-1)/n is 0 by definition (no link is used); "
               "algbw is a device-local copy\n");
    NCCL_CHECK(ncclCommDestroy(b.comm));
    MPI_Comm_free(&node);
    MPI_Finalize();
    return 0;
}
