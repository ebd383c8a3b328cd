/* straggler.h - injected slowness, so users see how each exchange strategy copes with a slow
 * rank: --straggler RANK:FACTOR (that rank's compute takes FACTOR times as long) or RANK:+MS
 * (MS milliseconds more per iteration), and --straggler-random P (every rank, each iteration,
 * with probability P, computes 3 times as long: a passing hiccup). The delay is slept at the end
 * of the backward pass, so it is part of `backward`, and recorded as `straggler_delay`. */
#ifndef DTBENCH_STRAGGLER_H
#define DTBENCH_STRAGGLER_H

#include <stddef.h>
#include <stdint.h>

/* Largest accepted values: one hour per iteration, or compute x 1000. */
#define STRAGGLER_MAX_MS     3600000
#define STRAGGLER_MAX_FACTOR 1000

typedef struct {
    int rank;        /* -1: no fixed straggler */
    double factor;   /* > 1: compute x factor */
    double add_s;    /* or this many seconds more */
    double random_p; /* probability of a random hiccup per rank and iteration */
    uint64_t seed;
} Straggler;

/* Parses --straggler ("" = none). Returns 0, or -1 with a one-line reason in err. */
int straggler_parse(const char *spec, int nranks, Straggler *s, char *err, size_t len);
/* Seconds this rank must be delayed in iteration `it`, given its compute time so far. */
double straggler_delay(const Straggler *s, int rank, int64_t it, double compute);
/* Sleeps for `seconds` (a slow rank frees its core, as a slow GPU or node would); returns early
 * when a stop is requested (a signal, or a write error). */
void straggler_sleep(double seconds);

#endif
