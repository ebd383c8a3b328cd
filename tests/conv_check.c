/* conv_check.c - the float64 convolution references with per-output bounds (conv_check.h).
 * Plain loops over the definitions (NCHW, cross-correlation, zero padding), one thread per block
 * of outer indices: ResNet-50's shapes take seconds on a machine's cores, not minutes. */
#include "conv_check.h"

#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <unistd.h>

size_t conv_result_count(ConvDir dir, const ConvShape *s) {
    if (dir == CONV_FWD) return (size_t)s->batch * s->c_out * s->h_out * s->w_out;
    if (dir == CONV_BWD_DATA) return (size_t)s->batch * s->c_in * s->h_in * s->w_in;
    return (size_t)s->c_out * s->c_in * s->k * s->k;
}

typedef struct {
    ConvDir dir;
    const ConvShape *s;
    const float *x, *w, *dy;
    double *exact, *bound;
    int t, nt;
} Job;

static void put(const Job *j, size_t i, double sum, double abs_sum, double terms) {
    j->exact[i] = sum;
    j->bound[i] = conv_fp32_bound(terms, abs_sum);
}

/* y[n,co,oh,ow] = sum over ci, kh, kw of w[co,ci,kh,kw] x[n,ci,ih,iw] */
static void fwd_plane(const Job *j, int n, int co) {
    const ConvShape *s = j->s;
    for (int oh = 0; oh < s->h_out; oh++)
        for (int ow = 0; ow < s->w_out; ow++) {
            double sum = 0, abs_sum = 0, terms = 0;
            for (int ci = 0; ci < s->c_in; ci++)
                for (int kh = 0; kh < s->k; kh++) {
                    const int ih = oh * s->stride - s->pad + kh;
                    if (ih < 0 || ih >= s->h_in) continue;
                    for (int kw = 0; kw < s->k; kw++) {
                        const int iw = ow * s->stride - s->pad + kw;
                        if (iw < 0 || iw >= s->w_in) continue;
                        const double p =
                            (double)j->w[(((size_t)co * s->c_in + ci) * s->k + kh) * s->k + kw] *
                            j->x[(((size_t)n * s->c_in + ci) * s->h_in + ih) * s->w_in + iw];
                        sum += p, abs_sum += fabs(p), terms++;
                    }
                }
            put(j, (((size_t)n * s->c_out + co) * s->h_out + oh) * s->w_out + ow, sum, abs_sum,
                terms);
        }
}

/* dx[n,ci,ih,iw] = sum over co, kh, kw with ih = oh*stride - pad + kh of w[co,ci,kh,kw]
 * dy[n,co,oh,ow] */
static void bwd_data_plane(const Job *j, int n, int ci) {
    const ConvShape *s = j->s;
    for (int ih = 0; ih < s->h_in; ih++)
        for (int iw = 0; iw < s->w_in; iw++) {
            double sum = 0, abs_sum = 0, terms = 0;
            for (int co = 0; co < s->c_out; co++)
                for (int kh = 0; kh < s->k; kh++) {
                    const int th = ih + s->pad - kh;
                    if (th < 0 || th % s->stride || th / s->stride >= s->h_out) continue;
                    for (int kw = 0; kw < s->k; kw++) {
                        const int tw = iw + s->pad - kw;
                        if (tw < 0 || tw % s->stride || tw / s->stride >= s->w_out) continue;
                        const double p =
                            (double)j->w[(((size_t)co * s->c_in + ci) * s->k + kh) * s->k + kw] *
                            j->dy[(((size_t)n * s->c_out + co) * s->h_out + th / s->stride) *
                                      s->w_out +
                                  tw / s->stride];
                        sum += p, abs_sum += fabs(p), terms++;
                    }
                }
            put(j, (((size_t)n * s->c_in + ci) * s->h_in + ih) * s->w_in + iw, sum, abs_sum, terms);
        }
}

/* dw[co,ci,kh,kw] = sum over n, oh, ow of dy[n,co,oh,ow] x[n,ci,oh*stride-pad+kh,ow*stride-pad+kw]
 */
