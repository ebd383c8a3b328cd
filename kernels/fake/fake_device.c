/* fake_device.c - the fake device's wrappers (see fake_device.h), one per BackendOps member,
 * generated from backend_members.h: each gathers its arguments and their trace, asks the
 * configuration's hook, and runs the replacement or the inner backend's member. */
#include "fake_device.h"
#include "fail.h" /* defines: check_fail */

#include <string.h>

static const FakeDevice *dev; /* the process's configuration */

/* ---- the trace: FNV-1a over the name and each argument ------------------------------------ */

static uint64_t fnv(uint64_t h, const void *p, size_t n) {
    const unsigned char *b = p;
    for (size_t i = 0; i < n; i++)
        h = (h ^ b[i]) * 0x100000001b3ULL;
    return h;
}
/* An argument v of `size` bytes: by value, or, where `pointee` is not 0, the bytes it points to. */
static uint64_t fold(uint64_t h, const void *v, size_t size, size_t pointee) {
    if (!pointee) return fnv(h, v, size);
    const void *p;
    memcpy(&p, v, sizeof p);
    return p ? fnv(h, p, pointee) : fnv(h, "null", 4);
}
/* The bytes an argument points to that count: a shape's, the concatenation's arrays (ninputs
 * long: the parameter of that name in those wrappers, this 0 in the others). */
static const int ninputs = 0;
#define POINTEE(v)                                                                                 \
    _Generic((v),                                                                                  \
        const FcShape *: sizeof(FcShape),                                                          \
        const ConvShape *: sizeof(ConvShape),                                                      \
        const PoolShape *: sizeof(PoolShape),                                                      \
        const LrnShape *: sizeof(LrnShape),                                                        \
        const BnShape *: sizeof(BnShape),                                                          \
        const DropoutShape *: sizeof(DropoutShape),                                                \
        const EmbeddingShape *: sizeof(EmbeddingShape),                                            \
        const LstmShape *: sizeof(LstmShape),                                                      \
        const TokPosShape *: sizeof(TokPosShape),                                                  \
        const LayerNormShape *: sizeof(LayerNormShape),                                            \
        const AttentionShape *: sizeof(AttentionShape),                                            \
        const AdamWStep *: sizeof(AdamWStep),                                                      \
        const float *const *: (size_t)ninputs * sizeof(float *),                                   \
        float *const *: (size_t)ninputs * sizeof(float *),                                         \
        const size_t *: (size_t)ninputs * sizeof(size_t),                                          \
        default: (size_t)0)
#define FOLD(v) call.trace = fold(call.trace, &(v), sizeof(v), POINTEE(v));

/* ---- the wrappers ---------------------------------------------------------------------------- */

/* run_<member>: the replacement or the inner member, with the call's arguments */
#define ARG(v) , a->v
#define RUN(ret, m, params, names)                                                                 \
    static ret run_##m(FakeArgs_##m *a) {                                                          \
        return (dev->over.m ? dev->over.m : dev->inner->m)(                                        \
            FAKE_APPLY(FAKE_REST, FAKE_EACH(ARG, FAKE_LIST names)));                               \
    }
BACKEND_MEMBERS(RUN)

#define WRAPPER(ret, m, params, names)                                                             \
    static ret fd_##m params {                                                                     \
        FakeArgs_##m fd_args = {FAKE_LIST names};                                                  \
        FakeCall call = {BM_##m, #m, &fd_args, fnv(0xcbf29ce484222325ULL, #m, sizeof #m - 1)};     \
        FAKE_EACH(FOLD, FAKE_LIST names)                                                           \
        if (dev->before && !dev->before(&call)) return (ret)0;                                     \
        return run_##m(&fd_args);                                                                  \
    }
BACKEND_MEMBERS(WRAPPER)

void fake_device_run(FakeCall *call) {
#define RUN_CASE(ret, m, params, names)                                                            \
    case BM_##m:                                                                                   \
        (void)run_##m(call->args);                                                                 \
        return;
    switch (call->member) {
        BACKEND_MEMBERS(RUN_CASE)
    default:
        return;
    }
}

void fake_device_table(const FakeDevice *d, BackendOps *t) {
    if (dev && dev != d)
        check_fail(__FILE__, __LINE__, "fake device",
                   "a second fake device configuration in one process (the wrappers serve one)");
    dev = d;
    *t = *d->inner;
    if (d->over.name) t->name = d->over.name;
    if (d->over.reads) t->reads = d->over.reads;
    if (d->over.device_memory) t->device_memory = 1;
#define INSTALL(ret, m, params, names) t->m = d->over.m || d->inner->m ? fd_##m : NULL;
    BACKEND_MEMBERS(INSTALL)
}
