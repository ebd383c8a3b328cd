/* run_limits.h - is the run possible on this machine? Memory a rank will need, estimated from the
 * planned model and the options before anything is allocated, against the memory the node has
 * for its ranks; an impossible run is refused naming the option that makes it so. */
#ifndef DTBENCH_RUN_LIMITS_H
#define DTBENCH_RUN_LIMITS_H

#include "exchange.h"
#include "model.h"
#include "options.h"

#include <stddef.h>

/* x: the exchange strategy; plan: the planned model; layers [first, last) are this rank's; batch:
 * samples per rank (or per replica); replicas: the ranks exchanging (a strategy that shards the
 * optimizer's state, ExchangeOps.shards_optimizer, holds 1/replicas of it per rank);
 * ranks_on_node: ranks sharing this node's memory. 0, or -1 with one line in err. */
int limits_check(const Options *o, const ExchangeOps *x, const Model *plan, int first, int last,
                 int batch, int replicas, int ranks_on_node, char *err, size_t errlen);

#endif
