/* test_device_nhwc.c - the CUDA backend's NHWC 16-bit kernels but batch norm
 * (kernels/cuda/cuda_act16_kernels.cu; batch norm: tests/test_device_bn16.c) run on the CPU, no GPU
 * needed: every thread of a launch is played with the functions it runs
 * (kernels/cuda/cuda_elem16.h, shared with the device code) over the same grid, on random bf16 and
 * fp16 values, and the result is compared with the CPU backend run on the
 * widened values in NCHW (kernels/common/layout.h's maps), rounded once:
 *   - the index maps NCHW <-> NHWC against layout.h, the input conversion, the 16-bit transposes
 *     of a flattened fc's input, the filters' KRSC copies with their biases (weights_ready) and
 *     the filter gradient widened back, bit for bit;
 *   - the concatenation's kernels (one launch for every input, in units of 16 bytes down to one
 *     value): the inputs side by side, forward and backward, whatever the alignment;
 *   - ReLU, its backward, the residual add, a bias over rows, dropout (the NCHW mask of an NHWC
 *     image, DropoutShape.c/hw), max pooling with and without padding (argmax too), average
 *     pooling, global average pooling, LRN, forward and backward: bit for bit the CPU's result of
 *     the same 16-bit inputs, rounded.
 * Device indexing of the launches, 16-byte loads and the libraries are left to
 * tests/test_cuda_nhwc.c on a GPU. */
#include "harness.h"
#include "dev16.h"
#include "backend.h"
#include "cuda_elem16.h"
#include "layout.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- maps and conversions -------------------------------------------------------------------- */

static void test_maps(void) {
    const size_t shapes[][3] = {{2, 3, 5}, {1, 1, 7}, {3, 8, 1}, {2, 16, 49}};
    int bad = 0;
    for (size_t k = 0; k < sizeof shapes / sizeof shapes[0]; k++) {
        const size_t n = shapes[k][0], c = shapes[k][1], hw = shapes[k][2];
        for (size_t i = 0; i < n; i++)
            for (size_t q = 0; q < c; q++)
                for (size_t p = 0; p < hw; p++) {
                    const size_t a = layout_nchw(c, hw, i, q, p), b = layout_nhwc(c, hw, i, q, p);
                    bad += dt_nhwc_of_nchw(a, c, hw) != b || dt_nchw_of_nhwc(b, c, hw) != a;
                }
    }
    EXPECT(!bad, "dt_nhwc_of_nchw and dt_nchw_of_nhwc are layout.h's maps (%d wrong)", bad);
    /* the element kernels' division (bias, dropout): 32-bit below 2^32, 64-bit above */
    const size_t es[] = {0, 1, 63, 64, 4095, 0xffffffffu, (size_t)1 << 32, ((size_t)5 << 33) + 7};
    const size_t ds[] = {1, 3, 64, 1000, 0xffffffffu, (size_t)1 << 32};
    bad = 0;
    for (size_t i = 0; i < sizeof es / sizeof es[0]; i++)
        for (size_t j = 0; j < sizeof ds / sizeof ds[0]; j++) {
            size_t r;
            const size_t q = dt16_divmod(es[i], ds[j], &r);
            bad += q != es[i] / ds[j] || r != es[i] % ds[j];
        }
    EXPECT(!bad, "dt16_divmod = / and %% below and above 2^32 (%d wrong)", bad);
}

static void test_conversions(void) {
    const size_t n = 3, c = 5, hw = 7, total = n * c * hw;
    /* the input: input_kernel, o over NHWC */
    float *x = rand_floats(total, -3, 3), *t = malloc(total * sizeof *t);
    dt16 *y = poison16(total), *ref = malloc(total * sizeof *ref);
    for (size_t o = 0; o < total; o++)
        y[o] = dt16_r(x[dt_nchw_of_nhwc(o, c, hw)], HALF);
    layout_to_nhwc(n, c, hw, x, t);
    for (size_t i = 0; i < total; i++)
        ref[i] = dt16_r(t[i], HALF);
    EXPECT(same16(y, ref, total), "%s: input_to_act = the input in NHWC, rounded", type_name());
    /* the transposes: to_nchw_kernel then to_nhwc_kernel */
    dt16 *a = poison16(total), *b = poison16(total);
    for (size_t i = 0; i < total; i++)
        a[i] = y[dt_nhwc_of_nchw(i, c, hw)];
    int ok = 1;
    for (size_t q = 0; q < c && ok; q++)
        for (size_t p = 0; p < hw; p++) /* sample 1: a holds [c][hw] */
            ok &= a[layout_nchw(c, hw, 1, q, p)] == y[layout_nhwc(c, hw, 1, q, p)];
    for (size_t o = 0; o < total; o++)
        b[o] = a[dt_nchw_of_nhwc(o, c, hw)];
    EXPECT(ok && same16(b, y, total), "%s: the fc's 16-bit transposes to NCHW order and back",
           type_name());
    free(x), free(t), free(y), free(ref), free(a), free(b);
}

