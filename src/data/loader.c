/* loader.c - the batch loader's threads (see loader.h).
 *
 * Every thread runs the same loop under one mutex: claim a part of the batch being copied; else,
 * when a request waits and none is being copied, prepare it (its shuffled positions, computed
 * outside the lock, one preparer at a time) and cut it into parts; else sleep. The thread that
 * copies a batch's last part marks it made and wakes the driver. */
#define _GNU_SOURCE
#include "loader.h"
#include "alloc.h" /* defines: xmalloc, xcalloc */
#include "clock.h" /* defines: dt_now */
#include "fail.h"  /* defines: check_fail */

#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

enum { FREE, WAITING, PREPARING, COPYING, MADE };

typedef struct {
    int state;
    int64_t it;
    float *x;
    int32_t *labels;
    size_t *idx;             /* the slice's positions in the data set */
    int parts, next, undone; /* parts of the copy: in all, next to claim, not yet copied */
    double start, made;      /* when preparing began; seconds to make it */
} Request;

struct Loader {
    Dataset *ds;
    int global_batch, shard, nshards, n; /* n: samples per slice */
    int nthreads;
    pthread_t *threads;
    pthread_mutex_t mu;
    pthread_cond_t work, done;
    int stop, preparing;
    Request req[LOADER_SLOTS];
};

static void lock(Loader *l) {
    pthread_mutex_lock(&l->mu);
}
static void unlock(Loader *l) {
    pthread_mutex_unlock(&l->mu);
}

/* The waiting request of the lowest iteration, or NULL. */
static Request *oldest_waiting(Loader *l) {
    Request *best = NULL;
    for (int s = 0; s < LOADER_SLOTS; s++)
        if (l->req[s].state == WAITING && (!best || l->req[s].it < best->it)) best = &l->req[s];
    return best;
}

/* A request being copied with a part left to claim, or NULL. */
static Request *copying(Loader *l) {
    for (int s = 0; s < LOADER_SLOTS; s++)
        if (l->req[s].state == COPYING && l->req[s].next < l->req[s].parts) return &l->req[s];
    return NULL;
}

/* Called with the lock held; returns with it held. */
static void prepare(Loader *l, Request *r) {
    r->state = PREPARING, r->start = dt_now();
    l->preparing = 1;
    unlock(l);
    dataset_batch_indices(l->ds, r->it, l->global_batch, l->shard, l->nshards, r->idx);
    lock(l);
    l->preparing = 0;
    /* parts of at least one sample, about two per thread (a late thread still helps) */
    r->parts = l->n < 2 * l->nthreads ? l->n : 2 * l->nthreads;
    r->next = 0, r->undone = r->parts;
    r->state = COPYING;
    if (r->parts == 0) r->state = MADE, r->made = dt_now() - r->start;
    pthread_cond_broadcast(r->state == MADE ? &l->done : &l->work);
}

/* Called with the lock held; copies one claimed part without it. */
static void copy_part(Loader *l, Request *r) {
    int p = r->next++;
    int i0 = (int)((int64_t)l->n * p / r->parts), i1 = (int)((int64_t)l->n * (p + 1) / r->parts);
    unlock(l);
    dataset_fill(l->ds, r->idx, i0, i1, r->x, r->labels);
    lock(l);
    if (--r->undone == 0) {
        r->state = MADE, r->made = dt_now() - r->start;
        pthread_cond_broadcast(&l->done);
    }
}

/* The calling thread at the lowest priority: SCHED_IDLE, which never preempts a normal thread on
 * waking (under the default binding a loader thread shares the driver's core: its wake-up must not
 * delay the driver recording the data mark and queueing the step); where that is refused, nice
 * 19 on this thread alone. The driver sleeps in its waits (blocking-sync events on a GPU), so the
 * loader still gets the core then. Named "dtbench-loader" for ps and the tests. */
static void lowest_priority(void) {
    pthread_setname_np(pthread_self(), "dtbench-loader");
    const struct sched_param p = {.sched_priority = 0};
    if (pthread_setschedparam(pthread_self(), SCHED_IDLE, &p) == 0) return;
    setpriority(PRIO_PROCESS, (id_t)syscall(SYS_gettid), 19);
}

