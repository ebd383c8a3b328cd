/* test_device_arith.c - the CUDA kernels' arithmetic, checked on the CPU (no GPU needed, runs in
 * CI). kernels/cuda/cuda_elem.h holds each kernel's per-element arithmetic as functions nvcc
 * compiles for the device and this test compiles as plain C; here they are driven in the same loops
 * as the GPU kernels (one "thread" per output or input element, the same summation order) and the
 * results are compared BIT FOR BIT with the CPU backend (cpu_backend, kernels/cpu/) where the
 * kernel adds the same terms in the same order: SGD, AdamW, dropout mask and values, padded max
 * pooling forward and its gathering backward, average pooling, global average pooling, LRN forward
 * and backward, batch-norm inference and normalisation, embedding, the LSTM cell and its recurrence
 * (exp, sigmoid and tanh are one definition for both, kernels/common/elem_math.h, whose accuracy
 * tests/test_cpu_elementwise checks against libm). Batch-norm backward (reductions in another
 * order) is checked within 1e-5 relative. Also the row-major to column-major GEMM mapping of the
 * LSTM's cuBLAS calls (against cblas row-major) and the NCCL collective's pure logic
 * (coll_nccl_plan.c). What is left to the GPU tests (tests/test_cuda_kernels.c): indexing on the
 * device, cuBLAS, cuDNN, and nvcc honouring -fmad=false. */
#include "backend.h"
#include "coll_nccl_plan.h"
#include "cuda_elem.h"
#include "cuda_plan.h"
#include "harness.h"

#include <cblas.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int same_bits(const float *a, const float *b, size_t n) {
    return memcmp(a, b, n * sizeof *a) == 0;
}
static int close_rel(const float *a, const float *b, size_t n, float tol) {
    for (size_t i = 0; i < n; i++)
        if (!(fabsf(a[i] - b[i]) <= tol * (1.0f + fabsf(b[i])))) {
            printf("  [%zu]: %.9g vs %.9g\n", i, a[i], b[i]);
            return 0;
        }
    return 1;
}

static void test_sgd(void) {
    const size_t n = 1003;
    for (int mom = 0; mom < 2; mom++) {
        float *p = rand_floats(n, -1, 1), *g = rand_floats(n, -1, 1), *v = rand_floats(n, -1, 1);
        float *p2 = malloc(n * 4), *v2 = malloc(n * 4);
        memcpy(p2, p, n * 4), memcpy(v2, v, n * 4);
        const float lr = 0.05f, m = mom ? 0.9f : 0.0f, wd = 5e-4f;
        cpu_backend.sgd_update(NULL, n, p, g, v, lr, m, wd);
        for (size_t i = 0; i < n; i++)
            if (mom)
                dt_sgd_momentum(&p2[i], g[i], &v2[i], lr, m, wd);
            else
                p2[i] = dt_sgd_plain(p2[i], g[i], lr, wd);
        EXPECT(same_bits(p, p2, n) && same_bits(v, v2, n), "%s",
               mom ? "SGD with momentum = CPU bit for bit" : "SGD without momentum = CPU");
        free(p), free(g), free(v), free(p2), free(v2);
    }
}

/* AdamW: cuda_optim_kernels.cu derives the step's constants as cpu_adamw_update does, then
 * dt_adamw per element */
