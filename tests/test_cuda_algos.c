/* test_cuda_algos.c - every cuDNN convolution algorithm, in every direction, on LeNet's and
 * ResNet-50's convolution shapes, measured against the float64 result (tests/conv_check.c): the
 * measurement behind strict fp32's rule (kernels/cuda/cuda_plan.h), brought back by a GPU session.
 *
 * For each shape (from the model tables: LeNet at batch 64, ResNet-50 at 224x224 and --batch,
 * default 8, each distinct shape once), direction (fwd, bwd_data, bwd_filter) and algorithm
 * cuDNN numbers, under CUDNN_FMA_MATH on fp32 NCHW tensors, it prints one line:
 *   the algorithm, whether cuDNN runs it here, its workspace, its rank in cuDNN's heuristics,
 *   its largest error on uniform and on graded inputs (conv_inputs) as a share of the strict fp32
 *   bound, gamma(K) * sum|products| of each output, and whether the rule admits it;
 * then the algorithm the chooser (pick_algo, as kernels/cuda/cuda.c plans) takes for the direction,
 * and the one the old math-type-only rule would have taken. A line ends FAIL when an admitted
 * algorithm exceeds the bound on either input set, or the chooser takes one the rule refuses;
 * refused algorithms are reported, never failed. Each line is a check counted by tests/harness.h.
 * Exit status 0 when nothing failed, 1 otherwise, 77 without a GPU. Options: --batch N
 * (ResNet-50's batch), --model lenet|resnet50 (one only).
 * About 10-30 s on a 16-core GPU machine, most of it the float64 references. */
#include "conv_check.h" /* defines: conv_exact, conv_inputs, conv_measure */
#include "cuda.h"       /* defines: cuda_device_count */
#include "cuda_check.h" /* defines: CUDA_CHECK, CUDNN_CHECK */
#include "cuda_plan.h"  /* defines: pick_algo, conv_algo_strict_fp32 */
#include "harness.h"
#include "model.h"

#include <cudnn.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

extern const ModelDesc model_lenet, model_resnet50; /* src/model/models.c */

#define WS_CAP    ((size_t)8 << 30)   /* larger workspaces are reported, not run */
#define WS_LIMIT  ((size_t)512 << 20) /* the chooser's limit (kernels/cuda/cuda_ctx.h CONV_WS_LIMIT) */
#define MAX_ALGOS 8

static int lines;
static cudnnHandle_t dnn;

typedef struct { /* one shape's descriptors and device buffers */
    ConvShape s;
    cudnnTensorDescriptor_t x, y;
    cudnnFilterDescriptor_t w;
    cudnnConvolutionDescriptor_t conv;
    float *dx, *dw, *ddy, *out[CONV_DIRS]; /* inputs; each direction's result */
} Sweep;

typedef struct {       /* one algorithm of one direction */
    int runs;          /* cuDNN ran it */
    size_t ws;         /* its workspace */
    int rank;          /* in the heuristics' list, -1 if absent */
    double ratio[2];   /* error / bound, uniform and graded inputs */
    double err_rel[2]; /* error / largest |exact| */
    char why[64];      /* why it did not run */
} AlgoResult;

/* cuDNN's workspace size of algorithm a in direction dir (status, not checked: an algorithm may
 * not support the shape) */
static cudnnStatus_t ws_size(const Sweep *w, ConvDir dir, int a, size_t *ws) {
    if (dir == CONV_FWD)
        return cudnnGetConvolutionForwardWorkspaceSize(dnn, w->x, w->w, w->conv, w->y,
                                                       (cudnnConvolutionFwdAlgo_t)a, ws);
    if (dir == CONV_BWD_DATA)
        return cudnnGetConvolutionBackwardDataWorkspaceSize(dnn, w->w, w->y, w->conv, w->x,
                                                            (cudnnConvolutionBwdDataAlgo_t)a, ws);
    return cudnnGetConvolutionBackwardFilterWorkspaceSize(dnn, w->x, w->y, w->conv, w->w,
                                                          (cudnnConvolutionBwdFilterAlgo_t)a, ws);
}

static cudnnStatus_t run_algo(const Sweep *w, ConvDir dir, int a, void *ws, size_t bytes) {
    const float one = 1.0f, zero = 0.0f;
    if (dir == CONV_FWD)
        return cudnnConvolutionForward(dnn, &one, w->x, w->dx, w->w, w->dw, w->conv,
                                       (cudnnConvolutionFwdAlgo_t)a, ws, bytes, &zero, w->y,
                                       w->out[dir]);
    if (dir == CONV_BWD_DATA)
        return cudnnConvolutionBackwardData(dnn, &one, w->w, w->dw, w->y, w->ddy, w->conv,
                                            (cudnnConvolutionBwdDataAlgo_t)a, ws, bytes, &zero,
                                            w->x, w->out[dir]);
    return cudnnConvolutionBackwardFilter(dnn, &one, w->x, w->dx, w->y, w->ddy, w->conv,
                                          (cudnnConvolutionBwdFilterAlgo_t)a, ws, bytes, &zero,
                                          w->w, w->out[dir]);
}

