/* iter_fields.c - the table of per-iteration quantities (see recorder.h and
 * docs/hdf5-layout.md, which documents each row). */
#include "recorder.h"

#define FIELD(name, units, text)                                                                   \
    { #name, offsetof(IterRecord, name), units, text }

const IterField ITER_FIELDS[] = {
    FIELD(start, "s", "iteration start on the aligned clock (s since rank 0's t0)"),
    FIELD(data, "s", "loading the local batch and uploading it to the device"),
    FIELD(forward, "s", "forward pass and loss"),
    FIELD(backward, "s", "backward pass"),
    FIELD(exchange, "s", "gradient exchange between ranks"),
    FIELD(update, "s", "optimizer step"),
    FIELD(total, "s", "iteration start to end of its update"),
    FIELD(loss, "1", "mean training loss of this rank's local batch"),
    FIELD(bytes_sent, "bytes", "payload this rank handed to the exchange"),
    FIELD(bytes_recv, "bytes", "payload this rank received from the exchange"),
    FIELD(staleness, "1",
          "versions between the parameters a gradient was computed on and those it was applied to"),
    FIELD(version, "1", "version of the parameters this rank holds after the exchange"),
    FIELD(exchange_wait, "s", "part of exchange spent waiting for other ranks"),
    FIELD(straggler_delay, "s", "injected delay (--straggler), included in backward"),
    FIELD(record, "s", "recorder's own cost just before this iteration (not part of total)"),
    FIELD(exchange_hidden, "s",
          "exchange work done while backward still ran (--overlap; not part of exchange)"),
    FIELD(pipe_compute, "s", "pipeline stage: forward and backward computation of its layers"),
    FIELD(pipe_send, "s", "pipeline stage: handing activations/gradients to its neighbours"),
    FIELD(pipe_recv, "s", "pipeline stage: receiving after the neighbour started sending"),
    FIELD(pipe_idle, "s", "pipeline stage: waiting for a neighbour still computing (bubble)"),
    FIELD(pipe_bytes, "bytes", "pipeline stage: activations and gradients sent to neighbours"),
    FIELD(loss_scale, "1", "loss scale of this iteration's backward (--precision fp16; else 1)"),
    FIELD(step_skipped, "1",
          "1 if the optimizer step was skipped: inf/NaN gradients under fp16 loss scaling"),
    FIELD(profile_cost, "s",
          "host time of --profile-layers' per-layer timer marks in this iteration (0: not "
          "profiled), included in forward and backward"),
    FIELD(load, "s",
          "making this iteration's batch (sample copies and conversion): by the loader's threads "
          "during the previous step with --prefetch, else on the driver's thread inside data"),
    FIELD(load_wait, "s",
          "part of data the step waited for its batch to be made (with --prefetch: 0 when the "
          "loader had made it during the previous step and its upload was queued then)"),
    FIELD(exchange_reduce_scatter, "s",
          "sharded exchange (zero1, zero2): the gradients' reduce-scatters completed after "
          "backward, inside exchange (0 with other strategies)"),
    FIELD(exchange_allgather, "s",
          "sharded exchange (zero1, zero2): the updated parameters' all-gathers, inside exchange "
          "(0 with other strategies)"),
    FIELD(bytes_reduce_scatter, "bytes",
          "sharded exchange: gradient payload handed to the reduce-scatters (--grad-dtype's type)"),
    FIELD(bytes_allgather, "bytes",
          "sharded exchange: parameter payload handed to the all-gathers (fp32)"),
    FIELD(exchange_allreduce, "s",
          "sharded exchange with --transport hier (sharded inside a node): the shards' "
          "allreduce across the nodes, inside exchange (0 elsewhere)"),
    FIELD(bytes_allreduce, "bytes",
          "sharded exchange with --transport hier: gradient payload handed to the shards' "
          "allreduce across the nodes (--grad-dtype's type)"),
    FIELD(wall, "s",
          "host time of the iteration: from the previous one's record (the first: the training "
          "loop's start) to its own, evaluations left out; total and what the host does outside "
          "it (waking from its wait, reading the loss, recording)"),
    FIELD(tp_comm, "s",
          "tensor group: its allreduces of activations and gradients (--parallel tensor), "
          "included in forward and backward, not in exchange"),
    FIELD(tp_bytes, "bytes", "tensor group: payload this rank handed to its allreduces"),
    FIELD(tp_calls, "-", "tensor group: how many allreduces this rank made (0 elsewhere)"),
};
const int ITER_NFIELDS = (int)(sizeof ITER_FIELDS / sizeof ITER_FIELDS[0]);