static void test_adamw(void) {
    const size_t n = 1003;
    for (int wd = 0; wd < 2; wd++) {
        float *p = rand_floats(n, -1, 1), *g = rand_floats(n, -1, 1);
        float *m = rand_floats(n, -0.1f, 0.1f), *v = rand_floats(n, 0, 0.1f);
        float *p2 = malloc(n * 4), *m2 = malloc(n * 4), *v2 = malloc(n * 4);
        memcpy(p2, p, n * 4), memcpy(m2, m, n * 4), memcpy(v2, v, n * 4);
        const AdamWStep a = {.lr = 6e-4f,
                             .beta1 = 0.9f,
                             .beta2 = 0.95f,
                             .eps = 1e-8f,
                             .weight_decay = wd ? 0.1f : 0.0f,
                             .bias1 = 0.271f,
                             .bias2 = 0.185494f};
        cpu_backend.adamw_update(NULL, n, p, g, m, v, &a);
        const float decay = 1.0f - a.lr * a.weight_decay, c1 = 1.0f - a.beta1;
        const float c2 = 1.0f - a.beta2, step = a.lr / a.bias1, root2 = sqrtf(a.bias2);
        for (size_t i = 0; i < n; i++)
            dt_adamw(&p2[i], g[i], &m2[i], &v2[i], decay, c1, a.beta2, c2, step, root2, a.eps);
        EXPECT(same_bits(p, p2, n) && same_bits(m, m2, n) && same_bits(v, v2, n),
               "AdamW (weight decay %g) = CPU bit for bit", a.weight_decay);
        free(p), free(g), free(m), free(v), free(p2), free(m2), free(v2);
    }
}

static void test_dropout(void) {
    DropoutShape s = {.batch = 7, .size = 301, .rate = 0.4f, .seed = 12345, .first_sample = 999};
    size_t n = (size_t)s.batch * s.size;
    float *x = rand_floats(n, -1, 1), *y = malloc(n * 4), *y2 = malloc(n * 4);
    uint8_t *mask = malloc(n), *mask2 = malloc(n);
    cpu_backend.dropout_forward(NULL, &s, x, y, mask);
    for (size_t e = 0; e < n; e++) { /* the GPU kernel's loop */
        size_t i = e / s.size, j = e % s.size;
        uint64_t key = dt_dropout_key(s.seed, s.first_sample + i);
        int keep = dt_dropout_keep(key, j, s.rate);
        mask2[e] = (uint8_t)keep;
        y2[e] = keep ? x[e] * dt_dropout_scale(s.rate) : 0.0f;
    }
    size_t kept = 0;
    for (size_t e = 0; e < n; e++)
        kept += mask[e];
    EXPECT(!memcmp(mask, mask2, n) && same_bits(y, y2, n) && kept > n / 2 && kept < n * 7 / 10,
           "dropout: the same counter-based mask and values as the CPU backend");
    free(x), free(y), free(y2), free(mask), free(mask2);
}

/* the GPU max-pool forward (one thread per output) and gathering backward (one per input) */
static void gpu_maxpool(const PoolShape *s, const float *x, float *y, int32_t *am, const float *dy,
                        float *dx) {
    size_t op = (size_t)s->h_out * s->w_out, ip = (size_t)s->h_in * s->w_in;
    for (size_t o = 0; o < (size_t)s->batch * s->c * op; o++) {
        size_t pl = o / op;
        int oh = (int)(o % op / s->w_out), ow = (int)(o % s->w_out);
        float m = -INFINITY;
        int32_t a = -1;
        for (int kh = 0; kh < s->k; kh++) {
            int ih = oh * s->stride - s->pad + kh;
            if (ih < 0 || ih >= s->h_in) continue;
            for (int kw = 0; kw < s->k; kw++) {
                int iw = ow * s->stride - s->pad + kw;
                if (iw < 0 || iw >= s->w_in) continue;
                float v = x[pl * ip + (size_t)ih * s->w_in + iw];
                if (v > m) m = v, a = ih * s->w_in + iw;
            }
        }
        y[o] = a < 0 ? 0.0f : m, am[o] = a;
    }
    for (size_t i = 0; i < (size_t)s->batch * s->c * ip; i++) {
        size_t pl = i / ip;
        int ih = (int)(i % ip / s->w_in), iw = (int)(i % s->w_in), h0, h1, w0, w1;
        dt_outputs_of(ih, s->stride, s->pad, s->k, s->h_out, &h0, &h1);
        dt_outputs_of(iw, s->stride, s->pad, s->k, s->w_out, &w0, &w1);
        float acc = 0.0f;
        for (int oh = h0; oh < h1; oh++)
            for (int ow = w0; ow < w1; ow++) {
                size_t o = pl * op + (size_t)oh * s->w_out + ow;
                if (am[o] == ih * s->w_in + iw) acc += dy[o];
            }
        dx[i] = acc;
    }
}

