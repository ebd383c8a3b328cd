/* backend.h - the compute-backend seam: one const struct of function pointers per backend.
 *
 * A backend owns device memory and runs the layer kernels of a training step. The CPU backend
 * (its table in kernels/cpu/cpu.c, its kernels in kernels/cpu/cpu_*.c, OpenBLAS) is always built;
 * the CUDA backend plugs in here through the same struct. Each layer kind of src/model/layers.h
 * names the optional members it calls. Tensors live in memory returned by the backend's alloc();
 * they are float32 and NCHW, except activations in a backend that declares another format
 * (ActFormat). The members are grouped by concern; a group or member marked optional may be NULL,
 * and model_build() then refuses a model whose layers need it, naming it (model_missing_op). Shapes
 * are passed as small structs so a kernel never has to guess a dimension.
 */
#ifndef DTBENCH_BACKEND_H
#define DTBENCH_BACKEND_H

#include "names.h" /* defines: NAME_OF */

#include <stddef.h>
#include <stdint.h>

/* Fully connected: y[n,out] = x[n,in] * W[out,in]^T + b[out] */
typedef struct {
    int batch; /* n */
    int in;    /* input features */
    int out;   /* output features */
    /* The input flattened from [flat_c, flat_hw pixels] (0, 0: a vector or a sequence): with NHWC
     * activations its features are pixel-major (kernels/common/layout.h), W stays in NCHW order. */
    int flat_c, flat_hw;
    int logits; /* 1: y (and dy) are fp32 whatever the activation format: the loss reads them */
} FcShape;

/* 2-D convolution, square kernel, NCHW.
 * x[n,c_in,h_in,w_in] -> y[n,c_out,h_out,w_out]; W[c_out,c_in,k,k]; b[c_out]
 * h_out = (h_in + 2*pad - k)/stride + 1 (same for w). */
typedef struct {
    int batch, c_in, h_in, w_in;
    int c_out, k, stride, pad;
    int h_out, w_out;
} ConvShape;

/* Max or average pooling: square k x k window, zero padding `pad` on every side (0: none), NCHW.
 * x[n,c,h_in,w_in] -> y[n,c,h_out,w_out]; h_out = (h_in + 2*pad - k)/stride + 1 (floor). */
typedef struct {
    int batch, c, h_in, w_in;
    int k, stride, pad;
    int h_out, w_out;
} PoolShape;

/* Local response normalisation across channels (AlexNet, GoogLeNet), PyTorch's definition:
 *   s[n,c,h,w] = bias + alpha/size * sum of x[n,c',h,w]^2 over c' in [c - size/2, c + (size-1)/2]
 *   y = x * s^-beta                      (channels outside [0, c) count as zeros) */
typedef struct {
    int batch, c, h, w;
    int size;
    float alpha, beta, bias;
} LrnShape;

/* Batch normalisation over [n, c, spatial] (spatial = h*w; 1 after a fully connected layer):
 * statistics per channel over n*spatial values. Training: the batch's mean and biased variance
 * normalise; the running statistics move by `momentum` towards the batch mean and the UNBIASED
 * batch variance (PyTorch semantics). Inference: the running statistics normalise. */
typedef struct {
    int batch, c, spatial;
    float eps, momentum;
} BnShape;

/* Inverted dropout over [batch, size] with a seeded, counter-based mask, so that a sample gets the
 * same mask whatever the number of ranks, pipeline stages or micro-batches. Sample i of the call
 * is global sample g = first_sample + *origin + i (origin: NULL, read as 0, or backend memory the
 * kernel reads when it runs: the model's sample origin, written once per step, so that a step
 * replayed from a captured graph draws that step's mask); its element j is kept iff
 * u(g, j) >= rate, where
 *   key    = mix64(seed ^ (g * 0x9E3779B97F4A7C15))
 *   u(g,j) = (mix64(key + j) >> 40) / 2^24            (mix64: splitmix64's finaliser,
 *            z += 0x9E3779B97F4A7C15; z = (z ^ z>>30) * 0xBF58476D1CE4E5B9;
 *            z = (z ^ z>>27) * 0x94D049BB133111EB; z ^ z>>31)
 * and kept elements are scaled by 1/(1 - rate). */
