/* cpu_winograd.c - F(2x2, 3x3) Winograd convolution for the CPU backend (3x3, stride 1, pad 1).
 *
 * Each 2x2 output tile comes from a 4x4 input patch d (rows/columns 2ty-1 .. 2ty+2, zero outside
 * the image) and each 3x3 filter g of a channel pair:
 *     y = A^T [ (G g G^T) (.) (B^T d B) ] A      (.) elementwise, 16 products per tile
 * with B^T = [1 0 -1 0; 0 1 1 0; 0 -1 1 0; 0 1 0 -1], G = [1 0 0; .5 .5 .5; .5 -.5 .5; 0 0 1],
 * A^T = [1 1 1 0; 0 1 -1 -1]. Summed over input channels, the 16 elementwise products become 16
 * GEMMs: M[xi][c_out][T] = U[xi][c_out][c_in] * V[xi][c_in][T] for the T tiles of a block, where
 * U = G g G^T (the transformed weights) and V = B^T d B (the transformed input).
 *
 * Backward: the input gradient is the same convolution of dy with the filters flipped and the
 * channel roles swapped (3x3, pad 1: a full correlation); the weight gradient is
 *     dU[xi][c_out][c_in] = sum over tiles of (A dy A^T)[xi] (.) V[xi]   (16 GEMMs),
 *     dg = G^T dU G.
 *
 * Tiles are taken a block of tile rows at a time (all samples' tile rows in sequence), so that V
 * and M of a block stay a few megabytes. The transforms work on whole tile rows: a patch row's
 * even and odd columns are split into two arrays, so the 4-point transforms are element-wise over
 * the tiles of the row and vectorise (VBLOCK-wide, see cpu_vec.h).
 */
#include "cpu_winograd.h"
#include "cpu_blas.h" /* defines: cpu_blas (OpenBLAS) */
#include "cpu_vec.h"  /* defines: VBLOCK, cpu_vsum */

#include <string.h>

/* V and M of a block: 16 x channels x tiles floats each, about this many. */
#define WINO_BLOCK_FLOATS (4u << 20)
/* Measured against the im2col GEMM (4 samples, VGG16's layers, process CPU time): at 14x14 and
 * 7x7 the 16 small GEMMs, each repacking its 16th of the weights, lose (120 vs 126, 43 vs 126
 * GFLOPS-equivalent); from 28x28 on they win (175-250 vs 115-150). */
#define WINO_MIN_PIXELS 400
/* The weight gradient's 16 GEMMs are c_out x c_in: at 64 x 64 they run far below peak and the
 * im2col GEMM is faster (64@224: 400 vs 305 ms backward); from 128 x 128 on Winograd wins. */
#define WINO_MIN_WEIGHT_CHANNELS 256

int cpu_wino_applies(const ConvShape *s) {
    return s->k == 3 && s->stride == 1 && s->pad == 1 && s->c_in >= 16 && s->c_out >= 16 &&
           s->h_out == s->h_in && s->w_out == s->w_in &&
           (size_t)s->h_in * s->w_in >= WINO_MIN_PIXELS;
}

int cpu_wino_weights_apply(const ConvShape *s) {
    return cpu_wino_applies(s) && s->c_in >= WINO_MIN_WEIGHT_CHANNELS &&
           s->c_out >= WINO_MIN_WEIGHT_CHANNELS;
}

/* Tiling of one image: th x tw tiles; a block is `rows` tile rows (of any samples). */
typedef struct {
    int th, tw, rows, cmax;
} Tiling;

static Tiling tiling(const ConvShape *s) {
    Tiling t;
    t.th = (s->h_in + 1) / 2, t.tw = (s->w_in + 1) / 2;
    t.cmax = s->c_in > s->c_out ? s->c_in : s->c_out;
    size_t tiles = WINO_BLOCK_FLOATS / (16u * (size_t)t.cmax);
    if (tiles < 64) tiles = 64;
    size_t rows = tiles / (size_t)t.tw;
    if (rows < 1) rows = 1;
    const size_t all = (size_t)(s->batch > 0 ? s->batch : 1) * t.th;
    t.rows = (int)(rows < all ? rows : all);
    return t;
}

/* Workspace: U[16][c_out][c_in] | V[16][cmax][T] | M[16][cmax][T] | row scratch. */
static size_t scratch_floats(const Tiling *t) {
    return 32 * ((size_t)t->tw + 2);
}

