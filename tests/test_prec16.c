/* test_prec16.c - the 16-bit precisions' error bound (prec16_bound, kernels/cuda/cuda_plan.c),
 * which tests/test_cuda_precision.c holds the GPU's bf16 and fp16 convolutions to, checked on the
 * CPU against models of the arithmetic cuDNN may do, on that test's own inputs (its generator and
 * order of draws, replayed here): the input gradients of its three convolutions. Errors are
 * printed as that test prints them, max |err| / S (S: an element's sum of |products|):
 *   1. what the 16-bit rule admits (cuda_plan.h conv_algo_16bit): inputs rounded to 16 bits,
 *      products summed in fp32 in any order (two here), the output rounded to 16 bits: within
 *      the bound at every element, in fp16 and bf16. Where an H200 ran such an algorithm its
 *      worst errors were these, to three digits (fp16 16x24^2 0.000204, 8x13^2 0.000573; bf16
 *      0.0013, 0.00385); on the 1x28^2 shape it was not (fp16 0.00268 = 5.5 u, bf16 0.00374
 *      against 0.000169 and 0.0013 here);
 *   2. a transform in half precision must fail the bound, or the GPU test could not tell one: an
 *      FFT computed in fp16 arithmetic (radix 2 on 32x32 planes, each butterfly rounded) goes
 *      beyond it on the 1x28^2 shape (4.2 u at worst). For comparison it prints the products
 *      summed in fp16 (every addition rounded, which the float compute type rules out): 2.1 to
 *      2.7 u. Only a transform comes near the H200's 5.5 u. */
#include "backend.h"   /* defines: ConvShape */
#include "cuda_plan.h" /* defines: prec16_bound */
#include "half_bits.h" /* defines: gc_fp16_*, gc_bf16_* */
#include "harness.h"

#include <complex.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { P = 32 }; /* the FFT's planes, P x P */

static int fp16; /* the 16-bit type modelled: 1 fp16, 0 bf16 */
static double unit(void) {
    return fp16 ? 0x1p-11 : 0x1p-8;
}
static double r16(double v) {
    return fp16 ? gc_fp16_to_float(gc_fp16_from_float((float)v))
                : gc_bf16_to_float(gc_bf16_from_float((float)v));
}

/* tests/test_cuda_precision.c's inputs: its generator and its order of draws (per precision
 * tf32, bf16, fp16: two fully connected layers, then three convolutions, each x, w, b, dy) */
static uint64_t rng = 0x9e3779b97f4a7c15ull;
static float draw(void) {
    rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
    return -1.0f + 2.0f * (float)((rng >> 40) * (1.0 / 16777216.0));
}
static float *draws(size_t n) {
    float *p = malloc((n ? n : 1) * sizeof *p);
    for (size_t i = 0; i < n; i++)
        p[i] = draw();
    return p;
}
static void skip(size_t n) {
    for (size_t i = 0; i < n; i++)
        draw();
}
static const ConvShape SHAPES[3] = {{4, 1, 28, 28, 20, 5, 1, 0, 24, 24},
                                    {3, 16, 24, 24, 20, 3, 1, 1, 24, 24},
                                    {2, 8, 13, 13, 12, 3, 2, 1, 7, 7}};
typedef struct {
    float *w, *dy;
} Inputs;
static void inputs(Inputs in[2][3]) { /* [bf16, fp16][shape] */
    for (int p = 0; p < 3; p++) {
        skip(64 * 800 + 500 * 800 + 500 + 64 * 500), skip(7 * 33 + 33 * 10 + 10 + 7 * 10);
        for (int i = 0; i < 3; i++) {
            const ConvShape *s = &SHAPES[i];
            skip((size_t)s->batch * s->c_in * s->h_in * s->w_in);
            float *w = draws((size_t)s->c_out * s->c_in * s->k * s->k);
            skip((size_t)s->c_out);
            float *dy = draws((size_t)s->batch * s->c_out * s->h_out * s->w_out);
            if (p == 0) {
                free(w), free(dy);
                continue;
            }
            in[p - 1][i] = (Inputs){w, dy};
        }
    }
}

/* Calls f for every product of input-gradient element (n, ci, ih, iw) in the order co-major
 * (tap_major 0) or tap-major. */