/* weights_ready's filters_kernel over a table of two convolutions, and filter_grad_kernel */
static void test_filters(void) {
    enum { K0 = 4, C0 = 3, R0 = 9, K1 = 6, C1 = 5, R1 = 1 };
    const size_t n0 = K0 * C0 * R0, n1 = K1 * C1 * R1;
    const size_t nparams = n0 + K0 + n1 + 7; /* conv0 (bias), conv1 (none), other parameters */
    float *params = rand_floats(nparams, -1, 1);
    const struct {
        size_t w_src, w_dst, b_src, b_dst;
        int k, c, khw;
    } table[2] = {{0, 0, n0, 128, K0, C0, R0}, {n0 + K0, 256, SIZE_MAX, SIZE_MAX, K1, C1, R1}};
    dt16 *w16 = poison16(512);
    for (int b = 0; b < 2; b++) { /* block row b, every thread of it */
        const size_t count = (size_t)table[b].k * table[b].c * table[b].khw;
        for (size_t o = 0; o < count; o++) {
            w16[table[b].w_dst + o] =
                dt16_r(params[table[b].w_src +
                              dt_nchw_of_nhwc(o, (size_t)table[b].c, (size_t)table[b].khw)],
                       HALF);
            if (table[b].b_src != SIZE_MAX && o < (size_t)table[b].k)
                w16[table[b].b_dst + o] = dt16_r(params[table[b].b_src + o], HALF);
        }
    }
    float *krsc = malloc(n0 * sizeof *krsc);
    filter_to_krsc(K0, C0, R0, params, krsc);
    int ok = 1;
    for (size_t i = 0; i < n0; i++)
        ok &= w16[i] == dt16_r(krsc[i], HALF);
    for (size_t i = 0; i < K0; i++)
        ok &= w16[128 + i] == dt16_r(params[n0 + i], HALF);
    filter_to_krsc(K1, C1, R1, params + n0 + K0, krsc);
    for (size_t i = 0; i < n1; i++)
        ok &= w16[256 + i] == dt16_r(krsc[i], HALF);
    ok &= w16[128 + K0] == 0xa5a5 && w16[256 + n1] == 0xa5a5; /* nothing else written */
    /* the gradient back: dw[k][c][r] = widened dw16[k][r][c] */
    float *dw = malloc(n0 * sizeof *dw), *back = malloc(n0 * sizeof *back), *ref = malloc(n0 * 4);
    for (size_t i = 0; i < n0; i++)
        dw[i] = dt16_f(w16[dt_nhwc_of_nchw(i, C0, R0)], HALF);
    for (size_t i = 0; i < n0; i++)
        back[i] = dt16_f(w16[i], HALF);
    filter_from_krsc(K0, C0, R0, back, ref);
    ok &= memcmp(dw, ref, n0 * sizeof *dw) == 0;
    EXPECT(ok,
           "%s: the filters' KRSC copies and biases where the table puts them, nothing else "
           "written; the filter gradient widened back to KCRS",
           type_name());
    free(params), free(w16), free(krsc), free(dw), free(back), free(ref);
}

/* ---- element-wise ---------------------------------------------------------------------------- */

