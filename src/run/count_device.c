/* count_device.c - the counting fake device (see count_device.h): the CPU backend's table with
 * every member wrapped. A wrapper counts its call into the current iteration, folds its name and
 * arguments (pointers, shapes, scalars) into the running graph trace, and runs the CPU kernel
 * unless a graph is being captured. Its timer reads as a GPU's does: each elapsed time rounded
 * to float milliseconds (cudaEventElapsedTime).
 *
 * Iterations are read off the driver's phase marks: MARK_START opens one (and closes the line of
 * the previous), MARK_BACKWARD ends its compute (no host synchronisation before it), MARK_UPDATE
 * ends it (no allocation before it). The report line's fields:
 *   launches    what the host queued between MARK_START and MARK_UPDATE: kernels run eagerly,
 *               graph launches
 *   kernels     kernels run there, those of replayed graphs included
 *   outside     kernels run after MARK_UPDATE (the loss read, evaluations)
 *   allocs      allocations and frees (device or page-locked) between MARK_START and MARK_UPDATE
 *   step_syncs  host waits between MARK_START and MARK_BACKWARD (download, synchronize,
 *               timer_elapsed, all_finite)
 *   syncs       host waits elsewhere in the iteration (the exchange's, the update's, the phase
 *               reads and the loss after the update, evaluations)
 *   fences      prefetch_fence (host waits for a prefetched copy)
 *   casts       weights_ready calls run between MARK_START and MARK_UPDATE (the step's 16-bit
 *               weight copy on a GPU)
 *   uploads     synchronous uploads
 *   prefetches  prefetch_upload calls; overlapped: those queued while kernels were queued and not
 *               yet waited for (on a device they run while those kernels compute)
 *   captures, replays   graphs captured, graph launches */
#include "count_device.h"
#include "driver_stage.h" /* defines: MARK_START, MARK_BACKWARD, MARK_UPDATE */
#include "fail.h"         /* defines: check_fail */

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef struct {
    long launches, kernels, allocs, step_syncs, syncs, fences, casts, uploads, prefetches,
        overlapped, captures, replays, outside;
} Counts;

/* A graph of the fake: the work it was captured from and the trace of its calls. */
typedef struct {
    void (*work)(void *);
    void *arg;
    uint64_t *trace;
    const char **names;
    size_t n;
} FakeGraph;

typedef struct {
    void *dst;
    const void *src;
    size_t bytes;
} Copy;

enum { SLOT_FREE, SLOT_LOADING, SLOT_IN_USE };

static struct {
    const char *path;
    long long iter;   /* -1: before the first MARK_START */
    int in_step;      /* between MARK_START and MARK_BACKWARD */
    int in_iteration; /* between MARK_START and MARK_UPDATE */
    long queued;      /* launches since the host last waited */
    Counts c;
    FakeGraph *capture; /* being captured */
    FakeGraph *replay;  /* being replayed; pos: its next call */
    size_t pos;
    int slot_state[BACKEND_PREFETCH_SLOTS];
    Copy pending[BACKEND_PREFETCH_SLOTS][4];
    int npending[BACKEND_PREFETCH_SLOTS];
    const float *params; /* the parameters weights_ready copied, and whether they changed since */
    size_t nparams;
    int params_changed;
} C = {.iter = -1};

static _Noreturn void breach(const char *what) {
    check_fail(__FILE__, __LINE__, "count device", what);
}

static void report(void) {
    FILE *f = fopen(C.path, "a");
    if (!f) return;
    const Counts *c = &C.c;
    fprintf(f,
            "count pid=%ld iter=%lld launches=%ld kernels=%ld allocs=%ld step_syncs=%ld syncs=%ld "
            "fences=%ld casts=%ld uploads=%ld prefetches=%ld overlapped=%ld captures=%ld "
            "replays=%ld outside=%ld\n",
            (long)getpid(), C.iter, c->launches, c->kernels, c->allocs, c->step_syncs, c->syncs,
            c->fences, c->casts, c->uploads, c->prefetches, c->overlapped, c->captures, c->replays,
            c->outside);
    fclose(f);
}

