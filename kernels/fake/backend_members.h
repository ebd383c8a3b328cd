/* backend_members.h - every function member of BackendOps (backend.h) in one list, for code that
 * treats all of them alike: the fake device's forwarding wrappers (fake_device.h).
 * BACKEND_MEMBERS(X) calls X(return type, member, (parameters), (arguments)) once per member, in
 * the struct's order, with backend.h's parameter names. The assertions at the end keep the list and
 * the struct in step: a member missing, moved or of another type stops the build here. */
#ifndef DTBENCH_BACKEND_MEMBERS_H
#define DTBENCH_BACKEND_MEMBERS_H

#include "backend.h"

#include <stddef.h>

/* clang-format off */
#define BACKEND_MEMBERS(X)                                                                         \
    X(int, precision_ok, (Precision precision, int threads, char *why, size_t len),                \
      (precision, threads, why, len))                                                              \
    X(int, act_format_for, (Precision precision, ActLayout layout, ActFormat *f, char *why,        \
      size_t len), (precision, layout, f, why, len))                                               \
    X(void, activation_format, (BackendCtx *ctx, ActFormat *f), (ctx, f))                          \
    X(void, input_to_act, (BackendCtx *ctx, int n, int c, int h, int w, const float *x,            \
      float *x_act), (ctx, n, c, h, w, x, x_act))                                                  \
                                                                                                   \
    X(int, init, (const BackendConfig *cfg, BackendCtx **out), (cfg, out))                         \
    X(void, finalize, (BackendCtx *ctx), (ctx))                                                    \
    X(void, describe, (BackendCtx *ctx, char *buf, size_t len), (ctx, buf, len))                   \
    X(size_t, describe_kernels, (BackendCtx *ctx, char *buf, size_t len), (ctx, buf, len))         \
                                                                                                   \
    X(void *, alloc, (BackendCtx *ctx, size_t bytes), (ctx, bytes))                                \
    X(void, free, (BackendCtx *ctx, void *p), (ctx, p))                                            \
    X(void, upload, (BackendCtx *ctx, void *dst_dev, const void *src_host, size_t bytes),          \
      (ctx, dst_dev, src_host, bytes))                                                             \
    X(void, download, (BackendCtx *ctx, void *dst_host, const void *src_dev, size_t bytes),        \
      (ctx, dst_host, src_dev, bytes))                                                             \
    X(void, zero, (BackendCtx *ctx, void *p, size_t bytes), (ctx, p, bytes))                       \
    X(void, synchronize, (BackendCtx *ctx), (ctx))                                                 \
    X(void, copy, (BackendCtx *ctx, void *dst, const void *src, size_t bytes),                     \
      (ctx, dst, src, bytes))                                                                      \
    X(void, weights_ready, (BackendCtx *ctx, const float *params, size_t n), (ctx, params, n))     \
    X(void, weights_layout, (BackendCtx *ctx, const ConvWeights *convs, int n), (ctx, convs, n))   \
                                                                                                   \
    X(void *, host_alloc, (BackendCtx *ctx, size_t bytes), (ctx, bytes))                           \
    X(void, host_free, (BackendCtx *ctx, void *p), (ctx, p))                                       \
    X(void, prefetch_upload, (BackendCtx *ctx, int slot, void *dst_dev, const void *src_host,      \
      size_t bytes), (ctx, slot, dst_dev, src_host, bytes))                                        \
    X(void, prefetch_wait, (BackendCtx *ctx, int slot), (ctx, slot))                               \
    X(void, prefetch_release, (BackendCtx *ctx, int slot), (ctx, slot))                            \
    X(void, prefetch_fence, (BackendCtx *ctx, int slot), (ctx, slot))                              \
                                                                                                   \
    X(void *, graph_capture, (BackendCtx *ctx, void (*work)(void *arg), void *arg),                \
      (ctx, work, arg))                                                                            \
    X(void, graph_launch, (BackendCtx *ctx, void *graph), (ctx, graph))                            \
    X(void, graph_free, (BackendCtx *ctx, void *graph), (ctx, graph))                              \
                                                                                                   \
    X(void, timer_record, (BackendCtx *ctx, int slot), (ctx, slot))                                \
    X(double, timer_elapsed, (BackendCtx *ctx, int slot_a, int slot_b), (ctx, slot_a, slot_b))     \
    X(int, timer_done, (BackendCtx *ctx, int slot), (ctx, slot))                                   \
                                                                                                   \
    X(void, fc_forward, (BackendCtx *ctx, const FcShape *s, const float *x, const float *w,        \
      const float *b, float *y), (ctx, s, x, w, b, y))                                             \
    X(void, fc_backward, (BackendCtx *ctx, const FcShape *s, const float *x, const float *w,       \
      const float *dy, float *dx, float *dw, float *db), (ctx, s, x, w, dy, dx, dw, db))           \
    X(size_t, conv_workspace_bytes, (BackendCtx *ctx, const ConvShape *s), (ctx, s))               \
    X(void, conv_forward, (BackendCtx *ctx, const ConvShape *s, const float *x, const float *w,    \
      const float *b, float *y, void *work), (ctx, s, x, w, b, y, work))                           \
    X(void, conv_backward, (BackendCtx *ctx, const ConvShape *s, const float *x, const float *w,   \
      const float *dy, float *dx, float *dw, float *db, void *work),                               \
      (ctx, s, x, w, dy, dx, dw, db, work))                                                        \
    X(void, conv_relu_forward, (BackendCtx *ctx, const ConvShape *s, const float *x,               \
      const float *w, const float *b, float *y, void *work), (ctx, s, x, w, b, y, work))           \
                                                                                                   \
    X(void, maxpool_forward, (BackendCtx *ctx, const PoolShape *s, const float *x, float *y,       \
      int32_t *argmax), (ctx, s, x, y, argmax))                                                    \
    X(void, maxpool_backward, (BackendCtx *ctx, const PoolShape *s, const int32_t *argmax,         \
      const float *dy, float *dx), (ctx, s, argmax, dy, dx))                                       \
    X(void, avgpool_forward, (BackendCtx *ctx, const PoolShape *s, const float *x, float *y),      \
      (ctx, s, x, y))                                                                              \
    X(void, avgpool_backward, (BackendCtx *ctx, const PoolShape *s, const float *dy, float *dx),   \
      (ctx, s, dy, dx))                                                                            \
    X(void, global_avgpool_forward, (BackendCtx *ctx, size_t n, size_t c, size_t plane,            \
      const float *x, float *y), (ctx, n, c, plane, x, y))                                         \
    X(void, global_avgpool_backward, (BackendCtx *ctx, size_t n, size_t c, size_t plane,           \
      const float *dy, float *dx), (ctx, n, c, plane, dy, dx))                                     \
                                                                                                   \
    X(void, lrn_forward, (BackendCtx *ctx, const LrnShape *s, const float *x, float *y,            \
      float *scale), (ctx, s, x, y, scale))                                                        \
    X(void, lrn_backward, (BackendCtx *ctx, const LrnShape *s, const float *x, const float *y,     \
      const float *scale, const float *dy, float *dx), (ctx, s, x, y, scale, dy, dx))              \
    X(void, batchnorm_forward_train, (BackendCtx *ctx, const BnShape *s, const float *x,           \
      const float *gamma, const float *beta, float *y, float *save_mean, float *save_invstd,       \
      float *running_mean, float *running_var),                                                    \
      (ctx, s, x, gamma, beta, y, save_mean, save_invstd, running_mean, running_var))              \
    X(void, batchnorm_forward_infer, (BackendCtx *ctx, const BnShape *s, const float *x,           \
      const float *gamma, const float *beta, const float *running_mean, const float *running_var,  \
      float *y), (ctx, s, x, gamma, beta, running_mean, running_var, y))                           \
    X(void, batchnorm_backward, (BackendCtx *ctx, const BnShape *s, const float *x,                \
      const float *gamma, const float *save_mean, const float *save_invstd, const float *dy,       \
      float *dx, float *dgamma, float *dbeta),                                                     \
      (ctx, s, x, gamma, save_mean, save_invstd, dy, dx, dgamma, dbeta))                           \
    X(void, bn_act_forward_train, (BackendCtx *ctx, const BnShape *s, const float *x,              \
      const float *gamma, const float *beta, const float *z, float *y, float *save_mean,           \
      float *save_invstd, float *running_mean, float *running_var),                                \
      (ctx, s, x, gamma, beta, z, y, save_mean, save_invstd, running_mean, running_var))           \
    X(void, bn_act_forward_infer, (BackendCtx *ctx, const BnShape *s, const float *x,              \
      const float *gamma, const float *beta, const float *running_mean, const float *running_var,  \
      const float *z, float *y), (ctx, s, x, gamma, beta, running_mean, running_var, z, y))        \
    X(void, bn_act_backward, (BackendCtx *ctx, const BnShape *s, const float *x,                   \
      const float *gamma, const float *save_mean, const float *save_invstd, const float *y,        \
      float *dy, float *dx, float *dz, float *dgamma, float *dbeta),                               \
      (ctx, s, x, gamma, save_mean, save_invstd, y, dy, dx, dz, dgamma, dbeta))                    \
                                                                                                   \
    X(void, relu_forward, (BackendCtx *ctx, size_t n, const float *x, float *y), (ctx, n, x, y))   \
    X(void, relu_backward, (BackendCtx *ctx, size_t n, const float *y, const float *dy,            \
      float *dx), (ctx, n, y, dy, dx))                                                             \
    X(void, dropout_forward, (BackendCtx *ctx, const DropoutShape *s, const float *x, float *y,    \
      uint8_t *mask), (ctx, s, x, y, mask))                                                        \
    X(void, dropout_backward, (BackendCtx *ctx, const DropoutShape *s, const uint8_t *mask,        \
      const float *dy, float *dx), (ctx, s, mask, dy, dx))                                         \
    X(void, concat_forward, (BackendCtx *ctx, int batch, int ninputs, const float *const *xs,      \
      const size_t *sizes, float *y), (ctx, batch, ninputs, xs, sizes, y))                         \
    X(void, concat_backward, (BackendCtx *ctx, int batch, int ninputs, const size_t *sizes,        \
      const float *dy, float *const *dxs), (ctx, batch, ninputs, sizes, dy, dxs))                  \
    X(void, add_forward, (BackendCtx *ctx, size_t n, const float *a, const float *b, float *y),    \
      (ctx, n, a, b, y))                                                                           \
    X(void, add_backward, (BackendCtx *ctx, size_t n, const float *dy, float *da, float *db),      \
      (ctx, n, dy, da, db))                                                                        \
    X(void, axpy, (BackendCtx *ctx, size_t n, float alpha, const float *x, float *y),              \
      (ctx, n, alpha, x, y))                                                                       \
    X(void, scale, (BackendCtx *ctx, size_t n, float alpha, float *x), (ctx, n, alpha, x))         \
    X(void, scale_by, (BackendCtx *ctx, size_t n, float alpha, const float *factor, float *x),     \
      (ctx, n, alpha, factor, x))                                                                  \
    X(void, act_add, (BackendCtx *ctx, size_t n, const float *x, float *y), (ctx, n, x, y))        \
                                                                                                   \
    X(void, embedding_forward, (BackendCtx *ctx, const EmbeddingShape *s, const float *ids,        \
      const float *w, float *y), (ctx, s, ids, w, y))                                              \
    X(void, embedding_backward, (BackendCtx *ctx, const EmbeddingShape *s, const float *ids,       \
      const float *dy, float *dw), (ctx, s, ids, dy, dw))                                          \
    X(size_t, lstm_reserve_bytes, (BackendCtx *ctx, const LstmShape *s), (ctx, s))                 \
    X(size_t, lstm_workspace_bytes, (BackendCtx *ctx, const LstmShape *s), (ctx, s))               \
    X(void, lstm_forward, (BackendCtx *ctx, const LstmShape *s, const float *x, const float *w,    \
      const float *b, float *y, void *reserve, void *work), (ctx, s, x, w, b, y, reserve, work))   \
    X(void, lstm_backward, (BackendCtx *ctx, const LstmShape *s, const float *x, const float *w,   \
      const float *y, const void *reserve, const float *dy, float *dx, float *dw, float *db,       \
      void *work), (ctx, s, x, w, y, reserve, dy, dx, dw, db, work))                               \
                                                                                                   \
    X(void, tokpos_forward, (BackendCtx *ctx, const TokPosShape *s, const float *ids,              \
      const float *wte, const float *wpe, float *y), (ctx, s, ids, wte, wpe, y))                   \
    X(void, tokpos_backward, (BackendCtx *ctx, const TokPosShape *s, const float *ids,             \
      const float *dy, float *dwte, float *dwpe), (ctx, s, ids, dy, dwte, dwpe))                   \
    X(void, layernorm_forward, (BackendCtx *ctx, const LayerNormShape *s, const float *x,          \
      const float *gamma, const float *beta, float *y, float *mean, float *rstd),                  \
      (ctx, s, x, gamma, beta, y, mean, rstd))                                                     \
    X(void, layernorm_backward, (BackendCtx *ctx, const LayerNormShape *s, const float *x,         \
      const float *gamma, const float *mean, const float *rstd, const float *dy, float *dx,        \
      float *dgamma, float *dbeta), (ctx, s, x, gamma, mean, rstd, dy, dx, dgamma, dbeta))         \
    X(void, gelu_forward, (BackendCtx *ctx, size_t n, const float *x, float *y), (ctx, n, x, y))   \
    X(void, gelu_backward, (BackendCtx *ctx, size_t n, const float *x, const float *dy,            \
      float *dx), (ctx, n, x, dy, dx))                                                             \
    X(size_t, attention_reserve_bytes, (BackendCtx *ctx, const AttentionShape *s), (ctx, s))       \
    X(size_t, attention_workspace_bytes, (BackendCtx *ctx, const AttentionShape *s), (ctx, s))     \
    X(void, attention_forward, (BackendCtx *ctx, const AttentionShape *s, const float *qkv,        \
      float *y, void *reserve, void *work), (ctx, s, qkv, y, reserve, work))                       \
    X(void, attention_backward, (BackendCtx *ctx, const AttentionShape *s, const float *qkv,       \
      const float *y, const void *reserve, const float *dy, float *dqkv, void *work),              \
      (ctx, s, qkv, y, reserve, dy, dqkv, work))                                                   \
                                                                                                   \
    X(void, softmax_xent, (BackendCtx *ctx, int n, int c, const float *logits,                     \
      const int32_t *labels, float *dlogits, float *stats),                                        \
      (ctx, n, c, logits, labels, dlogits, stats))                                                 \
    X(void, sgd_update, (BackendCtx *ctx, size_t n, float *p, const float *g, float *v, float lr,  \
      float momentum, float weight_decay), (ctx, n, p, g, v, lr, momentum, weight_decay))          \
    X(void, adamw_update, (BackendCtx *ctx, size_t n, float *p, const float *g, float *m,          \
      float *v, const AdamWStep *a), (ctx, n, p, g, m, v, a))                                      \
    X(int, all_finite, (BackendCtx *ctx, size_t n, const float *x), (ctx, n, x))
/* clang-format on */

/* BM_<member>: a member's place in the list */
#define BACKEND_MEMBER_ENUM(ret, m, params, names) BM_##m,
typedef enum { BACKEND_MEMBERS(BACKEND_MEMBER_ENUM) BM_COUNT } BackendMember;

/* The list is the struct's function members: each at its place, of its type, none left out. */
#define BACKEND_MEMBER_CHECK(ret, m, params, names)                                                 \
    _Static_assert(offsetof(BackendOps, m) ==                                                      \
                       offsetof(BackendOps, precision_ok) + BM_##m * sizeof(void (*)(void)),       \
                   "backend_members.h: " #m " is not at its place in BackendOps");                 \
    _Static_assert(_Generic(((BackendOps *)0)->m, ret(*) params : 1, default : 0),                 \
                   "backend_members.h: " #m " has another type in BackendOps");
BACKEND_MEMBERS(BACKEND_MEMBER_CHECK)
_Static_assert(sizeof(BackendOps) ==
                   offsetof(BackendOps, precision_ok) + BM_COUNT * sizeof(void (*)(void)),
               "backend_members.h: BackendOps has a member the list lacks");

#endif