/* cuDNN's heuristic ranking of direction dir under FMA math, as AlgoPerf (kernels/cuda/cuda.c) */
static int heuristics(const Sweep *w, ConvDir dir, AlgoPerf *ap) {
    int got = 0;
    if (dir == CONV_FWD) {
        cudnnConvolutionFwdAlgoPerf_t p[MAX_ALGOS];
        CUDNN_CHECK(cudnnGetConvolutionForwardAlgorithm_v7(dnn, w->x, w->w, w->conv, w->y,
                                                           MAX_ALGOS, &got, p));
        for (int i = 0; i < got; i++)
            ap[i] = (AlgoPerf){p[i].algo, p[i].status == CUDNN_STATUS_SUCCESS,
                               p[i].mathType == CUDNN_FMA_MATH, p[i].memory,
                               p[i].determinism == CUDNN_DETERMINISTIC};
    } else if (dir == CONV_BWD_DATA) {
        cudnnConvolutionBwdDataAlgoPerf_t p[MAX_ALGOS];
        CUDNN_CHECK(cudnnGetConvolutionBackwardDataAlgorithm_v7(dnn, w->w, w->y, w->conv, w->x,
                                                                MAX_ALGOS, &got, p));
        for (int i = 0; i < got; i++)
            ap[i] = (AlgoPerf){p[i].algo, p[i].status == CUDNN_STATUS_SUCCESS,
                               p[i].mathType == CUDNN_FMA_MATH, p[i].memory,
                               p[i].determinism == CUDNN_DETERMINISTIC};
    } else {
        cudnnConvolutionBwdFilterAlgoPerf_t p[MAX_ALGOS];
        CUDNN_CHECK(cudnnGetConvolutionBackwardFilterAlgorithm_v7(dnn, w->x, w->y, w->conv, w->w,
                                                                  MAX_ALGOS, &got, p));
        for (int i = 0; i < got; i++)
            ap[i] = (AlgoPerf){p[i].algo, p[i].status == CUDNN_STATUS_SUCCESS,
                               p[i].mathType == CUDNN_FMA_MATH, p[i].memory,
                               p[i].determinism == CUDNN_DETERMINISTIC};
    }
    return got;
}

static int algo_count(ConvDir dir) {
    return dir == CONV_FWD        ? CUDNN_CONVOLUTION_FWD_ALGO_COUNT
           : dir == CONV_BWD_DATA ? CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT
                                  : CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT;
}

static void sweep_setup(Sweep *w, const ConvShape *s) {
    memset(w, 0, sizeof *w);
    w->s = *s;
    CUDNN_CHECK(cudnnCreateTensorDescriptor(&w->x));
    CUDNN_CHECK(cudnnCreateTensorDescriptor(&w->y));
    CUDNN_CHECK(cudnnCreateFilterDescriptor(&w->w));
    CUDNN_CHECK(cudnnCreateConvolutionDescriptor(&w->conv));
    CUDNN_CHECK(cudnnSetTensor4dDescriptor(w->x, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, s->batch,
                                           s->c_in, s->h_in, s->w_in));
    CUDNN_CHECK(cudnnSetTensor4dDescriptor(w->y, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, s->batch,
                                           s->c_out, s->h_out, s->w_out));
    CUDNN_CHECK(cudnnSetFilter4dDescriptor(w->w, CUDNN_DATA_FLOAT, CUDNN_TENSOR_NCHW, s->c_out,
                                           s->c_in, s->k, s->k));
    CUDNN_CHECK(cudnnSetConvolution2dDescriptor(w->conv, s->pad, s->pad, s->stride, s->stride, 1, 1,
                                                CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT));
    CUDNN_CHECK(cudnnSetConvolutionMathType(w->conv, CUDNN_FMA_MATH)); /* strict fp32 */
    const size_t nx = conv_result_count(CONV_BWD_DATA, s),
                 nw = conv_result_count(CONV_BWD_FILTER, s);
    const size_t ny = conv_result_count(CONV_FWD, s);
    CUDA_CHECK(cudaMalloc((void **)&w->dx, nx * 4));
    CUDA_CHECK(cudaMalloc((void **)&w->dw, nw * 4));
    CUDA_CHECK(cudaMalloc((void **)&w->ddy, ny * 4));
    for (int d = 0; d < CONV_DIRS; d++)
        CUDA_CHECK(cudaMalloc((void **)&w->out[d], conv_result_count((ConvDir)d, s) * 4));
}

