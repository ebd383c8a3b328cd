/* prefetch.c - batches made by the loader and uploaded one step ahead (see prefetch.h). */
#include "prefetch.h"
#include "fail.h"   /* defines: check_fail */
#include "loader.h" /* defines: loader_create, loader_submit, loader_wait */

#include <stdio.h>
#include <string.h>

const char *prefetch_why_not(const BackendOps *be, char *why, size_t len) {
    why[0] = '\0';
    if (!be->device_memory)
        snprintf(why, len, "the %s backend computes on host memory: there is nothing to upload",
                 be->name);
    else if (!be->host_alloc || !be->host_free || !be->prefetch_upload || !be->prefetch_wait ||
             !be->prefetch_release || !be->prefetch_fence)
        snprintf(why, len, "the %s backend has no copy stream", be->name);
    return why;
}

/* Backend memory of `bytes`, or the job ends saying so. */
static void *need(void *p, const BackendOps *be, size_t bytes, const char *what) {
    if (p) return p;
    char msg[160];
    snprintf(msg, sizeof msg, "cannot allocate %zu bytes of %s on the %s backend", bytes, what,
             be->name);
    check_fail(__FILE__, __LINE__, "prefetch", msg);
}

/* The loader is asked for batch it into its slot's host buffers (free: see prefetch.h). */
static void ask(Prefetch *p, int64_t it) {
    const int s = (int)(it % BACKEND_PREFETCH_SLOTS);
    loader_submit(p->loader, s, it, p->samples ? p->host_x[s] : NULL, p->host_labels[s]);
    p->asked[s] = it;
}

/* Batch it, made, is queued for upload into its slot (behind the slot's release). */
static void queue_upload(Prefetch *p, Driver *d, int64_t it) {
    Model *m = d->model;
    const int s = (int)(it % BACKEND_PREFETCH_SLOTS);
    if (p->samples) m->be->prefetch_upload(m->ctx, s, p->dev_x[s], p->host_x[s], p->sample_bytes);
    if (p->labels)
        m->be->prefetch_upload(m->ctx, s, p->dev_labels[s], p->host_labels[s], p->label_bytes);
    p->queued[s] = it;
}

void prefetch_init(Prefetch *p, Driver *d) {
    memset(p, 0, sizeof *p);
    Model *m = d->model;
    const BackendOps *be = m->be;
    p->samples = d->pipe->stage == 0;
    p->labels = d->pipe->stage == d->pipe->stages - 1;
    p->on = d->set.prefetch && (p->samples || p->labels);
    if (!p->on) return;
    p->sample_bytes = (size_t)m->batch * d->data->sample_size * sizeof(float);
    p->label_bytes = (size_t)m->batch * d->data->label_size * sizeof(int32_t);
    p->total = d->set.warmup + d->set.iters;
    for (int s = 0; s < BACKEND_PREFETCH_SLOTS; s++) {
        p->asked[s] = p->queued[s] = -1;
        /* the loader writes labels on every stage it runs on; samples only where read */
        p->host_labels[s] =
            need(be->host_alloc(m->ctx, p->label_bytes), be, p->label_bytes, "page-locked labels");
        if (p->samples)
            p->host_x[s] = need(be->host_alloc(m->ctx, p->sample_bytes), be, p->sample_bytes,
                                "page-locked samples");
        p->dev_x[s] = s == 0 || !p->samples ? m->x
                                            : need(be->alloc(m->ctx, p->sample_bytes), be,
                                                   p->sample_bytes, "prefetched samples");
        p->dev_labels[s] = s == 0 || !p->labels ? m->labels
                                                : need(be->alloc(m->ctx, p->label_bytes), be,
                                                       p->label_bytes, "prefetched labels");
    }
    p->loader = loader_create(d->data, d->set.batch, d->shard, d->nshards, d->set.loader_threads);
    if (p->total > 0) ask(p, 0);
}

void prefetch_take(Prefetch *p, Driver *d, int64_t it, double *load, double *load_wait) {
    Model *m = d->model;
    const int s = (int)(it % BACKEND_PREFETCH_SLOTS),
              next = (int)((it + 1) % BACKEND_PREFETCH_SLOTS);
    *load_wait = 0.0;
    if (p->queued[s] != it) { /* the loader was late (or this is the first batch) */
        if (p->asked[s] != it) check_fail(__FILE__, __LINE__, "prefetch", "batch never asked for");
        double w = loader_wait(p->loader, s, &p->made[s]);
        *load_wait = w > 1e-9 ? w : 1e-9; /* > 0: the step waited */
        queue_upload(p, d, it);
    }
    *load = p->made[s];
    m->be->prefetch_wait(m->ctx, s);
    if (p->samples) m->x = p->dev_x[s];
    if (p->labels) m->labels = p->dev_labels[s];
    if (it + 1 < p->total) {
        m->be->prefetch_fence(m->ctx, next); /* the copy of batch it - 1 read its host buffers */
        ask(p, it + 1);
    }
}

void prefetch_upload_next(Prefetch *p, Driver *d, int64_t it) {
    const int s = (int)(it % BACKEND_PREFETCH_SLOTS);
    if (!p->on || it >= p->total || p->asked[s] != it || !loader_ready(p->loader, s)) return;
    loader_wait(p->loader, s, &p->made[s]); /* made: returns at once */
    queue_upload(p, d, it);
}

/* How long the host waits for the loader between two looks at the device: the most it can be
 * late to notice that the device finished the step before the loader made the batch. */
#define POLL_S 100e-6

void prefetch_upload_during(Prefetch *p, Driver *d, int64_t it, int mark, int when_idle) {
    const int s = (int)(it % BACKEND_PREFETCH_SLOTS);
    if (!p->on || it >= p->total || p->asked[s] != it || p->queued[s] == it) return;
    const BackendOps *be = d->model->be;
    for (;;) {
        const int idle = !be->timer_done || be->timer_done(d->model->ctx, mark);
        if (idle && !when_idle) return; /* host work now would leave the device idle */
        if (loader_ready(p->loader, s)) {
            prefetch_upload_next(p, d, it);
            return;
        }
        if (idle) return; /* the batch is late: prefetch_take waits for it */
        loader_wait_for(p->loader, s, POLL_S);
    }
}

void prefetch_release(Prefetch *p, Driver *d, int64_t it) {
    if (p->on) d->model->be->prefetch_release(d->model->ctx, (int)(it % BACKEND_PREFETCH_SLOTS));
}

void prefetch_free(Prefetch *p, Driver *d) {
    if (!p->on) return;
    Model *m = d->model;
    const BackendOps *be = m->be;
    loader_free(p->loader); /* its threads write the host buffers no more */
    for (int s = 0; s < BACKEND_PREFETCH_SLOTS; s++)
        be->prefetch_fence(m->ctx, s); /* a batch still in flight (a stop) */
    m->x = p->dev_x[0], m->labels = p->dev_labels[0];
    for (int s = 1; s < BACKEND_PREFETCH_SLOTS; s++) {
        if (p->dev_x[s] != m->x) be->free(m->ctx, p->dev_x[s]);
        if (p->dev_labels[s] != m->labels) be->free(m->ctx, p->dev_labels[s]);
    }
    for (int s = 0; s < BACKEND_PREFETCH_SLOTS; s++)
        be->host_free(m->ctx, p->host_x[s]), be->host_free(m->ctx, p->host_labels[s]);
    memset(p, 0, sizeof *p);
}
