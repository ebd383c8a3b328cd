/* straggler.c - parsing and timing of injected delays (see straggler.h). */
#define _GNU_SOURCE
#include "straggler.h"
#include "util.h"

#include <errno.h>
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
        ok = end != p + add && *end == '\0' && (add ? v >= 0 : v >= 1.0);
    }
    if (!ok) {
        snprintf(err, len,
                 "--straggler: '%s' is not accepted: expected RANK:FACTOR (FACTOR >= 1, e.g. 2:3) "
                 "or RANK:+MS (e.g. 1:+50)",
                 spec);
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

void straggler_sleep(double seconds) {
    if (seconds <= 0) return;
    struct timespec ts = {(time_t)seconds, (long)((seconds - (double)(time_t)seconds) * 1e9)};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
    }
}