size_t cpu_wino_workspace_bytes(const ConvShape *s) {
    const Tiling t = tiling(s);
    const size_t T = (size_t)t.rows * t.tw;
    return (16 * (size_t)s->c_out * s->c_in + 2 * 16 * (size_t)t.cmax * T + scratch_floats(&t)) *
           sizeof(float);
}

/* ---- transforms --------------------------------------------------------------------------- */

/* Even and odd columns of one image row (zero beyond the image, and for a row outside it):
 * e[k] = x[2k], k in [0, tw]; o[k] = x[2k-1], k in [0, tw] (o[0] is the left padding). */
static void split_row(const float *row, int w, int tw, float *restrict e, float *restrict o) {
    for (int k = 0; k <= tw; k++) {
        e[k] = row && 2 * k < w ? row[2 * k] : 0.0f;
        o[k] = row && k > 0 && 2 * k - 1 < w ? row[2 * k - 1] : 0.0f;
    }
}

/* d B for every tile of a patch row: r0 = d0 - d2, r1 = d1 + d2, r2 = d2 - d1, r3 = d1 - d3, with
 * d0 = o[tx], d1 = e[tx], d2 = o[tx+1], d3 = e[tx+1]. */
static void row_transform(const float *restrict e, const float *restrict o, int tw,
                          float *restrict r0, float *restrict r1, float *restrict r2,
                          float *restrict r3) {
    int t = 0;
    for (; t + VBLOCK <= tw; t += VBLOCK)
        for (int j = 0; j < VBLOCK; j++) {
            const float d0 = o[t + j], d1 = e[t + j], d2 = o[t + j + 1], d3 = e[t + j + 1];
            r0[t + j] = d0 - d2, r1[t + j] = d1 + d2, r2[t + j] = d2 - d1, r3[t + j] = d1 - d3;
        }
    for (; t < tw; t++) {
        const float d0 = o[t], d1 = e[t], d2 = o[t + 1], d3 = e[t + 1];
        r0[t] = d0 - d2, r1[t] = d1 + d2, r2[t] = d2 - d1, r3[t] = d1 - d3;
    }
}

/* B^T over the four patch rows a, b, c, d (one column position j of every tile):
 * v0 = a - c, v1 = b + c, v2 = c - b, v3 = b - d. */
static void col_transform(const float *restrict a, const float *restrict b, const float *restrict c,
                          const float *restrict d, int tw, float *restrict v0, float *restrict v1,
                          float *restrict v2, float *restrict v3) {
    int t = 0;
    for (; t + VBLOCK <= tw; t += VBLOCK)
        for (int j = 0; j < VBLOCK; j++) {
            v0[t + j] = a[t + j] - c[t + j], v1[t + j] = b[t + j] + c[t + j];
            v2[t + j] = c[t + j] - b[t + j], v3[t + j] = b[t + j] - d[t + j];
        }
    for (; t < tw; t++)
        v0[t] = a[t] - c[t], v1[t] = b[t] + c[t], v2[t] = c[t] - b[t], v3[t] = b[t] - d[t];
}

/* V[xi][ch][t] (row stride ldv = tiles of the block) = B^T d B of every tile of tile rows
 * [r0, r1) (row index R = n*th + ty) of x[n][channels][h][w]. */
static void input_transform(const float *x, int channels, int h, int w, const Tiling *tl, int r0,
                            int r1, float *V, size_t ldv, float *scratch) {
    const int tw = tl->tw;
    float *e = scratch, *o = e + tw + 2, *rt = o + tw + 2; /* rt[4 rows][4][tw] */
    for (int ch = 0; ch < channels; ch++)
        for (int R = r0; R < r1; R++) {
            const int n = R / tl->th, ty = R % tl->th;
            const float *img = x + ((size_t)n * channels + ch) * h * w;
            for (int r = 0; r < 4; r++) {
                const int row = 2 * ty - 1 + r;
                split_row(row >= 0 && row < h ? img + (size_t)row * w : NULL, w, tw, e, o);
                float *q = rt + (size_t)r * 4 * tw;
                row_transform(e, o, tw, q, q + tw, q + 2 * tw, q + 3 * tw);
            }
            const size_t t0 = (size_t)(R - r0) * tw;
            for (int j = 0; j < 4; j++) {
                float *v[4];
                for (int i = 0; i < 4; i++)
                    v[i] = V + ((size_t)(4 * i + j) * channels + ch) * ldv + t0;
                col_transform(rt + (size_t)j * tw, rt + (size_t)(4 + j) * tw,
                              rt + (size_t)(8 + j) * tw, rt + (size_t)(12 + j) * tw, tw, v[0], v[1],
                              v[2], v[3]);
            }
        }
}

