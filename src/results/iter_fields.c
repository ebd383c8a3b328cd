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
    FIELD(tp_comm, "s",
          "tensor group: its allreduces of activations and gradients (--parallel tensor), "
          "included in forward and backward, not in exchange"),
    FIELD(tp_bytes, "bytes", "tensor group: payload this rank handed to its allreduces"),
};
const int ITER_NFIELDS = (int)(sizeof ITER_FIELDS / sizeof ITER_FIELDS[0]);
