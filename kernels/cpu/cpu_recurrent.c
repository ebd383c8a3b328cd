/* cpu_recurrent.c - the CPU backend's language-model layers: embedding lookup and the LSTM layer
 * (input, recurrent and weight-gradient products through OpenBLAS; gates through the branch-free
 * dt_sigmoidf / dt_tanhf). Semantics: backend.h. */
#include "cpu_bf16.h" /* defines: CPU_BF16_WEIGHT_B */
#include "cpu_kernels.h"
#include "cpu_vec.h"
#include "lstm_layout.h" /* defines: lstm_reserve, lstm_work (the buffers' layout) */

#include <string.h>

/* ---- embedding ------------------------------------------------------------------------------- */

static int token(float id, int vocab) {
    return id >= 0.0f && id < (float)vocab ? (int)id : -1;
}

void cpu_embedding_forward(BackendCtx *ctx, const EmbeddingShape *s, const float *ids,
                           const float *w, float *y) {
    (void)ctx;
    const size_t dim = (size_t)s->dim;
    for (int r = 0; r < s->rows; r++) {
        const int t = token(ids[r], s->vocab);
        if (t >= 0)
            memcpy(y + r * dim, w + (size_t)t * dim, dim * sizeof(float));
        else
            memset(y + r * dim, 0, dim * sizeof(float));
    }
}

void cpu_embedding_backward(BackendCtx *ctx, const EmbeddingShape *s, const float *ids,
                            const float *dy, float *dw) {
    const size_t dim = (size_t)s->dim;
    memset(dw, 0, (size_t)s->vocab * dim * sizeof(float));
    for (int r = 0; r < s->rows; r++) {
        const int t = token(ids[r], s->vocab);
        if (t >= 0) cpu_axpy(ctx, dim, 1.0f, dy + r * dim, dw + (size_t)t * dim);
    }
}

/* ---- LSTM (its buffers: lstm_layout.h) ------------------------------------------------------- */

size_t cpu_lstm_reserve_bytes(BackendCtx *ctx, const LstmShape *s) {
    (void)ctx;
    return lstm_reserve_bytes(s);
}

size_t cpu_lstm_workspace_bytes(BackendCtx *ctx, const LstmShape *s) {
    (void)ctx;
    return lstm_work_bytes(s);
}

/* One step for one sample: the gates' pre-activations gi, gf, gg, go [H] become activations (in
 * place); c = f*c_prev + i*g, h = o*tanh(c). Separate restrict parameters (rather than offsets into
 * one array) are what lets GCC vectorise the VBLOCK loop. */
static void lstm_cell(float *restrict gi, float *restrict gf, float *restrict gg,
                      float *restrict go, const float *restrict c_prev, float *restrict c,
                      float *restrict h, int hidden) {
    int j = 0;
#define LSTM_STEP(J)                                                                               \
    do {                                                                                           \
        const float i = dt_sigmoidf(gi[J]), f = dt_sigmoidf(gf[J]);                                \
        const float gv = dt_tanhf(gg[J]), o = dt_sigmoidf(go[J]);                                  \
        const float cv = f * c_prev[J] + i * gv;                                                   \
        gi[J] = i, gf[J] = f, gg[J] = gv, go[J] = o;                                               \
        c[J] = cv;                                                                                 \
        h[J] = o * dt_tanhf(cv);                                                                   \
    } while (0)
    for (; j + VBLOCK <= hidden; j += VBLOCK)
        for (int u = 0; u < VBLOCK; u++)
            LSTM_STEP(j + u);
    for (; j < hidden; j++)
        LSTM_STEP(j);
#undef LSTM_STEP
}

void cpu_lstm_forward(BackendCtx *ctx, const LstmShape *s, const float *x, const float *w,
                      const float *b, float *y, void *reserve, void *work) {
    (void)ctx;
    const int B = s->batch, T = s->seq, D = s->in, H = s->hidden, G = 4 * H, ldw = D + H;
    const size_t bt = (size_t)B * T;
    const LstmReserve r = lstm_reserve(s, reserve);
    float *gates = r.gates, *cell = r.cell, *zeros = lstm_work(s, work).zeros;
    if (B <= 0 || T <= 0 || H <= 0) return;
    memset(zeros, 0, (size_t)H * sizeof(float));

    /* gates[BT, 4H] = b + x[BT, D] W[:, :D]^T: the input part of every step in one GEMM */
    for (size_t r = 0; r < bt; r++)
        memcpy(gates + r * G, b, (size_t)G * sizeof(float));
    if (D > 0)
        cpu_gemm(ctx, CPU_BF16_WEIGHT_B, 0, 1, (int)bt, G, D, 1.0f, x, D, w, ldw, 1.0f, gates, G);
    for (int t = 0; t < T; t++) {
        if (t > 0) /* += h_{t-1}[B, H] W[:, D:]^T, both strided over the sequence */
            cpu_gemm(ctx, CPU_BF16_WEIGHT_B, 0, 1, B, G, H, 1.0f, y + (size_t)(t - 1) * H, T * H,
                     w + D, ldw, 1.0f, gates + (size_t)t * G, T * G);
        for (int n = 0; n < B; n++) {
            const size_t row = (size_t)n * T + t;
            float *g = gates + row * G;
            lstm_cell(g, g + H, g + 2 * H, g + 3 * H, t > 0 ? cell + (row - 1) * H : zeros,
                      cell + row * H, y + row * H, H);
        }
    }
}