typedef struct {
    int batch;
    size_t size; /* elements per sample */
    float rate;  /* probability of dropping, in [0, 1) */
    uint64_t seed;
    uint64_t first_sample;
    /* An image sample [c, hw] stored NHWC (ActFormat): its element stored at p*c + q is element
     * j = q*hw + p of the definition above, so that it is dropped where the NCHW one is; 0, 0:
     * the elements are stored in the order of j (NCHW, or a vector). */
    int c, hw;
    const uint64_t *origin;
} DropoutShape;

/* Embedding lookup: ids[rows] (token ids stored as floats, exact below 2^24) ->
 * y[rows, dim] = W[id, :] with W[vocab, dim]. */
typedef struct {
    int rows, vocab, dim;
} EmbeddingShape;

/* One LSTM layer over a whole sequence (the LSTM cell unrolled over seq steps, h0 = c0 = 0):
 *   x[batch, seq, in] -> y[batch, seq, hidden] (every step's h)
 *   W[4*hidden, in + hidden]: row block g in gate order i, f, g, o; columns [0, in) multiply x_t,
 *   columns [in, in + hidden) multiply h_{t-1}; one bias b[4*hidden] (TensorFlow's BasicLSTMCell,
 *   forget bias 0):
 *   i,f,o = sigmoid(.), g = tanh(.), c_t = f*c_{t-1} + i*g, h_t = o*tanh(c_t). */
typedef struct {
    int batch, seq, in, hidden;
} LstmShape;

/* Token and learned position embedding (GPT-2's wte + wpe): ids[batch, seq] (token ids stored as
 * floats) -> y[b, t, :] = wte[id(b, t), :] + wpe[t, :], with wte[vocab, dim] and wpe[>= seq, dim].
 * Backward: dwte[vocab, dim] OVERWRITTEN with the sum of the dy rows of each id (ids outside
 * [0, vocab) are ignored, and give wpe alone forward), dwpe[seq, dim] OVERWRITTEN with the sum over
 * the batch of dy[b, t, :] (rows of dwpe from seq on are not touched). */
typedef struct {
    int batch, seq, vocab, dim;
} TokPosShape;

/* Layer normalisation over the last dimension (PyTorch's LayerNorm): `rows` rows of `dim` values,
 *   y = (x - mean) * rstd * gamma + beta,   rstd = 1 / sqrt(var + eps), var the biased variance.
 * The forward saves mean[rows] and rstd[rows] for the backward of the same rows. Backward: dx,
 * dgamma[dim] and dbeta[dim] OVERWRITTEN. */
typedef struct {
    int rows, dim;
    float eps;
} LayerNormShape;

/* Causal multi-head self-attention between GPT-2's QKV projection and its output projection:
 * qkv[batch, seq, 3 * heads * head_dim] holds, per position, q then k then v, each [heads,
 * head_dim] (GPT-2's c_attn output); y[batch, seq, heads * head_dim] is, per head h,
 *   softmax(q_h k_h^T / sqrt(head_dim) + mask) v_h,   mask: -inf above the diagonal (t' > t),
 * the heads side by side (PyTorch's scaled_dot_product_attention(is_causal=True) on the same
 * tensors). `reserve` (attention_reserve_bytes) keeps what the forward saves for the backward of
 * the same samples; `work` (attention_workspace_bytes) is scratch for both. Backward: dqkv
 * OVERWRITTEN. */
typedef struct {
    int batch, seq, heads, head_dim;
} AttentionShape;

/* One AdamW step (Loshchilov & Hutter; PyTorch's torch.optim.AdamW, whose order of operations it
 * follows) over n parameters at step t >= 1, with bias1 = 1 - beta1^t and bias2 = 1 - beta2^t:
 *   p *= 1 - lr * weight_decay
 *   m += (1 - beta1) * (g - m);      v = beta2 * v + (1 - beta2) * g * g
 *   p -= (lr / bias1) * m / (sqrt(v) / sqrt(bias2) + eps) */
typedef struct {
    float lr, beta1, beta2, eps, weight_decay;
    float bias1, bias2;
} AdamWStep;

typedef struct BackendCtx BackendCtx; /* opaque, one per rank */