/* (A dy A^T) of every output tile of tile rows [r0, r1): for the tile's 2x2 gradient [[p,q],[r,s]],
 * the rows of A dy are [p,q], [p+r,q+s], [p-r,q-s], [-r,-s] and each row [u,v] becomes
 * [u, u+v, u-v, -v]. Into D[xi][ch][t] like input_transform. */
static void grad_transform(const float *dy, int channels, int h, int w, const Tiling *tl, int r0,
                           int r1, float *D, size_t ldd, float *scratch) {
    const int tw = tl->tw;
    float *u0 = scratch, *v0 = u0 + tw + 2, *u1 = v0 + tw + 2, *v1 = u1 + tw + 2;
    for (int ch = 0; ch < channels; ch++)
        for (int R = r0; R < r1; R++) {
            const int n = R / tl->th, ty = R % tl->th;
            const float *img = dy + ((size_t)n * channels + ch) * h * w;
            for (int a = 0; a < 2; a++) { /* output rows 2ty, 2ty+1: even/odd columns */
                const int row = 2 * ty + a;
                float *u = a ? u1 : u0, *v = a ? v1 : v0;
                const float *src = row < h ? img + (size_t)row * w : NULL;
                for (int t = 0; t < tw; t++) {
                    u[t] = src ? src[2 * t] : 0.0f;
                    v[t] = src && 2 * t + 1 < w ? src[2 * t + 1] : 0.0f;
                }
            }
            const size_t t0 = (size_t)(R - r0) * tw;
            float *d[16];
            for (int i = 0; i < 16; i++)
                d[i] = D + ((size_t)i * channels + ch) * ldd + t0;
            for (int t = 0; t < tw; t++) {
                const float p = u0[t], q = v0[t], r = u1[t], s = v1[t];
                const float rows[4][2] = {{p, q}, {p + r, q + s}, {p - r, q - s}, {-r, -s}};
                for (int i = 0; i < 4; i++) {
                    const float uu = rows[i][0], vv = rows[i][1];
                    d[4 * i][t] = uu, d[4 * i + 1][t] = uu + vv;
                    d[4 * i + 2][t] = uu - vv, d[4 * i + 3][t] = -vv;
                }
            }
        }
}

/* y tiles of tile rows [r0, r1) = A^T M A (+ bias) from M[xi][ch][t]: rows s0 = m0 + m1 + m2,
 * s1 = m1 - m2 - m3 of the 4x4 m, then the same on each row's columns. */
static void output_transform(const float *M, size_t ldm, int channels, int h, int w,
                             const Tiling *tl, int r0, int r1, const float *bias, float *y,
                             float *scratch) {
    const int tw = tl->tw;
    float *s = scratch;              /* s[2][4][tw] */
    float *out = s + 8 * (size_t)tw; /* out[2][2][tw]: y rows a, columns b */
    for (int ch = 0; ch < channels; ch++) {
        const float b = bias ? bias[ch] : 0.0f;
        for (int R = r0; R < r1; R++) {
            const int n = R / tl->th, ty = R % tl->th;
            const size_t t0 = (size_t)(R - r0) * tw;
            const float *m[16];
            for (int i = 0; i < 16; i++)
                m[i] = M + ((size_t)i * channels + ch) * ldm + t0;
            for (int j = 0; j < 4; j++) {
                float *restrict s0 = s + (size_t)j * tw, *restrict s1 = s + (size_t)(4 + j) * tw;
                const float *restrict a = m[j], *restrict bb = m[4 + j];
                const float *restrict c = m[8 + j], *restrict d = m[12 + j];
                for (int t = 0; t < tw; t++)
                    s0[t] = a[t] + bb[t] + c[t], s1[t] = bb[t] - c[t] - d[t];
            }
            for (int a = 0; a < 2; a++) {
                const float *restrict q0 = s + (size_t)(4 * a) * tw, *restrict q1 = q0 + tw;
                const float *restrict q2 = q1 + tw, *restrict q3 = q2 + tw;
                float *restrict o0 = out + (size_t)(2 * a) * tw, *restrict o1 = o0 + tw;
                for (int t = 0; t < tw; t++)
                    o0[t] = q0[t] + q1[t] + q2[t] + b, o1[t] = q1[t] - q2[t] - q3[t] + b;
            }
            float *img = y + ((size_t)n * channels + ch) * h * w;
            for (int a = 0; a < 2; a++) {
                const int row = 2 * ty + a;
                if (row >= h) break;
                float *dst = img + (size_t)row * w;
                const float *o0 = out + (size_t)(2 * a) * tw, *o1 = o0 + tw;
                for (int t = 0; 2 * t + 1 < w; t++)
                    dst[2 * t] = o0[t], dst[2 * t + 1] = o1[t];
                if (w & 1) dst[w - 1] = o0[tw - 1];
            }
        }
    }
}

