"""check_torch.py - dtbench's training against PyTorch's, from the files both wrote (PyTorch's by
tests/torch_ref.py and tests/torch_bf16_ref.py). Exit 0 when the check holds, 1 with one line;
each prints what it measured.

  train NAME --loss-tol L --param-tol P [--adamw]
                  NAME.h5, NAME.params, NAME-init.params (dtbench) against NAME-torch.json,
                  NAME-torch.params, NAME-torch.params64 (PyTorch): the same losses and final
                  parameters as PyTorch's float64 run (test_vs_torch.sh)
  autocast FP32 BF16 TORCH_JSON
                  dtbench's bf16 losses as close to its fp32 ones as PyTorch autocast(bfloat16)'s
                  are to PyTorch's fp32, and close to autocast's (test_precision_torch.sh)
"""
import json

import numpy as np

from checkutil import command, expect, h5, main, parser


def params(path):
    """A --save-model file's parameters (after its 64-byte header) in float64."""
    return np.fromfile(path, "<f4", offset=64).astype(np.float64)


def train(a):
    """Every step's loss within L of PyTorch's float64 run, or 10x PyTorch's own float32 error at
    that step where larger (a ReLU input crossing 0 by a rounding error); the final parameters
    within P, or 10x PyTorch's float32 error; the loss fell below 0.8 of its first value; training
    moved the parameters by more than 100 P and 10x the tolerance applied. With --adamw, by more
    than 10 P only: AdamW moves a parameter by about lr x the sign of its gradient, so a gradient
    within rounding of 0 moves it by lr one way or the other in PyTorch's float32 run as in ours,
    and the tolerance (10x PyTorch's own float32 error) is then of the order of the steps."""
    name = a.name
    with h5(f"{name}.h5") as f:
        dt = f["iterations/loss"][0].astype(np.float64)
    with open(f"{name}-torch.json") as fh:
        ref = json.load(fh)
    t32, t64 = np.array(ref["losses"]), np.array(ref["losses_f64"])
    p_dt, p_init, p32 = params(f"{name}.params"), params(f"{name}-init.params"), \
        params(f"{name}-torch.params")
    p64 = np.fromfile(f"{name}-torch.params64", "<f8")
    expect(dt.shape == t32.shape and p_dt.shape == p64.shape,
           f"{name}: losses {dt.shape} vs {t32.shape}, parameters {p_dt.shape} vs {p64.shape}")
    ltol = np.maximum(a.loss_tol, 10 * np.abs(t32 - t64))
    ptol = max(a.param_tol, 10 * float(np.max(np.abs(p32 - p64))))
    dloss, dparam = np.abs(dt - t64), float(np.max(np.abs(p_dt - p64)))
    moved = float(np.max(np.abs(p_dt - p_init)))
    print(f"{name}: losses dtbench {np.round(dt, 5).tolist()}")
    print(f"{name}: losses PyTorch {np.round(t32, 5).tolist()} (torch {ref['torch']}, "
          f"batch {ref['batch']})")
    print(f"{name}: {len(dt)} steps: loss max |dtbench - PyTorch float32| "
          f"{np.max(np.abs(dt - t32)):.3g}; |dtbench - PyTorch float64| {dloss.max():.3g} "
          f"(tolerance {ltol.min():.3g} .. {ltol.max():.3g}; PyTorch float32 - float64: "
          f"{np.max(np.abs(t32 - t64)):.3g})")
    print(f"{name}: {ref['parameters']} final parameters: max |dtbench - PyTorch float32| "
          f"{np.max(np.abs(p_dt - p32)):.3g}; |dtbench - PyTorch float64| {dparam:.3g} (tolerance "
          f"{ptol:.3g}); training moved them by up to {moved:.3g}")
    moved_enough = moved > 10 * a.param_tol if a.adamw else \
        moved > 100 * a.param_tol and moved > 10 * ptol
    ok = (bool(np.all(dloss <= ltol)) and dparam <= ptol and dt[-1] < 0.8 * dt[0]
          and moved_enough)
    expect(ok, f"{name} does not train as in PyTorch")
    print(f"ok: {name} trains as in PyTorch")


def autocast(a):
    """Rank 0's losses of FP32 and BF16 (dtbench) and TORCH_JSON's fp32 and bf16 (PyTorch): the
    bf16 run differs from fp32 (the rounding happened) by at most 3x (+1e-3) what autocast's
    does from PyTorch's fp32; |dtbench bf16 - autocast bf16| at most 3x (+1e-3) the larger of
    those two deviations; the bf16 loss fell below 0.8 of its first value."""
    dt = {}
    for p, path in (("fp32", a.fp32), ("bf16", a.bf16)):
        with h5(path) as f:
            dt[p] = f["iterations/loss"][0].astype(float)
    with open(a.torch_json) as fh:
        t = {k: np.array(v) for k, v in json.load(fh).items() if k != "torch"}
    d_dt, d_t = np.abs(dt["bf16"] - dt["fp32"]).max(), np.abs(t["bf16"] - t["fp32"]).max()
    x = np.abs(dt["bf16"] - t["bf16"]).max()
    print("dtbench bf16 losses ", np.round(dt["bf16"], 5).tolist())
    print("autocast bf16 losses", np.round(t["bf16"], 5).tolist())
    print(f"max |bf16 - fp32|: dtbench {d_dt:.3g}, PyTorch autocast {d_t:.3g}; "
          f"max |dtbench bf16 - autocast bf16| {x:.3g}")
    expect(d_dt > 0, "dtbench's bf16 run equals its fp32 run")
    expect(d_dt <= 3 * d_t + 1e-3, "dtbench's bf16 strays further from fp32 than autocast's")
    expect(x <= 3 * max(d_dt, d_t) + 1e-3, "dtbench's bf16 and autocast's disagree")
    expect(dt["bf16"][-1] < 0.8 * dt["bf16"][0], f"the bf16 loss did not fall: {dt['bf16']}")


if __name__ == "__main__":
    ap, sub = parser(__doc__)
    command(sub, train, ("name",), ("--loss-tol", {"type": float, "required": True}),
            ("--param-tol", {"type": float, "required": True}),
            ("--adamw", {"action": "store_true"}))
    command(sub, autocast, ("fp32",), ("bf16",), ("torch_json",))
    main(ap)