/* How a backend stores activations: every layer's input and output and their gradients (the
 * tensors the layer members below read and write as `float *` whatever they hold), chosen by the
 * backend at init (e.g. from --precision) and asked by the model (activation_format). NCHW fp32
 * is the CPU backend's, and the default. Whatever the format:
 *   - parameters, their gradients, optimizer state, batch-norm statistics, checkpoints and the
 *     exchange are fp32 and in NCHW order (a backend maps them, kernels/common/layout.h);
 *   - the model's input arrives fp32 NCHW (upload) and is converted once (input_to_act);
 *   - the logits and their gradient are fp32 [n, classes] (FcShape.logits);
 *   - vectors [n, features] and sequences [n, seq, features] are the same in both layouts.
 * NHWC: per sample, pixels then channels innermost. The model then concatenates channels as rows
 * of pixels (concat_forward with batch = n*h*w, sizes[i] = channels of input i). */
typedef enum { ACT_NCHW = 0, ACT_NHWC } ActLayout;
typedef enum { ACT_FP32 = 0, ACT_BF16, ACT_FP16 } ActType;
typedef struct {
    ActLayout layout;
    ActType type;
} ActFormat;
#define ACT_TYPE_BYTES(t)  ((t) == ACT_FP32 ? (size_t)4 : (size_t)2)
#define ACT_TYPE_NAME(t)   ((t) == ACT_BF16 ? "bf16" : (t) == ACT_FP16 ? "fp16" : "fp32")
#define ACT_LAYOUT_NAME(l) ((l) == ACT_NHWC ? "NHWC" : "NCHW")
/* --act-layout, as the resolver passes it to a backend (BackendConfig.act_layout): NCHW or NHWC
 * asked for; the type follows from the layout and the precision (act_format_for). The option's
 * choices, named in the enum's order; auto is resolved first (model_choose_layout). */
typedef enum { ACT_LAYOUT_AUTO = 0, ACT_LAYOUT_NCHW, ACT_LAYOUT_NHWC } ActLayoutChoice;
#define ACT_LAYOUT_NAMES "auto,nchw,nhwc"

/* A convolution's parameters in the model's parameter buffer (weights_layout): the filter
 * W[k][c][khw] (KCRS) at value offset w_off, its bias [k] at b_off (SIZE_MAX: none). */
typedef struct {
    size_t w_off, b_off;
    int k, c, khw;
} ConvWeights;

/* Arithmetic of the matrix products (--precision; docs/gpu.md "Precision"). Tensors, master
 * weights, optimizer state and reductions stay fp32 in every mode:
 *   FP32: strict fp32 (no TF32 tensor-op math on GPUs);
 *   TF32: GEMMs and convolutions on TF32 tensor cores (fp32 data, 10-bit mantissa products);
 *   BF16 / FP16: GEMM and convolution inputs rounded to bfloat16 / IEEE half, fp32 accumulation;
 *   FP16 adds dynamic loss scaling (src/run/precision.h). */
typedef enum { PRECISION_FP32 = 0, PRECISION_TF32, PRECISION_BF16, PRECISION_FP16 } Precision;
#define PRECISION_NAMES   "fp32,tf32,bf16,fp16" /* in enum order: the one map (names.h) */
#define PRECISION_NAME(p) NAME_OF(PRECISION_NAMES, p)

/* How a backend that has several algorithms per convolution shape chooses (--conv-algo; the CUDA
 * backend): FIND times the candidates once per shape when the model is built (cuDNN's
 * cudnnFind*AlgorithmEx, as PyTorch's cudnn.benchmark), HEURISTIC takes cuDNN's ranking without
 * running anything (quicker set-up, the same choice on every run). */
typedef enum { CONV_ALGO_FIND = 0, CONV_ALGO_HEURISTIC } ConvAlgoChoice;
#define CONV_ALGO_NAMES "find,heuristic" /* in enum order */

typedef struct {
    int threads;    /* BLAS / OpenMP threads per rank (CPU) */
    int local_rank; /* rank within the node: picks the GPU */
    int gpus_per_node;
    int verbose;         /* set on one rank: the backend may print warnings about its set-up */
    Precision precision; /* accepted by precision_ok first */
    ConvAlgoChoice conv_algo;
    ActLayout act_layout; /* accepted by act_format_for first (0: NCHW, the default) */
} BackendConfig;

/* Its function members are listed again, in this order, in backend_members.h (the fake device's
 * wrappers are made from that list); the build checks that the two agree. */