/* U[xi][a][b] = G g G^T of the 3x3 filter g of output channel co and input channel ci, stored at
 * index (co, ci) of a [rows_of][cols_of] matrix per xi (flip: the filter rotated by 180 degrees
 * and stored at (ci, co): the backward-data filters). */
static void weight_transform(const float *w, int c_out, int c_in, int flip, float *U) {
    const size_t plane = (size_t)c_out * c_in;
    for (int co = 0; co < c_out; co++)
        for (int ci = 0; ci < c_in; ci++) {
            const float *src = w + ((size_t)co * c_in + ci) * 9;
            float g[9];
            for (int k = 0; k < 9; k++)
                g[k] = flip ? src[8 - k] : src[k];
            float gg[4][3]; /* G g */
            for (int c = 0; c < 3; c++) {
                const float a = g[c], b = g[3 + c], d = g[6 + c];
                gg[0][c] = a, gg[1][c] = 0.5f * (a + b + d), gg[2][c] = 0.5f * (a - b + d),
                gg[3][c] = d;
            }
            const size_t at = flip ? (size_t)ci * c_out + co : (size_t)co * c_in + ci;
            for (int r = 0; r < 4; r++) { /* (G g) G^T */
                const float a = gg[r][0], b = gg[r][1], d = gg[r][2];
                U[(size_t)(4 * r) * plane + at] = a;
                U[(size_t)(4 * r + 1) * plane + at] = 0.5f * (a + b + d);
                U[(size_t)(4 * r + 2) * plane + at] = 0.5f * (a - b + d);
                U[(size_t)(4 * r + 3) * plane + at] = d;
            }
        }
}

/* dg = G^T dU G for every channel pair, dU[xi][c_out][c_in] -> dw[c_out][c_in][3][3]. */
static void weight_grad_transform(const float *dU, int c_out, int c_in, float *dw) {
    const size_t plane = (size_t)c_out * c_in;
    for (size_t p = 0; p < plane; p++) {
        float u[4][4], t[3][4];
        for (int i = 0; i < 16; i++)
            u[i / 4][i % 4] = dU[(size_t)i * plane + p];
        for (int j = 0; j < 4; j++) { /* G^T dU: rows */
            t[0][j] = u[0][j] + 0.5f * (u[1][j] + u[2][j]);
            t[1][j] = 0.5f * (u[1][j] - u[2][j]);
            t[2][j] = 0.5f * (u[1][j] + u[2][j]) + u[3][j];
        }
        float *g = dw + p * 9;
        for (int r = 0; r < 3; r++) { /* (G^T dU) G: columns */
            g[3 * r] = t[r][0] + 0.5f * (t[r][1] + t[r][2]);
            g[3 * r + 1] = 0.5f * (t[r][1] - t[r][2]);
            g[3 * r + 2] = 0.5f * (t[r][1] + t[r][2]) + t[r][3];
        }
    }
}

/* ---- convolutions --------------------------------------------------------------------------- */

/* y[n][c_out] = conv(x[n][c_in]) with transformed filters U[xi][c_out][c_in], block by block. */
static void wino_conv(const float *x, int c_in, int c_out, int batch, int h, int w,
                      const Tiling *tl, const float *U, const float *bias, float *y, float *V,
                      float *M, float *scratch) {
    const int rows_total = batch * tl->th;
    for (int r0 = 0; r0 < rows_total; r0 += tl->rows) {
        const int r1 = r0 + tl->rows < rows_total ? r0 + tl->rows : rows_total;
        const int T = (r1 - r0) * tl->tw;
        input_transform(x, c_in, h, w, tl, r0, r1, V, (size_t)T, scratch);
        for (int xi = 0; xi < 16; xi++)
            cpu_blas()->sgemm(CPU_BLAS_ROW_MAJOR, CPU_BLAS_NO_TRANS, CPU_BLAS_NO_TRANS, c_out, T,
                              c_in, 1.0f, U + (size_t)xi * c_out * c_in, c_in,
                              V + (size_t)xi * c_in * T, T, 0.0f, M + (size_t)xi * c_out * T, T);
        output_transform(M, (size_t)T, c_out, h, w, tl, r0, r1, bias, y, scratch);
    }
}