static void test_elementwise(void) {
    const size_t n = 4, c = 6, hw = 5, total = n * c * hw;
    dt16 *x = rand16(total, -2, 2), *z = rand16(total, -2, 2), *g = rand16(total, -1, 1);
    float *xf = malloc(total * 4), *zf = malloc(total * 4), *gf = malloc(total * 4);
    for (size_t i = 0; i < total; i++)
        xf[i] = dt16_f(x[i], HALF), zf[i] = dt16_f(z[i], HALF), gf[i] = dt16_f(g[i], HALF);
    float *r = malloc(total * 4), *r2 = malloc(total * 4);
    dt16 *y = poison16(total), *ref = malloc(total * sizeof *ref);
    int ok;
    /* ReLU and its backward */
    cpu_backend.relu_forward(NULL, total, xf, r);
    for (size_t i = 0; i < total; i++)
        y[i] = dt16_relu(x[i], HALF), ref[i] = dt16_r(r[i], HALF);
    ok = same16(y, ref, total);
    cpu_backend.relu_backward(NULL, total, r, gf, r2);
    for (size_t i = 0; i < total; i++)
        y[i] = dt16_relu_grad(y[i], g[i], HALF), ref[i] = dt16_r(r2[i], HALF);
    ok &= same16(y, ref, total);
    /* the residual add, a bias over rows of c channels */
    cpu_backend.add_forward(NULL, total, xf, zf, r);
    for (size_t i = 0; i < total; i++)
        y[i] = dt16_add(x[i], z[i], HALF), ref[i] = dt16_r(r[i], HALF);
    ok &= same16(y, ref, total);
    float *b = rand_floats(c, -1, 1);
    for (size_t i = 0; i < total; i++) { /* bias_kernel */
        size_t ch;
        (void)dt16_divmod(i, c, &ch);
        y[i] = dt16_bias(x[i], b[ch], HALF), ref[i] = dt16_r(xf[i] + b[i % c], HALF);
    }
    ok &= same16(y, ref, total);
    EXPECT(ok, "%s: ReLU, its backward, the residual add, the bias = the CPU's, rounded",
           type_name());
    /* the kernels' units of 8, 4 and 1 values = the values one by one, in place too */
    ok = 1;
    dt16 *e1 = malloc(total * 2), *e2 = malloc(total * 2), *e3 = malloc(total * 2);
    for (size_t i = 0; i < total; i++)
        e1[i] = dt16_relu(x[i], HALF), e2[i] = dt16_relu_grad(x[i], g[i], HALF),
        e3[i] = dt16_add(x[i], z[i], HALF);
    for (int vec = 8; vec >= 1; vec /= 2) {
        if (vec == 2 || total % (size_t)vec) continue;
        for (int in_place = 0; in_place < 2; in_place++) {
            dt16 *o = in_place ? y : poison16(total);
            if (in_place) memcpy(o, x, total * 2);
            for (size_t u = 0; u < total / (size_t)vec; u++)
                dt16_relu_unit(in_place ? o : x, o, u, vec, HALF);
            ok &= same16(o, e1, total);
            if (in_place) memcpy(o, g, total * 2);
            for (size_t u = 0; u < total / (size_t)vec; u++)
                dt16_relu_back_unit(x, in_place ? o : g, o, u, vec, HALF);
            ok &= same16(o, e2, total);
            if (in_place) memcpy(o, x, total * 2);
            for (size_t u = 0; u < total / (size_t)vec; u++)
                dt16_add_unit(in_place ? o : x, z, o, u, vec, HALF);
            ok &= same16(o, e3, total);
            if (!in_place) free(o);
        }
    }
    EXPECT(ok, "%s: ReLU, its backward and the add on units of 8, 4, 1 values (in place too) = "
               "value by value", type_name());
    free(e1), free(e2), free(e3);
    /* dropout on an NHWC image: the CPU's NCHW mask and values; the kernel reads the batch's
     * origin (70) from memory and adds the call's first sample (7), the CPU gets 77 at once */
    const uint64_t origin = 70;
    DropoutShape s = {(int)n, c * hw, 0.35f, 0xd20bULL, 7, (int)c, (int)hw, &origin};
    DropoutShape sc = {(int)n, c * hw, 0.35f, 0xd20bULL, 77, 0, 0, NULL};
    float *xn = widen_nchw(x, n, c, hw);
    uint8_t *mask = malloc(total), *cmask = malloc(total);
    cpu_backend.dropout_forward(NULL, &sc, xn, r, cmask);
    dt16 *yref = round_nhwc(r, n, c, hw);
    const float keep_scale = dt_dropout_scale(s.rate);
    const uint64_t first = s.first_sample + (s.origin ? *s.origin : 0);
    for (size_t e = 0; e < total; e++) { /* dropout_kernel */
        const int keep = dt16_dropout_keep_at(&s, first, e);
        mask[e] = (uint8_t)keep;
        y[e] = dt16_dropout(x[e], keep, keep_scale, HALF);
    }
    ok = same16(y, yref, total);
    for (size_t i = 0; i < n; i++) /* the same element kept in both layouts */
        for (size_t q = 0; q < c; q++)
            for (size_t p = 0; p < hw; p++)
                ok &= mask[layout_nhwc(c, hw, i, q, p)] == cmask[layout_nchw(c, hw, i, q, p)];
    EXPECT(ok,
           "%s: dropout of an NHWC image drops the elements the CPU drops in NCHW, scaled "
           "and rounded; the batch's origin read from memory",
           type_name());
    free(x), free(z), free(g), free(xf), free(zf), free(gf), free(r), free(r2), free(y), free(ref);
    free(b), free(xn), free(mask), free(cmask), free(yref);
}

