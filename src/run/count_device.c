/* count_device.c - the counting fake device (see count_device.h): a configuration of the fake
 * device (kernels/fake/fake_device.h) over the CPU backend. Its hook counts each call into the
 * current iteration and appends a kernel's trace (its name and arguments folded) to the graph being
 * captured, where the kernel does not run, or checks it against the graph being replayed. The
 * batch prefetch and the graphs are its own, played on the CPU. Its timer reads as a GPU's does:
 * each elapsed time rounded to float milliseconds (cudaEventElapsedTime).
 *
 * DTBENCH_COUNT_DEVICE_STEP=S models a device that computes for S after each iteration's start
 * mark while the host queues in no time (a graphed GPU step): until then timer_done reports no
 * mark as happened and every host wait (synchronize, download, timer_elapsed, all_finite) sleeps
 * until then; the kernels themselves still run on the CPU when queued.
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
 *   idle_gap    prefetch_upload calls between MARK_BACKWARD and MARK_EXCHANGE while the device
 *               had nothing left to compute: host work a device would sit idle for, recorded as
 *               exchange
 *   captures, replays   graphs captured, graph launches */
#define _GNU_SOURCE /* nanosleep */
#include "count_device.h"
#include "clock.h"        /* defines: dt_now */
#include "driver_stage.h" /* defines: MARK_START, MARK_BACKWARD, MARK_UPDATE */
#include "fail.h"         /* defines: check_fail */
#include "fake_device.h"  /* defines: FakeDevice, FAKE_ARGS */

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

typedef struct {
    long launches, kernels, allocs, step_syncs, syncs, fences, casts, uploads, prefetches,
        overlapped, idle_gap, captures, replays, outside;
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
    int in_gap;       /* between MARK_BACKWARD and MARK_EXCHANGE */
    double step;      /* DTBENCH_COUNT_DEVICE_STEP: s the device computes an iteration (0: none) */
    double busy_until; /* dt_now() at which the iteration's queued work is done */
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
            "fences=%ld casts=%ld uploads=%ld prefetches=%ld overlapped=%ld idle_gap=%ld "
            "captures=%ld replays=%ld outside=%ld\n",
            (long)getpid(), C.iter, c->launches, c->kernels, c->allocs, c->step_syncs, c->syncs,
            c->fences, c->casts, c->uploads, c->prefetches, c->overlapped, c->idle_gap, c->captures,
            c->replays, c->outside);
    fclose(f);
}

/* ---- kernels: their trace, and what may not happen in a capture ----------------------------- */

