/* dev_transformer.c - the launches of the CUDA transformer kernels
 * (kernels/cuda/cuda_transformer_kernels.cu) and of the attention's cuBLAS calls, played on the CPU
 * with the functions the device runs (kernels/cuda/cuda_transformer.h): every block, warp and lane
 * in the kernel's order, the warp's xor butterfly lane by lane, cuBLAS's column-major calls through
 * cblas_sgemm(CblasColMajor). Used by tests/test_device_transformer.c. */
#include "dev_transformer.h"
#include "harness.h"

#include <cblas.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ln_forward_kernel / ln_dx_kernel: a warp per row, lanes' partials, butterfly */
void play_ln_forward(const LayerNormShape *s, const float *x, const float *gamma, const float *beta,
                     float *y, float *mean, float *rstd) {
    float v[DT_LANES];
    for (int row = 0; row < s->rows; row++) {
        const float *xr = x + (size_t)row * s->dim;
        for (int l = 0; l < DT_LANES; l++)
            v[l] = dt_lane_sum(xr, s->dim, l, DT_LANES);
        const float m = dt_ln_mean(dt_lanes_sum(v), s->dim);
        for (int l = 0; l < DT_LANES; l++)
            v[l] = dt_lane_sqdev(xr, s->dim, l, DT_LANES, m);
        const float r = dt_ln_rstd(dt_lanes_sum(v), s->dim, s->eps);
        mean[row] = m, rstd[row] = r;
        for (int j = 0; j < s->dim; j++)
            y[(size_t)row * s->dim + j] = dt_ln_y(xr[j], m, r, gamma[j], beta[j]);
    }
}

void play_ln_dx(const LayerNormShape *s, const float *x, const float *gamma, const float *mean,
                const float *rstd, const float *dy, float *dx) {
    float vg[DT_LANES], vx[DT_LANES];
    for (int row = 0; row < s->rows; row++) {
        const size_t o = (size_t)row * s->dim;
        for (int l = 0; l < DT_LANES; l++)
            dt_ln_lane_back(x + o, dy + o, gamma, s->dim, l, DT_LANES, mean[row], rstd[row], &vg[l],
                            &vx[l]);
        const float a = dt_lanes_sum(vg) / (float)s->dim, b = dt_lanes_sum(vx) / (float)s->dim;
        for (int j = 0; j < s->dim; j++)
            dx[o + j] = dt_ln_dx(x[o + j], dy[o + j], gamma[j], mean[row], rstd[row], a, b);
    }
}

/* ln_cols_kernel over the grid, then ln_cols_finish_kernel */
void play_ln_cols(const LayerNormShape *s, const LnColGrid *g, const float *x, const float *dy,
                  const float *mean, const float *rstd, float *dgamma, float *dbeta) {
    double *part = malloc(2 * (size_t)g->splits * s->dim * sizeof(double));
    double sh_g[LN_LANES][LN_COLS], sh_b[LN_LANES][LN_COLS];
    for (int cb = 0; cb < g->colblocks; cb++)
        for (int split = 0; split < g->splits; split++) {
            const int r0 = split * g->chunk;
            const int r1 = r0 + g->chunk < s->rows ? r0 + g->chunk : s->rows;
            for (int th = 0; th < LN_COLS * LN_LANES; th++) {
                const int tc = th % LN_COLS, lane = th / LN_COLS, col = cb * LN_COLS + tc;
                sh_g[lane][tc] = sh_b[lane][tc] = 0.0;
                if (col < s->dim)
                    dt_ln_col_thread(x, dy, mean, rstd, s->dim, col, r0, r1, lane, &sh_g[lane][tc],
                                     &sh_b[lane][tc]);
            }
            for (int tc = 0; tc < LN_COLS && cb * LN_COLS + tc < s->dim; tc++) {
                const int col = cb * LN_COLS + tc;
                part[(size_t)split * s->dim + col] = dt_ln_col_lanes(&sh_g[0][tc], LN_COLS);
                part[(size_t)(g->splits + split) * s->dim + col] =
                    dt_ln_col_lanes(&sh_b[0][tc], LN_COLS);
            }
        }
    for (int c = 0; c < s->dim; c++) {
        dgamma[c] = dt_ln_col_finish(part, g->splits, s->dim, c);
        dbeta[c] = dt_ln_col_finish(part + (size_t)g->splits * s->dim, g->splits, s->dim, c);
    }
    free(part);
}

void play_softmax(size_t rows, int T, float *p) {
    float v[DT_LANES];
    for (size_t row = 0; row < rows; row++) {
        float *pr = p + row * T;
        const int n = (int)(row % (size_t)T) + 1;
        for (int l = 0; l < DT_LANES; l++)
            v[l] = dt_lane_max(pr, n, l, DT_LANES);
        const float m = dt_lanes_max(v);
        for (int l = 0; l < DT_LANES; l++)
            v[l] = dt_lane_exp(pr, n, l, DT_LANES, m);
        const float inv = 1.0f / dt_lanes_sum(v);
        for (int l = 0; l < DT_LANES; l++)
            dt_att_lane_scale(pr, n, T, l, DT_LANES, inv);
    }
}

void play_softmax_back(size_t rows, int T, const float *p, float *d, float scale) {
    float v[DT_LANES];
    for (size_t row = 0; row < rows; row++) {
        const float *pr = p + row * T;
        float *dr = d + row * T;
        const int n = (int)(row % (size_t)T) + 1;
        for (int l = 0; l < DT_LANES; l++)
            v[l] = dt_lane_dot(dr, pr, n, l, DT_LANES);
        const float dot = dt_lanes_sum(v);
        for (int l = 0; l < DT_LANES; l++)
            dt_att_lane_grad(dr, pr, n, T, l, DT_LANES, dot, scale);
    }
}