/* ---- concatenation: concat_kernel and concat_back_kernel, every unit played --------------- */

/* aligned_alloc wants a size that is a multiple of the alignment (ASan returns NULL otherwise) */
static void *alloc16(size_t bytes) {
    void *p = aligned_alloc(16, (bytes + 15) / 16 * 16);
    if (!p) abort();
    return p;
}

/* rows rows of n inputs of sizes[i] values of eb bytes; input `skip` without a gradient (-1:
 * none); offset: bytes the inputs' buffers start past 16-byte alignment. The expected unit. */
static void test_concat(int n, const size_t *sizes, size_t eb, size_t rows, int skip,
                        size_t offset, size_t want_unit) {
    size_t total = 0;
    for (int i = 0; i < n; i++)
        total += sizes[i];
    const size_t yb = rows * total * eb;
    unsigned char *y = alloc16(yb + 16), *ref = malloc(yb), *parts[DT_CONCAT_MAX];
    unsigned char *back[DT_CONCAT_MAX], *bref[DT_CONCAT_MAX];
    void *ps[DT_CONCAT_MAX], *bs[DT_CONCAT_MAX];
    for (int i = 0; i < n; i++) {
        const size_t b = rows * sizes[i] * eb;
        parts[i] = (unsigned char *)alloc16(b + 32) + offset;
        back[i] = (unsigned char *)alloc16(b + 32) + offset;
        bref[i] = malloc(b);
        for (size_t k = 0; k < b; k++)
            parts[i][k] = (unsigned char)rand(), back[i][k] = bref[i][k] = 0xa5;
        ps[i] = parts[i], bs[i] = i == skip ? NULL : back[i];
    }
    DtConcat c;
    size_t unit = 0;
    int ok = dt_concat_plan(&c, n, sizes, eb, rows, y, ps, &unit) && unit == want_unit;
    if (ok) {
        for (uint32_t u = 0; u < rows * c.units; u++) { /* concat_kernel */
            int i;
            const size_t k = dt_concat_at(&c, u, &i);
            memcpy(y + u * unit, (const unsigned char *)c.part[i] + k * unit, unit);
        }
        for (size_t r = 0, off = 0; r < rows; r++, off = 0) /* the definition */
            for (int i = 0; i < n; off += sizes[i], i++)
                memcpy(ref + (r * total + off) * eb, parts[i] + r * sizes[i] * eb, sizes[i] * eb);
        ok = memcmp(y, ref, yb) == 0;
        ok &= dt_concat_plan(&c, n, sizes, eb, rows, y, bs, &unit) == 1;
        for (uint32_t u = 0; u < rows * c.units; u++) { /* concat_back_kernel, dy = y */
            int i;
            const size_t k = dt_concat_at(&c, u, &i);
            if (c.part[i]) memcpy((unsigned char *)c.part[i] + k * unit, y + u * unit, unit);
        }
        for (size_t r = 0, off = 0; r < rows; r++, off = 0)
            for (int i = 0; i < n; off += sizes[i], i++)
                if (i != skip)
                    memcpy(bref[i] + r * sizes[i] * eb, y + (r * total + off) * eb, sizes[i] * eb);
        for (int i = 0; i < n; i++)
            ok &= memcmp(back[i], bref[i], rows * sizes[i] * eb) == 0;
    }
    EXPECT(ok,
           "concatenation of %d inputs of %zu-byte values, %zu rows (unit %zu bytes, want %zu%s): "
           "forward and backward = the inputs side by side",
           n, eb, rows, unit, want_unit, skip >= 0 ? "; an input without gradient untouched" : "");
    for (int i = 0; i < n; i++)
        free(parts[i] - offset), free(back[i] - offset), free(bref[i]);
    free(y), free(ref);
}