/* One step back for one sample: from dh = dy + dh_rec (dh_rec: the gradient through W_hh from
 * step t+1, zeros at the last step) and the carried dc, the gates' pre-activation gradients
 * di, df, dg, do [H]; dc becomes the gradient reaching c_{t-1}. */
static void lstm_cell_backward(const float *restrict ai, const float *restrict af,
                               const float *restrict ag, const float *restrict ao,
                               const float *restrict c, const float *restrict c_prev,
                               const float *restrict dy, const float *restrict dh_rec,
                               float *restrict dc, float *restrict di, float *restrict df,
                               float *restrict dgg, float *restrict dout, int hidden) {
    int j = 0;
#define LSTM_BACK_STEP(J)                                                                          \
    do {                                                                                           \
        const float i = ai[J], f = af[J], g = ag[J], o = ao[J];                                    \
        const float dh = dy[J] + dh_rec[J];                                                        \
        const float tc = dt_tanhf(c[J]);                                                           \
        const float dcv = dc[J] + dh * o * (1.0f - tc * tc);                                       \
        di[J] = dcv * g * i * (1.0f - i);                                                          \
        df[J] = dcv * c_prev[J] * f * (1.0f - f);                                                  \
        dgg[J] = dcv * i * (1.0f - g * g);                                                         \
        dout[J] = dh * tc * o * (1.0f - o);                                                        \
        dc[J] = dcv * f;                                                                           \
    } while (0)
    for (; j + VBLOCK <= hidden; j += VBLOCK)
        for (int u = 0; u < VBLOCK; u++)
            LSTM_BACK_STEP(j + u);
    for (; j < hidden; j++)
        LSTM_BACK_STEP(j);
#undef LSTM_BACK_STEP
}

void cpu_lstm_backward(BackendCtx *ctx, const LstmShape *s, const float *x, const float *w,
                       const float *y, const void *reserve, const float *dy, float *dx, float *dw,
                       float *db, void *work) {
    const int B = s->batch, T = s->seq, D = s->in, H = s->hidden, G = 4 * H, ldw = D + H;
    const size_t bt = (size_t)B * T;
    const LstmReserve r = lstm_reserve(s, reserve);
    const LstmWork k = lstm_work(s, work);
    const float *gates = r.gates, *cell = r.cell;
    float *dgates = k.dgates, *hprev = k.hprev, *dh_rec = k.dh_rec, *dcell = k.dcell;
    float *zeros = k.zeros;
    memset(dw, 0, (size_t)G * ldw * sizeof(float));
    memset(db, 0, (size_t)G * sizeof(float));
    if (B <= 0 || T <= 0 || H <= 0) {
        if (dx && B > 0 && T > 0) memset(dx, 0, bt * D * sizeof(float));
        return;
    }
    memset(zeros, 0, (size_t)H * sizeof(float));
    memset(dcell, 0, (size_t)B * H * sizeof(float));
    for (int t = T - 1; t >= 0; t--) {
        for (int n = 0; n < B; n++) {
            const size_t row = (size_t)n * T + t;
            const float *a = gates + row * G;
            float *dg = dgates + row * G;
            lstm_cell_backward(a, a + H, a + 2 * H, a + 3 * H, cell + row * H,
                               t > 0 ? cell + (row - 1) * H : zeros, dy + row * H,
                               t < T - 1 ? dh_rec + (size_t)n * H : zeros, dcell + (size_t)n * H,
                               dg, dg + H, dg + 2 * H, dg + 3 * H, H);
        }
        if (t > 0) /* dh_rec[B, H] = dgates_t[B, 4H] W[:, D:] */
            cpu_gemm(ctx, CPU_BF16_WEIGHT_B, 0, 0, B, H, G, 1.0f, dgates + (size_t)t * G, T * G,
                     w + D, ldw, 0.0f, dh_rec, H);
    }

    /* dW[:, :D] = dgates^T x, dW[:, D:] = dgates^T hprev, db = column sums: one GEMM each */
    for (int n = 0; n < B; n++) {
        memset(hprev + (size_t)n * T * H, 0, (size_t)H * sizeof(float));
        memcpy(hprev + ((size_t)n * T + 1) * H, y + (size_t)n * T * H,
               (size_t)(T - 1) * H * sizeof(float));
    }
    if (D > 0)
        cpu_gemm(ctx, CPU_BF16_NO_WEIGHT, 1, 0, G, D, (int)bt, 1.0f, dgates, G, x, D, 0.0f, dw,
                 ldw);
    cpu_gemm(ctx, CPU_BF16_NO_WEIGHT, 1, 0, G, H, (int)bt, 1.0f, dgates, G, hprev, H, 0.0f, dw + D,
             ldw);
    for (size_t r = 0; r < bt; r++)
        cpu_axpy(ctx, (size_t)G, 1.0f, dgates + r * G, db);
    if (dx && D > 0)
        cpu_gemm(ctx, CPU_BF16_WEIGHT_B, 0, 0, (int)bt, D, G, 1.0f, dgates, G, w, ldw, 0.0f, dx, D);
}
