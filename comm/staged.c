/* staged.c - a host-staging wrapper that runs a host-memory exchange strategy (ssp, async: their
 * ExchangeOps.device_ok is 0) on a backend with device memory (CUDA). The wrapped strategy sees
 * host mirrors of the parameters, the gradients and the optimizer's state (the momentum buffer;
 * AdamW's second moment too), and a host backend
 * (ExchangeConfig.host_be) for the optimizer steps it applies itself; the wrapper moves data
 * between the device buffers and the mirrors with the device backend's download/upload.
 *
 * Per iteration: download params and grads (download waits for the compute stream, so the
 * strategy sees this iteration's gradients), run the strategy, then upload what it left for the
 * driver: the parameters (EXCHANGE_PARAMS_UPDATED) or the averaged gradients
 * (EXCHANGE_APPLY_UPDATE; the driver's optimizer step runs on the device with the device's
 * momentum buffer). The optimizer's state is used by the strategies only in serve() and
 * finish(): those download it with the parameters and upload both afterwards, so it is never on
 * two sides at once. Mirrors are allocated at create, never in a timed step. Transports on device
 * memory (nccl) cannot serve host mirrors: the resolver refuses them with a staged strategy. */
#include "exchange.h"
#include "alloc.h" /* defines: xmalloc, xcalloc */

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct ExchangeState {
    const ExchangeOps *inner;
    ExchangeState *in;
    ExchangeConfig cfg;   /* the device side: cfg.be, cfg.ctx, cfg.velocity, cfg.variance on the
                             device */
    BackendCtx *host_ctx; /* cfg.host_be's context, made here */
    float *p, *g, *v, *s; /* host mirrors [nparams]; s: of the variance, when there is one */
};

static ExchangeState *staged_create(const ExchangeOps *inner, const ExchangeConfig *cfg, char *err,
                                    size_t errlen) {
    ExchangeState *st = xcalloc(1, sizeof *st);
    st->inner = inner;
    st->cfg = *cfg;
    size_t bytes = cfg->nparams * sizeof(float);
    st->p = xcalloc(cfg->nparams ? cfg->nparams : 1, sizeof(float));
    st->g = xcalloc(cfg->nparams ? cfg->nparams : 1, sizeof(float));
    st->v = xcalloc(cfg->nparams ? cfg->nparams : 1, sizeof(float));
    if (cfg->variance) st->s = xcalloc(cfg->nparams ? cfg->nparams : 1, sizeof(float));
    if (cfg->velocity) cfg->be->download(cfg->ctx, st->v, cfg->velocity, bytes);
    if (cfg->variance) cfg->be->download(cfg->ctx, st->s, cfg->variance, bytes);
    if (cfg->host_be->init(NULL, &st->host_ctx) != 0) {
        snprintf(err, errlen, "--exchange %s: the host backend for staging did not start",
                 inner->name);
        free(st->p), free(st->g), free(st->v), free(st->s), free(st);
        return NULL;
    }
    ExchangeConfig hc = *cfg;
    hc.be = cfg->host_be, hc.ctx = st->host_ctx, hc.velocity = st->v, hc.variance = st->s;
    hc.device_coll = NULL, hc.overlap = 0;
    st->in = inner->create(&hc, err, errlen);
    if (!st->in) {
        cfg->host_be->finalize(st->host_ctx);
        free(st->p), free(st->g), free(st->v), free(st->s), free(st);
        return NULL;
    }
    return st;
}

static int staged_role(ExchangeState *st, int *index, int *count) {
    return st->inner->role(st->in, index, count);
}

static int staged_exchange(ExchangeState *st, float *params, float *grads, ExchangeStep *step) {
    const ExchangeConfig *c = &st->cfg;
    size_t bytes = c->nparams * sizeof(float);
    c->be->download(c->ctx, st->p, params, bytes);
    c->be->download(c->ctx, st->g, grads, bytes);
    int done = st->inner->exchange(st->in, st->p, st->g, step);
    if (done == EXCHANGE_PARAMS_UPDATED)
        c->be->upload(c->ctx, params, st->p, bytes);
    else
        c->be->upload(c->ctx, grads, st->g, bytes);
    return done;
}

