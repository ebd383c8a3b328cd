/* backend.h - the compute-backend seam: one const struct of function pointers per backend.
 *
 * A backend owns device memory and runs the layer kernels of a training step. The CPU backend
 * (kernels/cpu.c, OpenBLAS) is always built; the CUDA backend plugs in here through the same
 * struct. All tensors are float32, NCHW, and live in memory returned by the backend's alloc().
 * Shapes are passed as small structs so a kernel never has to guess a dimension.
 */
#ifndef DTBENCH_BACKEND_H
#define DTBENCH_BACKEND_H

#include <stddef.h>
#include <stdint.h>

/* Fully connected: y[n,out] = x[n,in] * W[out,in]^T + b[out] */
typedef struct {
    int batch; /* n */
    int in;    /* input features */
    int out;   /* output features */
} FcShape;

/* 2-D convolution, square kernel, NCHW.
 * x[n,c_in,h_in,w_in] -> y[n,c_out,h_out,w_out]; W[c_out,c_in,k,k]; b[c_out]
 * h_out = (h_in + 2*pad - k)/stride + 1 (same for w). */
typedef struct {
    int batch, c_in, h_in, w_in;
    int c_out, k, stride, pad;
    int h_out, w_out;
} ConvShape;

/* Max pooling, square window, NCHW, no padding.
 * x[n,c,h_in,w_in] -> y[n,c,h_out,w_out]; h_out = (h_in - k)/stride + 1 */
typedef struct {
    int batch, c, h_in, w_in;
    int k, stride;
    int h_out, w_out;
} PoolShape;

typedef struct BackendCtx BackendCtx; /* opaque, one per rank */

typedef struct {
    int threads;    /* BLAS / OpenMP threads per rank (CPU) */
    int local_rank; /* rank within the node: picks the GPU */
    int gpus_per_node;
    int verbose; /* set on one rank: the backend may print warnings about its set-up */
} BackendConfig;

typedef struct BackendOps {
    const char *name; /* "cpu", "cuda" */
    /* 0: alloc() returns host memory the caller may read and write directly (CPU); 1: device
     * memory, reached only through upload/download and the kernels (CUDA). Exchange transports
     * that work on host memory stage device buffers through the host when this is set. */
    int device_memory;

    int (*init)(const BackendConfig *cfg, BackendCtx **out); /* 0 on success */
    void (*finalize)(BackendCtx *ctx);
    /* A line describing the library versions, for the HDF5 metadata. */
    void (*describe)(BackendCtx *ctx, char *buf, size_t len);

    /* Memory. alloc() returns zeroed memory of at least `bytes`, aligned to 64 bytes. */
    void *(*alloc)(BackendCtx *ctx, size_t bytes);
    void (*free)(BackendCtx *ctx, void *p);
    void (*upload)(BackendCtx *ctx, void *dst_dev, const void *src_host, size_t bytes);
    void (*download)(BackendCtx *ctx, void *dst_host, const void *src_dev, size_t bytes);
    void (*zero)(BackendCtx *ctx, void *p, size_t bytes);
    void (*synchronize)(BackendCtx *ctx); /* wait for queued work (no-op on CPU) */

    /* Fully connected. dx may be NULL (first layer: no input gradient needed).
     * dw and db are OVERWRITTEN (not accumulated). */
    void (*fc_forward)(BackendCtx *ctx, const FcShape *s, const float *x, const float *w,
                       const float *b, float *y);
    void (*fc_backward)(BackendCtx *ctx, const FcShape *s, const float *x, const float *w,
                        const float *dy, float *dx, float *dw, float *db);

    /* Convolution. `work` is scratch of conv_workspace_bytes(s) bytes. dx may be NULL.
     * dw and db are OVERWRITTEN. */
    size_t (*conv_workspace_bytes)(BackendCtx *ctx, const ConvShape *s);
    void (*conv_forward)(BackendCtx *ctx, const ConvShape *s, const float *x, const float *w,
                         const float *b, float *y, void *work);
    void (*conv_backward)(BackendCtx *ctx, const ConvShape *s, const float *x, const float *w,
                          const float *dy, float *dx, float *dw, float *db, void *work);

    /* Max pooling. argmax[n*c*h_out*w_out] is the backend's record of each window's maximum: the
     * CPU backend stores the flat input index (within its n,c plane) and scatters dy through it;
     * the CUDA backend leaves it untouched, since cuDNN finds the maxima again from the forward
     * input x and output y, which backward therefore also receives. dx is overwritten. */
    void (*maxpool_forward)(BackendCtx *ctx, const PoolShape *s, const float *x, float *y,
                            int32_t *argmax);
    void (*maxpool_backward)(BackendCtx *ctx, const PoolShape *s, const float *x, const float *y,
                             const int32_t *argmax, const float *dy, float *dx);

    /* ReLU over n elements; backward uses the output y (y > 0 passes the gradient). */
    void (*relu_forward)(BackendCtx *ctx, size_t n, const float *x, float *y);
    void (*relu_backward)(BackendCtx *ctx, size_t n, const float *y, const float *dy, float *dx);

    /* Softmax cross-entropy, mean over the batch.
     * logits[n,c], labels[n] -> stats[0] = the mean loss, stats[1] = the number of rows whose
     * argmax is the label (exact in float up to 2^24); dlogits[n,c] = (softmax - onehot)/n
     * (dlogits may be NULL for evaluation). stats is backend memory (2 floats): the result stays
     * on the device, queued like any kernel, and is read with download() when it is needed, so
     * a training step never waits for its loss (see model_read_loss). */
    void (*softmax_xent)(BackendCtx *ctx, int n, int c, const float *logits, const int32_t *labels,
                         float *dlogits, float *stats);

    /* SGD with momentum and weight decay (PyTorch semantics), over n parameters:
     *   g' = g + wd*p;  v = momentum*v + g';  p -= lr*v        (v unused when momentum == 0) */
    void (*sgd_update)(BackendCtx *ctx, size_t n, float *p, const float *g, float *v, float lr,
                       float momentum, float weight_decay);

    /* Phase timing. record(slot) marks a point on the backend's timeline (CPU: reads the clock;
     * CUDA: records an event on the compute stream, no synchronisation). elapsed(a, b) returns the
     * seconds between two marks of the SAME iteration and may block until b has happened; the
     * driver calls it only after the iteration, outside the timed phases. */
    void (*timer_record)(BackendCtx *ctx, int slot);
    double (*timer_elapsed)(BackendCtx *ctx, int slot_a, int slot_b);
} BackendOps;

#define BACKEND_TIMER_SLOTS 16

extern const BackendOps cpu_backend; /* kernels/cpu.c, always built */

#endif
