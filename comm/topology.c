/* topology.c - node grouping of a communicator's ranks (see topology.h). */
#include "topology.h"
#include "mpi_check.h" /* defines: MPI_CHECK */

/* Fills t from comm and node_comm (the ranks of comm on this node, already split). */
static void complete(Topology *t, MPI_Comm comm) {
    t->comm = comm;
    MPI_CHECK(MPI_Comm_rank(comm, &t->rank));
    MPI_CHECK(MPI_Comm_size(comm, &t->nranks));
    MPI_CHECK(MPI_Comm_rank(t->node_comm, &t->local_rank));
    MPI_CHECK(MPI_Comm_size(t->node_comm, &t->local_size));
    MPI_CHECK(
        MPI_Comm_split(comm, t->local_rank == 0 ? 0 : MPI_UNDEFINED, t->rank, &t->leader_comm));
    /* Node index = rank of the node's leader among the leaders, broadcast within the node. */
    int node = 0;
    t->nnodes = 0;
    if (t->leader_comm != MPI_COMM_NULL) {
        MPI_CHECK(MPI_Comm_rank(t->leader_comm, &node));
        MPI_CHECK(MPI_Comm_size(t->leader_comm, &t->nnodes));
    }
    MPI_CHECK(MPI_Bcast(&node, 1, MPI_INT, 0, t->node_comm));
    MPI_CHECK(MPI_Bcast(&t->nnodes, 1, MPI_INT, 0, t->node_comm));
    t->node = node;
}

void topology_init(Topology *t, int ranks_per_node) {
    int rank;
    MPI_CHECK(MPI_Comm_rank(MPI_COMM_WORLD, &rank));
    if (ranks_per_node > 0)
        MPI_CHECK(MPI_Comm_split(MPI_COMM_WORLD, rank / ranks_per_node, rank, &t->node_comm));
    else
        MPI_CHECK(MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL,
                                      &t->node_comm));
    complete(t, MPI_COMM_WORLD);
    /* The GPU follows the rank's place on its host, whatever --ranks-per-node emulates. */
    MPI_Comm host;
    MPI_CHECK(
        MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &host));
    MPI_CHECK(MPI_Comm_rank(host, &t->host_local_rank));
    MPI_CHECK(MPI_Comm_size(host, &t->host_local_size));
    MPI_CHECK(MPI_Comm_free(&host));
}

void topology_derive(Topology *t, MPI_Comm comm, const Topology *job) {
    int rank;
    MPI_CHECK(MPI_Comm_rank(comm, &rank));
    MPI_CHECK(MPI_Comm_split(comm, job->node, rank, &t->node_comm));
    complete(t, comm);
    t->host_local_rank = job->host_local_rank; /* only COMM_WORLD's split may ask the host */
    t->host_local_size = job->host_local_size;
}

void topology_free(Topology *t) {
    if (t->leader_comm != MPI_COMM_NULL) MPI_Comm_free(&t->leader_comm);
    MPI_Comm_free(&t->node_comm);
}