static void gpu_avgpool(const PoolShape *s, const float *x, float *y, const float *dy, float *dx) {
    size_t op = (size_t)s->h_out * s->w_out, ip = (size_t)s->h_in * s->w_in;
    float inv = dt_avgpool_inv(s->k);
    for (size_t o = 0; o < (size_t)s->batch * s->c * op; o++) {
        size_t pl = o / op;
        int oh = (int)(o % op / s->w_out), ow = (int)(o % s->w_out), h0, h1, w0, w1;
        dt_window(oh, s->stride, s->pad, s->k, s->h_in, &h0, &h1);
        dt_window(ow, s->stride, s->pad, s->k, s->w_in, &w0, &w1);
        float sum = 0.0f;
        for (int ih = h0; ih < h1; ih++)
            for (int iw = w0; iw < w1; iw++)
                sum += x[pl * ip + (size_t)ih * s->w_in + iw];
        y[o] = sum * inv;
    }
    for (size_t i = 0; i < (size_t)s->batch * s->c * ip; i++) {
        size_t pl = i / ip;
        int ih = (int)(i % ip / s->w_in), iw = (int)(i % s->w_in), h0, h1, w0, w1;
        dt_outputs_of(ih, s->stride, s->pad, s->k, s->h_out, &h0, &h1);
        dt_outputs_of(iw, s->stride, s->pad, s->k, s->w_out, &w0, &w1);
        float acc = 0.0f;
        for (int oh = h0; oh < h1; oh++)
            for (int ow = w0; ow < w1; ow++)
                acc += dy[pl * op + (size_t)oh * s->w_out + ow] * inv;
        dx[i] = acc;
    }
}

static void test_pooling(void) {
    /* GoogLeNet's 3x3/2 pad 1 and 3x3/1 pad 1, AlexNet's 3x3/2, a 2x2/2, an odd 5x5/3 pad 2 */
    const int cases[][5] = {
        {13, 3, 2, 1, 0}, {7, 3, 1, 1, 0}, {13, 3, 2, 0, 0}, {8, 2, 2, 0, 0}, {11, 5, 3, 2, 0}};
    int ok_max = 1, ok_avg = 1;
    for (size_t t = 0; t < sizeof cases / sizeof cases[0]; t++) {
        int h = cases[t][0], k = cases[t][1], st = cases[t][2], pad = cases[t][3];
        int ho = (h + 2 * pad - k) / st + 1;
        PoolShape s = {2, 3, h, h + 1, k, st, pad, ho, (h + 1 + 2 * pad - k) / st + 1};
        size_t ni = (size_t)2 * 3 * h * (h + 1), no = (size_t)2 * 3 * s.h_out * s.w_out;
        float *x = rand_floats(ni, -1, 1), *dy = rand_floats(no, -1, 1);
        if (t == 1) /* ties: the first maximum must win on both */
            for (size_t i = 0; i < ni; i++)
                x[i] = (float)((int)(x[i] * 2));
        float *y = malloc(no * 4), *y2 = malloc(no * 4), *dx = malloc(ni * 4),
              *dx2 = malloc(ni * 4);
        int32_t *am = malloc(no * 4), *am2 = malloc(no * 4);
        cpu_backend.maxpool_forward(NULL, &s, x, y, am);
        cpu_backend.maxpool_backward(NULL, &s, am, dy, dx);
        gpu_maxpool(&s, x, y2, am2, dy, dx2);
        ok_max &= same_bits(y, y2, no) && !memcmp(am, am2, no * 4) && same_bits(dx, dx2, ni);
        cpu_backend.avgpool_forward(NULL, &s, x, y);
        cpu_backend.avgpool_backward(NULL, &s, dy, dx);
        gpu_avgpool(&s, x, y2, dy, dx2);
        ok_avg &= same_bits(y, y2, no) && same_bits(dx, dx2, ni);
        free(x), free(dy), free(y), free(y2), free(dx), free(dx2), free(am), free(am2);
    }
    EXPECT(ok_max, "max pooling (padded or not, ties): forward, argmax, gathering backward = CPU");
    EXPECT(ok_avg, "average pooling: forward and gathering backward = CPU bit for bit");

    const size_t planes = 37, plane = 49; /* ResNet-50's 7x7 */
    float *x = rand_floats(planes * plane, -1, 1), *y = malloc(planes * 4),
          *y2 = malloc(planes * 4);
    cpu_backend.global_avgpool_forward(NULL, 1, planes, plane, x, y);
    for (size_t pl = 0; pl < planes; pl++) { /* gap_fwd_kernel's 8 lanes */
        float acc[8] = {0}, sum = 0.0f;
        size_t i = 0;
        for (; i + 8 <= plane; i += 8)
            for (int j = 0; j < 8; j++)
                acc[j] += x[pl * plane + i + j];
        for (int j = 0; j < 8; j++)
            sum += acc[j];
        for (; i < plane; i++)
            sum += x[pl * plane + i];
        y2[pl] = sum * (1.0f / (float)plane);
    }
    EXPECT(same_bits(y, y2, planes), "global average pooling = CPU bit for bit");
    free(x), free(y), free(y2);
}

