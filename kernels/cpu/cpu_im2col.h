/* cpu_im2col.h - im2col / col2im for the CPU convolution (kernels/cpu/cpu_conv.c).
 *
 * Both work on ONE sample of an NCHW tensor. The column matrix is row-major
 * col[c_in*k*k, h_out*w_out]: row (c*k + ki)*k + kj holds, for every output position (oh, ow),
 * the input x[c, oh*stride - pad + ki, ow*stride - pad + kj], or 0 where that falls in the padding.
 * This is the layout that makes the forward pass one GEMM: y[c_out, hw] = W[c_out, c_in*k*k] * col.
 */
#ifndef DTBENCH_CPU_IM2COL_H
#define DTBENCH_CPU_IM2COL_H

#include "backend.h"

/* x[c_in,h_in,w_in] -> col[c_in*k*k, h_out*w_out] (every entry of col is written). */
void cpu_im2col(const ConvShape *s, const float *x, float *col);

/* col[c_in*k*k, h_out*w_out] -> dx[c_in,h_in,w_in]: dx is OVERWRITTEN with the sum, over all
 * column entries, of the entries that were copied from each input position (the adjoint of
 * cpu_im2col). Input positions no window touches get 0. */
void cpu_col2im(const ConvShape *s, const float *col, float *dx);

/* The same for the block of output rows [oh0, oh1): row (c*k + ki)*k + kj of col, which starts
 * at col + ((c*k + ki)*k + kj) * ld, holds in its first (oh1-oh0)*w_out entries the inputs of
 * output positions (oh, ow) with oh0 <= oh < oh1. ld >= (oh1-oh0)*w_out lets several samples'
 * blocks sit side by side in one matrix (one GEMM over the batch). */
void cpu_im2col_rows(const ConvShape *s, const float *x, int oh0, int oh1, float *col, size_t ld);
/* Adds the block's column entries (same layout) to dx (not zeroed first: blocks accumulate). */
void cpu_col2im_rows_add(const ConvShape *s, const float *col, int oh0, int oh1, size_t ld,
                         float *dx);

#endif
