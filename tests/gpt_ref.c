/* gpt_ref.c - the CUDA transformer tests' references beyond tests/ref_transformer.c (gpt_ref.h). */
#include "gpt_ref.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static int token(float id, int vocab) {
    return id >= 0.0f && id < (float)vocab ? (int)id : -1;
}

int gref_id_repeats(const TokPosShape *s, const float *ids) {
    int *count = calloc((size_t)s->vocab + 1, sizeof(int)), most = 0;
    for (size_t r = 0; r < (size_t)s->batch * s->seq; r++) {
        const int id = token(ids[r], s->vocab);
        if (id >= 0 && ++count[id] > most) most = count[id];
    }
    free(count);
    return most;
}

void gref_tokpos_dwte_float(const TokPosShape *s, const float *ids, const float *dy, float *dwte) {
    const size_t D = (size_t)s->dim, rows = (size_t)s->batch * s->seq;
    memset(dwte, 0, (size_t)s->vocab * D * sizeof(float));
    for (size_t r = 0; r < rows; r++) {
        const int id = token(ids[r], s->vocab);
        for (size_t c = 0; id >= 0 && c < D; c++)
            dwte[id * D + c] += dy[r * D + c];
    }
}

void gref_adamw_float(size_t n, float *p, const float *g, float *m, float *v, const AdamWStep *a) {
    for (size_t i = 0; i < n; i++) {
        p[i] = p[i] * (1.0f - a->lr * a->weight_decay);
        m[i] = m[i] + (1.0f - a->beta1) * (g[i] - m[i]);
        v[i] = a->beta2 * v[i] + (1.0f - a->beta2) * g[i] * g[i];
        p[i] = p[i] - (a->lr / a->bias1) * (m[i] / (sqrtf(v[i]) / sqrtf(a->bias2) + a->eps));
    }
}

void gref_adamw_double(size_t n, double *p, const float *g, double *m, double *v,
                       const AdamWStep *a) {
    for (size_t i = 0; i < n; i++) {
        m[i] = a->beta1 * m[i] + (1.0 - a->beta1) * g[i];
        v[i] = a->beta2 * v[i] + (1.0 - a->beta2) * (double)g[i] * g[i];
        const double mhat = m[i] / a->bias1, vhat = v[i] / a->bias2;
        p[i] =
            p[i] * (1.0 - (double)a->lr * a->weight_decay) - a->lr * mhat / (sqrt(vhat) + a->eps);
    }
}
