/* tensor_group.c - the tensor group's allreduces (see tensor_group.h), on comm/'s MPI Coll in
 * its blocking form: the model waits for each one (it reads the sum at once), so nothing is
 * gained by the non-blocking one. */
#include "tensor_group.h"
#include "coll.h"
#include "alloc.h" /* defines: xcalloc */
#include "clock.h" /* defines: dt_now */

#include <stdlib.h>

struct TensorGroup {
    Coll *coll;
    double seconds, bytes, calls; /* since the last tensor_group_take */
};

/* ModelTensor.allreduce: buf[count] summed over the group, in place. */
static void group_allreduce(void *user, float *buf, size_t count) {
    TensorGroup *g = user;
    const double t = dt_now();
    coll_mpi.wait(g->coll, coll_mpi.allreduce(g->coll, buf, count, 1.0f));
    g->seconds += dt_now() - t;
    g->bytes += (double)count * sizeof(float);
    g->calls += 1.0;
}

TensorGroup *tensor_group_create(MPI_Comm comm, const BackendOps *be, BackendCtx *ctx,
                                 ModelTensor *tp) {
    TensorGroup *g = xcalloc(1, sizeof *g);
    g->coll = coll_mpi.create(comm, be, ctx, &(CollSettings){.device_memory = be->device_memory});
    if (coll_mpi.set_blocking) coll_mpi.set_blocking(g->coll, 1);
    *tp = (ModelTensor){
        .size = g->coll->size, .rank = g->coll->rank, .allreduce = group_allreduce, .user = g};
    return g;
}

void tensor_group_take(TensorGroup *g, double *seconds, double *bytes, double *calls) {
    if (seconds) *seconds = g->seconds;
    if (bytes) *bytes = g->bytes;
    if (calls) *calls = g->calls;
    g->seconds = g->bytes = g->calls = 0.0;
    (void)coll_mpi.hidden(g->coll); /* forgets the operations kept for the iteration */
}

void tensor_group_free(TensorGroup *g) {
    if (!g) return;
    coll_mpi.destroy(g->coll);
    free(g);
}
