/* tensor_group.h - the collectives of a tensor group (--parallel tensor): the allreduce the
 * model calls between layers (ModelTensor in model.h), through comm/'s MPI collectives on the
 * group's communicator, timed and counted for the iteration's record (tp_comm, tp_bytes). Host
 * memory only: the resolver refuses --parallel tensor on a device. */
#ifndef DTBENCH_TENSOR_GROUP_H
#define DTBENCH_TENSOR_GROUP_H

#include "backend.h"
#include "model.h"

#include <mpi.h>

typedef struct TensorGroup TensorGroup;

/* The group of the ranks of comm (one rank's, collective over comm), with *tp filled for
 * model_build_tensor: its size, this rank's place and the allreduce. */
TensorGroup *tensor_group_create(MPI_Comm comm, const BackendOps *be, BackendCtx *ctx,
                                 ModelTensor *tp);
/* The seconds, bytes and number of the allreduces since the last call (any pointer may be NULL: the
 * counts are dropped), then starts counting anew. */
void tensor_group_take(TensorGroup *g, double *seconds, double *bytes, double *calls);
void tensor_group_free(TensorGroup *g);

#endif
