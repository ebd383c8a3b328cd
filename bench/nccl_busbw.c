/* nccl_busbw.c - NCCL allreduce bandwidth for the gradient sizes of dtbench's models, measured as
 * nccl-tests measures it: one rank per GPU, in-place ncclAllReduce(sum) of S bytes, CUDA events
 * around `iters` back-to-back calls after `warmup` untimed ones; algbw = S / t,
 * busbw = algbw * 2(n-1)/n (the bandwidth each link must carry in a ring, comparable across
 * rank counts). Inputs are seeded so that the result is known exactly: #wrong is printed next to
 * every timing (an element is wrong when it differs from the exact sum at all).
 *
 *   mpirun -np NGPUS bench/nccl_busbw [--warmup 5] [--iters 20] [--bucket-mb 25]
 *                                     [NAME=FLOATS ...]
 * Without NAME=FLOATS: the parameter counts of the zoo (lenet, googlenet, lstm32/64, resnet50,
 * alexnet, fcn5, fcn8, vgg16, as `dtbench --dry-run` prints them),
 * and bucket=FLOATS of --bucket-mb (dtbench's default bucket). For each model size it also times
 * the whole gradient cut into --bucket-mb buckets, one allreduce each, as dtbench's exchange does.
 * One line per size (rank 0), then the same as JSON lines when --json is given.
 * Built with the CUDA backend and NCCL (bench/README.md); needs one GPU per rank. */
#include <config.h>
#include "cuda.h"
#include "check.h"      /* defines: MPI_CHECK (no longer through cuda_check.h) */
#include "cuda_check.h" /* defines: CUDA_CHECK */
#include "nccl_check.h" /* defines: NCCL_CHECK */
#include "util.h"

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