static void test_lrn(void) {
    const float betas[] = {0.75f, 0.6f};
    for (int b = 0; b < 2; b++) {
        LrnShape s = {.batch = 2,
                      .c = 11,
                      .h = 3,
                      .w = 5,
                      .size = 5,
                      .alpha = 1e-4f * 50,
                      .beta = betas[b],
                      .bias = 2.0f};
        size_t hw = 15, chw = 11 * hw, n = 2 * chw;
        float *x = rand_floats(n, -2, 2), *dy = rand_floats(n, -1, 1);
        float *y = malloc(n * 4), *sc = malloc(n * 4), *dx = malloc(n * 4);
        float *y2 = malloc(n * 4), *sc2 = malloc(n * 4), *dx2 = malloc(n * 4);
        cpu_backend.lrn_forward(NULL, &s, x, y, sc);
        cpu_backend.lrn_backward(NULL, &s, x, y, sc, dy, dx);
        int before = s.size / 2, after = (s.size - 1) / 2;
        for (size_t i = 0; i < n; i++) { /* lrn_fwd_kernel */
            size_t nn = i / chw, px = i % hw;
            int c = (int)(i % chw / hw), c0 = c - before < 0 ? 0 : c - before;
            int c1 = c + after >= s.c ? s.c - 1 : c + after;
            float sum = 0.0f;
            for (int cc = c0; cc <= c1; cc++) {
                float v = x[nn * chw + cc * hw + px];
                sum += v * v;
            }
            sc2[i] = dt_lrn_scale(s.bias, s.alpha / (float)s.size, sum);
            y2[i] = x[i] * dt_pow_neg_beta(sc2[i], s.beta);
        }
        for (size_t i = 0; i < n; i++) { /* lrn_bwd_kernel */
            size_t nn = i / chw, px = i % hw;
            int c = (int)(i % chw / hw), c0 = c - after < 0 ? 0 : c - after;
            int c1 = c + before >= s.c ? s.c - 1 : c + before;
            float sum = 0.0f;
            for (int cc = c0; cc <= c1; cc++) {
                size_t j = nn * chw + cc * hw + px;
                sum += dt_lrn_back_term(dy[j], y2[j], sc2[j]);
            }
            dx2[i] =
                dt_lrn_back(dy[i], sc2[i], x[i], sum, 2.0f * s.alpha * s.beta / s.size, s.beta);
        }
        EXPECT(same_bits(sc, sc2, n) && same_bits(y, y2, n) && same_bits(dx, dx2, n), "%s",
               b ? "LRN (beta 0.6, powf) forward and backward = CPU bit for bit"
                 : "LRN (beta 0.75) scale, forward and backward = CPU bit for bit");
        free(x), free(dy), free(y), free(sc), free(dx), free(y2), free(sc2), free(dx2);
    }
}