/* ---- calls, their trace, and what may not happen in a capture ------------------------------ */

enum { A_END, A_PTR, A_MEM, A_INT, A_DBL };
#define P(p)     A_PTR, (const void *)(p)
#define M(p)     A_MEM, (const void *)(p), sizeof *(p)
#define MN(p, n) A_MEM, (const void *)(p), (size_t)(n)
#define I(v)     A_INT, (long long)(v)
#define D(v)     A_DBL, (double)(v)

static uint64_t fnv(uint64_t h, const void *p, size_t n) {
    const unsigned char *b = p;
    for (size_t i = 0; i < n; i++)
        h = (h ^ b[i]) * 0x100000001b3ULL;
    return h;
}

/* A kernel call: counted, traced; returns 1 when it is to run (not captured). */
static int kernel(const char *name, ...) {
    uint64_t h = fnv(0xcbf29ce484222325ULL, name, strlen(name));
    va_list ap;
    va_start(ap, name);
    for (int tag; (tag = va_arg(ap, int)) != A_END;) {
        if (tag == A_PTR) {
            const void *p = va_arg(ap, const void *);
            h = fnv(h, &p, sizeof p);
        } else if (tag == A_MEM) {
            const void *p = va_arg(ap, const void *);
            size_t n = va_arg(ap, size_t);
            h = p ? fnv(h, p, n) : fnv(h, "null", 4);
        } else if (tag == A_INT) {
            long long v = va_arg(ap, long long);
            h = fnv(h, &v, sizeof v);
        } else {
            double v = va_arg(ap, double);
            h = fnv(h, &v, sizeof v);
        }
    }
    va_end(ap);
    if (C.capture) {
        FakeGraph *g = C.capture;
        g->trace = realloc(g->trace, (g->n + 1) * sizeof *g->trace);
        g->names = realloc(g->names, (g->n + 1) * sizeof *g->names);
        if (!g->trace || !g->names) breach("out of memory");
        g->trace[g->n] = h, g->names[g->n++] = name;
        return 0;
    }
    if (C.replay) {
        FakeGraph *g = C.replay;
        if (C.pos >= g->n || g->trace[C.pos] != h) {
            char msg[256];
            snprintf(msg, sizeof msg,
                     "a graph replay differs from its capture at call %zu (%s now, %s captured): "
                     "an argument changed since the capture",
                     C.pos, name, C.pos < g->n ? g->names[C.pos] : "nothing");
            breach(msg);
        }
        C.pos++;
    } else {
        C.queued++;
        if (C.in_iteration) C.c.launches++;
    }
    if (C.in_iteration)
        C.c.kernels++;
    else
        C.c.outside++;
    return 1;
}
#define K(...) kernel(__VA_ARGS__, A_END)

static void no_capture(const char *what) {
    if (!C.capture) return;
    char msg[200];
    snprintf(msg, sizeof msg,
             "%s inside a graph capture (a GPU's capture fails there: no allocation, host "
             "synchronisation, upload or timer mark may sit in a captured step)",
             what);
    breach(msg);
}

static void host_waits(const char *what) {
    no_capture(what);
    if (C.in_step)
        C.c.step_syncs++;
    else
        C.c.syncs++;
    C.queued = 0;
}

static void memory(const char *what) {
    no_capture(what);
    if (C.in_iteration) C.c.allocs++;
}

/* Writes to the parameters make weights_ready's copy stale; products read it. */
static int in_params(const void *p) {
    const float *f = p;
    return C.params && f >= C.params && f < C.params + C.nparams;
}
static void writes(const void *p) {
    if (in_params(p)) C.params_changed = 1;
}
static void reads_weights(const char *what, const float *w) {
    if (!C.capture && in_params(w) && C.params_changed) {
        char msg[200];
        snprintf(msg, sizeof msg,
                 "%s reads weights changed since the last weights_ready (a GPU's 16-bit copy "
                 "would be stale)",
                 what);
        breach(msg);
    }
}

/* ---- lifetime, memory, phase marks ---------------------------------------------------------- */

