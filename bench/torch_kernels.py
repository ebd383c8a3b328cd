"""torch_kernels.py - PyTorch's side of bench/gpu_kernels.sh: the cases bench/gpu_kernels lists
(batch norm, max pooling, LRN on ResNet-50's and GoogLeNet's shapes), each timed as a bf16
channels_last training step runs it in PyTorch, and the table that sets both sides side by side.

  python3 torch_kernels.py time CASES.jsonl [--iters N] [--warmup N] [--only S] [--device D]
                                            [--batch N]
      one line per case, `case NAME ms MS`: forward as torchvision's modules call it (batch norm
      in training mode on bf16 with fp32 parameters, then `+= z` and ReLU in place where the case
      fuses them; max_pool2d with its indices; local_response_norm), backward as
      torch.autograd.grad of that forward (every input's and parameter's gradient); `warmup`
      calls, then `iters` back to back between two CUDA events (a case PyTorch cannot run: one
      `skip` line). --device cpu and --batch 1 rehearse the script without a GPU (not a
      measurement).
  python3 torch_kernels.py table CASES.jsonl DT.txt... --torch TORCH.txt... [--peak-gbs G]
      per case the fastest round of each side: dtbench's time, its GB/s over the bytes its
      kernels move, the share of the device's peak bandwidth (below 60% marked), PyTorch's time
      and PyTorch's time / dtbench's (above 1: dtbench is faster).
A bad input file is one line, exit 2."""
import argparse
import json
import sys
import time


def load_cases(path, only=None):
    cases = []
    with open(path) as f:
        for line in f:
            if line.strip():
                c = json.loads(line)
                if not only or only in c["name"]:
                    cases.append(c)
    return cases


def build(torch, c, device, batch):
    """The case's inputs and a function that runs it once."""
    F = torch.nn.functional
    n = batch or c["n"]
    fmt = torch.channels_last
    x = torch.randn(n, c["c"], c["h"], c["w"], device=device).to(torch.bfloat16)
    x = x.contiguous(memory_format=fmt).requires_grad_(True)
    bwd = c["op"].endswith("_bwd")
    if c["op"].startswith("bn"):
        ch = c["c"]
        gamma = torch.ones(ch, device=device, requires_grad=True)
        beta = torch.zeros(ch, device=device, requires_grad=True)
        rm, rv = torch.zeros(ch, device=device), torch.ones(ch, device=device)
        z = None
        if c["mode"] == 2:
            z = torch.randn_like(x, dtype=torch.float32).to(torch.bfloat16)
            z = z.contiguous(memory_format=fmt).requires_grad_(True)

        def fwd():
            y = F.batch_norm(x, rm, rv, gamma, beta, training=True, momentum=0.1, eps=1e-5)
            if z is not None:
                y += z
            if c["mode"] > 0:
                y = torch.relu_(y)
            return y
        inputs = [x, gamma, beta] + ([z] if z is not None else [])
    elif c["op"].startswith("pool"):
        def fwd():
            return F.max_pool2d(x, c["k"], c["s"], c["p"])
        inputs = [x]
    else:
        def fwd():
            return F.local_response_norm(x, c["size"], c["alpha"], c["beta"], c["bias"])
        inputs = [x]
    if not bwd:
        return fwd
    y = fwd()
    dy = torch.randn_like(y, dtype=torch.float32).to(torch.bfloat16)
    dy = dy.contiguous(memory_format=fmt)
    return lambda: torch.autograd.grad(y, inputs, dy, retain_graph=True)


def time_cases(a):
    import torch
    if a.device == "cuda" and not torch.cuda.is_available():
        print("torch_kernels: PyTorch sees no CUDA device", file=sys.stderr)
        return 77
    torch.backends.cudnn.benchmark = True
    for c in load_cases(a.cases, a.only):
        try:
            run = build(torch, c, a.device, a.batch)
            run()
        except RuntimeError as e:  # an op this build of PyTorch lacks for bf16 (CPU rehearsals)
            print(f"skip {c['name']}.{c['op']}: {str(e).splitlines()[0]}", flush=True)
            continue
        for _ in range(a.warmup):
            run()
        if a.device == "cuda":
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            for _ in range(a.iters):
                run()
            end.record()
            torch.cuda.synchronize()
            ms = start.elapsed_time(end) / a.iters
        else:
            t0 = time.perf_counter()
            for _ in range(a.iters):
                run()
            ms = (time.perf_counter() - t0) * 1e3 / a.iters
        print(f"case {c['name']}.{c['op']} ms {ms:.4f}", flush=True)
        del run
        if a.device == "cuda":
            torch.cuda.empty_cache()
    return 0


def read_times(paths):
    """{case: fastest ms over the files}, and the device line's peak (0: none)."""
    best, peak = {}, 0.0
    for p in paths:
        with open(p) as f:
            for line in f:
                t = line.split()
                if len(t) >= 4 and t[0] == "device" and t[2] == "peak_gbs":
                    peak = float(t[3])
                elif len(t) >= 4 and t[0] == "case" and t[2] == "ms":
                    ms = float(t[3])
                    best[t[1]] = min(ms, best.get(t[1], ms))
    return best, peak


def table(a):
    cases = load_cases(a.cases)
    dt, peak = read_times(a.dtbench)
    th, _ = read_times(a.torch or [])
    peak = a.peak_gbs or peak
    print(f"peak memory bandwidth {peak:.0f} GB/s; dtbench's GB/s: the bytes its kernels move "
          "(each tensor once a pass) / its time; ratio: PyTorch's time / dtbench's")
    print(f"{'case':46} {'MB':>7} {'dtbench ms':>10} {'GB/s':>7} {'% peak':>7} "
          f"{'PyTorch ms':>10} {'ratio':>6}")
    for c in cases:
        key = f"{c['name']}.{c['op']}"
        if key not in dt:
            continue
        ms, mb = dt[key], c["bytes"] / 1e6
        gbs = c["bytes"] / (ms * 1e-3) / 1e9
        share = f"{100 * gbs / peak:6.1f}%" if peak else "     ?"
        mark = " <60%" if peak and gbs < 0.6 * peak else ""
        tms = f"{th[key]:10.4f}" if key in th else f"{'-':>10}"
        ratio = f"{th[key] / ms:6.2f}" if key in th else f"{'-':>6}"
        print(f"{key:46} {mb:7.0f} {ms:10.4f} {gbs:7.0f} {share} {tms} {ratio}{mark}")
    return 0


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    t = sub.add_parser("time")
    t.add_argument("cases")
    t.add_argument("--iters", type=int, default=20)
    t.add_argument("--warmup", type=int, default=5)
    t.add_argument("--only")
    t.add_argument("--device", default="cuda", choices=["cuda", "cpu"])
    t.add_argument("--batch", type=int, default=0, help="override every case's batch (rehearsal)")
    b = sub.add_parser("table")
    b.add_argument("cases")
    b.add_argument("dtbench", nargs="+")
    b.add_argument("--torch", nargs="*")
    b.add_argument("--peak-gbs", type=float, default=0.0)
    a = p.parse_args()
    try:
        return time_cases(a) if a.cmd == "time" else table(a)
    except (OSError, ValueError, KeyError) as e:
        print(f"torch_kernels: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
