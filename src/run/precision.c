/* precision.c - which modes scale their loss, and fp16's dynamic loss scaler (see precision.h). */
#include "precision.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

int precision_loss_scaling(Precision p) {
    const char *t = getenv("DTBENCH_TEST_LOSS_SCALING");
    return p == PRECISION_FP16 || (t && !strcmp(t, "1"));
}

int precision_test_overflow(long long it) {
    const char *e = getenv("DTBENCH_TEST_OVERFLOW");
    for (const char *p = e; p && *p;) {
        char *end;
        long long v = strtoll(p, &end, 10);
        if (end == p) return 0;
        if (v == it) return 1;
        p = *end == ',' ? end + 1 : end;
        if (*end && *end != ',') return 0;
    }
    return 0;
}

void loss_scaler_init(LossScaler *s) {
    *s = (LossScaler){.scale = 65536.0, .growth = 2.0, .backoff = 0.5, .interval = 2000};
}

/* torch's _amp_update_scale_: overflow -> back off and restart the count; else count, and grow
 * at `interval` good steps (only to a finite scale). */
int loss_scaler_update(LossScaler *s, int found_nonfinite) {
    if (found_nonfinite) {
        s->scale *= s->backoff;
        s->good = 0;
        s->skipped++;
        return 1;
    }
    if (++s->good >= s->interval) {
        double grown = s->scale * s->growth;
        if (isfinite(grown)) s->scale = grown;
        s->good = 0;
    }
    return 0;
}
