/* sampler.c - the sampling thread (see sampler.h). One pthread per rank sleeps on a condition
 * variable with an absolute CLOCK_MONOTONIC deadline, so the rate does not drift and stop() wakes
 * it at once; it writes sample i into the preallocated buffer, then publishes the count with a
 * release store that sampler_pull's acquire load pairs with. */
#define _GNU_SOURCE
#include "sampler.h"
#include "nvml.h"
#include "alloc.h"     /* defines: xcalloc */
#include "clock.h"     /* defines: dt_now */
#include "mpi_check.h" /* defines: dt_rank */

#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

struct Sampler {
    double period, offset, t0;
    NvmlGpu *gpu; /* NULL: procfs */
    SampleRecord *buf;
    int64_t capacity, pulled;
    _Atomic int64_t count, dropped;
    double last_cpu, last_wall; /* procfs: the previous reading */
    pthread_t thread;
    pthread_mutex_t lock;
    pthread_cond_t wake;
    int running, stop;
};

double sampler_cpu_seconds(void) {
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

double sampler_resident_mib(void) {
    long size = 0, resident = 0;
    FILE *f = fopen("/proc/self/statm", "r");
    if (!f) return NAN;
    int n = fscanf(f, "%ld %ld", &size, &resident);
    fclose(f);
    return n == 2 ? (double)resident * (double)sysconf(_SC_PAGESIZE) / 1048576.0 : NAN;
}

Sampler *sampler_create(double hz, int64_t capacity, const char *gpu_pci_bus_id,
                        double clock_offset, double t0, char *note, size_t notelen) {
    Sampler *s = xcalloc(1, sizeof *s);
    hz = hz > 1e3 ? 1e3 : hz < 1e-3 ? 1e-3 : hz; /* the bounds resolve.c accepts */
    s->period = 1.0 / hz, s->offset = clock_offset, s->t0 = t0;
    s->capacity = capacity > 0 ? capacity : 1;
    s->buf = xcalloc((size_t)s->capacity, sizeof(SampleRecord));
    if (note && notelen) note[0] = '\0';
    if (gpu_pci_bus_id && *gpu_pci_bus_id) {
        char why[300];
        s->gpu = nvml_gpu(gpu_pci_bus_id, why, sizeof why);
        if (!s->gpu && note) snprintf(note, notelen, "%s", why);
    }
    s->last_cpu = sampler_cpu_seconds();
    s->last_wall = dt_now();
    pthread_mutex_init(&s->lock, NULL);
    pthread_condattr_t attr;
    pthread_condattr_init(&attr);
    pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
    pthread_cond_init(&s->wake, &attr);
    pthread_condattr_destroy(&attr);
    return s;
}

const char *sampler_source(const Sampler *s) {
    return s->gpu ? "nvml" : "procfs";
}

static void take(Sampler *s) {
    SampleRecord r;
    double now = dt_now();
    r.time = now - s->offset - s->t0;
    if (s->gpu) {
        nvml_read(s->gpu, &r.power_w, &r.memory_mib, &r.utilization);
    } else {
        double cpu = sampler_cpu_seconds(), wall = now - s->last_wall;
        r.power_w = NAN;
        r.memory_mib = sampler_resident_mib();
        r.utilization = wall > 0 ? 100.0 * (cpu - s->last_cpu) / wall : NAN;
        s->last_cpu = cpu, s->last_wall = now;
    }
    int64_t i = atomic_load_explicit(&s->count, memory_order_relaxed);
    if (i >= s->capacity) {
        atomic_fetch_add(&s->dropped, 1);
        return;
    }
    s->buf[i] = r;
    atomic_store_explicit(&s->count, i + 1, memory_order_release);
}

/* t + ns, normalised. */
static struct timespec ts_add(struct timespec t, int64_t ns) {
    int64_t n = (int64_t)t.tv_nsec + ns % 1000000000;
    t.tv_sec += (time_t)(ns / 1000000000 + n / 1000000000);
    t.tv_nsec = (long)(n % 1000000000);
    return t;
}

static int ts_before(struct timespec a, struct timespec b) {
    return a.tv_sec < b.tv_sec || (a.tv_sec == b.tv_sec && a.tv_nsec < b.tv_nsec);
}

static void *loop(void *arg) {
    Sampler *s = arg;
    const int64_t period_ns = (int64_t)llround(s->period * 1e9); /* 1 ms to 1000 s (resolve.c) */
    struct timespec next, now;
    clock_gettime(CLOCK_MONOTONIC, &next);
    pthread_mutex_lock(&s->lock);
    while (!s->stop) {
        pthread_mutex_unlock(&s->lock);
        take(s);
        pthread_mutex_lock(&s->lock);
        next = ts_add(next, period_ns);
        clock_gettime(CLOCK_MONOTONIC, &now);
        if (ts_before(next, now)) next = now; /* fell behind (a slow reading): skip, no burst */
        /* 0: woken (sampler_stop, or spuriously): look at stop again; anything else (the
         * deadline passed): the next sample */
        while (!s->stop && pthread_cond_timedwait(&s->wake, &s->lock, &next) == 0) {
        }
    }
    pthread_mutex_unlock(&s->lock);
    return NULL;
}

void sampler_start(Sampler *s) {
    if (s->running) return;
    s->last_cpu = sampler_cpu_seconds();
    s->last_wall = dt_now();
    s->stop = 0;
    if (pthread_create(&s->thread, NULL, loop, s) == 0)
        s->running = 1;
    else
        fprintf(stderr, "dtbench: warning: rank %d: cannot start the sampler thread\n", dt_rank());
}

void sampler_stop(Sampler *s) {
    if (!s->running) return;
    pthread_mutex_lock(&s->lock);
    s->stop = 1;
    pthread_cond_signal(&s->wake);
    pthread_mutex_unlock(&s->lock);
    pthread_join(s->thread, NULL);
    s->running = 0;
}

int sampler_pull(void *sampler, SampleRecord *out, int max) {
    Sampler *s = sampler;
    int64_t avail = atomic_load_explicit(&s->count, memory_order_acquire) - s->pulled;
    int n = avail < max ? (int)avail : max;
    if (n > 0) memcpy(out, s->buf + s->pulled, (size_t)n * sizeof *out);
    s->pulled += n > 0 ? n : 0;
    return n > 0 ? n : 0;
}

int64_t sampler_taken(const Sampler *s) {
    return atomic_load(&((Sampler *)s)->count);
}

int64_t sampler_dropped(const Sampler *s) {
    return atomic_load(&((Sampler *)s)->dropped);
}

void sampler_free(Sampler *s) {
    if (!s) return;
    sampler_stop(s);
    pthread_cond_destroy(&s->wake);
    pthread_mutex_destroy(&s->lock);
    free(s->gpu);
    free(s->buf);
    free(s);
}