static void test_batchnorm(void) {
    BnShape s = {.batch = 4, .c = 5, .spatial = 9, .eps = 1e-5f, .momentum = 0.1f};
    size_t n = 4 * 5 * 9, sp = 9;
    float *x = rand_floats(n, -2, 3), *dy = rand_floats(n, -1, 1),
          *gamma = rand_floats(5, 0.5f, 1.5f), *beta = rand_floats(5, -0.5f, 0.5f),
          *rm = rand_floats(5, -1, 1), *rv = rand_floats(5, 0.5f, 2);
    float *y = malloc(n * 4), *y2 = malloc(n * 4), *dx = malloc(n * 4), *dx2 = malloc(n * 4);
    float mean[5], invstd[5], rm2[5], rv2[5], dg[5], db[5];
    memcpy(rm2, rm, sizeof rm2), memcpy(rv2, rv, sizeof rv2);
    cpu_backend.batchnorm_forward_infer(NULL, &s, x, gamma, beta, rm, rv, y);
    for (size_t i = 0; i < n; i++) { /* bn_infer_kernel */
        int c = (int)(i / sp % 5);
        float mul, add;
        dt_bn_coeffs(gamma[c], beta[c], rm[c], dt_bn_infer_invstd(rv[c], s.eps), &mul, &add);
        y2[i] = dt_bn_affine(x[i], mul, add);
    }
    EXPECT(same_bits(y, y2, n), "batch norm inference = CPU bit for bit");

    cpu_backend.batchnorm_forward_train(NULL, &s, x, gamma, beta, y, mean, invstd, rm, rv);
    int ok = 1;
    for (int c = 0; c < 5; c++) { /* bn_train_kernel, given the batch statistics */
        float mul, add;
        dt_bn_coeffs(gamma[c], beta[c], mean[c], invstd[c], &mul, &add);
        for (int b = 0; b < 4; b++)
            for (size_t p = 0; p < sp; p++) {
                size_t i = ((size_t)b * 5 + c) * sp + p;
                y2[i] = dt_bn_affine(x[i], mul, add);
            }
        ok &= dt_bn_running(rm2[c], s.momentum, mean[c]) == rm[c];
        /* the unbiased variance from the saved invstd (within float rounding) */
        double var = 1.0 / ((double)invstd[c] * invstd[c]) - s.eps, unb = var * 36.0 / 35.0;
        float want = dt_bn_running(rv2[c], s.momentum, (float)unb);
        ok &= fabsf(want - rv[c]) <= 1e-4f * fabsf(rv[c]);
    }
    EXPECT(ok && same_bits(y, y2, n),
           "batch norm training: normalisation bit for bit, running mean, unbiased running var");

    cpu_backend.batchnorm_backward(NULL, &s, x, gamma, mean, invstd, dy, dx, dg, db);
    for (int c = 0; c < 5; c++) { /* bn_backward_kernel, reductions in double */
        double sdy = 0, sdd = 0, count = 36;
        for (int b = 0; b < 4; b++)
            for (size_t p = 0; p < sp; p++) {
                size_t i = ((size_t)b * 5 + c) * sp + p;
                sdy += dy[i], sdd += dy[i] * (x[i] - mean[c]);
            }
        float k = gamma[c] * invstd[c], m_dy = (float)(sdy / count),
              m_xdy = (float)(sdd / count) * invstd[c] * invstd[c];
        for (int b = 0; b < 4; b++)
            for (size_t p = 0; p < sp; p++) {
                size_t i = ((size_t)b * 5 + c) * sp + p;
                dx2[i] = dt_bn_back(k, dy[i], m_dy, x[i], mean[c], m_xdy);
            }
    }
    EXPECT(close_rel(dx, dx2, n, 1e-5f), "batch norm backward = CPU within 1e-5 (sum order)");
    free(x), free(dy), free(gamma), free(beta), free(rm), free(rv), free(y), free(y2), free(dx),
        free(dx2);
}

