/* pipeline.h - the layout of model parallelism: the layers split into K consecutive stages on K
 * ranks, the batch pipelined through them in micro-batches (in a schedule's order: schedule.h),
 * and data-parallel replicas of such a pipeline (hybrid). Data parallelism is the one-stage
 * layout: every rank a replica.
 *
 * Ranks: rank = replica * K + stage, so the stages of one replica are consecutive ranks (usually
 * one node). Two communicators: the replica's pipeline (activations forward, gradients backward
 * between stage k and k+1, src/run/pipeline_p2p.c) and, per stage, the R ranks holding that stage
 * (the exchange strategy averages their gradients, as in data parallelism).
 *
 * One iteration on every stage (src/run/driver.c): post the receives of all M micro-batches; run
 * the forward (receive, compute, send) and backward (receive, compute and add the parameter
 * gradients, send) steps in the schedule's order; wait for the sends; exchange among the stage's
 * replicas; update. The last stage scales each micro-batch's loss gradient by 1/M, so the summed
 * gradients are those of the mean loss over the replica's batch: the parameters follow the same
 * trajectory as one process training on the whole batch (batch norm excepted: it normalises per
 * micro-batch and per replica, as in GPipe and PyTorch's data parallelism). */
#ifndef DTBENCH_PIPELINE_H
#define DTBENCH_PIPELINE_H

#include "model.h"
#include "options.h"
#include "topology.h"

#include <mpi.h>
#include <stdio.h>

typedef struct {
    ParallelMode mode;
    int stages, stage;     /* K, and this rank's stage */
    int replicas, replica; /* R = ranks / K, and this rank's replica */
    int microbatches;      /* M */
    int *first;            /* [K + 1]: stage s holds layers [first[s], first[s+1]) */
    char split_text[256];  /* first[0..K-1], comma-separated (result file) */
    MPI_Comm pipe_comm;    /* this replica's stages; rank in it = stage */
    MPI_Comm stage_comm;   /* the replicas' ranks holding this stage: the exchange's communicator */
    /* --parallel tensor: groups of tp consecutive ranks (rank = replica * tp + tp_rank), each
     * holding the whole model split (ModelTensor); stage_comm then joins the ranks of the same
     * tp_rank over the replicas. tp 1, tp_comm MPI_COMM_NULL: no tensor group. */
    int tp, tp_rank;
    MPI_Comm tp_comm;
} Pipeline;

/* Checks --parallel, --stages, --split, --microbatches and --batch against the model `plan` and
 * the ranks (collective: on bad input every rank exits 2 after one line naming the option), and
 * fills p. With --parallel data: one stage, every rank a replica, stage_comm = MPI_COMM_WORLD.
 * dry_run 1: the rank count is not checked (the stages are only printed) and no communicator is
 * made. */
void pipeline_setup(Pipeline *p, const Options *opt, ParallelMode mode, const Model *plan,
                    const Topology *topo, int dry_run);
void pipeline_free(Pipeline *p);

/* The stages: layers, parameters, share of the FLOPs (for --dry-run and the start-up lines). */
void pipeline_print(const Pipeline *p, const Model *plan, FILE *out);

/* Collective. Rank 0 writes the whole model's parameters of replica 0, gathered from its stages
 * (or its tensor group's slices, in the unsplit layout), as model_save does (which reports its
 * own failure). Returns 0. */
int pipeline_save_model(const Pipeline *p, const Model *m, const char *path);

#endif
