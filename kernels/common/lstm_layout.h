/* lstm_layout.h - what the LSTM layer (LstmShape, backend.h) keeps where in its two buffers, one
 * layout for every backend that runs dtbench's LSTM (cpu_recurrent.c, cuda_recurrent.c). With
 * B = batch, T = seq, H = hidden and rows in (sample, step) order:
 *   reserve (forward to backward): gates[B, T, 4H] (i, f, g, o after their activations),
 *                                  cell[B, T, H];
 *   work (scratch of both):        dgates[B, T, 4H], hprev[B, T, H] (h_{t-1}, zero at t = 0),
 *                                  dh_rec[B, H] (the gradient reaching h_{t-1} through W_hh),
 *                                  dcell[B, H] (the gradient carried through c),
 *                                  zeros[H] (c_{-1}, and the recurrent gradient at the last
 *                                  step). */
#ifndef DTBENCH_LSTM_LAYOUT_H
#define DTBENCH_LSTM_LAYOUT_H

#include "backend.h" /* defines: LstmShape */

#include <stddef.h>

typedef struct {
    float *gates, *cell;
} LstmReserve;

typedef struct {
    float *dgates, *hprev, *dh_rec, *dcell, *zeros;
} LstmWork;

static inline size_t lstm_reserve_bytes(const LstmShape *s) {
    return (size_t)s->batch * s->seq * 5 * (size_t)s->hidden * sizeof(float);
}

static inline size_t lstm_work_bytes(const LstmShape *s) {
    const size_t bt = (size_t)s->batch * s->seq, h = (size_t)s->hidden;
    return (bt * 5 * h + 2 * (size_t)s->batch * h + h) * sizeof(float);
}

static inline LstmReserve lstm_reserve(const LstmShape *s, const void *reserve) {
    const size_t bt = (size_t)s->batch * s->seq;
    float *gates = (float *)reserve;
    return (LstmReserve){gates, gates + bt * 4 * (size_t)s->hidden};
}

static inline LstmWork lstm_work(const LstmShape *s, void *work) {
    const size_t bt = (size_t)s->batch * s->seq, h = (size_t)s->hidden;
    float *dgates = (float *)work, *hprev = dgates + bt * 4 * h, *dh_rec = hprev + bt * h;
    float *dcell = dh_rec + (size_t)s->batch * h;
    return (LstmWork){dgates, hprev, dh_rec, dcell, dcell + (size_t)s->batch * h};
}

#endif