static void sweep_free(Sweep *w) {
    cudaFree(w->dx), cudaFree(w->dw), cudaFree(w->ddy);
    for (int d = 0; d < CONV_DIRS; d++)
        cudaFree(w->out[d]);
    cudnnDestroyTensorDescriptor(w->x), cudnnDestroyTensorDescriptor(w->y);
    cudnnDestroyFilterDescriptor(w->w), cudnnDestroyConvolutionDescriptor(w->conv);
}

/* Runs algorithm a of direction dir on the uploaded inputs of input set `set` and measures it. */
static void measure(const Sweep *w, ConvDir dir, int a, int set, const double *exact,
                    const double *bound, AlgoResult *r) {
    const size_t n = conv_result_count(dir, &w->s);
    size_t bytes = 0;
    cudnnStatus_t st = ws_size(w, dir, a, &bytes);
    if (st != CUDNN_STATUS_SUCCESS) {
        snprintf(r->why, sizeof r->why, "not supported (%s)", cudnnGetErrorString(st));
        return;
    }
    r->ws = bytes;
    if (bytes > WS_CAP) {
        snprintf(r->why, sizeof r->why, "workspace %.0f MiB not tried", bytes / 1048576.0);
        return;
    }
    void *ws = NULL;
    if (bytes && cudaMalloc(&ws, bytes) != cudaSuccess) {
        (void)cudaGetLastError();
        snprintf(r->why, sizeof r->why, "workspace %.0f MiB not allocated", bytes / 1048576.0);
        return;
    }
    CUDA_CHECK(cudaMemset(w->out[dir], 0xff, n * 4)); /* NaN: an element not written fails */
    st = run_algo(w, dir, a, ws, bytes);
    CUDA_CHECK(cudaDeviceSynchronize());
    if (ws) CUDA_CHECK(cudaFree(ws));
    if (st != CUDNN_STATUS_SUCCESS) {
        snprintf(r->why, sizeof r->why, "did not run (%s)", cudnnGetErrorString(st));
        return;
    }
    float *got = malloc(n * 4);
    CUDA_CHECK(cudaMemcpy(got, w->out[dir], n * 4, cudaMemcpyDeviceToHost));
    ConvErr e = conv_measure(got, exact, bound, n);
    r->runs = 1;
    r->ratio[set] = e.nonfinite ? INFINITY : e.max_ratio;
    r->err_rel[set] = e.nonfinite ? INFINITY : e.max_rel;
    free(got);
}

static void report(const char *tag, ConvDir dir, const AlgoResult *res, const AlgoPerf *ap,
                   int got) {
    for (int a = 0; a < algo_count(dir); a++) {
        const AlgoResult *r = &res[a];
        const int admitted = conv_algo_strict_fp32(dir, a, 1);
        const int bad = admitted && r->runs && !(r->ratio[0] <= 1.0 && r->ratio[1] <= 1.0);
        if (r->runs)
            printf("%s %s %d %s: rank %d, ws %.1f MiB; uniform: %.3g of the bound (%.2g of the "
                   "largest); graded: %.3g of the bound (%.2g); %s %s\n",
                   tag, conv_dir_name(dir), a, conv_algo_name(dir, a), r->rank, r->ws / 1048576.0,
                   r->ratio[0], r->err_rel[0], r->ratio[1], r->err_rel[1],
                   admitted ? "admitted" : "refused", bad ? "FAIL" : "ok");
        else
            printf("%s %s %d %s: rank %d, %s; %s ok\n", tag, conv_dir_name(dir), a,
                   conv_algo_name(dir, a), r->rank, r->why, admitted ? "admitted" : "refused");
        check_count(!bad), lines++;
    }
    const int pick = pick_algo(dir, ap, got, WS_LIMIT, CONV_RULE_STRICT_FP32);
    int old = -1; /* the rule before: the first FMA-math algorithm that fits */
    for (int i = 0; i < got && old < 0; i++)
        if (ap[i].ok && ap[i].memory <= WS_LIMIT && ap[i].fma_math) old = i;
    const int chosen = pick >= 0 ? ap[pick].algo : 0, before = old >= 0 ? ap[old].algo : 0;
    const int ok = conv_algo_strict_fp32(dir, chosen, 1);
    printf("%s %s chosen: %d %s (graded: %.3g of the bound); the math-type-only rule took %d %s "
           "(graded: %.3g) %s\n",
           tag, conv_dir_name(dir), chosen, conv_algo_name(dir, chosen),
           res[chosen].runs ? res[chosen].ratio[1] : NAN, before, conv_algo_name(dir, before),
           res[before].runs ? res[before].ratio[1] : NAN, ok ? "ok" : "FAIL");
    check_count(ok);
}

