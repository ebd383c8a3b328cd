/* test_layout.c - kernels/common/layout.h's NHWC (channels-last) index maps and permutations
 * against NCHW, on the CPU (no GPU needed): what a backend storing activations NHWC computes must
 * be what the NCHW reference (tests/ref_kernels.c) computes, permuted.
 *   - layout_nchw / layout_nhwc are bijections onto the tensor, and the two conversions are each
 *     other's inverse;
 *   - a convolution read through layout_nhwc with the filter in KRSC order (filter_to_krsc) gives
 *     ref_conv_forward's output, permuted, bit for bit (the same sums in the same order);
 *   - a fully connected layer on an input flattened from [c, h, w] and stored NHWC, with its
 *     weights through fc_weights_to_nhwc: the forward within 1e-6 of the NCHW one (the same terms
 *     summed in another order), dx bit for bit permuted, dW through fc_weights_from_nhwc bit for
 *     bit the NCHW parameters' gradient;
 *   - channel concatenation in NHWC through layout_concat_nhwc = the NCHW concatenation permuted.
 */
#include "harness.h"
#include "backend.h"
#include "layout.h"
#include "ref_kernels.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* one counted check (tests/harness.h), its message already formatted */
static void check(int ok, const char *what) {
    EXPECT(ok, "%s", what);
}

static float *rand_buf(size_t n) {
    return rand_floats(n, -1.0f, 1.0f);
}
static float *nhwc_of(const float *x, size_t n, size_t c, size_t hw) {
    const size_t total = n * c * hw;
    float *y = malloc((total ? total : 1) * sizeof *y);
    layout_to_nhwc(n, c, hw, x, y);
    return y;
}

static void test_maps(void) {
    const size_t N = 3, C = 5, HW = 7 * 6, total = N * C * HW;
    unsigned char *seen = calloc(total, 1);
    int ok = 1;
    for (size_t n = 0; n < N; n++)
        for (size_t c = 0; c < C; c++)
            for (size_t p = 0; p < HW; p++) {
                const size_t i = layout_nhwc(C, HW, n, c, p), j = layout_nchw(C, HW, n, c, p);
                ok &= i < total && j == (n * C + c) * HW + p;
                if (i < total) seen[i]++;
            }
    for (size_t i = 0; i < total; i++)
        ok &= seen[i] == 1;
    float *x = rand_buf(total), *y = nhwc_of(x, N, C, HW), *z = malloc(total * 4);
    layout_to_nchw(N, C, HW, y, z);
    ok &= !memcmp(x, z, total * 4) && y[layout_nhwc(C, HW, 2, 3, 11)] == x[(2 * C + 3) * HW + 11];
    check(ok, "layout_nhwc is a bijection; to_nhwc and to_nchw are inverses");
    free(seen), free(x), free(y), free(z);
}

/* ref_conv_forward's loops (the same order, double sums), reading x NHWC and W KRSC, writing y
 * NHWC */
static void conv_nhwc(const ConvShape *s, const float *x, const float *w_krsc, const float *b,
                      float *y) {
    const size_t hw_in = (size_t)s->h_in * s->w_in, hw_out = (size_t)s->h_out * s->w_out,
                 khw = (size_t)s->k * s->k;
    for (int n = 0; n < s->batch; n++)
        for (int co = 0; co < s->c_out; co++)
            for (int oh = 0; oh < s->h_out; oh++)
                for (int ow = 0; ow < s->w_out; ow++) {
                    double acc = b ? b[co] : 0.0;
                    for (int ci = 0; ci < s->c_in; ci++)
                        for (int ki = 0; ki < s->k; ki++)
                            for (int kj = 0; kj < s->k; kj++) {
                                int ih = oh * s->stride - s->pad + ki;
                                int iw = ow * s->stride - s->pad + kj;
                                if (ih < 0 || ih >= s->h_in || iw < 0 || iw >= s->w_in) continue;
                                acc += (double)w_krsc[layout_nhwc(s->c_in, khw, co, ci,
                                                                  (size_t)ki * s->k + kj)] *
                                       x[layout_nhwc(s->c_in, hw_in, n, ci,
                                                     (size_t)ih * s->w_in + iw)];
                            }
                    y[layout_nhwc(s->c_out, hw_out, n, co, (size_t)oh * s->w_out + ow)] =
                        (float)acc;
                }
}

static void test_conv(void) {
    ConvShape s = {2, 3, 9, 8, 4, 3, 2, 1, 0, 0};
    s.h_out = (s.h_in + 2 * s.pad - s.k) / s.stride + 1;
    s.w_out = (s.w_in + 2 * s.pad - s.k) / s.stride + 1;
    const size_t nx = (size_t)s.batch * s.c_in * s.h_in * s.w_in,
                 ny = (size_t)s.batch * s.c_out * s.h_out * s.w_out,
                 nw = (size_t)s.c_out * s.c_in * s.k * s.k;
    float *x = rand_buf(nx), *w = rand_buf(nw), *b = rand_buf(s.c_out),
          *y = malloc(ny * 4), *y2 = malloc(ny * 4), *wk = malloc(nw * 4), *w2 = malloc(nw * 4);
    ref_conv_forward(&s, x, w, b, y);
    float *xn = nhwc_of(x, s.batch, s.c_in, (size_t)s.h_in * s.w_in);
    filter_to_krsc(s.c_out, s.c_in, (size_t)s.k * s.k, w, wk);
    filter_from_krsc(s.c_out, s.c_in, (size_t)s.k * s.k, wk, w2);
    conv_nhwc(&s, xn, wk, b, y2);
    float *yn = nhwc_of(y, s.batch, s.c_out, (size_t)s.h_out * s.w_out);
    check(!memcmp(yn, y2, ny * 4) && !memcmp(w, w2, nw * 4),
          "convolution on NHWC input with the KRSC filter = ref_conv_forward permuted, bit for "
          "bit; the filter round trip is exact");
    free(x), free(w), free(b), free(y), free(y2), free(wk), free(w2), free(xn), free(yn);
}

