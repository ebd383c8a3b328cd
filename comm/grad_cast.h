/* grad_cast.h - the gradient exchange's wire type (--grad-dtype fp32, bf16, fp16): conversions
 * between fp32 and the 2-byte types, and the MPI datatype and reduction for them.
 *
 * fp32 gradients are cast into a wire buffer per bucket, reduced in the wire type and cast back
 * (comm/coll_mpi.c on host memory, comm/coll_nccl.c on the GPU with NCCL's own bf16/fp16).
 * Rounding is IEEE round-to-nearest-even in both types. bf16 has fp32's range, so only values
 * within half a bf16 step of FLT_MAX overflow (to inf, as an fp32 sum would). fp16 is IEEE
 * binary16 with subnormals: magnitudes from 65520 up become inf (not saturated: an overflow shows
 * up as inf in the update, like an fp32 overflow, instead of a silently clipped gradient), below
 * 2^-25 zero; NaN stays NaN (quiet, sign kept). No loss scaling is applied here (that is
 * --precision's business): fp16 gradients under ~6e-8 are lost.
 *
 * MPI has no 2-byte float type: the wire type is a contiguous type of 2 bytes and the sum a
 * commutative user operation that adds in fp32 and rounds back (each partial sum is rounded to
 * the wire type, as NCCL's own bf16/fp16 reductions do). Both are made on first use and freed at
 * MPI_Finalize (an attribute of MPI_COMM_SELF). */
#ifndef DTBENCH_GRAD_CAST_H
#define DTBENCH_GRAD_CAST_H

#include "coll.h"

#include <mpi.h>
#include <stddef.h>
#include <stdint.h>

typedef enum { GRAD_FP32 = 0, GRAD_BF16 = 1, GRAD_FP16 = 2 } GradDtype;

#define GRAD_DTYPE_NAMES "fp32,bf16,fp16"

/* "fp32", "bf16", "fp16" */
const char *grad_dtype_name(GradDtype dt);
/* The GradDtype named (one of GRAD_DTYPE_NAMES), -1 for any other name */
int grad_dtype_parse(const char *name);
/* bytes per gradient on the wire: 4 or 2 */
size_t grad_dtype_size(GradDtype dt);

/* One value (round to nearest even; see above for overflow and NaN). */
uint16_t grad_bf16_from_float(float x);
float grad_bf16_to_float(uint16_t h);
uint16_t grad_fp16_from_float(float x);
float grad_fp16_to_float(uint16_t h);

/* wire[n] = cast of src[n] (dt bf16 or fp16) */
void grad_pack(GradDtype dt, uint16_t *wire, const float *src, size_t n);
/* dst[n] = scale * value of wire[n] (the product in fp32) */
void grad_unpack(GradDtype dt, float *dst, const uint16_t *wire, size_t n, float scale);
/* x[n] = x rounded to the wire type (what the owner of a block keeps of it: every rank must hold
 * the same values) */
void grad_round(GradDtype dt, float *x, size_t n);

/* The MPI datatype of one wire value (MPI_FLOAT for fp32) and its SUM (MPI_SUM for fp32). */
MPI_Datatype grad_mpi_type(GradDtype dt);
MPI_Op grad_mpi_sum(GradDtype dt);

/* A usage error (exit 2 on every rank) when ops' collectives cannot use wire type dt
 * (CollOps.wire_types); nothing for fp32. */
void grad_wire_check(const CollOps *ops, int dt);

/* A wire buffer that grows (kept across iterations by its owner). */
typedef struct {
    uint16_t *buf;
    size_t cap; /* values */
} GradWire;
uint16_t *grad_wire_reserve(GradWire *w, size_t n);
void grad_wire_free(GradWire *w);

#endif