int main(int argc, char **argv) {
    MPI_CHECK(MPI_Init(&argc, &argv));
    MPI_CHECK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
    int rank, n, warmup = 5, iters = 20, json = 0;
    double bucket_mb = 25.0;
    MPI_CHECK(MPI_Comm_rank(MPI_COMM_WORLD, &rank));
    MPI_CHECK(MPI_Comm_size(MPI_COMM_WORLD, &n));
    Size sizes[32];
    int nsizes = 0;
    for (int a = 1; a < argc; a++) {
        if (!strcmp(argv[a], "--warmup") && a + 1 < argc)
            warmup = atoi(argv[++a]);
        else if (!strcmp(argv[a], "--iters") && a + 1 < argc)
            iters = atoi(argv[++a]);
        else if (!strcmp(argv[a], "--bucket-mb") && a + 1 < argc)
            bucket_mb = atof(argv[++a]);
        else if (!strcmp(argv[a], "--json"))
            json = 1;
        else if (strchr(argv[a], '=') && nsizes < 32) {
            char *eq = strchr(argv[a], '=');
            snprintf(sizes[nsizes].name, sizeof sizes[nsizes].name, "%.*s", (int)(eq - argv[a]),
                     argv[a]);
            sizes[nsizes++].floats = strtoull(eq + 1, NULL, 10);
        } else {
            if (rank == 0) fprintf(stderr, "nccl_busbw: unknown argument %s\n", argv[a]);
            MPI_Finalize();
            return 2;
        }
    }
    size_t bucket = (size_t)(bucket_mb * 1048576.0 / sizeof(float));
    if (nsizes == 0) {
        Size d[] = {{"lenet", 431080},        {"googlenet", 6998552}, {"lstm", 6180624},
                    {"resnet50", 25557032}, {"alexnet", 61100840},  {"fcn5", 117997696},
                    {"fcn8", 130586752},    {"vgg16", 138357544},   {"bucket", bucket}};
        memcpy(sizes, d, sizeof d);
        nsizes = (int)(sizeof d / sizeof d[0]);
    }

    /* One GPU per rank, by local rank. */
    MPI_Comm node;
    int local;
    MPI_CHECK(
        MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &node));
    MPI_CHECK(MPI_Comm_rank(node, &local));
    int gpus = cuda_device_count();
    if (gpus == 0) {
        if (rank == 0) fprintf(stderr, "nccl_busbw: no CUDA device visible\n");
        MPI_Finalize();
        return 77;
    }
    CUDA_CHECK(cudaSetDevice(local % gpus));
    ncclUniqueId id;
    if (rank == 0) NCCL_CHECK(ncclGetUniqueId(&id));
    MPI_CHECK(MPI_Bcast(&id, (int)sizeof id, MPI_BYTE, 0, MPI_COMM_WORLD));
    ncclComm_t comm;
    NCCL_CHECK(ncclCommInitRank(&comm, n, id, rank));
    cudaStream_t stream;
    CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
    cudaEvent_t t0, t1;
    CUDA_CHECK(cudaEventCreate(&t0));
    CUDA_CHECK(cudaEventCreate(&t1));
    int nv = 0;
    NCCL_CHECK(ncclGetVersion(&nv));
    if (rank == 0) {
        printf("# nccl_busbw: %d rank(s), NCCL %d.%d.%d, in-place ncclAllReduce(float, sum), "
               "%d warm-up + %d timed calls per size\n",
               n, nv / 10000, nv / 100 % 100, nv % 100, warmup, iters);
        printf("# %-10s %14s %12s %10s %10s %10s %8s\n", "size", "bytes", "time_us", "algbw_GB/s",
               "busbw_GB/s", "buckets", "#wrong");
    }

    for (int s = 0; s < nsizes; s++) {
        size_t count = sizes[s].floats, bytes = count * sizeof(float);
        float *host = xmalloc(bytes ? bytes : 4), *dev = NULL;
        CUDA_CHECK(cudaMalloc((void **)&dev, bytes ? bytes : 4));
        /* whole buffer in one call, then (model sizes) in dtbench's buckets */
        for (int bucketed = 0; bucketed < 2; bucketed++) {
            size_t piece = bucketed ? bucket : count;
            if (bucketed && (piece == 0 || piece >= count)) continue;
            for (size_t i = 0; i < count; i++)
                host[i] = value(rank, i);
            CUDA_CHECK(cudaMemcpy(dev, host, bytes, cudaMemcpyHostToDevice));
            /* correctness: one call on the seeded input */
            for (size_t off = 0; off < count; off += piece) {
                size_t c = count - off < piece ? count - off : piece;
                NCCL_CHECK(
                    ncclAllReduce(dev + off, dev + off, c, ncclFloat32, ncclSum, comm, stream));
            }
            CUDA_CHECK(cudaStreamSynchronize(stream));
            CUDA_CHECK(cudaMemcpy(host, dev, bytes, cudaMemcpyDeviceToHost));
            long long wrong = 0;
            float factor = (float)(n * (n + 1) / 2); /* sum over ranks of (rank + 1) */
            for (size_t i = 0; i < count; i++)
                wrong += host[i] != factor * (float)(int)(i % 7 + 1) / 8.0f;
            /* timing (values grow, which does not change the time) */
            for (int it = 0; it < warmup + iters; it++) {
                if (it == warmup) CUDA_CHECK(cudaEventRecord(t0, stream));
                for (size_t off = 0; off < count; off += piece) {
                    size_t c = count - off < piece ? count - off : piece;
                    NCCL_CHECK(
                        ncclAllReduce(dev + off, dev + off, c, ncclFloat32, ncclSum, comm, stream));
                }
            }
            CUDA_CHECK(cudaEventRecord(t1, stream));
            CUDA_CHECK(cudaEventSynchronize(t1));
            float ms = 0;
            CUDA_CHECK(cudaEventElapsedTime(&ms, t0, t1));
            double t = 0, mine = iters > 0 ? 1e-3 * ms / iters : 0; /* per call; slowest rank */
            MPI_CHECK(MPI_Reduce(&mine, &t, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD));
            long long wrong_all = 0;
            MPI_CHECK(MPI_Reduce(&wrong, &wrong_all, 1, MPI_LONG_LONG, MPI_SUM, 0, MPI_COMM_WORLD));
            if (rank == 0) {
                double alg = t > 0 ? bytes / t / 1e9 : 0, bus = alg * 2.0 * (n - 1) / n;
                size_t nb = (count + piece - 1) / (piece ? piece : 1);
                printf("  %-10s %14zu %12.1f %10.2f %10.2f %10zu %8lld\n", sizes[s].name, bytes,
                       t * 1e6, alg, bus, nb, wrong_all);
                if (json)
                    printf("{\"size\": \"%s\", \"bytes\": %zu, \"ranks\": %d, \"time_s\": %.9g, "
                           "\"algbw_GBps\": %.6g, \"busbw_GBps\": %.6g, \"buckets\": %zu, "
                           "\"wrong\": %lld, \"nccl\": %d}\n",
                           sizes[s].name, bytes, n, t, alg, bus, nb, wrong_all, nv);
                fflush(stdout);
            }
        }
        CUDA_CHECK(cudaFree(dev));
        free(host);
    }
    if (rank == 0 && n == 1)
        printf("# one rank: busbw = algbw * 2(n-1)/n is 0 by definition (no link is used); "
               "algbw is a device-local copy\n");
    NCCL_CHECK(ncclCommDestroy(comm));
    MPI_Comm_free(&node);
    MPI_Finalize();
    return 0;
}