static void test_fc_flatten(void) {
    const int batch = 3, c = 6, hw = 10, out = 7, in = c * hw;
    FcShape s = {.batch = batch, .in = in, .out = out};
    float *x = rand_buf((size_t)batch * in), *w = rand_buf((size_t)out * in),
          *b = rand_buf(out), *dy = rand_buf((size_t)batch * out);
    float *y = malloc(batch * out * 4), *dx = malloc(batch * in * 4), *dw = malloc(out * in * 4),
          *db = malloc(out * 4);
    ref_fc_forward(&s, x, w, b, y);
    ref_fc_backward(&s, x, w, dy, dx, dw, db);
    /* the NHWC side: features in NHWC order, the weights mapped */
    float *xn = nhwc_of(x, batch, c, hw), *wn = malloc(out * in * 4), *y2 = malloc(batch * out * 4),
          *dx2 = malloc(batch * in * 4), *dwn = malloc(out * in * 4), *dw2 = malloc(out * in * 4),
          *db2 = malloc(out * 4);
    fc_weights_to_nhwc(out, c, hw, w, wn);
    ref_fc_forward(&s, xn, wn, b, y2);
    ref_fc_backward(&s, xn, wn, dy, dx2, dwn, db2);
    fc_weights_from_nhwc(out, c, hw, dwn, dw2);
    float *dxn = nhwc_of(dx, batch, c, hw);
    int close = 1;
    for (int i = 0; i < batch * out; i++)
        close &= fabsf(y[i] - y2[i]) <= 1e-6f * (1.0f + fabsf(y[i]));
    check(close, "fc on an NHWC-flattened input with fc_weights_to_nhwc: y within 1e-6");
    check(!memcmp(dxn, dx2, (size_t)batch * in * 4) && !memcmp(dw, dw2, (size_t)out * in * 4) &&
              !memcmp(db, db2, (size_t)out * 4),
          "  dx = NCHW dx permuted, dW through fc_weights_from_nhwc = NCHW dW, bit for bit");
    float *w3 = malloc(out * in * 4);
    fc_weights_from_nhwc(out, c, hw, wn, w3);
    check(!memcmp(w, w3, (size_t)out * in * 4) &&
              wn[2 * in + layout_fc_feature_nhwc(c, hw, 3 * hw + 4)] == w[2 * in + 3 * hw + 4] &&
              layout_fc_feature_nhwc(c, hw, 3 * hw + 4) == (size_t)4 * c + 3,
          "  fc_weights_from_nhwc inverts fc_weights_to_nhwc; feature (c 3, pixel 4) at 4c + 3");
    free(x), free(w), free(b), free(dy), free(y), free(dx), free(dw), free(db), free(xn), free(wn),
        free(y2), free(dx2), free(dwn), free(dw2), free(db2), free(dxn), free(w3);
}

static void test_concat(void) {
    const int batch = 2, hw = 6, cs[3] = {3, 1, 4}, ct = 8;
    size_t sizes[3];
    float *xs[3], *xn[3];
    for (int i = 0; i < 3; i++) {
        sizes[i] = (size_t)cs[i] * hw;
        xs[i] = rand_buf(batch * sizes[i]);
        xn[i] = nhwc_of(xs[i], batch, cs[i], hw);
    }
    float *y = malloc(batch * ct * hw * 4), *yn2 = malloc(batch * ct * hw * 4);
    ref_concat_forward(batch, 3, (const float *const *)xs, sizes, y);
    size_t off = 0;
    for (int i = 0; i < 3; i++) {
        for (int n = 0; n < batch; n++)
            for (int q = 0; q < cs[i]; q++)
                for (int p = 0; p < hw; p++)
                    yn2[layout_concat_nhwc(ct, hw, off, n, q, p)] =
                        xn[i][layout_nhwc(cs[i], hw, n, q, p)];
        off += cs[i];
    }
    float *yn = nhwc_of(y, batch, ct, hw);
    check(!memcmp(yn, yn2, (size_t)batch * ct * hw * 4),
          "channel concatenation in NHWC (layout_concat_nhwc) = NCHW concatenation permuted");
    for (int i = 0; i < 3; i++)
        free(xs[i]), free(xn[i]);
    free(y), free(yn), free(yn2);
}

int main(void) {
    rand_seed(25);
    test_maps();
    test_conv();
    test_fc_flatten();
    test_concat();
    return check_summary();
}