typedef struct {
    double acc, abs_acc;
    int terms, half16;
} Sum;
static void products(const ConvShape *s, const Inputs *in, int n, int ci, int ih, int iw,
                     int tap_major, int rounded, Sum *sum) {
    const int kk = s->k * s->k;
    for (int a = 0; a < s->c_out * kk; a++) {
        const int co = tap_major ? a % s->c_out : a / kk, t = tap_major ? a / s->c_out : a % kk;
        const int kh = t / s->k, kw = t % s->k, oh_s = ih + s->pad - kh, ow_s = iw + s->pad - kw;
        if (oh_s < 0 || ow_s < 0 || oh_s % s->stride || ow_s % s->stride) continue;
        const int oh = oh_s / s->stride, ow = ow_s / s->stride;
        if (oh >= s->h_out || ow >= s->w_out) continue;
        double wv = in->w[((size_t)co * s->c_in + ci) * kk + t];
        double dv = in->dy[(((size_t)n * s->c_out + co) * s->h_out + oh) * s->w_out + ow];
        if (rounded) wv = r16(wv), dv = r16(dv);
        const double p = wv * dv; /* exact: two 16-bit values */
        if (!rounded)
            sum->acc += p;
        else
            sum->acc = sum->half16 ? r16(sum->acc + p) : (double)(float)(sum->acc + p);
        sum->abs_acc += fabs(p), sum->terms++;
    }
}

/* the input gradient of shape s: exact (as the fp32 reference), S and K of every element, and
 * a direct sum of the 16-bit products (fp32 or, half16, fp16 additions), rounded to 16 bits */
static void input_grad(const ConvShape *s, const Inputs *in, int tap_major, int half16, double *ref,
                       double *sabs, int *k, double *got) {
    size_t i = 0;
    for (int n = 0; n < s->batch; n++)
        for (int ci = 0; ci < s->c_in; ci++)
            for (int ih = 0; ih < s->h_in; ih++)
                for (int iw = 0; iw < s->w_in; iw++, i++) {
                    Sum e = {0, 0, 0, 0}, g = {0, 0, 0, half16};
                    products(s, in, n, ci, ih, iw, tap_major, 0, &e);
                    products(s, in, n, ci, ih, iw, tap_major, 1, &g);
                    ref[i] = (float)e.acc, sabs[i] = e.abs_acc, k[i] = e.terms;
                    got[i] = r16(g.acc);
                }
}

static double complex rc(double complex z) {
    return r16(creal(z)) + I * r16(cimag(z));
}
/* a radix-2 FFT of one P-point line (stride apart), every butterfly rounded to 16 bits */
static void fft_line(double complex *a, int stride, int inverse) {
    for (int i = 1, j = 0; i < P; i++) { /* bit reversal */
        int bit = P >> 1;
        for (; j & bit; bit >>= 1)
            j ^= bit;
        j ^= bit;
        if (i < j) {
            const double complex t = a[i * stride];
            a[i * stride] = a[j * stride], a[j * stride] = t;
        }
    }
    for (int len = 2; len <= P; len <<= 1)
        for (int i = 0; i < P; i += len)
            for (int j = 0; j < len / 2; j++) {
                const double complex tw = cexp((inverse ? 2 : -2) * M_PI * I * j / len);
                const double complex e = a[(i + j) * stride];
                const double complex o = rc(a[(i + j + len / 2) * stride] * tw);
                a[(i + j) * stride] = rc(e + o), a[(i + j + len / 2) * stride] = rc(e - o);
            }
}
static void fft2(double complex *a, int inverse) {
    for (int i = 0; i < P * P; i++)
        a[i] = rc(a[i]);
    for (int r = 0; r < P; r++)
        fft_line(a + r * P, 1, inverse);
    for (int c = 0; c < P; c++)
        fft_line(a + c, P, inverse);
}

/* the input gradient of SHAPES[0] (4x1x28x28 5x5 -> 20) as a full convolution through 16-bit
 * FFTs of P x P planes: the spectra of dy and w multiplied and summed over co exactly,
 * transformed back, the output rounded */
