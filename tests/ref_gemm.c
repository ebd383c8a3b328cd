/* ref_gemm.c - naive reference kernels: the fully connected layer (kernels/cpu/cpu_gemm.c).
 * Textbook definitions as nested loops with double accumulators; backward passes written as
 * gathers, sharing no structure with the backends' GEMM/im2col formulation (ref_kernels.h). */
#include "ref_kernels.h"

#include <math.h>
#include <stdlib.h>

/* ---- fully connected ---- */

void ref_fc_forward(const FcShape *s, const float *x, const float *w, const float *b, float *y) {
    for (int i = 0; i < s->batch; i++) {
        for (int o = 0; o < s->out; o++) {
            double acc = b ? b[o] : 0.0;
            for (int j = 0; j < s->in; j++)
                acc += (double)x[(size_t)i * s->in + j] * w[(size_t)o * s->in + j];
            y[(size_t)i * s->out + o] = (float)acc;
        }
    }
}

void ref_fc_backward(const FcShape *s, const float *x, const float *w, const float *dy, float *dx,
                     float *dw, float *db) {
    for (int o = 0; o < s->out; o++) {
        for (int j = 0; j < s->in; j++) {
            double acc = 0.0;
            for (int i = 0; i < s->batch; i++)
                acc += (double)dy[(size_t)i * s->out + o] * x[(size_t)i * s->in + j];
            dw[(size_t)o * s->in + j] = (float)acc;
        }
        double acc = 0.0;
        for (int i = 0; i < s->batch; i++)
            acc += dy[(size_t)i * s->out + o];
        db[o] = (float)acc;
    }
    if (!dx) return;
    for (int i = 0; i < s->batch; i++) {
        for (int j = 0; j < s->in; j++) {
            double acc = 0.0;
            for (int o = 0; o < s->out; o++)
                acc += (double)dy[(size_t)i * s->out + o] * w[(size_t)o * s->in + j];
            dx[(size_t)i * s->in + j] = (float)acc;
        }
    }
}
