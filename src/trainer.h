/* trainer.h - the timed training loop: data, forward, backward, exchange, update per iteration,
 * each phase timed on the backend's timeline; records handed to the recorder between iterations;
 * test-set evaluations outside the timed phases. A stop request (signals.h, or --target-acc
 * reached) ends the loop as the exchange strategy agrees (see exchange.h). */
#ifndef DTBENCH_TRAINER_H
#define DTBENCH_TRAINER_H

#include "data.h"
#include "exchange.h"
#include "model.h"
#include "options.h"
#include "recorder.h"
#include "straggler.h"
#include "topology.h"

typedef struct {
    const Options *opt;
    const Topology *topo;
    Dataset *data;
    Model *model;
    const ExchangeOps *xops;
    ExchangeState *xstate;
    const RecorderOps *rops;
    Recorder *rec;
    double clock_offset;            /* this rank's clock minus rank 0's */
    double t0;                      /* rank 0's clock at the start of the run */
    int worker_index, worker_count; /* data are sharded over the workers */
    Straggler straggler;
} Trainer;

typedef struct {
    int64_t iterations;   /* completed */
    int stopped;          /* stopped early: a rank received SIGTERM / SIGUSR1 */
    int target_reached;   /* stopped because --target-acc was reached */
    double median_total;  /* this rank, measured iterations, s */
    double last_accuracy; /* -1 when never evaluated */
} TrainResult;

/* Evaluations the run will make (0 without a test split): every eval_every iterations and at the
 * end. Needed up front, since the file is created at its final size. */
int trainer_eval_count(const Options *opt, const Dataset *data);

/* Workers only. */
TrainResult trainer_run(Trainer *t);

/* Test accuracy and mean loss of the current parameters; the test set is sharded over the
 * ranks of comm (collective over comm; MPI_COMM_SELF: this rank alone, on all of it). */
void trainer_evaluate(Trainer *t, MPI_Comm comm, double *accuracy, double *loss);

#endif
