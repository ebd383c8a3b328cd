/* grad_cast.c - the gradient exchange's wire type: fp32 <-> bf16/fp16 conversions and the MPI
 * datatype and sum for them (see grad_cast.h). The conversions work on the bit patterns with
 * integer arithmetic, so they do not depend on the FPU's rounding mode or on flush-to-zero;
 * tests/test_grad_cast.c checks them against a naive reference on every 2-byte pattern. */
#include "grad_cast.h"
#include "half_bits.h" /* defines: gc_bf16_from_float ... (shared with the GPU and kernels/) */
#include "mpi_check.h" /* defines: MPI_CHECK, usage_check_all */
#include "alloc.h"     /* defines: xmalloc, xcalloc */

#include <stdlib.h>
#include <string.h>

static const char *const NAMES[] = {"fp32", "bf16", "fp16"};

const char *grad_dtype_name(GradDtype dt) {
    return (unsigned)dt < 3 ? NAMES[dt] : "?";
}

int grad_dtype_parse(const char *name) {
    for (int i = 0; i < 3; i++)
        if (name && !strcmp(name, NAMES[i])) return i;
    return -1;
}

size_t grad_dtype_size(GradDtype dt) {
    return dt == GRAD_FP32 ? 4 : 2;
}

uint16_t grad_bf16_from_float(float x) {
    return gc_bf16_from_float(x);
}
float grad_bf16_to_float(uint16_t h) {
    return gc_bf16_to_float(h);
}
uint16_t grad_fp16_from_float(float x) {
    return gc_fp16_from_float(x);
}
float grad_fp16_to_float(uint16_t h) {
    return gc_fp16_to_float(h);
}

/* Loops in blocks of 16 with a fixed trip count, which GCC's -O2 (its "very cheap" cost model:
 * no epilogue allowed) vectorizes, then the tail: about 4x faster here than the plain loop. */
#define BLOCKED(i, n, stmt)                                                                        \
    do {                                                                                           \
        size_t i = 0;                                                                              \
        for (; i + 16 <= (n); i += 16)                                                             \
            for (size_t blk_ = i, i = blk_; i < blk_ + 16; i++)                                    \
                stmt;                                                                              \
        for (; i < (n); i++)                                                                       \
            stmt;                                                                                  \
    } while (0)

void grad_pack(GradDtype dt, uint16_t *restrict wire, const float *restrict src, size_t n) {
    if (dt == GRAD_BF16)
        BLOCKED(i, n, wire[i] = gc_bf16_from_float(src[i]));
    else
        BLOCKED(i, n, wire[i] = gc_fp16_from_float(src[i]));
}

void grad_unpack(GradDtype dt, float *restrict dst, const uint16_t *restrict wire, size_t n,
                 float scale) {
    if (dt == GRAD_BF16)
        BLOCKED(i, n, dst[i] = gc_bf16_to_float(wire[i]) * scale);
    else
        BLOCKED(i, n, dst[i] = gc_fp16_to_float(wire[i]) * scale);
}

void grad_round(GradDtype dt, float *x, size_t n) {
    if (dt == GRAD_BF16)
        BLOCKED(i, n, x[i] = gc_bf16_to_float(gc_bf16_from_float(x[i])));
    else if (dt == GRAD_FP16)
        BLOCKED(i, n, x[i] = gc_fp16_to_float(gc_fp16_from_float(x[i])));
}

/* ---- MPI ------------------------------------------------------------------------------------- */

/* inout[i] = round(in[i] + inout[i]): the fp32 sum of two 2-byte values rounds once more to the
 * wire type (commutative, so MPI may combine in any order it likes). Through fp32 chunks of 256
 * values, so that each step is one of the vectorized loops above. */
static void sum_wire(GradDtype dt, const uint16_t *in, uint16_t *inout, int len) {
    float x[256], y[256];
    for (size_t i = 0, n = (size_t)len; i < n; i += 256) {
        size_t m = n - i < 256 ? n - i : 256;
        grad_unpack(dt, x, in + i, m, 1.0f);
        grad_unpack(dt, y, inout + i, m, 1.0f);
        BLOCKED(k, m, x[k] += y[k]);
        grad_pack(dt, inout + i, x, m);
    }
}

static void sum_bf16(void *in, void *inout, int *len, MPI_Datatype *type) {
    (void)type;
    sum_wire(GRAD_BF16, in, inout, *len);
}

static void sum_fp16(void *in, void *inout, int *len, MPI_Datatype *type) {
    (void)type;
    sum_wire(GRAD_FP16, in, inout, *len);
}

static MPI_Datatype wire_type = MPI_DATATYPE_NULL;
static MPI_Op ops[3] = {MPI_OP_NULL, MPI_OP_NULL, MPI_OP_NULL};

/* Called by MPI_Finalize (MPI_COMM_SELF's attributes are deleted first). */
static int free_at_finalize(MPI_Comm comm, int key, void *val, void *extra) {
    (void)comm, (void)key, (void)val, (void)extra;
    for (int i = 0; i < 3; i++)
        if (ops[i] != MPI_OP_NULL) MPI_Op_free(&ops[i]);
    if (wire_type != MPI_DATATYPE_NULL) MPI_Type_free(&wire_type);
    return MPI_SUCCESS;
}

static void make_mpi_objects(void) {
    if (wire_type != MPI_DATATYPE_NULL) return;
    MPI_CHECK(MPI_Type_contiguous(2, MPI_BYTE, &wire_type));
    MPI_CHECK(MPI_Type_commit(&wire_type));
    MPI_CHECK(MPI_Op_create(sum_bf16, 1, &ops[GRAD_BF16]));
    MPI_CHECK(MPI_Op_create(sum_fp16, 1, &ops[GRAD_FP16]));
    int key;
    MPI_CHECK(MPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, free_at_finalize, &key, NULL));
    MPI_CHECK(MPI_Comm_set_attr(MPI_COMM_SELF, key, NULL));
    MPI_CHECK(MPI_Comm_free_keyval(&key)); /* the attribute keeps it until MPI_Finalize */
}

MPI_Datatype grad_mpi_type(GradDtype dt) {
    if (dt == GRAD_FP32) return MPI_FLOAT;
    make_mpi_objects();
    return wire_type;
}

MPI_Op grad_mpi_sum(GradDtype dt) {
    if (dt == GRAD_FP32) return MPI_SUM;
    make_mpi_objects();
    return ops[dt];
}

void grad_wire_check(const CollOps *ops, int dt) {
    if (dt == GRAD_FP32) return;
    usage_check_all(ops->wire_types,
                    "--grad-dtype: '%s' is not accepted by the %s collectives (accepted: fp32)",
                    grad_dtype_name((GradDtype)dt), ops->name);
}

uint16_t *grad_wire_reserve(GradWire *w, size_t n) {
    if (n > w->cap) {
        free(w->buf);
        w->buf = xmalloc((n ? n : 1) * sizeof(uint16_t));
        w->cap = n;
    }
    return w->buf;
}

void grad_wire_free(GradWire *w) {
    free(w->buf);
    w->buf = NULL, w->cap = 0;
}
