/* fake_device.h - a backend made of another, for tests without a GPU: every BackendOps member is
 * forwarded to an inner backend (the CPU's), except those the configuration replaces, and a hook
 * sees each call first, with its name, its arguments by name and a trace of them. The wrappers
 * are generated from the list of members (backend_members.h). Its configurations:
 *   - the counting device (src/run/count_device.c, DTBENCH_COUNT_DEVICE): device memory declared,
 *     the hook counts and checks every call, prefetch and graphs played on the CPU;
 *   - the CPU posing as a device (comm/as_device.c, DTBENCH_CPU_AS_DEVICE): device memory
 *     declared, the hook counts the bytes moved;
 *   - activations in another format (tests/act_fake.c): the layer kernels replaced by conversions
 *     around the CPU's.
 * The wrappers serve one configuration per process (a second one stops the program): every test
 * program and run uses one fake device at most. */
#ifndef DTBENCH_FAKE_DEVICE_H
#define DTBENCH_FAKE_DEVICE_H

#include "backend_members.h" /* defines: BACKEND_MEMBERS, BackendMember (BM_*) */

#include <stdint.h>

/* FAKE_EACH(f, a, b, ...): f(a) f(b) ..., up to 12 (the most parameters a member has) */
#define FAKE_EACH(f, ...)                                                                          \
    FAKE_PICK(__VA_ARGS__, FAKE_E12, FAKE_E11, FAKE_E10, FAKE_E9, FAKE_E8, FAKE_E7, FAKE_E6,       \
              FAKE_E5, FAKE_E4, FAKE_E3, FAKE_E2, FAKE_E1, )                                       \
    (f, __VA_ARGS__)
#define FAKE_PICK(_1, _2, _3, _4, _5, _6, _7, _8, _9, _10, _11, _12, e, ...) e

#define FAKE_E1(f, a)       f(a)
#define FAKE_E2(f, a, ...)  f(a) FAKE_E1(f, __VA_ARGS__)
#define FAKE_E3(f, a, ...)  f(a) FAKE_E2(f, __VA_ARGS__)
#define FAKE_E4(f, a, ...)  f(a) FAKE_E3(f, __VA_ARGS__)
#define FAKE_E5(f, a, ...)  f(a) FAKE_E4(f, __VA_ARGS__)
#define FAKE_E6(f, a, ...)  f(a) FAKE_E5(f, __VA_ARGS__)
#define FAKE_E7(f, a, ...)  f(a) FAKE_E6(f, __VA_ARGS__)
#define FAKE_E8(f, a, ...)  f(a) FAKE_E7(f, __VA_ARGS__)
#define FAKE_E9(f, a, ...)  f(a) FAKE_E8(f, __VA_ARGS__)
#define FAKE_E10(f, a, ...) f(a) FAKE_E9(f, __VA_ARGS__)
#define FAKE_E11(f, a, ...) f(a) FAKE_E10(f, __VA_ARGS__)
#define FAKE_E12(f, a, ...) f(a) FAKE_E11(f, __VA_ARGS__)

#define FAKE_LIST(...)         __VA_ARGS__ /* (a, b) -> a, b */
#define FAKE_REST(first, ...)  __VA_ARGS__ /* all but the first */
#define FAKE_APPLY(macro, ...) macro(__VA_ARGS__)

/* FakeArgs_<member>: one call's arguments, named as its parameters. */
#define FAKE_FIELD(decl) decl;
#define FAKE_ARGS_TYPE(ret, m, params, names)                                                      \
    typedef struct {                                                                               \
        FAKE_EACH(FAKE_FIELD, FAKE_LIST params)                                                    \
    } FakeArgs_##m;
BACKEND_MEMBERS(FAKE_ARGS_TYPE)

typedef struct {
    BackendMember member;
    const char *name; /* the member's */
    /* Its FakeArgs_<member> (FAKE_ARGS(call, member)->x): the member runs with these, so that a
     * hook may change them. */
    void *args;
    /* The name and the arguments folded (FNV-1a): pointers and scalars by value, shapes and
     * concatenation's arrays (xs, sizes, dxs) by content; equal for two calls that a captured
     * graph could not tell apart. */
    uint64_t trace;
} FakeCall;
#define FAKE_ARGS(call, m) ((FakeArgs_##m *)(call)->args)

typedef struct {
    const BackendOps *inner;
    /* Members that run instead of the inner's (NULL: the inner's); name, reads: the table's
     * where set; device_memory 1: the table declares device memory. */
    BackendOps over;
    /* Sees every call first; returns 1 to run it, 0 when it is done (skipped, the member then
     * returning zero, or run by the hook itself through fake_device_run). NULL: every call runs. */
    int (*before)(FakeCall *call);
} FakeDevice;

/* Fills t: the wrappers of d (NULL where neither over nor inner has the member). */
void fake_device_table(const FakeDevice *d, BackendOps *t);
/* Runs the call's member (the replacement or the inner one) with call->args, for a hook that
 * works around it (converts its arguments, then its results); what it returns is dropped. */
void fake_device_run(FakeCall *call);

#endif