static void count_finalize(BackendCtx *ctx) {
    for (int s = 0; s < BACKEND_PREFETCH_SLOTS; s++)
        if (C.npending[s]) breach("a prefetched copy still queued at the end (never fenced)");
    report();
    cpu_backend.finalize(ctx);
}
static void count_describe(BackendCtx *ctx, char *buf, size_t len) {
    char cpu[400];
    cpu_backend.describe(ctx, cpu, sizeof cpu);
    snprintf(buf, len, "counting fake device (DTBENCH_COUNT_DEVICE) over %s", cpu);
}
static void *count_alloc(BackendCtx *c, size_t bytes) {
    memory("alloc");
    return cpu_backend.alloc(c, bytes);
}
static void count_free(BackendCtx *c, void *p) {
    memory("free");
    cpu_backend.free(c, p);
}
static void count_upload(BackendCtx *c, void *dst, const void *src, size_t bytes) {
    no_capture("upload");
    C.c.uploads++;
    writes(dst);
    cpu_backend.upload(c, dst, src, bytes);
}
static void count_download(BackendCtx *c, void *dst, const void *src, size_t bytes) {
    host_waits("download");
    cpu_backend.download(c, dst, src, bytes);
}
static void count_synchronize(BackendCtx *c) {
    (void)c;
    host_waits("synchronize");
}
static void count_zero(BackendCtx *c, void *p, size_t bytes) {
    writes(p);
    if (K("zero", P(p), I(bytes))) cpu_backend.zero(c, p, bytes);
}
static void count_copy(BackendCtx *c, void *dst, const void *src, size_t bytes) {
    writes(dst);
    if (K("copy", P(dst), P(src), I(bytes))) cpu_backend.copy(c, dst, src, bytes);
}
static void count_weights_ready(BackendCtx *c, const float *params, size_t n) {
    (void)c;
    if (!K("weights_ready", P(params), I(n))) return;
    if (C.in_iteration) C.c.casts++;
    C.params = params, C.nparams = n, C.params_changed = 0;
}
static void count_timer_record(BackendCtx *c, int slot) {
    no_capture("timer_record");
    if (slot == MARK_START) {
        report();
        memset(&C.c, 0, sizeof C.c);
        C.iter++, C.in_step = 1, C.in_iteration = 1, C.queued = 0;
    } else if (slot == MARK_BACKWARD) {
        C.in_step = 0;
    } else if (slot == MARK_UPDATE) {
        C.in_iteration = 0;
    }
    cpu_backend.timer_record(c, slot);
}
/* As a GPU's timer reads (cudaEventElapsedTime): float milliseconds, each reading rounded on
 * its own. */
static double count_timer_elapsed(BackendCtx *c, int a, int b) {
    host_waits("timer_elapsed");
    return 1e-3 * (double)(float)(1e3 * cpu_backend.timer_elapsed(c, a, b));
}

/* ---- batch prefetch: copies deferred until the compute stream waits for them ---------------- */

static void *count_host_alloc(BackendCtx *c, size_t bytes) {
    memory("host_alloc");
    return cpu_backend.alloc(c, bytes);
}
static void count_host_free(BackendCtx *c, void *p) {
    memory("host_free");
    if (p) cpu_backend.free(c, p);
}
static int slot_of(int slot) {
    if (slot < 0 || slot >= BACKEND_PREFETCH_SLOTS) breach("prefetch slot out of range");
    return slot;
}
static void run_copies(BackendCtx *c, int s) {
    for (int i = 0; i < C.npending[s]; i++)
        cpu_backend.upload(c, C.pending[s][i].dst, C.pending[s][i].src, C.pending[s][i].bytes);
    C.npending[s] = 0;
}
static void count_prefetch_upload(BackendCtx *c, int slot, void *dst, const void *src,
                                  size_t bytes) {
    (void)c;
    const int s = slot_of(slot);
    no_capture("prefetch_upload");
    if (C.slot_state[s] == SLOT_IN_USE)
        breach("prefetch_upload into a slot the compute stream may still read (no "
               "prefetch_release since its prefetch_wait)");
    if (C.npending[s] == 4) breach("more than 4 copies queued into one slot");
    C.pending[s][C.npending[s]++] = (Copy){dst, src, bytes};
    C.slot_state[s] = SLOT_LOADING;
    C.c.prefetches++;
    if (C.queued > 0) C.c.overlapped++;
}
static void count_prefetch_wait(BackendCtx *c, int slot) {
    const int s = slot_of(slot);
    no_capture("prefetch_wait");
    run_copies(c, s);
    C.slot_state[s] = SLOT_IN_USE;
}
static void count_prefetch_release(BackendCtx *c, int slot) {
    (void)c;
    const int s = slot_of(slot);
    no_capture("prefetch_release");
    if (C.slot_state[s] == SLOT_IN_USE) C.slot_state[s] = SLOT_FREE;
}
static void count_prefetch_fence(BackendCtx *c, int slot) {
    const int s = slot_of(slot);
    no_capture("prefetch_fence");
    C.c.fences++;
    run_copies(c, s);
}

