/* topology.h - which rank runs on which node. Nodes come from MPI_COMM_TYPE_SHARED, or are
 * groups of --ranks-per-node consecutive ranks (so tests can form several "nodes" on one host). */
#ifndef DTBENCH_TOPOLOGY_H
#define DTBENCH_TOPOLOGY_H

#include <mpi.h>

typedef struct {
    int rank, nranks;
    int node, nnodes; /* this rank's node index, node count */
    int local_rank, local_size;
    int host_local_rank; /* rank among the ranks of this HOST (MPI_COMM_TYPE_SHARED), whatever
                          * --ranks-per-node says: picks the GPU */
    MPI_Comm node_comm;   /* ranks of this node */
    MPI_Comm leader_comm; /* local rank 0 of every node (MPI_COMM_NULL elsewhere) */
} Topology;

/* Collective over COMM_WORLD. ranks_per_node 0 = detect. */
void topology_init(Topology *t, int ranks_per_node);
void topology_free(Topology *t);

#endif