void cpu_wino_forward(const ConvShape *s, const float *x, const float *w, const float *b, float *y,
                      void *work) {
    const Tiling tl = tiling(s);
    const size_t T = (size_t)tl.rows * tl.tw;
    float *U = work, *V = U + 16 * (size_t)s->c_out * s->c_in, *M = V + 16 * (size_t)tl.cmax * T;
    float *scratch = M + 16 * (size_t)tl.cmax * T;
    if (s->batch <= 0) return;
    weight_transform(w, s->c_out, s->c_in, 0, U);
    wino_conv(x, s->c_in, s->c_out, s->batch, s->h_in, s->w_in, &tl, U, b, y, V, M, scratch);
}

void cpu_wino_backward_data(const ConvShape *s, const float *w, const float *dy, float *dx,
                            void *work) {
    const Tiling tl = tiling(s);
    const size_t T = (size_t)tl.rows * tl.tw;
    float *U = work, *V = U + 16 * (size_t)s->c_out * s->c_in, *M = V + 16 * (size_t)tl.cmax * T;
    float *scratch = M + 16 * (size_t)tl.cmax * T;
    if (s->batch <= 0) return;
    weight_transform(w, s->c_out, s->c_in, 1, U);
    wino_conv(dy, s->c_out, s->c_in, s->batch, s->h_in, s->w_in, &tl, U, NULL, dx, V, M, scratch);
}

void cpu_wino_backward(const ConvShape *s, const float *x, const float *w, const float *dy,
                       float *dx, float *dw, float *db, void *work) {
    const int c_in = s->c_in, c_out = s->c_out, h = s->h_in, wd = s->w_in;
    const Tiling tl = tiling(s);
    const size_t T = (size_t)tl.rows * tl.tw, hw = (size_t)h * wd;
    float *U = work, *V = U + 16 * (size_t)c_out * c_in, *M = V + 16 * (size_t)tl.cmax * T;
    float *scratch = M + 16 * (size_t)tl.cmax * T;

    if (db) {
        memset(db, 0, (size_t)c_out * sizeof(float));
        for (int n = 0; n < s->batch; n++)
            for (int co = 0; co < c_out; co++)
                db[co] += cpu_vsum(dy + ((size_t)n * c_out + co) * hw, hw);
    }

    /* dU[xi] = sum over blocks of D[xi] (c_out x T) * V[xi]^T (T x c_in); dw = G^T dU G */
    const int rows_total = s->batch * tl.th;
    for (int r0 = 0; r0 < rows_total; r0 += tl.rows) {
        const int r1 = r0 + tl.rows < rows_total ? r0 + tl.rows : rows_total;
        const int Tb = (r1 - r0) * tl.tw;
        input_transform(x, c_in, h, wd, &tl, r0, r1, V, (size_t)Tb, scratch);
        grad_transform(dy, c_out, h, wd, &tl, r0, r1, M, (size_t)Tb, scratch);
        for (int xi = 0; xi < 16; xi++)
            cpu_blas()->sgemm(CPU_BLAS_ROW_MAJOR, CPU_BLAS_NO_TRANS, CPU_BLAS_TRANS, c_out, c_in,
                              Tb, 1.0f, M + (size_t)xi * c_out * Tb, Tb, V + (size_t)xi * c_in * Tb,
                              Tb, r0 == 0 ? 0.0f : 1.0f, U + (size_t)xi * c_out * c_in, c_in);
    }
    if (rows_total > 0)
        weight_grad_transform(U, c_out, c_in, dw);
    else
        memset(dw, 0, (size_t)c_out * c_in * 9 * sizeof(float));

    /* dx: dy convolved with the flipped filters, channels swapped (U'[xi][c_in][c_out]) */
    if (dx) cpu_wino_backward_data(s, w, dy, dx, work);
}
