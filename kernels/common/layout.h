/* layout.h - where an element of an image tensor lives in NCHW and in NHWC (channels-last)
 * storage, and the permutations a backend that stores activations NHWC applies to what the rest
 * of dtbench keeps in NCHW order (backend.h's ActFormat): the tensors themselves, a fully
 * connected layer's weights when its input is flattened from [c, h, w], and a convolution's
 * filter. Parameters, their gradients and checkpoints are always in NCHW order; a backend maps
 * them with these functions, so the mapping is written once and checked against NCHW on the CPU
 * (tests/test_layout.c). Plain C11 and C++17, compiled by nvcc as __host__ __device__. */
#ifndef DTBENCH_LAYOUT_H
#define DTBENCH_LAYOUT_H

#include <stddef.h>

#ifndef DT_HD
#ifdef __CUDACC__
#define DT_HD __host__ __device__ static inline
#else
#define DT_HD static inline
#endif
#endif

/* Offset of element (n, c, p) of a tensor of `c_all` channels and `hw` pixels per channel
 * (p = h*w_size + w), stored NCHW ([n][c][p]) or NHWC ([n][p][c]). */
DT_HD size_t layout_nchw(size_t c_all, size_t hw, size_t n, size_t c, size_t p) {
    return (n * c_all + c) * hw + p;
}
DT_HD size_t layout_nhwc(size_t c_all, size_t hw, size_t n, size_t c, size_t p) {
    return (n * hw + p) * c_all + c;
}

/* y (NHWC) = x (NCHW) and back, for x[n, c, hw]. */
DT_HD void layout_to_nhwc(size_t n, size_t c, size_t hw, const float *x, float *y) {
    for (size_t i = 0; i < n; i++)
        for (size_t q = 0; q < c; q++)
            for (size_t p = 0; p < hw; p++)
                y[layout_nhwc(c, hw, i, q, p)] = x[layout_nchw(c, hw, i, q, p)];
}
DT_HD void layout_to_nchw(size_t n, size_t c, size_t hw, const float *x, float *y) {
    for (size_t i = 0; i < n; i++)
        for (size_t q = 0; q < c; q++)
            for (size_t p = 0; p < hw; p++)
                y[layout_nchw(c, hw, i, q, p)] = x[layout_nhwc(c, hw, i, q, p)];
}

/* A fully connected layer whose input [c, h, w] is flattened: in NCHW order its feature f holds
 * (q, p) = (f / hw, f % hw), so W[o, q*hw + p] (the parameters) multiplies it; stored NHWC the
 * same element is feature p*c + q. The weights in the order of the NHWC features:
 *   w_nhwc[o, p*c + q] = w[o, q*hw + p]                 (fc_weights_to_nhwc)
 * and a weight gradient computed in that order put back (fc_weights_from_nhwc). */
DT_HD size_t layout_fc_feature_nhwc(size_t c, size_t hw, size_t f_nchw) {
    return (f_nchw % hw) * c + f_nchw / hw;
}
DT_HD void fc_weights_to_nhwc(size_t out, size_t c, size_t hw, const float *w, float *w_nhwc) {
    const size_t in = c * hw;
    for (size_t o = 0; o < out; o++)
        for (size_t f = 0; f < in; f++)
            w_nhwc[o * in + layout_fc_feature_nhwc(c, hw, f)] = w[o * in + f];
}
DT_HD void fc_weights_from_nhwc(size_t out, size_t c, size_t hw, const float *w_nhwc, float *w) {
    const size_t in = c * hw;
    for (size_t o = 0; o < out; o++)
        for (size_t f = 0; f < in; f++)
            w[o * in + f] = w_nhwc[o * in + layout_fc_feature_nhwc(c, hw, f)];
}

/* A convolution's filter W[k_out, c_in, kh, kw] (KCRS, the parameters) as NHWC convolutions take
 * it, [k_out, kh, kw, c_in] (KRSC: cuDNN's CUDNN_TENSOR_NHWC filter format), and back. */
DT_HD void filter_to_krsc(size_t k_out, size_t c_in, size_t khw, const float *w, float *w_krsc) {
    layout_to_nhwc(k_out, c_in, khw, w, w_krsc); /* the same map: k_out "samples" of c_in x khw */
}
DT_HD void filter_from_krsc(size_t k_out, size_t c_in, size_t khw, const float *w_krsc, float *w) {
    layout_to_nchw(k_out, c_in, khw, w_krsc, w);
}

/* Concatenation along channels of inputs of sizes[i] = c_i * hw values per sample: in NCHW input
 * i is a block of every sample (rows of sizes[i], at offset off_i = sum of the sizes before it,
 * backend.h's concat_forward); in NHWC it is a block of every pixel: rows of c_i values, at
 * channel offset off_i / hw, batch * hw rows of c_total. The offset of element (n, q, p) of
 * input i inside the NHWC output: */
DT_HD size_t layout_concat_nhwc(size_t c_total, size_t hw, size_t chan_off, size_t n, size_t q,
                                size_t p) {
    return layout_nhwc(c_total, hw, n, chan_off + q, p);
}

#endif
