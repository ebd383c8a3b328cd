/* ref_recurrent.c - naive reference kernels: embedding and the LSTM layer
 * (kernels/cpu/cpu_recurrent.c). Textbook definitions as nested loops with double accumulators;
 * backward passes written as gathers, sharing no structure with the backends' GEMM/im2col
 * formulation (ref_kernels.h). */
#include "ref_kernels.h"

#include <math.h>
#include <stdlib.h>

/* ---- embedding ---- */

void ref_embedding_forward(const EmbeddingShape *s, const float *ids, const float *w, float *y) {
    for (int r = 0; r < s->rows; r++) {
        int id = (int)ids[r];
        for (int d = 0; d < s->dim; d++)
            y[(size_t)r * s->dim + d] =
                id >= 0 && id < s->vocab ? w[(size_t)id * s->dim + d] : 0.0f;
    }
}

void ref_embedding_backward(const EmbeddingShape *s, const float *ids, const float *dy, float *dw) {
    for (int v = 0; v < s->vocab; v++)
        for (int d = 0; d < s->dim; d++) {
            double acc = 0.0; /* gather: every row whose id is v */
            for (int r = 0; r < s->rows; r++)
                if ((int)ids[r] == v) acc += dy[(size_t)r * s->dim + d];
            dw[(size_t)v * s->dim + d] = (float)acc;
        }
}

/* ---- LSTM ---- */

static double sigmoid(double x) {
    return 1.0 / (1.0 + exp(-x));
}

/* States of every step in double: act[b][t][4H] (i, f, g, o), c[b][t][H], h[b][t][H]. */
typedef struct {
    double *act, *c, *h;
} LstmStates;

static LstmStates lstm_run(const LstmShape *s, const float *x, const float *w, const float *b) {
    int B = s->batch, T = s->seq, D = s->in, H = s->hidden;
    LstmStates st = {calloc((size_t)B * T * 4 * H, sizeof(double)),
                     calloc((size_t)B * T * H, sizeof(double)),
                     calloc((size_t)B * T * H, sizeof(double))};
    if (!st.act || !st.c || !st.h) abort();
    for (int n = 0; n < B; n++)
        for (int t = 0; t < T; t++) {
            size_t row = (size_t)n * T + t;
            for (int gate = 0; gate < 4 * H; gate++) {
                double z = b[gate];
                for (int d = 0; d < D; d++)
                    z += (double)w[(size_t)gate * (D + H) + d] * x[row * D + d];
                for (int k = 0; k < H && t > 0; k++)
                    z += (double)w[(size_t)gate * (D + H) + D + k] * st.h[(row - 1) * H + k];
                int kind = gate / H; /* 0 i, 1 f, 2 g, 3 o */
                st.act[row * 4 * H + gate] = kind == 2 ? tanh(z) : sigmoid(z);
            }
            for (int j = 0; j < H; j++) {
                const double *a = st.act + row * 4 * H;
                double c_prev = t > 0 ? st.c[(row - 1) * H + j] : 0.0;
                double c = a[H + j] * c_prev + a[j] * a[2 * H + j];
                st.c[row * H + j] = c;
                st.h[row * H + j] = a[3 * H + j] * tanh(c);
            }
        }
    return st;
}

void ref_lstm_forward(const LstmShape *s, const float *x, const float *w, const float *b,
                      float *y) {
    LstmStates st = lstm_run(s, x, w, b);
    for (size_t i = 0; i < (size_t)s->batch * s->seq * s->hidden; i++)
        y[i] = (float)st.h[i];
    free(st.act), free(st.c), free(st.h);
}

void ref_lstm_backward(const LstmShape *s, const float *x, const float *w, const float *b,
                       const float *dy, float *dx, float *dw, float *db) {
    int B = s->batch, T = s->seq, D = s->in, H = s->hidden, ldw = D + H;
    LstmStates st = lstm_run(s, x, w, b);
    double *gw = calloc((size_t)4 * H * ldw, sizeof(double)),
           *gb = calloc((size_t)4 * H, sizeof(double));
    double *gx = calloc((size_t)B * T * D, sizeof(double)),
           *dz = calloc((size_t)4 * H, sizeof(double));
    double *dh = calloc((size_t)H, sizeof(double)), *dc = calloc((size_t)H, sizeof(double));
    double *dh_prev = calloc((size_t)H, sizeof(double));
    if (!gw || !gb || !gx || !dz || !dh || !dc || !dh_prev) abort();
    for (int n = 0; n < B; n++) {
        for (int j = 0; j < H; j++)
            dh[j] = dc[j] = 0.0; /* from step t+1 */
        for (int t = T - 1; t >= 0; t--) {
            size_t row = (size_t)n * T + t;
            const double *a = st.act + row * 4 * H;
            for (int j = 0; j < H; j++) {
                double h_grad = dh[j] + dy[row * H + j];
                double tc = tanh(st.c[row * H + j]);
                double c_grad = dc[j] + h_grad * a[3 * H + j] * (1 - tc * tc);
                double c_prev = t > 0 ? st.c[(row - 1) * H + j] : 0.0;
                dz[j] = c_grad * a[2 * H + j] * a[j] * (1 - a[j]);
                dz[H + j] = c_grad * c_prev * a[H + j] * (1 - a[H + j]);
                dz[2 * H + j] = c_grad * a[j] * (1 - a[2 * H + j] * a[2 * H + j]);
                dz[3 * H + j] = h_grad * tc * a[3 * H + j] * (1 - a[3 * H + j]);
                dc[j] = c_grad * a[H + j];
            }
            for (int k = 0; k < H; k++)
                dh_prev[k] = 0.0;
            for (int gate = 0; gate < 4 * H; gate++) {
                gb[gate] += dz[gate];
                for (int d = 0; d < D; d++) {
                    gw[(size_t)gate * ldw + d] += dz[gate] * x[row * D + d];
                    gx[row * D + d] += dz[gate] * w[(size_t)gate * ldw + d];
                }
                for (int k = 0; k < H; k++) {
                    if (t > 0) gw[(size_t)gate * ldw + D + k] += dz[gate] * st.h[(row - 1) * H + k];
                    dh_prev[k] += dz[gate] * w[(size_t)gate * ldw + D + k];
                }
            }
            for (int k = 0; k < H; k++)
                dh[k] = dh_prev[k];
        }
    }
    for (size_t i = 0; i < (size_t)4 * H * ldw; i++)
        dw[i] = (float)gw[i];
    for (int i = 0; i < 4 * H; i++)
        db[i] = (float)gb[i];
    if (dx)
        for (size_t i = 0; i < (size_t)B * T * D; i++)
            dx[i] = (float)gx[i];
    free(gw), free(gb), free(gx), free(dz), free(dh), free(dc), free(dh_prev), free(st.act),
        free(st.c), free(st.h);
}
