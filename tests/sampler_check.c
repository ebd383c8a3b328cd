/* sampler_check.c - the CPU sampler (src/results/sampler.c) measures what the process does.
 * At 20 Hz: while the main thread burns 0.6 s of CPU time (longer in wall time on a loaded
 * machine: the burn lasts until the process got that much) the mean utilisation must match the
 * process's own CPU time over that wall time (clock_gettime, within 10 points + 25%) and exceed
 * the sleeping one by 5 points; while it sleeps 0.6 s it must stay below 20%; after
 * touching 64 MiB the resident memory must have grown by at least 48 MiB. Samples must be
 * timestamped on the given clock (offset and t0 applied), 50 ms apart within 25 ms (median), and
 * a buffer of 5 samples must keep 5 and count the rest as dropped.
 * Exit status 0 pass, 1 fail. */
#define _GNU_SOURCE
#include "harness.h"
#include "sampler.h"
#include "clock.h" /* defines: dt_now */

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double mean_util(const SampleRecord *s, int n, double from, double to) {
    double sum = 0;
    int k = 0;
    for (int i = 1; i < n; i++) /* sample i covers (time[i-1], time[i]] */
        if (s[i - 1].time >= from && s[i].time <= to) sum += s[i].utilization, k++;
    return k ? sum / k : NAN;
}

static double cpu_seconds(void) { /* this process's CPU time */
    struct timespec t;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static int cmp(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int main(void) {
    const double offset = 0.25, t0 = dt_now() - 100.0; /* times near 100 - 0.25 s */
    char note[256];
    Sampler *s = sampler_create(20.0, 1000, NULL, offset, t0, note, sizeof note);
    EXPECT(!strcmp(sampler_source(s), "procfs") && !note[0], "CPU source is procfs");
    double mem0 = sampler_resident_mib();
    sampler_start(s);
    double a = dt_now() - offset - t0, cpu0 = cpu_seconds(), now = a;
    volatile double x = 0; /* burn 0.6 s of CPU: 0.6 s of wall time on an idle core, at most 10 */
    while ((cpu_seconds() - cpu0 < 0.6 || now < a + 0.6) && now < a + 10.0) {
        for (int i = 0; i < 1000; i++)
            x += sqrt(x + 1.0);
        now = dt_now() - offset - t0;
    }
    double b = dt_now() - offset - t0, own = 100.0 * (cpu_seconds() - cpu0) / (b - a);
    struct timespec nap = {0, 600000000};
    nanosleep(&nap, NULL);
    double c = dt_now() - offset - t0;
    size_t big = (size_t)64 << 20;
    char *volatile touched = malloc(big); /* volatile: the stores must happen */
    memset(touched, 1, big);
    for (size_t i = 0; i < big; i += 4096)
        touched[i] = (char)i;
    nap.tv_nsec = 200000000;
    nanosleep(&nap, NULL);
    sampler_stop(s);
    double d = dt_now() - offset - t0;

    SampleRecord buf[1000];
    int n = sampler_pull(s, buf, 1000);
    printf("%d samples; burn %.2f-%.2f s, sleep -%.2f s, stop %.2f s\n", n, a, b, c, d);
    /* from the elapsed time, not a fixed count: touching the 64 MiB takes a while under a
     * sanitizer or on a loaded machine */
    EXPECT(n >= 20 && n >= 10.0 * (d - a) && n <= 20.0 * (d - a) + 3,
           "about 20 samples per second");
    double gaps[1000];
    for (int i = 1; i < n; i++)
        gaps[i - 1] = buf[i].time - buf[i - 1].time;
    qsort(gaps, (size_t)(n - 1), sizeof(double), cmp);
    printf("median gap %.4f s\n", gaps[(n - 1) / 2]);
    EXPECT(fabs(gaps[(n - 1) / 2] - 0.05) < 0.025, "samples 50 ms apart (median within 25 ms)");
    EXPECT(buf[0].time >= a - 0.06 && buf[0].time <= a + 0.06, "timestamps on the given clock");
    double ub = mean_util(buf, n, a, b), us = mean_util(buf, n, b + 0.06, c);
    printf("utilisation while burning %.1f%% (the process's CPU time: %.1f%%), while sleeping "
           "%.1f%%\n",
           ub, own, us);
    EXPECT(fabs(ub - own) <= 10.0 + 0.25 * own,
           "utilisation while burning matches the process's CPU time");
    EXPECT(ub > us + 5.0, "utilisation while burning exceeds the sleeping one by 5 points");
    EXPECT(us < 20.0, "utilisation while sleeping < 20%%");
    double grew = buf[n - 1].memory_mib - mem0;
    printf("resident memory %.1f MiB before, %.1f MiB at the end (+%.1f)\n", mem0,
           buf[n - 1].memory_mib, grew);
    EXPECT(grew >= 48.0, "resident memory grew by >= 48 MiB after touching 64 MiB");
    EXPECT(isnan(buf[0].power_w), "power is NaN on the CPU");
    EXPECT(sampler_pull(s, buf, 10) == 0, "nothing more to pull");
    sampler_free(s);
    free(touched);

    s = sampler_create(100.0, 5, NULL, 0.0, 0.0, note, sizeof note);
    sampler_start(s);
    nap.tv_nsec = 150000000;
    nanosleep(&nap, NULL);
    sampler_stop(s);
    printf("full buffer: %lld kept, %lld dropped\n", (long long)sampler_taken(s),
           (long long)sampler_dropped(s));
    EXPECT(sampler_taken(s) == 5 && sampler_dropped(s) >= 3,
           "a full buffer keeps its capacity and counts the rest");
    sampler_free(s);

    /* Rates out of bounds (the resolver refuses them) are kept in bounds: the thread sleeps at
     * most 1000 s and its stop wakes it at once (1e-300 Hz used to spin holding the lock: the
     * stop never returned). */
    double rates[] = {1e-300, 1e-6, 1e300};
    for (int i = 0; i < 3; i++) {
        s = sampler_create(rates[i], 4, NULL, 0.0, 0.0, note, sizeof note);
        sampler_start(s);
        nanosleep(&(struct timespec){0, 20000000}, NULL);
        double t = dt_now();
        sampler_stop(s);
        t = dt_now() - t;
        printf("--sample-hz %g: stopped after %.3f s, %lld sample(s)\n", rates[i], t,
               (long long)sampler_taken(s));
        EXPECT(t < 0.5, "the sampler stops within 0.5 s whatever its rate");
        EXPECT(sampler_taken(s) >= 1, "it took a first sample");
        sampler_free(s);
    }
    printf("checksum %d\n", x > 0);
    return check_summary();
}