static void test_embedding(void) {
    EmbeddingShape s = {.rows = 40, .vocab = 9, .dim = 6};
    float ids[40], *w = rand_floats(54, -1, 1), *dy = rand_floats(240, -1, 1);
    for (int r = 0; r < 40; r++)
        ids[r] = (float)(r * 7 % 11) - 1.0f; /* -1 and 9 are outside the vocabulary */
    float y[240], y2[240], dw[54], dw2[54];
    cpu_backend.embedding_forward(NULL, &s, ids, w, y);
    cpu_backend.embedding_backward(NULL, &s, ids, dy, dw);
    for (int e = 0; e < 240; e++) {
        int t = dt_token(ids[e / 6], 9);
        y2[e] = t >= 0 ? w[t * 6 + e % 6] : 0.0f;
    }
    memset(dw2, 0, sizeof dw2);
    for (int d = 0; d < 6; d++) /* embed_bwd_kernel: one thread per column */
        for (int r = 0; r < 40; r++) {
            int t = dt_token(ids[r], 9);
            if (t >= 0) dw2[t * 6 + d] += dy[r * 6 + d];
        }
    EXPECT(same_bits(y, y2, 240) && same_bits(dw, dw2, 54), "embedding forward, backward = CPU");
    free(w), free(dy);
}

/* The LSTM cell and its recurrence: with no input (in = 0) and zero recurrent weights every gate
 * pre-activation is the bias exactly, so the layer is the cell alone, step after step. */
static void test_lstm_cell(void) {
    const int B = 3, T = 4, H = 5, G = 20;
    LstmShape s = {B, T, 0, H};
    float *w = calloc((size_t)G * H, 4), *b = rand_floats(G, -2, 2),
          *dy = rand_floats(B * T * H, -1, 1);
    float y[60], y2[60], db[20], dw[100];
    void *res = malloc(cpu_backend.lstm_reserve_bytes(NULL, &s));
    void *work = malloc(cpu_backend.lstm_workspace_bytes(NULL, &s));
    cpu_backend.lstm_forward(NULL, &s, NULL, w, b, y, res, work);
    cpu_backend.lstm_backward(NULL, &s, NULL, w, y, res, dy, NULL, dw, db, work);
    float gates[3 * 4 * 20], cell[60], dg[3 * 4 * 20], dcell[15] = {0}, db2[20];
    for (int t = 0; t < T; t++) /* cell_fwd_kernel, step by step */
        for (int e = 0; e < B * H; e++) {
            int n = e / H, j = e % H, row = n * T + t;
            float *g = gates + row * G;
            for (int q = 0; q < 4; q++)
                g[q * H + j] = b[q * H + j];
            cell[row * H + j] =
                dt_lstm_cell(&g[j], &g[H + j], &g[2 * H + j], &g[3 * H + j],
                             t > 0 ? cell[(row - 1) * H + j] : 0.0f, &y2[row * H + j]);
        }
    for (int t = T - 1; t >= 0; t--) /* cell_bwd_kernel; the recurrent gradient is zero */
        for (int e = 0; e < B * H; e++) {
            int n = e / H, j = e % H, row = n * T + t;
            const float *a = gates + row * G;
            float *d = dg + row * G;
            dcell[e] =
                dt_lstm_cell_back(a[j], a[H + j], a[2 * H + j], a[3 * H + j], cell[row * H + j],
                                  t > 0 ? cell[(row - 1) * H + j] : 0.0f, dy[row * H + j] + 0.0f,
                                  dcell[e], &d[j], &d[H + j], &d[2 * H + j], &d[3 * H + j]);
        }
    for (int o = 0; o < G; o++) { /* dtk_bias_grad: rows in order */
        float acc = dg[o];
        for (int r = 1; r < B * T; r++)
            acc += dg[r * G + o];
        db2[o] = acc;
    }
    EXPECT(same_bits(y, y2, 60), "LSTM cell forward over 4 steps = CPU bit for bit");
    EXPECT(same_bits(db, db2, 20),
           "LSTM cell backward (bias gradient of 4 steps) = CPU bit for bit");
    free(w), free(b), free(dy), free(res), free(work);
}

