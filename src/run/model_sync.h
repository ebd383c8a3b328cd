/* model_sync.h - model state that ranks agree on outside the gradient exchange: the batch-norm
 * running statistics, which every replica updates from its own batches, are averaged over the
 * replicas before an evaluation, so that all of them evaluate the same model. */
#ifndef DTBENCH_MODEL_SYNC_H
#define DTBENCH_MODEL_SYNC_H

#include "model.h"

#include <mpi.h>

/* Averages m->buffers over comm (collective; a no-op without such state or with one rank). */
void model_average_buffers(Model *m, MPI_Comm comm);

#endif