typedef struct BackendOps {
    /* ---- identity and capabilities ----------------------------------------------------------- */
    const char *name; /* "cpu", "cuda" */
    /* 0: alloc() returns host memory the caller may read and write directly (CPU); 1: device
     * memory, reached only through upload/download and the kernels (CUDA). Exchange transports
     * that work on host memory stage device buffers through the host when this is set. */
    int device_memory;
    /* Long options the backend reads (comma-separated), for the resolver (src/run/resolve.c): given
     * explicitly with a backend that does not read them, they are refused. */
    const char *reads;

    /* Optional (NULL: fp32 only): 1 if this backend runs `precision` on this machine with
     * `threads` (--threads), else 0 with a reason in why (the resolver refuses the option with it,
     * before anything is built). */
    int (*precision_ok)(Precision precision, int threads, char *why, size_t len);
    /* Optional (NULL: NCHW fp32 only): the activation format this backend stores under
     * `precision` when asked for `layout` (BackendConfig.act_layout, from --act-layout): 1 and *f,
     * or 0 with a reason in why (the resolver then refuses --act-layout, or with auto keeps NCHW
     * fp32). Asked before init; NCHW must give NCHW fp32. */
    int (*act_format_for)(Precision precision, ActLayout layout, ActFormat *f, char *why,
                          size_t len);
    /* Optional (NULL: NCHW fp32): the activation format of ctx (see ActFormat), the one
     * act_format_for gave for its configuration. A format other than NCHW fp32 needs input_to_act
     * and act_add. */
    void (*activation_format)(BackendCtx *ctx, ActFormat *f);
    /* Optional: x_act = x[n, c, h, w] (fp32 NCHW, as uploaded) in the activation format. */
    void (*input_to_act)(BackendCtx *ctx, int n, int c, int h, int w, const float *x, float *x_act);

    /* ---- lifetime ---------------------------------------------------------------------------- */
    int (*init)(const BackendConfig *cfg, BackendCtx **out); /* 0 on success */
    void (*finalize)(BackendCtx *ctx);
    /* A line describing the library versions, for the HDF5 metadata. */
    void (*describe)(BackendCtx *ctx, char *buf, size_t len);
    /* Optional (NULL: nothing to say): the kernels this rank runs and why, one line each (CPU:
     * the BLAS library, its core and how it was chosen; CUDA: each convolution shape's cuDNN
     * algorithms and math modes), for the result file (/ranks/kernel_choices). Writes at most len
     * bytes of it into buf (NULL with len 0: nothing) and returns the full text's length, as
     * snprintf. */
    size_t (*describe_kernels)(BackendCtx *ctx, char *buf, size_t len);

    /* ---- memory ------------------------------------------------------------------------------ */
    /* alloc() returns zeroed memory of at least `bytes`, aligned to 64 bytes. */
    void *(*alloc)(BackendCtx *ctx, size_t bytes);
    void (*free)(BackendCtx *ctx, void *p);
    void (*upload)(BackendCtx *ctx, void *dst_dev, const void *src_host, size_t bytes);
    void (*download)(BackendCtx *ctx, void *dst_host, const void *src_dev, size_t bytes);
    void (*zero)(BackendCtx *ctx, void *p, size_t bytes);
    void (*synchronize)(BackendCtx *ctx); /* wait for queued work (no-op on CPU) */
    /* Optional: device-to-device copy of `bytes` (dropout at evaluation, pipeline buffers). */
    void (*copy)(BackendCtx *ctx, void *dst, const void *src, size_t bytes);
    /* Optional: params[n] (the model's parameter buffer) hold this step's weights: called when
     * the model is built and before each step's first forward pass, after whatever changed them
     * (the optimizer, an exchange that writes parameters). A backend that computes on copies of
     * the weights in another type or order (CUDA bf16/fp16: 16-bit copies) makes them here, once
     * per step, instead of at every call. The first call may allocate; later ones may not. */
    void (*weights_ready)(BackendCtx *ctx, const float *params, size_t n);
    /* Optional: where the convolutions' parameters lie in the buffer the next weights_ready calls
     * pass (convs[n], the model's convolutions in order), called when the model is built, before
     * its first weights_ready, and again only by another model's build. A backend that computes
     * on filters in another order (CUDA NHWC: KRSC 16-bit copies) makes them there. */
    void (*weights_layout)(BackendCtx *ctx, const ConvWeights *convs, int n);

    /* ---- batch prefetch (optional: all six or none; NULL on host backends) ------------------- */
    /* The next batch is filled into page-locked host memory and uploaded on a second stream (the
     * copy stream) while the current step computes (src/run/prefetch.c). A slot (0 or 1, of
     * BACKEND_PREFETCH_SLOTS) is a pair of device buffers (samples, labels) the copies write and
     * the compute stream reads, ordered by events only; none of these waits on the host but
     * prefetch_fence:
     *   host_alloc, host_free: page-locked host memory (CUDA: cudaHostAlloc), zeroed;
     *   prefetch_upload(slot, dst, src, bytes): queues the copy on the copy stream after the
     *     compute work marked by the slot's last prefetch_release; src must not change until
     *     the slot's prefetch_fence;
     *   prefetch_wait(slot): later compute work waits for the slot's queued copies;
     *   prefetch_release(slot): compute work queued so far is the last to read the slot;
     *   prefetch_fence(slot): the host waits for the slot's queued copies (its host buffers may
     *     then be refilled). */
    void *(*host_alloc)(BackendCtx *ctx, size_t bytes);
    void (*host_free)(BackendCtx *ctx, void *p);
    void (*prefetch_upload)(BackendCtx *ctx, int slot, void *dst_dev, const void *src_host,
                            size_t bytes);
    void (*prefetch_wait)(BackendCtx *ctx, int slot);
    void (*prefetch_release)(BackendCtx *ctx, int slot);
    void (*prefetch_fence)(BackendCtx *ctx, int slot);

    /* ---- step replay (optional: all three or none) ------------------------------------------- */
    /* graph_capture runs work(arg) with the compute stream recording instead of running (CUDA:
     * stream capture in thread-local mode, then an instantiated graph): nothing queued executes,
     * and an allocation, a host synchronisation or an upload inside ends the job with the
     * library's message. graph_launch queues the recorded work on the compute stream, with the
     * pointers, sizes and scalars it was recorded with (src/run/step_graph.c keys its graphs on
     * everything that may change between steps). Timer marks are never recorded inside. */
    void *(*graph_capture)(BackendCtx *ctx, void (*work)(void *arg), void *arg);
    void (*graph_launch)(BackendCtx *ctx, void *graph);
    void (*graph_free)(BackendCtx *ctx, void *graph);

    /* ---- phase timer ------------------------------------------------------------------------- */
    /* record(slot) marks a point on the backend's timeline (CPU: reads the clock;
     * CUDA: records an event on the compute stream, no synchronisation). elapsed(a, b) returns the
     * seconds between two marks of the SAME iteration and may block until b has happened; the
     * driver calls it only after the iteration, outside the timed phases. Optional done(slot):
     * 1 when the mark has happened, without waiting (CUDA: cudaEventQuery), so that the host can
     * do other work while the device computes; NULL: marks happen when recorded (CPU). */
    void (*timer_record)(BackendCtx *ctx, int slot);
    double (*timer_elapsed)(BackendCtx *ctx, int slot_a, int slot_b);
    int (*timer_done)(BackendCtx *ctx, int slot);

    /* ---- matrix products: fully connected and convolution ------------------------------------ */
    /* Fully connected. dx may be NULL (first layer: no input gradient needed).
     * dw and db are OVERWRITTEN (not accumulated). b and db may be NULL: a layer without bias. */
    void (*fc_forward)(BackendCtx *ctx, const FcShape *s, const float *x, const float *w,
                       const float *b, float *y);
    void (*fc_backward)(BackendCtx *ctx, const FcShape *s, const float *x, const float *w,
                        const float *dy, float *dx, float *dw, float *db);

    /* Convolution. `work` is scratch of conv_workspace_bytes(s) bytes. dx may be NULL.
     * dw and db are OVERWRITTEN. b and db may be NULL: a layer without bias (ResNet's
     * convolutions, followed by batch norm). */
    size_t (*conv_workspace_bytes)(BackendCtx *ctx, const ConvShape *s);
    void (*conv_forward)(BackendCtx *ctx, const ConvShape *s, const float *x, const float *w,
                         const float *b, float *y, void *work);
    void (*conv_backward)(BackendCtx *ctx, const ConvShape *s, const float *x, const float *w,
                          const float *dy, float *dx, float *dw, float *db, void *work);
    /* Optional: the convolution fused with the ReLU after it, forward only (chosen when the model
     * is built, src/model/model_fuse.c; the CPU backend keeps the unfused rows):
     * y = relu(conv(x) + b), b may be NULL. The ReLU's backward runs unfused, in place, from y. */
    void (*conv_relu_forward)(BackendCtx *ctx, const ConvShape *s, const float *x, const float *w,
                              const float *b, float *y, void *work);

    /* ---- pooling (avgpool_* and below optional) ---------------------------------------------- */
    /* Max pooling; padding never wins. argmax[n*c*h_out*w_out] is the backend's record of each
     * window's maximum: both backends store the flat input index ih*w_in + iw (within its n,c
     * plane) of the first maximum in row-major window order (-1, and y = 0, for a window entirely
     * in the padding) and route dy through it. Backward reads neither x nor y (y may have been
     * overwritten by a ReLU run in place: the layer is LK_OUTPUT_REUSABLE); dx is overwritten. */
    void (*maxpool_forward)(BackendCtx *ctx, const PoolShape *s, const float *x, float *y,
                            int32_t *argmax);
    void (*maxpool_backward)(BackendCtx *ctx, const PoolShape *s, const int32_t *argmax,
                             const float *dy, float *dx);
    /* Average pooling, padding counted as zeros: y = window sum / (k*k) (PyTorch's
     * count_include_pad). dx overwritten. */
    void (*avgpool_forward)(BackendCtx *ctx, const PoolShape *s, const float *x, float *y);
    void (*avgpool_backward)(BackendCtx *ctx, const PoolShape *s, const float *dy, float *dx);
    /* Global average pooling: x[n, c, plane] -> y[n, c] (plane = h*w; NHWC: x[n, plane, c]). */
    void (*global_avgpool_forward)(BackendCtx *ctx, size_t n, size_t c, size_t plane,
                                   const float *x, float *y);
    void (*global_avgpool_backward)(BackendCtx *ctx, size_t n, size_t c, size_t plane,
                                    const float *dy, float *dx);

    /* ---- normalisation (optional) ------------------------------------------------------------ */
    /* LRN (see LrnShape). The forward also writes s into scale[n,c,h,w], which the backward
     * of the same samples reads; dx overwritten. */
    void (*lrn_forward)(BackendCtx *ctx, const LrnShape *s, const float *x, float *y, float *scale);
    void (*lrn_backward)(BackendCtx *ctx, const LrnShape *s, const float *x, const float *y,
                         const float *scale, const float *dy, float *dx);

    /* Batch normalisation (see BnShape). gamma, beta, running_*: [c]. Training saves the batch
     * mean and 1/sqrt(var + eps) in save_mean, save_invstd [c] for the backward, and updates the
     * running statistics in place. Backward: dx, dgamma, dbeta OVERWRITTEN. */
    void (*batchnorm_forward_train)(BackendCtx *ctx, const BnShape *s, const float *x,
                                    const float *gamma, const float *beta, float *y,
                                    float *save_mean, float *save_invstd, float *running_mean,
                                    float *running_var);
    void (*batchnorm_forward_infer)(BackendCtx *ctx, const BnShape *s, const float *x,
                                    const float *gamma, const float *beta,
                                    const float *running_mean, const float *running_var, float *y);
    void (*batchnorm_backward)(BackendCtx *ctx, const BnShape *s, const float *x,
                               const float *gamma, const float *save_mean, const float *save_invstd,
                               const float *dy, float *dx, float *dgamma, float *dbeta);

    /* Optional, all three or none: batch norm fused with the ReLU after it, and with a residual
     * add before that ReLU (z not NULL), chosen when the model is built (src/model/model_fuse.c;
     * the CPU backend's give its unfused rows' bits, kernels/cpu/cpu_norm.c). Forward:
     * y = relu(BN(x) + z) with the residual add's and the ReLU's arithmetic (a + b, v > 0 ? v : 0),
     * statistics as batchnorm_forward_*. Backward, from y (the ReLU's output) and its gradient
     * dy: the gradient reaching the batch norm is dy where y > 0, else 0; it is also written to dz
     * (the add's other input's gradient, overwritten; NULL: no add) and may be written to dy (the
     * unfused ReLU runs in place there); dx, dgamma, dbeta as batchnorm_backward. */
    void (*bn_act_forward_train)(BackendCtx *ctx, const BnShape *s, const float *x,
                                 const float *gamma, const float *beta, const float *z, float *y,
                                 float *save_mean, float *save_invstd, float *running_mean,
                                 float *running_var);
    void (*bn_act_forward_infer)(BackendCtx *ctx, const BnShape *s, const float *x,
                                 const float *gamma, const float *beta, const float *running_mean,
                                 const float *running_var, const float *z, float *y);
    void (*bn_act_backward)(BackendCtx *ctx, const BnShape *s, const float *x, const float *gamma,
                            const float *save_mean, const float *save_invstd, const float *y,
                            float *dy, float *dx, float *dz, float *dgamma, float *dbeta);

    /* ---- element-wise and joins (relu_* mandatory, the rest optional) ------------------------ */
    /* ReLU over n elements; backward uses the output y (y > 0 passes the gradient). In place is
     * allowed (y == x; dx == dy): the model runs a ReLU in its producer's buffers. */
    void (*relu_forward)(BackendCtx *ctx, size_t n, const float *x, float *y);
    void (*relu_backward)(BackendCtx *ctx, size_t n, const float *y, const float *dy, float *dx);

    /* Dropout (see DropoutShape). mask[batch*size]: 1 kept, 0 dropped. dx overwritten. */
    void (*dropout_forward)(BackendCtx *ctx, const DropoutShape *s, const float *x, float *y,
                            uint8_t *mask);
    void (*dropout_backward)(BackendCtx *ctx, const DropoutShape *s, const uint8_t *mask,
                             const float *dy, float *dx);

    /* Concatenation of rows: input i is xs[i][batch, sizes[i]] and lands at offset
     * sizes[0] + ... + sizes[i-1] of every row of y[batch, sum sizes] (channels of NCHW: rows are
     * samples; of NHWC: rows are pixels, see ActFormat). Backward splits dy into dxs[i]
     * (overwritten; a NULL dxs[i] is skipped). */
    void (*concat_forward)(BackendCtx *ctx, int batch, int ninputs, const float *const *xs,
                           const size_t *sizes, float *y);
    void (*concat_backward)(BackendCtx *ctx, int batch, int ninputs, const size_t *sizes,
                            const float *dy, float *const *dxs);

    /* Residual add over n elements: y = a + b; backward: da = db = dy (either may be NULL). */
    void (*add_forward)(BackendCtx *ctx, size_t n, const float *a, const float *b, float *y);
    void (*add_backward)(BackendCtx *ctx, size_t n, const float *dy, float *da, float *db);

    /* y[n] += alpha * x[n]; x[n] *= alpha. Gradient accumulation (micro-batches, layers whose
     * output feeds several others) and loss scaling. */
    void (*axpy)(BackendCtx *ctx, size_t n, float alpha, const float *x, float *y);
    void (*scale)(BackendCtx *ctx, size_t n, float alpha, float *x);
    /* Optional: x[n] *= alpha * factor[0], factor backend memory read when the kernel runs (fp16's
     * loss scale: a replayed graph reads each step's own, so one graph serves every scale). NULL:
     * the model passes the scale to scale() by value, and step graphs are keyed on it. */
    void (*scale_by)(BackendCtx *ctx, size_t n, float alpha, const float *factor, float *x);
    /* Optional: y[n] += x[n] on activations in the backend's format (the gradient of an output
     * read by several layers). NULL: axpy with alpha 1 (fp32 activations). */
    void (*act_add)(BackendCtx *ctx, size_t n, const float *x, float *y);

    /* ---- recurrent (optional) ---------------------------------------------------------------- */
    /* Embedding (see EmbeddingShape). Backward: dW[vocab, dim] OVERWRITTEN with the sum of the dy
     * rows of each id (ids outside [0, vocab) are ignored, and give zero rows forward). */
    void (*embedding_forward)(BackendCtx *ctx, const EmbeddingShape *s, const float *ids,
                              const float *w, float *y);
    void (*embedding_backward)(BackendCtx *ctx, const EmbeddingShape *s, const float *ids,
                               const float *dy, float *dw);

    /* LSTM layer (see LstmShape). `reserve` (lstm_reserve_bytes) carries what the forward keeps
     * for the backward of the same samples; `work` (lstm_workspace_bytes) is scratch for both.
     * Backward: dw, db OVERWRITTEN; dx may be NULL. */
    size_t (*lstm_reserve_bytes)(BackendCtx *ctx, const LstmShape *s);
    size_t (*lstm_workspace_bytes)(BackendCtx *ctx, const LstmShape *s);
    void (*lstm_forward)(BackendCtx *ctx, const LstmShape *s, const float *x, const float *w,
                         const float *b, float *y, void *reserve, void *work);
    void (*lstm_backward)(BackendCtx *ctx, const LstmShape *s, const float *x, const float *w,
                          const float *y, const void *reserve, const float *dy, float *dx,
                          float *dw, float *db, void *work);


    /* ---- transformer (optional) -------------------------------------------------------------- */
    /* Token and position embedding (see TokPosShape). */
    void (*tokpos_forward)(BackendCtx *ctx, const TokPosShape *s, const float *ids,
                           const float *wte, const float *wpe, float *y);
    void (*tokpos_backward)(BackendCtx *ctx, const TokPosShape *s, const float *ids,
                            const float *dy, float *dwte, float *dwpe);
    /* Layer normalisation (see LayerNormShape). */
    void (*layernorm_forward)(BackendCtx *ctx, const LayerNormShape *s, const float *x,
                              const float *gamma, const float *beta, float *y, float *mean,
                              float *rstd);
    void (*layernorm_backward)(BackendCtx *ctx, const LayerNormShape *s, const float *x,
                               const float *gamma, const float *mean, const float *rstd,
                               const float *dy, float *dx, float *dgamma, float *dbeta);
    /* GELU, tanh approximation (GPT-2's; PyTorch's gelu(approximate="tanh")) over n elements:
     *   y = 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))). Backward reads x; dx overwritten. */
    void (*gelu_forward)(BackendCtx *ctx, size_t n, const float *x, float *y);
    void (*gelu_backward)(BackendCtx *ctx, size_t n, const float *x, const float *dy, float *dx);
    /* Causal self-attention (see AttentionShape). */
    size_t (*attention_reserve_bytes)(BackendCtx *ctx, const AttentionShape *s);
    size_t (*attention_workspace_bytes)(BackendCtx *ctx, const AttentionShape *s);
    void (*attention_forward)(BackendCtx *ctx, const AttentionShape *s, const float *qkv,
                              float *y, void *reserve, void *work);
    void (*attention_backward)(BackendCtx *ctx, const AttentionShape *s, const float *qkv,
                               const float *y, const void *reserve, const float *dy,
                               float *dqkv, void *work);

    /* ---- loss and optimizer ------------------------------------------------------------------ */
    /* Softmax cross-entropy, mean over the batch.
     * logits[n,c], labels[n] -> stats[0] = the mean loss, stats[1] = the number of rows whose
     * argmax is the label (exact in float up to 2^24); dlogits[n,c] = (softmax - onehot)/n
     * (dlogits may be NULL for evaluation, or logits itself: the gradient then overwrites the
     * logits row by row, so that a language model over a large vocabulary holds one copy). stats
     * is backend memory (2 floats): the result stays on the device, queued like any kernel, and
     * is read with download() when it is needed, so a training step never waits for its loss
     * (see model_read_loss). */
    void (*softmax_xent)(BackendCtx *ctx, int n, int c, const float *logits, const int32_t *labels,
                         float *dlogits, float *stats);

    /* SGD with momentum and weight decay (PyTorch semantics), over n parameters:
     *   g' = g + wd*p;  v = momentum*v + g';  p -= lr*v        (v unused when momentum == 0) */
    void (*sgd_update)(BackendCtx *ctx, size_t n, float *p, const float *g, float *v, float lr,
                       float momentum, float weight_decay);

    /* Optional (NULL: --optimizer adamw refused): AdamW over n parameters (see AdamWStep); m and
     * v are its first and second moments [n], zero before the first step. */
    void (*adamw_update)(BackendCtx *ctx, size_t n, float *p, const float *g, float *m, float *v,
                         const AdamWStep *a);

    /* 1 if none of x[n] is inf or NaN (the loss scaler's overflow check; waits for the result).
     * NULL: the backend cannot run fp16's loss scaling. */
    int (*all_finite)(BackendCtx *ctx, size_t n, const float *x);
} BackendOps;

/* Timer slots: the driver's phase marks (src/run/driver_stage.h) below BACKEND_PHASE_SLOTS, the
 * per-layer profile's (--profile-layers, src/results/profile.c: four per layer) above. */
#define BACKEND_PHASE_SLOTS    16
#define BACKEND_TIMER_SLOTS    (BACKEND_PHASE_SLOTS + 1024)
#define BACKEND_PREFETCH_SLOTS 2 /* prefetch_* slots: the batch computed and the next one */

extern const BackendOps cpu_backend; /* kernels/cpu/cpu.c, always built */

#endif