static void *loader_main(void *arg) {
    Loader *l = arg;
    lowest_priority();
    lock(l);
    while (!l->stop) {
        Request *r = copying(l);
        if (r) {
            copy_part(l, r);
            continue;
        }
        r = l->preparing ? NULL : oldest_waiting(l);
        if (r)
            prepare(l, r);
        else
            pthread_cond_wait(&l->work, &l->mu);
    }
    unlock(l);
    return NULL;
}

Loader *loader_create(Dataset *ds, int global_batch, int shard, int nshards, int threads) {
    Loader *l = xcalloc(1, sizeof *l);
    l->ds = ds, l->global_batch = global_batch, l->shard = shard, l->nshards = nshards;
    l->n = global_batch / nshards;
    l->nthreads = threads < 1 ? 1 : threads;
    for (int s = 0; s < LOADER_SLOTS; s++)
        l->req[s].idx = xmalloc(((size_t)l->n + 1) * sizeof(size_t));
    pthread_mutex_init(&l->mu, NULL);
    pthread_cond_init(&l->work, NULL);
    pthread_condattr_t monotonic; /* loader_wait_for's deadline: on dt_now's clock */
    pthread_condattr_init(&monotonic);
    pthread_condattr_setclock(&monotonic, CLOCK_MONOTONIC);
    pthread_cond_init(&l->done, &monotonic);
    pthread_condattr_destroy(&monotonic);
    l->threads = xcalloc((size_t)l->nthreads, sizeof *l->threads);
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old); /* the threads inherit it */
    for (int t = 0; t < l->nthreads; t++) {
        int rc = pthread_create(&l->threads[t], NULL, loader_main, l);
        if (rc != 0) check_fail(__FILE__, __LINE__, "pthread_create (batch loader)", strerror(rc));
    }
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    return l;
}

void loader_submit(Loader *l, int slot, int64_t it, float *x, int32_t *labels) {
    lock(l);
    Request *r = &l->req[slot];
    if (r->state != FREE) {
        unlock(l);
        check_fail(__FILE__, __LINE__, "batch loader", "a batch asked into a slot still in use");
    }
    r->state = WAITING, r->it = it, r->x = x, r->labels = labels;
    pthread_cond_broadcast(&l->work);
    unlock(l);
}

int loader_ready(Loader *l, int slot) {
    lock(l);
    int made = l->req[slot].state == MADE;
    unlock(l);
    return made;
}

int loader_wait_for(Loader *l, int slot, double seconds) {
    struct timespec until;
    clock_gettime(CLOCK_MONOTONIC, &until);
    long ns = until.tv_nsec + (long)(seconds * 1e9);
    until.tv_sec += ns / 1000000000L, until.tv_nsec = ns % 1000000000L;
    lock(l);
    const Request *r = &l->req[slot];
    int rc = 0;
    while (r->state != MADE && r->state != FREE && rc == 0)
        rc = pthread_cond_timedwait(&l->done, &l->mu, &until);
    int made = r->state == MADE;
    unlock(l);
    return made;
}

double loader_wait(Loader *l, int slot, double *made) {
    double t = dt_now();
    lock(l);
    Request *r = &l->req[slot];
    if (r->state == FREE) {
        unlock(l);
        check_fail(__FILE__, __LINE__, "batch loader", "waiting for a batch never asked for");
    }
    while (r->state != MADE)
        pthread_cond_wait(&l->done, &l->mu);
    r->state = FREE;
    if (made) *made = r->made;
    unlock(l);
    return dt_now() - t;
}

void loader_free(Loader *l) {
    if (!l) return;
    lock(l);
    l->stop = 1; /* a thread ends after its part: a batch in the making is abandoned */
    pthread_cond_broadcast(&l->work);
    unlock(l);
    for (int t = 0; t < l->nthreads; t++)
        pthread_join(l->threads[t], NULL);
    pthread_mutex_destroy(&l->mu);
    pthread_cond_destroy(&l->work);
    pthread_cond_destroy(&l->done);
    for (int s = 0; s < LOADER_SLOTS; s++)
        free(l->req[s].idx);
    free(l->threads);
    free(l);
}