/* ---- graphs: a capture records the calls without running them; a replay runs the work again
 * and must make the same calls with the same arguments ---------------------------------------- */

static void *count_graph_capture(BackendCtx *c, void (*work)(void *), void *arg) {
    (void)c;
    if (C.capture || C.replay) breach("a graph capture inside a capture or a replay");
    FakeGraph *g = calloc(1, sizeof *g);
    if (!g) breach("out of memory");
    g->work = work, g->arg = arg;
    C.capture = g;
    work(arg);
    C.capture = NULL;
    C.c.captures++;
    return g;
}
static void count_graph_launch(BackendCtx *c, void *graph) {
    (void)c;
    FakeGraph *g = graph;
    no_capture("graph_launch");
    C.c.launches++, C.c.replays++, C.queued++; /* the driver replays inside steps only */
    C.replay = g, C.pos = 0;
    g->work(g->arg);
    if (C.pos != g->n) breach("a graph replay made fewer calls than its capture");
    C.replay = NULL;
}
static void count_graph_free(BackendCtx *c, void *graph) {
    (void)c;
    FakeGraph *g = graph;
    if (g) free(g->trace), free(g->names), free(g);
}

/* ---- the kernels --------------------------------------------------------------------------- */

static void k_fc_forward(BackendCtx *c, const FcShape *s, const float *x, const float *w,
                         const float *b, float *y) {
    reads_weights("fc_forward", w);
    if (K("fc_forward", M(s), P(x), P(w), P(b), P(y))) cpu_backend.fc_forward(c, s, x, w, b, y);
}
static void k_fc_backward(BackendCtx *c, const FcShape *s, const float *x, const float *w,
                          const float *dy, float *dx, float *dw, float *db) {
    reads_weights("fc_backward", w);
    if (K("fc_backward", M(s), P(x), P(w), P(dy), P(dx), P(dw), P(db)))
        cpu_backend.fc_backward(c, s, x, w, dy, dx, dw, db);
}
static void k_conv_forward(BackendCtx *c, const ConvShape *s, const float *x, const float *w,
                           const float *b, float *y, void *work) {
    reads_weights("conv_forward", w);
    if (K("conv_forward", M(s), P(x), P(w), P(b), P(y), P(work)))
        cpu_backend.conv_forward(c, s, x, w, b, y, work);
}
static void k_conv_backward(BackendCtx *c, const ConvShape *s, const float *x, const float *w,
                            const float *dy, float *dx, float *dw, float *db, void *work) {
    reads_weights("conv_backward", w);
    if (K("conv_backward", M(s), P(x), P(w), P(dy), P(dx), P(dw), P(db), P(work)))
        cpu_backend.conv_backward(c, s, x, w, dy, dx, dw, db, work);
}
static void k_maxpool_forward(BackendCtx *c, const PoolShape *s, const float *x, float *y,
                              int32_t *am) {
    if (K("maxpool_forward", M(s), P(x), P(y), P(am))) cpu_backend.maxpool_forward(c, s, x, y, am);
}
static void k_maxpool_backward(BackendCtx *c, const PoolShape *s, const int32_t *am,
                               const float *dy, float *dx) {
    if (K("maxpool_backward", M(s), P(am), P(dy), P(dx)))
        cpu_backend.maxpool_backward(c, s, am, dy, dx);
}
static void k_avgpool_forward(BackendCtx *c, const PoolShape *s, const float *x, float *y) {
    if (K("avgpool_forward", M(s), P(x), P(y))) cpu_backend.avgpool_forward(c, s, x, y);
}
static void k_avgpool_backward(BackendCtx *c, const PoolShape *s, const float *dy, float *dx) {
    if (K("avgpool_backward", M(s), P(dy), P(dx))) cpu_backend.avgpool_backward(c, s, dy, dx);
}
static void k_gap_forward(BackendCtx *c, size_t n, size_t ch, size_t plane, const float *x,
                          float *y) {
    if (K("global_avgpool_forward", I(n), I(ch), I(plane), P(x), P(y)))
        cpu_backend.global_avgpool_forward(c, n, ch, plane, x, y);
}
static void k_gap_backward(BackendCtx *c, size_t n, size_t ch, size_t plane, const float *dy,
                           float *dx) {
    if (K("global_avgpool_backward", I(n), I(ch), I(plane), P(dy), P(dx)))
        cpu_backend.global_avgpool_backward(c, n, ch, plane, dy, dx);
}
static void k_lrn_forward(BackendCtx *c, const LrnShape *s, const float *x, float *y,
                          float *scale) {
    if (K("lrn_forward", M(s), P(x), P(y), P(scale))) cpu_backend.lrn_forward(c, s, x, y, scale);
}
static void k_lrn_backward(BackendCtx *c, const LrnShape *s, const float *x, const float *y,
                           const float *scale, const float *dy, float *dx) {
    if (K("lrn_backward", M(s), P(x), P(y), P(scale), P(dy), P(dx)))
        cpu_backend.lrn_backward(c, s, x, y, scale, dy, dx);
}
static void k_bn_train(BackendCtx *c, const BnShape *s, const float *x, const float *g,
                       const float *b, float *y, float *sm, float *si, float *rm, float *rv) {
    if (K("batchnorm_forward_train", M(s), P(x), P(g), P(b), P(y), P(sm), P(si), P(rm), P(rv)))
        cpu_backend.batchnorm_forward_train(c, s, x, g, b, y, sm, si, rm, rv);
}
static void k_bn_infer(BackendCtx *c, const BnShape *s, const float *x, const float *g,
                       const float *b, const float *rm, const float *rv, float *y) {
    if (K("batchnorm_forward_infer", M(s), P(x), P(g), P(b), P(rm), P(rv), P(y)))
        cpu_backend.batchnorm_forward_infer(c, s, x, g, b, rm, rv, y);
}
static void k_bn_backward(BackendCtx *c, const BnShape *s, const float *x, const float *g,
                          const float *sm, const float *si, const float *dy, float *dx, float *dg,
                          float *db) {
    if (K("batchnorm_backward", M(s), P(x), P(g), P(sm), P(si), P(dy), P(dx), P(dg), P(db)))
        cpu_backend.batchnorm_backward(c, s, x, g, sm, si, dy, dx, dg, db);
}
static void k_bn_act_train(BackendCtx *c, const BnShape *s, const float *x, const float *g,
                           const float *b, const float *z, float *y, float *sm, float *si,
                           float *rm, float *rv) {
    if (K("bn_act_forward_train", M(s), P(x), P(g), P(b), P(z), P(y), P(sm), P(si), P(rm), P(rv)))
        cpu_backend.bn_act_forward_train(c, s, x, g, b, z, y, sm, si, rm, rv);
}
static void k_bn_act_infer(BackendCtx *c, const BnShape *s, const float *x, const float *g,
                           const float *b, const float *rm, const float *rv, const float *z,
                           float *y) {
    if (K("bn_act_forward_infer", M(s), P(x), P(g), P(b), P(rm), P(rv), P(z), P(y)))
        cpu_backend.bn_act_forward_infer(c, s, x, g, b, rm, rv, z, y);
}
static void k_bn_act_backward(BackendCtx *c, const BnShape *s, const float *x, const float *g,
                              const float *sm, const float *si, const float *y, float *dy,
                              float *dx, float *dz, float *dg, float *db) {
    if (K("bn_act_backward", M(s), P(x), P(g), P(sm), P(si), P(y), P(dy), P(dx), P(dz), P(dg),
          P(db)))
        cpu_backend.bn_act_backward(c, s, x, g, sm, si, y, dy, dx, dz, dg, db);
}
static void k_relu_forward(BackendCtx *c, size_t n, const float *x, float *y) {
    if (K("relu_forward", I(n), P(x), P(y))) cpu_backend.relu_forward(c, n, x, y);
}
static void k_relu_backward(BackendCtx *c, size_t n, const float *y, const float *dy, float *dx) {
    if (K("relu_backward", I(n), P(y), P(dy), P(dx))) cpu_backend.relu_backward(c, n, y, dy, dx);
}
static void k_dropout_forward(BackendCtx *c, const DropoutShape *s, const float *x, float *y,
                              uint8_t *mask) {
    if (K("dropout_forward", M(s), P(x), P(y), P(mask)))
        cpu_backend.dropout_forward(c, s, x, y, mask);
}
static void k_dropout_backward(BackendCtx *c, const DropoutShape *s, const uint8_t *mask,
                               const float *dy, float *dx) {
    if (K("dropout_backward", M(s), P(mask), P(dy), P(dx)))
        cpu_backend.dropout_backward(c, s, mask, dy, dx);
}
static void k_concat_forward(BackendCtx *c, int batch, int n, const float *const *xs,
                             const size_t *sizes, float *y) {
    if (K("concat_forward", I(batch), I(n), MN(xs, n * sizeof *xs), MN(sizes, n * sizeof *sizes),
          P(y)))
        cpu_backend.concat_forward(c, batch, n, xs, sizes, y);
}
static void k_concat_backward(BackendCtx *c, int batch, int n, const size_t *sizes, const float *dy,
                              float *const *dxs) {
    if (K("concat_backward", I(batch), I(n), MN(sizes, n * sizeof *sizes), P(dy),
          MN(dxs, n * sizeof *dxs)))
        cpu_backend.concat_backward(c, batch, n, sizes, dy, dxs);
}
static void k_add_forward(BackendCtx *c, size_t n, const float *a, const float *b, float *y) {
    if (K("add_forward", I(n), P(a), P(b), P(y))) cpu_backend.add_forward(c, n, a, b, y);
}
static void k_add_backward(BackendCtx *c, size_t n, const float *dy, float *da, float *db) {
    if (K("add_backward", I(n), P(dy), P(da), P(db))) cpu_backend.add_backward(c, n, dy, da, db);
}
static void k_axpy(BackendCtx *c, size_t n, float alpha, const float *x, float *y) {
    writes(y);
    if (K("axpy", I(n), D(alpha), P(x), P(y))) cpu_backend.axpy(c, n, alpha, x, y);
}
static void k_scale(BackendCtx *c, size_t n, float alpha, float *x) {
    writes(x);
    if (K("scale", I(n), D(alpha), P(x))) cpu_backend.scale(c, n, alpha, x);
}
static void k_embedding_forward(BackendCtx *c, const EmbeddingShape *s, const float *ids,
                                const float *w, float *y) {
    if (K("embedding_forward", M(s), P(ids), P(w), P(y)))
        cpu_backend.embedding_forward(c, s, ids, w, y);
}
static void k_embedding_backward(BackendCtx *c, const EmbeddingShape *s, const float *ids,
                                 const float *dy, float *dw) {
    if (K("embedding_backward", M(s), P(ids), P(dy), P(dw)))
        cpu_backend.embedding_backward(c, s, ids, dy, dw);
}
static void k_lstm_forward(BackendCtx *c, const LstmShape *s, const float *x, const float *w,
                           const float *b, float *y, void *reserve, void *work) {
    reads_weights("lstm_forward", w);
    if (K("lstm_forward", M(s), P(x), P(w), P(b), P(y), P(reserve), P(work)))
        cpu_backend.lstm_forward(c, s, x, w, b, y, reserve, work);
}
static void k_lstm_backward(BackendCtx *c, const LstmShape *s, const float *x, const float *w,
                            const float *y, const void *reserve, const float *dy, float *dx,
                            float *dw, float *db, void *work) {
    reads_weights("lstm_backward", w);
    if (K("lstm_backward", M(s), P(x), P(w), P(y), P(reserve), P(dy), P(dx), P(dw), P(db), P(work)))
        cpu_backend.lstm_backward(c, s, x, w, y, reserve, dy, dx, dw, db, work);
}
static void k_softmax_xent(BackendCtx *c, int n, int classes, const float *logits,
                           const int32_t *labels, float *dlogits, float *stats) {
    if (K("softmax_xent", I(n), I(classes), P(logits), P(labels), P(dlogits), P(stats)))
        cpu_backend.softmax_xent(c, n, classes, logits, labels, dlogits, stats);
}
static void k_sgd_update(BackendCtx *c, size_t n, float *p, const float *g, float *v, float lr,
                         float momentum, float wd) {
    writes(p);
    if (K("sgd_update", I(n), P(p), P(g), P(v), D(lr), D(momentum), D(wd)))
        cpu_backend.sgd_update(c, n, p, g, v, lr, momentum, wd);
}
static int k_all_finite(BackendCtx *c, size_t n, const float *x) {
    K("all_finite", I(n), P(x));
    host_waits("all_finite");
    return cpu_backend.all_finite(c, n, x);
}