/* cuda_recurrent.c's row-major products through rowmajor_gemm + a column-major sgemm (cuBLAS's
 * convention, here cblas ColMajor) against cblas RowMajor, with strided leading dimensions. */
static void test_rowmajor_gemm(void) {
    int ok = 1;
    for (int ta = 0; ta < 2; ta++)
        for (int tb = 0; tb < 2; tb++) {
            const int m = 7, n = 5, k = 6, lda = (ta ? m : k) + 3, ldb = (tb ? k : n) + 2,
                      ldc = n + 4;
            float *a = rand_floats((size_t)(ta ? k : m) * lda, -1, 1);
            float *b = rand_floats((size_t)(tb ? n : k) * ldb, -1, 1);
            float *c = rand_floats((size_t)m * ldc, -1, 1), *c2 = malloc((size_t)m * ldc * 4);
            memcpy(c2, c, (size_t)m * ldc * 4);
            cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans,
                        tb ? CblasTrans : CblasNoTrans, m, n, k, 1.0f, a, lda, b, ldb, 0.5f, c,
                        ldc);
            ColGemm g = rowmajor_gemm(ta, tb, m, n, k, lda, ldb, ldc);
            cblas_sgemm(CblasColMajor, g.trans_a ? CblasTrans : CblasNoTrans,
                        g.trans_b ? CblasTrans : CblasNoTrans, g.m, g.n, g.k, 1.0f, b, g.lda, a,
                        g.ldb, 0.5f, c2, g.ldc);
            ok &= close_rel(c, c2, (size_t)m * ldc, 1e-6f);
            free(a), free(b), free(c), free(c2);
        }
    EXPECT(ok, "row-major GEMMs as column-major calls (4 transpose cases, strided)");
}

static void test_nccl_logic(void) {
    EXPECT(nccl_red_choice(1.0f, 4) == NCCL_RED_SUM &&
               nccl_red_choice(1.0f / 4, 4) == NCCL_RED_AVG &&
               nccl_red_choice(1.0f / 3, 3) == NCCL_RED_AVG &&
               nccl_red_choice(0.5f, 3) == NCCL_RED_PREMUL &&
               nccl_red_choice(1.0f / 3, 6) == NCCL_RED_PREMUL,
           "NCCL reduction: Sum for 1, Avg for 1/size, PreMulSum otherwise");
    const double s1[] = {0.0, 1.0, 5.0}, e1[] = {2.0, 3.0, 7.0};
    const double s2[] = {5.0, 0.0, 1.0}, e2[] = {7.0, 2.0, 3.0};
    EXPECT(fabs(hidden_union(s1, e1, 3, 6.0) - 4.0) < 1e-12 &&
               fabs(hidden_union(s2, e2, 3, 6.0) - 4.0) < 1e-12 &&
               hidden_union(s1, e1, 3, 0.0) == 0.0 && hidden_union(s1, e1, 0, 9.0) == 0.0,
           "hidden interval: union of overlapping intervals before backward's end, any order");
    unsigned char u[4 * GPU_UUID_BYTES];
    for (int i = 0; i < 4 * GPU_UUID_BYTES; i++)
        u[i] = (unsigned char)(i / GPU_UUID_BYTES * 17 + 1);
    int first = -1, none = duplicate_gpu(u, 4, &first);
    memcpy(u + 3 * GPU_UUID_BYTES, u + 1 * GPU_UUID_BYTES, GPU_UUID_BYTES);
    int dup = duplicate_gpu(u, 4, &first);
    char text[64];
    gpu_uuid_text(u, text, sizeof text);
    EXPECT(none == -1 && dup == 3 && first == 1 && strlen(text) == 40 &&
               !strncmp(text, "GPU-0101", 8),
           "duplicate GPU: ranks 1 and 3 on one UUID found, none among distinct ones");
}

int main(void) {
    test_sgd();
    test_adamw();
    test_dropout();
    test_pooling();
    test_lrn();
    test_batchnorm();
    test_embedding();
    test_lstm_cell();
    test_rowmajor_gemm();
    test_nccl_logic();
    return check_summary();
}
