/* cuda_optim.c - the CUDA backend's loss and optimizer (backend.h): softmax cross-entropy, the
 * fused SGD-with-momentum update and the fused AdamW update, our own kernels
 * (cuda_optim_kernels.cu). Each queues on the rank's compute stream; the loss's statistics stay on
 * the device until download(). */
#include <config.h>
#include "cuda_check.h"   /* defines: CUDA_CHECK */
#include "cuda_ctx.h"     /* defines: struct BackendCtx, XENT_ROWS0 */
#include "cuda_kernels.h" /* defines: dtk_softmax_xent, dtk_sgd_update, dtk_adamw_update */
#include "cuda_ops.h"

/* Any number of rows with the scratch made at init (XENT_ROWS0 partial sums): nothing grows or
 * waits in a step, so a language model's batch * seq rows are captured in a graph like any
 * other; dlogits may be logits (in place, backend.h). */
void cuda_softmax_xent(BackendCtx *ctx, int n, int c, const float *logits, const int32_t *labels,
                       float *dlogits, float *stats) {
    CUDA_CHECK(dtk_softmax_xent(ctx->stream, n, c, logits, labels, dlogits, stats, ctx->row_loss,
                                ctx->row_hit, ctx->xent_cap));
}

void cuda_sgd_update(BackendCtx *ctx, size_t n, float *p, const float *g, float *v, float lr,
                     float momentum, float weight_decay) {
    CUDA_CHECK(dtk_sgd_update(ctx->stream, n, p, g, v, lr, momentum, weight_decay));
}

void cuda_adamw_update(BackendCtx *ctx, size_t n, float *p, const float *g, float *m, float *v,
                       const AdamWStep *a) {
    CUDA_CHECK(dtk_adamw_update(ctx->stream, n, p, g, m, v, a));
}