static void bwd_filter_plane(const Job *j, int co, int ci) {
    const ConvShape *s = j->s;
    for (int kh = 0; kh < s->k; kh++)
        for (int kw = 0; kw < s->k; kw++) {
            double sum = 0, abs_sum = 0, terms = 0;
            for (int n = 0; n < s->batch; n++)
                for (int oh = 0; oh < s->h_out; oh++) {
                    const int ih = oh * s->stride - s->pad + kh;
                    if (ih < 0 || ih >= s->h_in) continue;
                    const float *dyr =
                        j->dy + (((size_t)n * s->c_out + co) * s->h_out + oh) * s->w_out;
                    const float *xr = j->x + (((size_t)n * s->c_in + ci) * s->h_in + ih) * s->w_in;
                    for (int ow = 0; ow < s->w_out; ow++) {
                        const int iw = ow * s->stride - s->pad + kw;
                        if (iw < 0 || iw >= s->w_in) continue;
                        const double p = (double)dyr[ow] * xr[iw];
                        sum += p, abs_sum += fabs(p), terms++;
                    }
                }
            put(j, (((size_t)co * s->c_in + ci) * s->k + kh) * s->k + kw, sum, abs_sum, terms);
        }
}

static void *run_job(void *arg) {
    const Job *j = arg;
    const ConvShape *s = j->s;
    const int outer = j->dir == CONV_BWD_FILTER ? s->c_out : s->batch;
    const int inner = j->dir == CONV_FWD ? s->c_out : s->c_in;
    for (long q = j->t; q < (long)outer * inner; q += j->nt) {
        const int a = (int)(q / inner), b = (int)(q % inner);
        if (j->dir == CONV_FWD)
            fwd_plane(j, a, b);
        else if (j->dir == CONV_BWD_DATA)
            bwd_data_plane(j, a, b);
        else
            bwd_filter_plane(j, a, b);
    }
    return NULL;
}

void conv_exact(ConvDir dir, const ConvShape *s, const float *x, const float *w, const float *dy,
                double *exact, double *bound) {
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    int nt = cores < 1 ? 1 : cores > 64 ? 64 : (int)cores;
    pthread_t th[64];
    int started[64] = {0};
    Job jobs[64];
    for (int t = 0; t < nt; t++) {
        jobs[t] = (Job){dir, s, x, w, dy, exact, bound, t, nt};
        if (t > 0) started[t] = pthread_create(&th[t], NULL, run_job, &jobs[t]) == 0;
    }
    for (int t = 0; t < nt; t++) /* this thread's share, and any a thread could not take */
        if (!started[t]) run_job(&jobs[t]);
    for (int t = 1; t < nt; t++)
        if (started[t]) pthread_join(th[t], NULL);
}

static uint64_t next(uint64_t *st) {
    uint64_t z = (*st += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static void fill(float *a, size_t n, uint64_t *st) {
    for (size_t i = 0; i < n; i++)
        a[i] = (float)((next(st) >> 40) * (2.0 / 16777216.0) - 1.0);
}

/* Every element outside the columns that are multiples of `period` (index % w) times 2^-24. */
static void grade(float *a, size_t n, int w, int period) {
    for (size_t i = 0; i < n; i++)
        if ((int)(i % (size_t)w) % period) a[i] = ldexpf(a[i], -24);
}

/* The smallest prime above k: a window of k columns fits between two large columns, and the
 * period shares no factor with the tile widths of FFT and Winograd algorithms (2, 4, 6, 8, 32). */
static int grade_period(int k) {
    for (int p = k + 1;; p++) {
        int prime = p > 2;
        for (int d = 2; d * d <= p; d++)
            prime = prime && p % d;
        if (prime) return p;
    }
}

void conv_inputs(const ConvShape *s, int graded, uint64_t seed, float *x, float *w, float *dy) {
    const size_t nx = (size_t)s->batch * s->c_in * s->h_in * s->w_in;
    const size_t nw = (size_t)s->c_out * s->c_in * s->k * s->k;
    const size_t ny = (size_t)s->batch * s->c_out * s->h_out * s->w_out;
    uint64_t st = seed;
    fill(x, nx, &st), fill(w, nw, &st), fill(dy, ny, &st);
    if (graded) {
        const int period = grade_period(s->k);
        grade(x, nx, s->w_in, period), grade(dy, ny, s->w_out, period);
    }
}

ConvErr conv_measure(const float *got, const double *exact, const double *bound, size_t n) {
    ConvErr e = {0, 0, 0, 0};
    double scale = 0;
    for (size_t i = 0; i < n; i++)
        scale = fmax(scale, fabs(exact[i]));
    for (size_t i = 0; i < n; i++) {
        if (!isfinite(got[i])) {
            e.nonfinite++;
            continue;
        }
        const double d = fabs((double)got[i] - exact[i]);
        e.max_err = fmax(e.max_err, d);
        if (d > 0) e.max_ratio = fmax(e.max_ratio, bound[i] > 0 ? d / bound[i] : INFINITY);
    }
    e.max_rel = scale > 0 ? e.max_err / scale : e.max_err > 0 ? INFINITY : 0;
    return e;
}
