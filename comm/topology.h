/* topology.h - which rank of a communicator runs on which node. The job's nodes come from
 * MPI_COMM_TYPE_SHARED, or are groups of --ranks-per-node consecutive ranks of COMM_WORLD (so
 * tests can form several "nodes" on one host). A component given a sub-communicator (a pipeline
 * stage's replicas) derives that communicator's own topology with topology_derive: its ranks,
 * grouped by the job's node they run on. */
#ifndef DTBENCH_TOPOLOGY_H
#define DTBENCH_TOPOLOGY_H

#include <mpi.h>

typedef struct {
    MPI_Comm comm;    /* the ranks described (not owned) */
    int rank, nranks; /* in comm */
    int node, nnodes; /* this rank's node index among comm's nodes, node count */
    int local_rank, local_size;
    int host_local_rank; /* rank among the job's ranks on this HOST (MPI_COMM_TYPE_SHARED),
                          * whatever --ranks-per-node says: picks the GPU */
    int host_local_size; /* the job's ranks on this host */
    MPI_Comm node_comm;   /* ranks of comm on this node */
    MPI_Comm leader_comm; /* local rank 0 of every node (MPI_COMM_NULL elsewhere) */
} Topology;

/* The job's topology: collective over COMM_WORLD. ranks_per_node 0 = detect. */
void topology_init(Topology *t, int ranks_per_node);
/* comm's topology (collective over comm): its ranks grouped by their node in `job`, the
 * topology of a communicator containing comm (e.g. COMM_WORLD's). */
void topology_derive(Topology *t, MPI_Comm comm, const Topology *job);
void topology_free(Topology *t);

#endif
