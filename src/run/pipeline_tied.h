/* pipeline_tied.h - a table two pipeline stages share: a language model's token embedding
 * (stage 0) and the head that multiplies by it (the last stage, on its copy: Model.tied_w), as
 * Megatron-LM keeps GPT's embedding on its first and last stages. Each iteration:
 *   1. the last stage sends the head's gradient of the table, summed over the micro-batches
 *      (Model.tied_grad), once its last backward has run;
 *   2. stage 0 receives it before its last backward, which adds it to the table's gradient
 *      (Model.tied_pending), so the table's bucket is whole when the exchange starts, with
 *      --overlap too;
 *   3. after the update, stage 0 sends the updated table and the last stage copies it.
 * The replicas' exchange averages the table's gradient on stage 0 as any other; the last stage's
 * copy is never updated by its own optimizer: it is stage 0's table, one step later. Device
 * buffers go through a host copy. On ranks without such a table every call returns at once. */
#ifndef DTBENCH_PIPELINE_TIED_H
#define DTBENCH_PIPELINE_TIED_H

#include "model.h"
#include "pipeline.h"

#include <mpi.h>

typedef struct {
    float *host;      /* device backends: the table's host copy; NULL: none, or host memory */
    MPI_Request send; /* 1.'s send, completed by tied_wait */
} TiedLink;

void tied_init(TiedLink *t, const Pipeline *p, const Model *m);
void tied_free(TiedLink *t);
/* 1. (the last stage; after its last backward) */
void tied_send_grad(TiedLink *t, const Pipeline *p, const Model *m);
void tied_wait(TiedLink *t);
/* 2. (stage 0; before its last backward) */
void tied_recv_grad(TiedLink *t, const Pipeline *p, Model *m);
/* 3. (stage 0 and the last stage; after the update) */
void tied_refresh(TiedLink *t, const Pipeline *p, Model *m);

#endif
