/* rng.h - splitmix64: a counter-based generator, so that sample g of a data set, parameter i of a
 * model or element j of a dropout mask gets the same value whatever the number of ranks. Inline:
 * the dropout kernels call it per element. */
#ifndef DTBENCH_RNG_H
#define DTBENCH_RNG_H

#include <stdint.h>

/* splitmix64's finaliser of x + the golden-ratio increment */
static inline uint64_t rng_mix(uint64_t x) {
    x += 0x9e3779b97f4a7c15ULL;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
    return x ^ (x >> 31);
}

/* [0,1) from the top 24 bits */
static inline float rng_uniform(uint64_t key) {
    return (float)(rng_mix(key) >> 40) * (1.0f / 16777216.0f);
}

#endif
