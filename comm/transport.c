/* transport.c - the one place a strategy's bucket engine is built (exchange_engine, exchange.h):
 * the transport the run asks for (mpi when none) over the strategy's communicator, with the run's
 * backend, device collectives, wire type and progress mode; and the set-up of a Coll that every
 * transport shares (transport_coll, transport.h). */
#include "exchange.h"
#include "grad_cast.h"
#include "mpi_check.h"

Coll *transport_coll(const CollOps *ops, MPI_Comm comm, const TransportConfig *cfg,
                     int device_memory) {
    grad_wire_check(ops, cfg->grad_dtype);
    const CollSettings s = {.device_memory = device_memory,
                            .wire = cfg->grad_dtype,
                            .progress_thread = cfg->progress_thread && ops->progress_thread};
    return ops->create(comm, cfg->be, cfg->ctx, &s);
}

/* Who scales by 1/P: where the collectives average for free (NCCL's ncclAvg), they do; else a
 * strategy that can hand the factor on (grad_scale) gets the sum, since scaling it costs a pass
 * over every bucket while folding 1/P into the learning rate costs nothing (src/run/driver.c). */
BucketEngine *exchange_engine(const ExchangeConfig *cfg, MPI_Comm comm, const Topology *topo,
                              int blocking, double *grad_scale) {
    const TransportOps *ops = cfg->transport ? cfg->transport : &mpi_transport;
    int P;
    MPI_CHECK(MPI_Comm_size(comm, &P));
    const int sum = grad_scale && !ops->averages_free;
    if (grad_scale) *grad_scale = sum ? 1.0f / (float)P : 1.0f;
    TransportConfig tc = {.comm = comm,
                          .topo = topo,
                          .be = cfg->be,
                          .ctx = cfg->ctx,
                          .device_coll = cfg->device_coll,
                          .blocking = blocking,
                          .scale = sum ? 1.0f : 1.0f / (float)P,
                          .grad_dtype = cfg->grad_dtype,
                          .progress_thread = cfg->progress_thread};
    return ops->create(&tc);
}
