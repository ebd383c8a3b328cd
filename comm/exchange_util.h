/* exchange_util.h - pieces the strategies share (defined in comm/sync.c). */
#ifndef DTBENCH_EXCHANGE_UTIL_H
#define DTBENCH_EXCHANGE_UTIL_H

#include <mpi.h>
#include <stddef.h>

/* The stop vote: MAX of `mine` over comm into *any; returns the seconds spent blocked in it
 * (the arrival imbalance of the ranks). */
double exchange_vote(MPI_Comm comm, int mine, int *any);
/* In-place average of grads[n] over the nranks of comm, in buckets of `bucket` floats. */
void exchange_average(MPI_Comm comm, int nranks, float *grads, size_t n, size_t bucket);

#endif