static void test_concats(void) {
    const size_t inception[] = {64, 128, 32, 32}, odd[] = {3, 5, 8}, pairs[] = {6, 10, 2};
    test_concat(4, inception, 2, 18, -1, 0, 16); /* GoogLeNet's NHWC rows: 16-byte units */
    test_concat(4, inception, 2, 18, 2, 8, 8);   /* inputs 8 bytes off alignment */
    test_concat(3, odd, 2, 7, 1, 0, 2);          /* odd channels: value by value */
    test_concat(3, pairs, 2, 5, -1, 0, 4);
    test_concat(3, odd, 4, 6, 0, 4, 4);          /* fp32 values */
    test_concat(4, inception, 4, 3, -1, 0, 16);
    const size_t many[DT_CONCAT_MAX + 1] = {8, 8, 8, 8, 8, 8, 8, 8, 8};
    void *none[DT_CONCAT_MAX + 1] = {NULL};
    DtConcat c;
    size_t unit;
    EXPECT(!dt_concat_plan(&c, DT_CONCAT_MAX + 1, many, 2, 4, none[0], none, &unit) &&
               !dt_concat_plan(&c, 2, many, 2, (size_t)1 << 30, none[0], none, &unit),
           "more than %d inputs, or 2^31 units, left to the 2-D copies", DT_CONCAT_MAX);
}

/* ---- pooling and LRN ------------------------------------------------------------------------- */

/* Max and average pooling of one shape, every unit of vec channels played (maxpool_kernel and
 * the others run dt16_*pool*_unit for u < units); ties: x takes few values, so that windows hold
 * equal maxima (the first one, in row-major window order, wins on both). */
static void test_pool_shape(const PoolShape *s, int vec, int ties) {
    const size_t hi = (size_t)s->h_in * s->w_in, ho = (size_t)s->h_out * s->w_out;
    const size_t nin = (size_t)s->batch * s->c * hi, nout = (size_t)s->batch * s->c * ho;
    const size_t N = (size_t)s->batch, C = (size_t)s->c;
    dt16 *x = rand16(nin, -2, 2), *dy = rand16(nout, -1, 1), *y = poison16(nout);
    if (ties)
        for (size_t i = 0; i < nin; i++)
            x[i] = dt16_r((float)(int)(dt16_f(x[i], HALF) * 1.5f), HALF);
    dt16 *dx = poison16(nin);
    int32_t *am = malloc(nout * 4), *cam = malloc(nout * 4), *am_nchw = malloc(nout * 4);
    float *xn = widen_nchw(x, N, C, hi), *dyn = widen_nchw(dy, N, C, ho);
    float *yr = malloc(nout * 4), *dxr = malloc(nin * 4);
    /* max pooling */
    memset(am, 0x5a, nout * 4);
    cpu_backend.maxpool_forward(NULL, s, xn, yr, cam);
    for (uint32_t u = 0; u < nout / (size_t)vec; u++)
        dt16_maxpool_unit(s, vec, HALF, x, u, y, am);
    dt16 *ref = round_nhwc(yr, N, C, ho);
    int ok = same16(y, ref, nout);
    for (size_t o = 0; o < nout; o++) /* argmax: the plane index, in NHWC order */
        am_nchw[dt_nchw_of_nhwc(o, C, ho)] = am[o];
    ok &= memcmp(am_nchw, cam, nout * 4) == 0;
    cpu_backend.maxpool_backward(NULL, s, cam, dyn, dxr);
    for (uint32_t u = 0; u < nin / (size_t)vec; u++)
        dt16_maxpool_back_unit(s, vec, HALF, am, dy, u, dx);
    dt16 *dref = round_nhwc(dxr, N, C, hi);
    ok &= same16(dx, dref, nin);
    free(ref), free(dref);
    /* average pooling */
    memset(y, 0xa5, nout * 2), memset(dx, 0xa5, nin * 2);
    cpu_backend.avgpool_forward(NULL, s, xn, yr);
    for (uint32_t u = 0; u < nout / (size_t)vec; u++)
        dt16_avgpool_unit(s, vec, HALF, x, u, y);
    ref = round_nhwc(yr, N, C, ho);
    ok &= same16(y, ref, nout);
    cpu_backend.avgpool_backward(NULL, s, dyn, dxr);
    for (uint32_t u = 0; u < nin / (size_t)vec; u++)
        dt16_avgpool_back_unit(s, vec, HALF, dy, u, dx);
    dref = round_nhwc(dxr, N, C, hi);
    ok &= same16(dx, dref, nin);
    EXPECT(ok,
           "%s: max pooling (argmax too%s) and average pooling [%d,%d,%d,%d] k%d s%d p%d, %d "
           "channels a thread, forward and backward = the CPU's, rounded",
           type_name(), ties ? ", ties" : "", s->batch, s->c, s->h_in, s->w_in, s->k, s->stride,
           s->pad, vec);
    free(x), free(dy), free(y), free(dx), free(am), free(cam), free(am_nchw), free(xn), free(dyn);
    free(yr), free(dxr), free(ref), free(dref);
}