/* Every algorithm of every direction on shape s. */
static void sweep_shape(const char *model, const ConvShape *s) {
    Sweep w;
    sweep_setup(&w, s);
    AlgoResult res[CONV_DIRS][MAX_ALGOS];
    memset(res, 0, sizeof res);
    AlgoPerf ap[CONV_DIRS][MAX_ALGOS];
    int got[CONV_DIRS];
    for (int d = 0; d < CONV_DIRS; d++) {
        got[d] = heuristics(&w, (ConvDir)d, ap[d]);
        for (int a = 0; a < MAX_ALGOS; a++)
            res[d][a].rank = -1;
        for (int i = got[d] - 1; i >= 0; i--)
            if (ap[d][i].algo >= 0 && ap[d][i].algo < MAX_ALGOS) res[d][ap[d][i].algo].rank = i;
    }
    const size_t nx = conv_result_count(CONV_BWD_DATA, s),
                 nw = conv_result_count(CONV_BWD_FILTER, s);
    const size_t ny = conv_result_count(CONV_FWD, s);
    float *x = malloc(nx * 4), *wt = malloc(nw * 4), *dy = malloc(ny * 4);
    for (int set = 0; set < 2; set++) {
        conv_inputs(s, set, 0x5eed + (uint64_t)set, x, wt, dy);
        CUDA_CHECK(cudaMemcpy(w.dx, x, nx * 4, cudaMemcpyHostToDevice));
        CUDA_CHECK(cudaMemcpy(w.dw, wt, nw * 4, cudaMemcpyHostToDevice));
        CUDA_CHECK(cudaMemcpy(w.ddy, dy, ny * 4, cudaMemcpyHostToDevice));
        for (int d = 0; d < CONV_DIRS; d++) {
            const size_t n = conv_result_count((ConvDir)d, s);
            double *exact = malloc(n * 8), *bound = malloc(n * 8);
            conv_exact((ConvDir)d, s, x, wt, dy, exact, bound);
            for (int a = 0; a < algo_count((ConvDir)d); a++)
                measure(&w, (ConvDir)d, a, set, exact, bound, &res[d][a]);
            free(exact), free(bound);
        }
    }
    char tag[160];
    snprintf(tag, sizeof tag, "%s conv %dx%dx%dx%d k%d s%d p%d -> %d", model, s->batch, s->c_in,
             s->h_in, s->w_in, s->k, s->stride, s->pad, s->c_out);
    for (int d = 0; d < CONV_DIRS; d++)
        report(tag, (ConvDir)d, res[d], ap[d], got[d]);
    fflush(stdout);
    free(x), free(wt), free(dy);
    sweep_free(&w);
}

/* The distinct convolution shapes of model d on [c,h,w] at `batch`, each swept once. */
static void sweep_model(const ModelDesc *d, int c, int h, int w, int batch) {
    Model m;
    model_plan(&m, d, c, h, w, d->classes, batch);
    ConvShape seen[128];
    int nseen = 0;
    for (int i = 0; i < m.nlayers; i++) {
        const Layer *L = &m.layers[i];
        if (L->d.kind != LAYER_CONV) continue;
        ConvShape s = {batch,  L->in_c,     L->in_h,  L->in_w,  L->out_c,
                       L->d.k, L->d.stride, L->d.pad, L->out_h, L->out_w};
        int dup = 0;
        for (int j = 0; j < nseen && !dup; j++)
            dup = !memcmp(&seen[j], &s, sizeof s);
        if (dup || nseen == 128) continue;
        seen[nseen++] = s;
        sweep_shape(d->name, &s);
    }
    model_free(&m);
}

int main(int argc, char **argv) {
    int batch = 8;
    const char *only = NULL;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--batch") && i + 1 < argc)
            batch = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--model") && i + 1 < argc)
            only = argv[++i];
        else {
            fprintf(stderr, "usage: test_cuda_algos [--batch N] [--model lenet|resnet50]\n");
            return 2;
        }
    }
    if (batch < 1) batch = 1;
    if (cuda_device_count() == 0) {
        printf("SKIP: no CUDA device visible\n");
        return 77;
    }
    CUDA_CHECK(cudaSetDevice(0));
    CUDNN_CHECK(cudnnCreate(&dnn));
    printf("cuDNN %zu; every algorithm under CUDNN_FMA_MATH against float64; bound gamma(K) * "
           "sum|products| per output (kernels/cuda/cuda_plan.h)\n",
           cudnnGetVersion());
    if (!only || !strcmp(only, "lenet")) sweep_model(&model_lenet, 1, 28, 28, 64);
    if (!only || !strcmp(only, "resnet50")) sweep_model(&model_resnet50, 3, 224, 224, batch);
    cudnnDestroy(dnn);
    printf("%d algorithm lines\n", lines);
    return check_summary();
}