/* serve() and finish(): the parameters and the optimizer's state go through the host. */
static void to_host(ExchangeState *st, const float *params) {
    const ExchangeConfig *c = &st->cfg;
    size_t bytes = c->nparams * sizeof(float);
    c->be->download(c->ctx, st->p, params, bytes);
    if (c->velocity) c->be->download(c->ctx, st->v, c->velocity, bytes);
    if (c->variance) c->be->download(c->ctx, st->s, c->variance, bytes);
}

static void to_device(ExchangeState *st, float *params) {
    const ExchangeConfig *c = &st->cfg;
    size_t bytes = c->nparams * sizeof(float);
    c->be->upload(c->ctx, params, st->p, bytes);
    if (c->velocity) c->be->upload(c->ctx, c->velocity, st->v, bytes);
    if (c->variance) c->be->upload(c->ctx, c->variance, st->s, bytes);
    c->be->synchronize(c->ctx); /* the mirrors may be reused at once */
}

static void staged_serve(ExchangeState *st, float *params) {
    to_host(st, params);
    st->inner->serve(st->in, st->p);
    to_device(st, params);
}

static void staged_finish(ExchangeState *st, float *params) {
    to_host(st, params);
    st->inner->finish(st->in, st->p);
    to_device(st, params);
}

static void staged_counts(ExchangeState *st, int64_t *pushed, int64_t *applied) {
    st->inner->counts(st->in, pushed, applied);
}

static void staged_report(ExchangeState *st, ExchangeStep *step) {
    if (st->inner->report) st->inner->report(st->in, step);
}

static void staged_destroy(ExchangeState *st) {
    st->inner->destroy(st->in);
    st->cfg.host_be->finalize(st->host_ctx);
    free(st->p), free(st->g), free(st->v), free(st->s), free(st);
}

/* One wrapper table per wrapped strategy; create() needs to know which, hence one trampoline
 * per slot. */
enum { MAX_STAGED = 8 };
static const ExchangeOps *inners[MAX_STAGED];
static ExchangeOps wrapped[MAX_STAGED];

#define TRAMPOLINE(i)                                                                              \
    static ExchangeState *create_##i(const ExchangeConfig *cfg, char *err, size_t errlen) {        \
        return staged_create(inners[i], cfg, err, errlen);                                         \
    }
TRAMPOLINE(0)
TRAMPOLINE(1)
TRAMPOLINE(2)
TRAMPOLINE(3)
TRAMPOLINE(4)
TRAMPOLINE(5)
TRAMPOLINE(6)
TRAMPOLINE(7)
static ExchangeState *(*const creates[MAX_STAGED])(const ExchangeConfig *, char *, size_t) = {
    create_0, create_1, create_2, create_3, create_4, create_5, create_6, create_7};

const ExchangeOps *exchange_staged(const ExchangeOps *inner) {
    int i = 0;
    while (i < MAX_STAGED && inners[i] && inners[i] != inner)
        i++;
    if (i == MAX_STAGED) return NULL;
    if (!inners[i]) {
        ExchangeOps w = *inner; /* name, reads, lockstep, delays_grads: the strategy's */
        w.device_ok = 1;
        w.create = creates[i];
        w.role = staged_role;
        w.exchange = staged_exchange;
        w.serve = inner->serve ? staged_serve : NULL;
        w.finish = staged_finish;
        w.counts = staged_counts;
        w.grads_ready = NULL; /* no overlap: the gradients are staged after backward */
        w.report = staged_report;
        w.destroy = staged_destroy;
        w.calibrate = NULL;
        w.pipeline_ok = 0;
        wrapped[i] = w;
        inners[i] = inner;
    }
    return &wrapped[i];
}