static void test_gap(size_t n, size_t c, size_t plane) {
    dt16 *x = rand16(n * c * plane, -2, 2), *dy = rand16(n * c, -1, 1);
    dt16 *y = poison16(n * c), *dx = poison16(n * c * plane), *ref = malloc(n * c * 2);
    float *xn = widen_nchw(x, n, c, plane), *yr = malloc(n * c * 4), *dyf = malloc(n * c * 4);
    float *dxr = malloc(n * c * plane * 4);
    cpu_backend.global_avgpool_forward(NULL, n, c, plane, xn, yr);
    for (size_t o = 0; o < n * c; o++)
        y[o] = dt16_gap_fwd(x, o, c, plane, HALF), ref[o] = dt16_r(yr[o], HALF);
    int ok = same16(y, ref, n * c);
    for (size_t i = 0; i < n * c; i++)
        dyf[i] = dt16_f(dy[i], HALF);
    cpu_backend.global_avgpool_backward(NULL, n, c, plane, dyf, dxr);
    for (size_t i = 0; i < n * c * plane; i++)
        dx[i] = dt16_gap_bwd(dy, i, c, plane, HALF);
    dt16 *dref = round_nhwc(dxr, n, c, plane);
    ok &= same16(dx, dref, n * c * plane);
    for (int vec = 8; vec >= 1; vec /= 2) /* gap_back_kernel's units */
        if (vec != 2 && c % (size_t)vec == 0) {
            memset(dx, 0xa5, n * c * plane * 2);
            for (size_t u = 0; u < n * c * plane / (size_t)vec; u++)
                dt16_gap_bwd_unit(dy, dx, u, c, plane, vec, HALF);
            ok &= same16(dx, dref, n * c * plane);
        }
    EXPECT(ok,
           "%s: global average pooling [%zu,%zu,%zu] forward and backward (per element and per "
           "unit of channels) = the CPU's, rounded",
           type_name(), n, c, plane);
    free(x), free(dy), free(y), free(dx), free(ref), free(xn), free(yr), free(dyf), free(dxr);
    free(dref);
}

/* LRN of c channels, window `size`, forward and backward: per element (lrn_kernel, vec 0) or per
 * unit of vec channels (lrn_unit_kernel), against the CPU bit for bit */