/* one att_gemm product of one sample through cblas, as cublasSgemmStridedBatched takes it */
void play_gemm(const AttentionShape *s, AttProduct p, int b, float *const base[ATT_BUFS]) {
    const AttGemm a = att_gemm(s, p, b);
    for (int i = 0; i < a.count; i++)
        cblas_sgemm(CblasColMajor, a.g.trans_a ? CblasTrans : CblasNoTrans,
                    a.g.trans_b ? CblasTrans : CblasNoTrans, a.g.m, a.g.n, a.g.k, a.alpha,
                    base[a.a.buf] + a.a.off + i * a.a.stride, a.g.lda,
                    base[a.b.buf] + a.b.off + i * a.b.stride, a.g.ldb, 0.0f,
                    base[a.c.buf] + a.c.off + i * a.c.stride, a.g.ldc);
}

/* cuda_attention_forward and _backward, step by step */
void play_attention(const AttentionShape *s, const float *qkv, float *y, float *P, const float *dy,
                    float *dqkv) {
    float *work = halloc(att_work_floats(s));
    float *const fw[ATT_BUFS] = {[ATT_QKV] = (float *)qkv, [ATT_P] = P, [ATT_OUT] = y};
    for (int b = 0; b < s->batch; b++)
        play_gemm(s, ATT_S, b, fw);
    play_softmax((size_t)s->batch * s->heads * s->seq, s->seq, P);
    for (int b = 0; b < s->batch; b++)
        play_gemm(s, ATT_Y, b, fw);
    float *const bw[ATT_BUFS] = {[ATT_QKV] = (float *)qkv,
                                 [ATT_P] = P,
                                 [ATT_OUT] = (float *)dy,
                                 [ATT_WORK] = work,
                                 [ATT_DQKV] = dqkv};
    for (int b = 0; b < s->batch; b++) {
        play_gemm(s, ATT_DP, b, bw);
        play_softmax_back((size_t)s->heads * s->seq, s->seq, P + (size_t)b * att_work_floats(s),
                          work, att_scale(s));
        play_gemm(s, ATT_DQ, b, bw), play_gemm(s, ATT_DK, b, bw), play_gemm(s, ATT_DV, b, bw);
    }
    free(work);
}

/* tokpos_forward_kernel: one thread an element */
void play_tokpos_forward(const TokPosShape *s, const float *ids, const float *wte, const float *wpe,
                         float *y) {
    const size_t D = (size_t)s->dim, ny = (size_t)s->batch * s->seq * D;
    for (size_t e = 0; e < ny; e++) {
        const size_t r = e / D, c = e % D, t = r % (size_t)s->seq;
        const int id = dt_token(ids[r], s->vocab);
        y[e] = dt_tokpos_y(id, id >= 0 ? wte[(size_t)id * D + c] : 0.0f, wpe[t * D + c]);
    }
}

/* tokpos_dwpe_kernel: one thread an element of dwpe, the samples in order */
void play_dwpe(const TokPosShape *s, const float *dy, float *dwpe) {
    const size_t D = (size_t)s->dim;
    for (size_t e = 0; e < (size_t)s->seq * D; e++) {
        float acc = s->batch > 0 ? dy[e] : 0.0f;
        for (int b = 1; b < s->batch; b++)
            acc += dy[(size_t)b * s->seq * D + e];
        dwpe[e] = acc;
    }
}

/* tokpos_dwte_kernel: block k owns rows [v0, v1), THREADS threads in warps, chunks of ids */
void play_dwte(const TokPosShape *s, const float *ids, const float *dy, float *dwte) {
    enum { T = 256, WARPS = T / DT_LANES };
    const size_t D = (size_t)s->dim;
    const int rows = s->batch * s->seq;
    int list[T], counts[WARPS];
    for (int v0 = 0; v0 < s->vocab; v0 += TOKPOS_VROWS) {
        const int v1 = v0 + TOKPOS_VROWS < s->vocab ? v0 + TOKPOS_VROWS : s->vocab;
        for (int v = v0; v < v1; v++)
            memset(dwte + v * D, 0, D * sizeof(float));
        for (int base = 0; base < rows; base += T) {
            unsigned ballot[WARPS] = {0};
            for (int t = 0; t < T; t++) {
                const int r = base + t;
                if (r < rows && dt_tokpos_owned(ids[r], s->vocab, v0, v1))
                    ballot[t / DT_LANES] |= 1u << (t % DT_LANES);
            }
            int total = 0;
            for (int w = 0; w < WARPS; w++) {
                counts[w] = 0;
                for (unsigned b = ballot[w]; b; b &= b - 1u)
                    counts[w]++;
                total += counts[w];
            }
            for (int k = 0; k < T; k++)
                list[k] = -1;
            for (int t = 0; t < T; t++)
                if (ballot[t / DT_LANES] >> (t % DT_LANES) & 1u)
                    list[dt_tokpos_slot(counts, t / DT_LANES, ballot[t / DT_LANES], t % DT_LANES)] =
                        base + t;
            for (int k = 0; k < total; k++) {
                const size_t id = (size_t)dt_token(ids[list[k]], s->vocab);
                for (size_t c = 0; c < D; c++)
                    dwte[id * D + c] += dy[(size_t)list[k] * D + c];
            }
        }
    }
}