const BackendOps *count_device_wrap(const BackendOps *be) {
    static BackendOps t;
    const char *path = getenv("DTBENCH_COUNT_DEVICE");
    if (be != &cpu_backend || !path || !*path) return be;
    if (t.name) return &t;
    C.path = path;
    t = cpu_backend;
    t.device_memory = 1;
    t.finalize = count_finalize, t.describe = count_describe;
    t.alloc = count_alloc, t.free = count_free, t.upload = count_upload;
    t.download = count_download, t.zero = count_zero, t.synchronize = count_synchronize;
    t.copy = count_copy, t.weights_ready = count_weights_ready;
    t.host_alloc = count_host_alloc, t.host_free = count_host_free;
    t.prefetch_upload = count_prefetch_upload, t.prefetch_wait = count_prefetch_wait;
    t.prefetch_release = count_prefetch_release, t.prefetch_fence = count_prefetch_fence;
    t.graph_capture = count_graph_capture, t.graph_launch = count_graph_launch;
    t.graph_free = count_graph_free;
    t.timer_record = count_timer_record, t.timer_elapsed = count_timer_elapsed;
    t.fc_forward = k_fc_forward, t.fc_backward = k_fc_backward;
    t.conv_forward = k_conv_forward, t.conv_backward = k_conv_backward;
    t.maxpool_forward = k_maxpool_forward, t.maxpool_backward = k_maxpool_backward;
    t.avgpool_forward = k_avgpool_forward, t.avgpool_backward = k_avgpool_backward;
    t.global_avgpool_forward = k_gap_forward, t.global_avgpool_backward = k_gap_backward;
    t.lrn_forward = k_lrn_forward, t.lrn_backward = k_lrn_backward;
    t.batchnorm_forward_train = k_bn_train, t.batchnorm_forward_infer = k_bn_infer;
    t.batchnorm_backward = k_bn_backward;
    t.bn_act_forward_train = k_bn_act_train, t.bn_act_forward_infer = k_bn_act_infer;
    t.bn_act_backward = k_bn_act_backward;
    t.relu_forward = k_relu_forward, t.relu_backward = k_relu_backward;
    t.dropout_forward = k_dropout_forward, t.dropout_backward = k_dropout_backward;
    t.concat_forward = k_concat_forward, t.concat_backward = k_concat_backward;
    t.add_forward = k_add_forward, t.add_backward = k_add_backward;
    t.axpy = k_axpy, t.scale = k_scale;
    t.embedding_forward = k_embedding_forward, t.embedding_backward = k_embedding_backward;
    t.lstm_forward = k_lstm_forward, t.lstm_backward = k_lstm_backward;
    t.softmax_xent = k_softmax_xent, t.sgd_update = k_sgd_update, t.all_finite = k_all_finite;
    return &t;
}