static void test_lrn(int c, int size, int vec, float beta) {
    LrnShape s = {.batch = 2, .c = c, .h = 3, .w = 5, .size = size, .alpha = 5e-3f, .beta = beta,
                  .bias = 2.0f};
    const size_t hw = 15, n = 2 * (size_t)c * hw, C = (size_t)c;
    dt16 *x = rand16(n, -2, 2), *dy = rand16(n, -1, 1), *y = poison16(n), *dx = poison16(n);
    float *sc = malloc(n * 4), *scn = malloc(n * 4), *csc = malloc(n * 4), *yr = malloc(n * 4);
    float *dxr = malloc(n * 4);
    if (vec)
        for (uint32_t u = 0; u < n / (size_t)vec; u++)
            dt16_lrn_fwd_unit(&s, size, vec, HALF, x, u, y, sc);
    else
        for (size_t i = 0; i < n; i++)
            y[i] = dt16_lrn_fwd(&s, x, i, HALF, sc);
    float *xn = widen_nchw(x, 2, C, hw), *dyn = widen_nchw(dy, 2, C, hw);
    cpu_backend.lrn_forward(NULL, &s, xn, yr, csc);
    dt16 *ref = round_nhwc(yr, 2, C, hw);
    layout_to_nchw(2, C, hw, sc, scn);
    int ok = same16(y, ref, n) && memcmp(scn, csc, n * 4) == 0;
    /* backward on the stored (rounded) output, as the kernel reads it */
    if (vec)
        for (uint32_t u = 0; u < n / (size_t)vec; u++)
            dt16_lrn_bwd_unit(&s, size, vec, HALF, x, y, sc, dy, u, dx);
    else
        for (size_t i = 0; i < n; i++)
            dx[i] = dt16_lrn_bwd(&s, x, y, sc, dy, i, HALF);
    float *yn = widen_nchw(y, 2, C, hw);
    cpu_backend.lrn_backward(NULL, &s, xn, yn, csc, dyn, dxr);
    dt16 *dref = round_nhwc(dxr, 2, C, hw);
    ok &= same16(dx, dref, n);
    EXPECT(ok,
           "%s: LRN of %d channels, size %d, beta %g, %s: forward (with its fp32 scale) and "
           "backward = the CPU's, rounded",
           type_name(), c, size, (double)beta,
           vec ? fmt_label("%d channels a thread", vec) : "a thread per element");
    free(x), free(dy), free(y), free(dx), free(sc), free(scn), free(csc), free(yr), free(dxr);
    free(xn), free(dyn), free(ref), free(yn), free(dref);
}

int main(void) {
    test_maps();
    test_concats();
    for (HALF = 0; HALF <= 1; HALF++) {
        test_conversions();
        test_filters();
        test_elementwise();
        const PoolShape pools[] = {
            {2, 8, 9, 9, 3, 2, 1, 5, 5},     /* ResNet's stem pooling, padded */
            {2, 12, 8, 8, 2, 2, 0, 4, 4},    /* LeNet / VGG, no padding: windows apart */
            {1, 16, 7, 7, 3, 1, 1, 7, 7},    /* GoogLeNet's inception pooling */
            {3, 24, 13, 13, 3, 2, 0, 6, 6},  /* AlexNet */
            {2, 5, 11, 12, 5, 3, 2, 4, 4},   /* odd channels, a 5x5/3 window */
            {1, 8, 3, 3, 3, 2, 2, 3, 3}};    /* windows wholly in the padding */
        for (size_t i = 0; i < sizeof pools / sizeof pools[0]; i++)
            for (int vec = 8; vec >= 1; vec /= 2)
                if (vec != 2 && pools[i].c % vec == 0) {
                    test_pool_shape(&pools[i], vec, 0);
                    test_pool_shape(&pools[i], vec, 1);
                }
        test_gap(3, 10, 49);
        test_gap(2, 7, 5);
        test_gap(2, 16, 49); /* units of 8 and 4 channels */
        test_lrn(11, 5, 0, 0.75f);  /* the per-element kernels */
        test_lrn(11, 5, 0, 0.6f);
        test_lrn(16, 5, 8, 0.75f);  /* GoogLeNet's window, 8 channels a thread */
        test_lrn(16, 3, 8, 0.75f);  /* AlexNet's */
        test_lrn(12, 5, 4, 0.6f);   /* 4 channels a thread, the generic power */
        test_lrn(11, 5, 1, 0.75f);  /* odd channels */
        test_lrn(40, 4, 8, 0.75f);  /* an even window (more channels before than after) */
        test_lrn(24, 17, 8, 0.75f); /* a window spanning three units */
        test_lrn(8, 9, 8, 0.75f);   /* a window wider than the channels */
    }
    return check_summary();
}
