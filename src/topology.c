/* topology.c - node grouping of the ranks (see topology.h). */
#include "topology.h"
#include "check.h"

void topology_init(Topology *t, int ranks_per_node) {
    MPI_CHECK(MPI_Comm_rank(MPI_COMM_WORLD, &t->rank));
    MPI_CHECK(MPI_Comm_size(MPI_COMM_WORLD, &t->nranks));
    if (ranks_per_node > 0)
        MPI_CHECK(MPI_Comm_split(MPI_COMM_WORLD, t->rank / ranks_per_node, t->rank, &t->node_comm));
    else
        MPI_CHECK(MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, t->rank, MPI_INFO_NULL,
                                      &t->node_comm));
    MPI_CHECK(MPI_Comm_rank(t->node_comm, &t->local_rank));
    MPI_Comm host;
    MPI_CHECK(MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, t->rank, MPI_INFO_NULL,
                                  &host));
    MPI_CHECK(MPI_Comm_rank(host, &t->host_local_rank));
    MPI_CHECK(MPI_Comm_free(&host));
    MPI_CHECK(MPI_Comm_size(t->node_comm, &t->local_size));
    MPI_CHECK(MPI_Comm_split(MPI_COMM_WORLD, t->local_rank == 0 ? 0 : MPI_UNDEFINED, t->rank,
                             &t->leader_comm));
    /* Node index = rank of the node's leader among the leaders, broadcast within the node. */
    int node = 0;
    if (t->leader_comm != MPI_COMM_NULL) {
        MPI_CHECK(MPI_Comm_rank(t->leader_comm, &node));
        MPI_CHECK(MPI_Comm_size(t->leader_comm, &t->nnodes));
    }
    MPI_CHECK(MPI_Bcast(&node, 1, MPI_INT, 0, t->node_comm));
    MPI_CHECK(MPI_Bcast(&t->nnodes, 1, MPI_INT, 0, t->node_comm));
    t->node = node;
}

void topology_free(Topology *t) {
    if (t->leader_comm != MPI_COMM_NULL) MPI_Comm_free(&t->leader_comm);
    MPI_Comm_free(&t->node_comm);
}
