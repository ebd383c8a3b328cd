/* straggler.c - parsing and timing of injected delays (see straggler.h). */
#define _GNU_SOURCE
#include "straggler.h"
#include "signals.h"
#include "clock.h" /* defines: dt_now */
#include "rng.h"   /* defines: rng_mix, rng_uniform */

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

int straggler_parse(const char *spec, int nranks, Straggler *s, char *err, size_t len) {
    s->rank = -1, s->factor = 1.0, s->add_s = 0.0;
    if (!spec || !*spec) return 0;
    char *end = NULL;
    errno = 0;
    long rank = strtol(spec, &end, 10);
    int ok = end != spec && *end == ':' && !errno && rank >= 0;
    double v = 0;
    int add = 0;
    if (ok) {
        const char *p = end + 1;
        add = *p == '+';
        v = strtod(p + add, &end);
        /* finite and bounded: a delay is slept every iteration */
        ok = end != p + add && *end == '\0' && isfinite(v) &&
             (add ? v >= 0 && v <= STRAGGLER_MAX_MS : v >= 1.0 && v <= STRAGGLER_MAX_FACTOR);
    }
    if (!ok) {
        snprintf(err, len,
                 "--straggler: '%s' is not accepted: expected RANK:FACTOR (FACTOR from 1 to %d, "
                 "e.g. 2:3) or RANK:+MS (MS from 0 to %d, e.g. 1:+50)",
                 spec, STRAGGLER_MAX_FACTOR, STRAGGLER_MAX_MS);
        return -1;
    }
    if (rank >= nranks) {
        snprintf(err, len, "--straggler: rank %ld is not accepted: the job has ranks 0 to %d", rank,
                 nranks - 1);
        return -1;
    }
    s->rank = (int)rank;
    if (add)
        s->add_s = v / 1000.0;
    else
        s->factor = v;
    return 0;
}

double straggler_delay(const Straggler *s, int rank, int64_t it, double compute) {
    double d = 0;
    if (rank == s->rank) d += s->add_s + (s->factor - 1.0) * compute;
    if (s->random_p > 0) {
        uint64_t key = rng_mix(s->seed ^ ((uint64_t)rank << 40) ^ (uint64_t)it ^ 0x57a6ULL);
        if (rng_uniform(key) < s->random_p) d += 2.0 * compute;
    }
    return d;
}

/* Slept in slices of at most 0.1 s, each ended early by a signal (nanosleep is never restarted
 * by SA_RESTART), until a stop is requested (signals.h): a straggler never delays a stop by more
 * than one slice, even for a signal that arrives between the check and the sleep. */
void straggler_sleep(double seconds) {
    double end = dt_now() + (seconds > 0 ? seconds : 0);
    for (;;) {
        double left = end - dt_now();
        if (!(left > 0) || signals_stop_requested()) return;
        if (left > 0.1) left = 0.1;
        struct timespec ts = {0, (long)(left * 1e9)};
        nanosleep(&ts, NULL);
    }
}