static void fft16(const Inputs *in, double *got) {
    const ConvShape *s = &SHAPES[0];
    const int kk = s->k * s->k, hw = s->h_out * s->w_out;
    double complex *fw = calloc((size_t)s->c_out * P * P, sizeof *fw),
                   *fd = calloc(P * P, sizeof *fd);
    double complex *sum = calloc(P * P, sizeof *sum);
    for (int co = 0; co < s->c_out; co++) {
        for (int t = 0; t < kk; t++)
            fw[(size_t)co * P * P + t / s->k * P + t % s->k] = in->w[co * kk + t];
        fft2(fw + (size_t)co * P * P, 0);
    }
    for (int n = 0; n < s->batch; n++) {
        memset(sum, 0, P * P * sizeof *sum);
        for (int co = 0; co < s->c_out; co++) {
            memset(fd, 0, P * P * sizeof *fd);
            for (int o = 0; o < hw; o++)
                fd[o / s->w_out * P + o % s->w_out] = in->dy[((size_t)n * s->c_out + co) * hw + o];
            fft2(fd, 0);
            for (int i = 0; i < P * P; i++)
                sum[i] += fd[i] * fw[(size_t)co * P * P + i];
        }
        fft2(sum, 1);
        for (int ih = 0; ih < s->h_in; ih++)
            for (int iw = 0; iw < s->w_in; iw++)
                got[((size_t)n * s->h_in + ih) * s->w_in + iw] =
                    r16(creal(sum[ih * P + iw]) / (P * P));
    }
    free(fw), free(fd), free(sum);
}

/* the largest |got - ref| / S (and in units of u), and the elements beyond prec16_bound */
static size_t measure(const double *got, const double *ref, const double *sabs, const int *k,
                      size_t n, double *worst) {
    size_t beyond = 0;
    *worst = 0;
    for (size_t i = 0; i < n; i++) {
        const double e = fabs(got[i] - ref[i]);
        beyond += !(e <= prec16_bound(unit(), unit(), k[i], sabs[i], fabs(ref[i])));
        if (e / sabs[i] > *worst) *worst = e / sabs[i];
    }
    return beyond;
}

int main(void) {
    Inputs in[2][3];
    inputs(in);
    const size_t most = 3 * 16 * 24 * 24;
    double *ref = malloc(most * sizeof *ref), *sabs = malloc(most * sizeof *sabs);
    double *got = malloc(most * sizeof *got), worst;
    int *k = malloc(most * sizeof *k);
    for (fp16 = 1; fp16 >= 0; fp16--)
        for (int i = 0; i < 3; i++) {
            const ConvShape *s = &SHAPES[i];
            const size_t n = (size_t)s->batch * s->c_in * s->h_in * s->w_in;
            for (int order = 0; order < 2; order++) {
                input_grad(s, &in[fp16][i], order, 0, ref, sabs, k, got);
                const size_t b = measure(got, ref, sabs, k, n, &worst);
                EXPECT(b == 0,
                       "%s conv %dx%d^2 k%d s%d -> %d dx, 16-bit products summed in fp32 (%s): "
                       "max |err|/S %.3g = %.2f u, within the bound everywhere (%zu beyond)",
                       fp16 ? "fp16" : "bf16", s->c_in, s->h_in, s->k, s->stride, s->c_out,
                       order ? "tap-major" : "channel-major", worst, worst / unit(), b);
            }
        }
    fp16 = 1;
    const size_t n0 = 4 * 28 * 28;
    for (int order = 0; order < 2; order++) {
        input_grad(&SHAPES[0], &in[1][0], order, 1, ref, sabs, k, got);
        const size_t b = measure(got, ref, sabs, k, n0, &worst);
        printf("  (fp16 conv 1x28^2 k5 dx, summed in fp16, %s: %.2f u at worst, %zu beyond)\n",
               order ? "tap-major" : "channel-major", worst / unit(), b);
    }
    input_grad(&SHAPES[0], &in[1][0], 0, 0, ref, sabs, k, got); /* ref, S, K */
    fft16(&in[1][0], got);
    const size_t b = measure(got, ref, sabs, k, n0, &worst);
    EXPECT(b > 0,
           "fp16 conv 1x28^2 k5 dx through an FFT in fp16 arithmetic: %.2f u at worst, %zu "
           "elements beyond the bound",
           worst / unit(), b);
    for (int p = 0; p < 2; p++)
        for (int i = 0; i < 3; i++)
            free(in[p][i].w), free(in[p][i].dy);
    free(ref), free(sabs), free(got), free(k);
    return check_summary();
}
