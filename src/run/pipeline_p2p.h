/* pipeline_p2p.h - the pipeline's transport between neighbouring stages: one micro-batch's
 * activations (forward) or gradients (backward), each preceded by a small header, sent and
 * received without blocking. This pair of files is the only place that moves pipeline data: MPI
 * point-to-point on host memory now; an NCCL send/recv version for the GPU backend replaces it.
 *
 * The header carries what has to travel along the pipeline with the data: the time the sender
 * handed the payload over (on the aligned clock, so the receiver can tell waiting for its
 * neighbour from the transfer itself), the stop vote, and (backward) the micro-batch's loss. */
#ifndef DTBENCH_PIPELINE_P2P_H
#define DTBENCH_PIPELINE_P2P_H

#include <mpi.h>
#include <stddef.h>

typedef struct {
    double send_time; /* aligned clock (s since rank 0's t0) when the payload was handed over */
    double stop;      /* 1: some rank upstream of the message asked to stop */
    double loss;      /* backward: the micro-batch's mean loss, from the last stage */
    double reserved;
} P2pHeader;

typedef struct {
    P2pHeader header;
    MPI_Request req[2]; /* header, payload */
    size_t bytes;       /* payload */
} P2pMessage;

/* Message tags: micro-batch j's header and payload, forward or backward. */
int p2p_tag(int backward, int microbatch, int payload);
#define P2P_MAX_MICROBATCHES 4096 /* tags stay below MPI's guaranteed 32767 */

/* Posts the receive of a header and `floats` floats into buf from peer. */
void p2p_post_recv(P2pMessage *msg, float *buf, size_t floats, int peer, int backward,
                   int microbatch, MPI_Comm comm);
/* Sends msg->header (filled by the caller) and `floats` floats of buf to peer, without waiting. */
void p2p_send(P2pMessage *msg, const float *buf, size_t floats, int peer, int backward,
              int microbatch, MPI_Comm comm);
/* Waits for a posted message (receive or send). */
void p2p_wait(P2pMessage *msg);
/* Lets MPI progress the given messages (sends in flight while the stage computes). */
void p2p_progress(P2pMessage *msgs, int n);

#endif