/* A kernel call: counted, traced; returns 1 when it is to run (not captured). */
static int kernel(const FakeCall *k) {
    if (C.capture) {
        FakeGraph *g = C.capture;
        g->trace = realloc(g->trace, (g->n + 1) * sizeof *g->trace);
        g->names = realloc(g->names, (g->n + 1) * sizeof *g->names);
        if (!g->trace || !g->names) breach("out of memory");
        g->trace[g->n] = k->trace, g->names[g->n++] = k->name;
        return 0;
    }
    if (C.replay) {
        FakeGraph *g = C.replay;
        if (C.pos >= g->n || g->trace[C.pos] != k->trace) {
            char msg[256];
            snprintf(msg, sizeof msg,
                     "a graph replay differs from its capture at call %zu (%s now, %s captured): "
                     "an argument changed since the capture",
                     C.pos, k->name, C.pos < g->n ? g->names[C.pos] : "nothing");
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

static void no_capture(const char *what) {
    if (!C.capture) return;
    char msg[200];
    snprintf(msg, sizeof msg,
             "%s inside a graph capture (a GPU's capture fails there: no allocation, host "
             "synchronisation, upload or timer mark may sit in a captured step)",
             what);
    breach(msg);
}

/* DTBENCH_COUNT_DEVICE_STEP: the queued work is done busy_until (the host waits until then). */
static int device_idle(void) {
    return dt_now() >= C.busy_until;
}
static void wait_device(void) {
    for (double left; (left = C.busy_until - dt_now()) > 0;) {
        struct timespec ts = {(time_t)left, (long)((left - (double)(time_t)left) * 1e9)};
        nanosleep(&ts, NULL);
    }
}

static void host_waits(const char *what) {
    no_capture(what);
    wait_device();
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

static void mark(int slot) {
    if (slot == MARK_START) {
        report();
        memset(&C.c, 0, sizeof C.c);
        C.iter++, C.in_step = 1, C.in_iteration = 1, C.queued = 0;
        C.busy_until = dt_now() + C.step;
    } else if (slot == MARK_BACKWARD) {
        C.in_step = 0, C.in_gap = 1;
    } else if (slot == MARK_EXCHANGE) {
        C.in_gap = 0;
    } else if (slot == MARK_UPDATE) {
        C.in_iteration = 0;
    }
}

/* What each call counts as (the report's fields above): a member not named here is a kernel. A
 * kernel that writes the parameters, or reads them as a product's weights, names that argument
 * (its offset in FakeArgs_<member>; 0: none). */
enum { KERNEL, MEMORY, WAITS, SYNC, UPLOAD, MARK, CAST, FINITE, UNCOUNTED };
typedef struct {
    unsigned char kind;
    unsigned short writes, weights;
} Rule;
#define WRITES(m, arg) [BM_##m] = {KERNEL, offsetof(FakeArgs_##m, arg), 0}
#define WEIGHTS(m)     [BM_##m] = {KERNEL, 0, offsetof(FakeArgs_##m, w)}
/* clang-format off */
static const Rule RULES[BM_COUNT] = {
    [BM_alloc] = {MEMORY}, [BM_free] = {MEMORY}, [BM_host_alloc] = {MEMORY},
    [BM_host_free] = {MEMORY}, [BM_download] = {WAITS}, [BM_timer_elapsed] = {WAITS},
    [BM_synchronize] = {SYNC}, [BM_upload] = {UPLOAD, offsetof(FakeArgs_upload, dst_dev), 0},
    [BM_timer_record] = {MARK}, [BM_weights_ready] = {CAST}, [BM_all_finite] = {FINITE},
    WRITES(zero, p), WRITES(copy, dst), WRITES(axpy, y), WRITES(scale, x), WRITES(scale_by, x),
    WRITES(sgd_update, p), WRITES(adamw_update, p),
    WEIGHTS(fc_forward), WEIGHTS(fc_backward), WEIGHTS(conv_forward), WEIGHTS(conv_backward),
    WEIGHTS(lstm_forward), WEIGHTS(lstm_backward),
    /* queries, the lifetime, and the prefetch and graphs (below), which check themselves */
    [BM_precision_ok] = {UNCOUNTED}, [BM_act_format_for] = {UNCOUNTED},
    [BM_activation_format] = {UNCOUNTED}, [BM_init] = {UNCOUNTED}, [BM_finalize] = {UNCOUNTED},
    [BM_describe] = {UNCOUNTED}, [BM_describe_kernels] = {UNCOUNTED},
    [BM_timer_done] = {UNCOUNTED},
    [BM_weights_layout] = {UNCOUNTED}, [BM_conv_workspace_bytes] = {UNCOUNTED},
    [BM_lstm_reserve_bytes] = {UNCOUNTED}, [BM_lstm_workspace_bytes] = {UNCOUNTED},
    [BM_prefetch_upload] = {UNCOUNTED}, [BM_prefetch_wait] = {UNCOUNTED},
    [BM_prefetch_release] = {UNCOUNTED}, [BM_prefetch_fence] = {UNCOUNTED},
    [BM_graph_capture] = {UNCOUNTED}, [BM_graph_launch] = {UNCOUNTED},
    [BM_graph_free] = {UNCOUNTED},
};
/* clang-format on */
static const void *arg_at(const FakeCall *k, size_t offset) {
    const void *p = NULL;
    if (offset) memcpy(&p, (const char *)k->args + offset, sizeof p);
    return p;
}

/* The fake device's hook: counts and checks the call. Returns 0 where the CPU's member is not to
 * run: a captured kernel, and what a CPU has nothing to do for (a wait for queued work, the 16-bit
 * weight copy). */
static int count_call(FakeCall *k) {
    const Rule *r = &RULES[k->member];
    writes(arg_at(k, r->writes));
    reads_weights(k->name, arg_at(k, r->weights));
    switch (r->kind) {
    case MEMORY:
        memory(k->name);
        return 1;
    case WAITS:
    case SYNC:
        host_waits(k->name);
        return r->kind == WAITS;
    case UPLOAD:
        no_capture(k->name);
        C.c.uploads++;
        return 1;
    case MARK:
        no_capture(k->name);
        mark(FAKE_ARGS(k, timer_record)->slot);
        return 1;
    case CAST:
        if (kernel(k)) {
            if (C.in_iteration) C.c.casts++;
            C.params = FAKE_ARGS(k, weights_ready)->params;
            C.nparams = FAKE_ARGS(k, weights_ready)->n, C.params_changed = 0;
        }
        return 0;
    case FINITE:
        kernel(k);
        host_waits(k->name);
        return 1;
    case UNCOUNTED:
        return 1;
    default:
        return kernel(k);
    }
}

/* ---- lifetime, the timer --------------------------------------------------------------------- */

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
/* As a GPU's timer reads (cudaEventElapsedTime): float milliseconds, each reading rounded on
 * its own. */
static double count_timer_elapsed(BackendCtx *c, int a, int b) {
    return 1e-3 * (double)(float)(1e3 * cpu_backend.timer_elapsed(c, a, b));
}
/* Every mark of the iteration happens when its work is done (DTBENCH_COUNT_DEVICE_STEP). */
static int count_timer_done(BackendCtx *c, int slot) {
    (void)c, (void)slot;
    return device_idle();
}

/* ---- batch prefetch: copies deferred until the compute stream waits for them ---------------- */

static void *count_host_alloc(BackendCtx *c, size_t bytes) {
    return cpu_backend.alloc(c, bytes);
}
static void count_host_free(BackendCtx *c, void *p) {
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
    if (C.in_gap && device_idle()) C.c.idle_gap++;
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

/* clang-format off */
static const FakeDevice COUNT = {
    .inner = &cpu_backend, .before = count_call,
    .over = {.device_memory = 1, .finalize = count_finalize, .describe = count_describe,
             .timer_elapsed = count_timer_elapsed, .timer_done = count_timer_done,
             .host_alloc = count_host_alloc, .host_free = count_host_free,
             .prefetch_upload = count_prefetch_upload, .prefetch_wait = count_prefetch_wait,
             .prefetch_release = count_prefetch_release, .prefetch_fence = count_prefetch_fence,
             .graph_capture = count_graph_capture, .graph_launch = count_graph_launch,
             .graph_free = count_graph_free},
};
/* clang-format on */

const BackendOps *count_device_wrap(const BackendOps *be) {
    static BackendOps t;
    const char *path = getenv("DTBENCH_COUNT_DEVICE");
    if (be != &cpu_backend || !path || !*path) return be;
    if (!t.name) {
        const char *step = getenv("DTBENCH_COUNT_DEVICE_STEP");
        C.path = path, C.step = step ? atof(step) : 0.0;
        fake_device_table(&COUNT, &t);
    }
    return &t;
}
