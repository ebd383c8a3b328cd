"""check_gpu.py - what a GPU run recorded (docs/hdf5-layout.md, docs/gpu.md), for the GPU shell
tests. Exit 0 when the check holds, 1 with one line.

  conv-algo FILE HOW    an fp32 run with --conv-algo HOW: the method and its budget, FMA-only
                        algorithms per convolution shape, timed under find, no plan made in a step
  recorded FILE         a LeNet fp32 run on the GPU: phases, falling loss, the GPU and its
                        libraries, strict fp32 convolutions, NVML samples when it loaded
  precisions FP32 TF32 BF16 FP16
                        one model in the four precisions: accuracies within 1 point of fp32's,
                        each mode named, fp16's loss scaler and the others' constant scale
  same-accuracy A B --evals N --atol T
                        N evaluations, A's and B's accuracies within T
  conv-plans FILE OUT   rank 0's convolution plans (one line a shape) written to OUT, to compare
                        two runs
"""
import numpy as np

from checkutil import command, expect, h5, main, parser, text

STRICT_FP32 = ("DEFAULT", "TENSOR_OP")  # math types other than FMA: TF32 or 16-bit products


def choices(f, rank=0):
    """/ranks/kernel_choices of one rank (the backend's describe_kernels) as text."""
    return text(f["ranks/kernel_choices"][rank])


def conv_algo(a):
    """One "conv algorithms:" line naming --conv-algo HOW and the workspace budget; at least two
    convolution shapes, each with three algorithms in FMA math (no DEFAULT or TENSOR_OP) and
    three measured times under find, none under heuristic; the last line "plans made inside a
    step: 0"."""
    with h5(a.file) as f:
        kc = choices(f)
    lines = kc.splitlines()
    method = [l for l in lines if l.startswith("conv algorithms:")]
    convs = [l for l in lines if l.startswith("conv ") and not l.startswith("conv algorithms:")]
    expect(len(method) == 1 and f"--conv-algo {a.how}" in method[0]
           and "workspace budget" in method[0], f"{a.file}: no method line for {a.how}: {kc!r}")
    expect(len(convs) >= 2, f"{a.file}: {len(convs)} convolution shapes: {kc!r}")
    for l in convs:
        expect(l.count(" FMA") == 3 and not any(m in l for m in STRICT_FP32),
               f"{a.file}: not FMA-only: {l}")
        expect(l.count(" ms") == (3 if a.how == "find" else 0),
               f"{a.file}: {l.count(' ms')} times under {a.how}: {l}")
    expect(lines[-1] == "plans made inside a step: 0", f"{a.file}: last line {lines[-1]!r}")
    print(f"ok: {a.file}: {method[0]}")


def recorded(a):
    """Rank 0: data, forward, backward, update and total > 0 in every iteration; the mean loss
    of the last 5 iterations under that of the first 5; device name, UUID (GPU-...), PCI bus id,
    CUDA runtime, cuDNN and cuBLAS versions recorded; kernel choices of at least two convolutions,
    FMA math only and direct sums (no FFT or WINOGRAD), the last "plans made inside a step: 0";
    samples written, and with sample_source nvml some power and memory > 0 in each."""
    with h5(a.file) as f:
        it, r = f["iterations"], f["ranks"]
        for p in ["data", "forward", "backward", "update", "total"]:
            expect((it[p][0] > 0).all(), f"{a.file}: /iterations/{p} not > 0: {it[p][0]}")
        loss = it["loss"][0]
        expect(loss[-5:].mean() < loss[:5].mean(), f"{a.file}: the loss did not fall: {loss}")
        for k in ["device_name", "device_uuid", "device_pci_bus_id", "cuda_runtime_version",
                  "cudnn_version", "cublas_version"]:
            expect(r[k][0], f"{a.file}: no /ranks/{k}")
        expect(r["device_uuid"][0].startswith(b"GPU-"), f"{a.file}: device_uuid "
                                                         f"{r['device_uuid'][0]}")
        kc = choices(f)  # LeNet: 2 convolution shapes (and eval), strict fp32
        expect(kc.count("conv ") >= 2 and not any(m in kc for m in STRICT_FP32),
               f"{a.file}: not strict fp32: {kc!r}")
        expect("FFT" not in kc and "WINOGRAD" not in kc,  # strict fp32: direct sums only
               f"{a.file}: a transform algorithm in strict fp32: {kc!r}")
        expect(kc.rstrip().endswith("plans made inside a step: 0"),
               f"{a.file}: plans made inside a step: {kc!r}")
        n = f["ranks/samples_written"][0]
        expect(n > 0, f"{a.file}: no samples written")
        src = r["sample_source"][0]
        if src == b"nvml":
            expect(np.isfinite(f["samples/power_w"][0, :n]).any()
                   and (f["samples/memory_mib"][0, :n] > 0).all(),
                   f"{a.file}: NVML samples without power or memory")
        print(f"ok: GPU run: phases, loss falls, metadata {text(r['device_name'][0])} "
              f"{text(r['driver_version'][0])} cuDNN {text(r['cudnn_version'][0])}; samples: "
              f"{text(src)} {n}")


def precisions(a):
    """The last test accuracy of fp32 above 0.80, of tf32, bf16 and fp16 within 0.01 of it. Each
    run's kernel choices start "precision P:"; fp32's name no DEFAULT or TENSOR_OP math. fp32,
    tf32, bf16: /iterations/loss_scale 1 and step_skipped 0 throughout. fp16: the scale starts at
    65536 and from one iteration to the next stays, halves or doubles, halving exactly after a
    skipped step; step_skipped 0 or 1."""
    acc, runs = {}, {}
    for p in ("fp32", "tf32", "bf16", "fp16"):
        path = getattr(a, p)
        with h5(path) as f:
            acc[p] = float(f["eval/accuracy"][-1])
            runs[p] = (choices(f), f["iterations/loss_scale"][0, :],
                       f["iterations/step_skipped"][0, :])
    print("test accuracy:", {k: round(v, 4) for k, v in acc.items()})
    expect(acc["fp32"] > 0.80, f"fp32 did not learn: {acc}")
    for p in ("tf32", "bf16", "fp16"):
        expect(abs(acc[p] - acc["fp32"]) <= 0.01, f"{p} more than 1 point from fp32: {acc}")
    for p, (kc, scale, skipped) in runs.items():
        expect(kc.startswith(f"precision {p}:"), f"{p}: first line {kc.splitlines()[0]!r}")
        if p == "fp32":
            expect(not any(m in kc for m in STRICT_FP32), f"fp32: not FMA-only: {kc!r}")
        if p != "fp16":
            expect((scale == 1).all() and (skipped == 0).all(),
                   f"{p}: loss_scale {scale}, step_skipped {skipped}")
    kc, scale, skipped = runs["fp16"]
    expect(scale[0] == 65536, f"fp16: loss_scale starts {scale[:3]}")
    expect(set(np.unique(skipped)) <= {0, 1}, f"fp16: step_skipped {np.unique(skipped)}")
    ratio = scale[1:] / scale[:-1]
    expect(((ratio == 1) | (ratio == 0.5) | (ratio == 2)).all(),
           f"fp16: loss_scale ratios {np.unique(ratio)}")
    expect(((ratio == 0.5) == (skipped[:-1] == 1)).all(),
           "fp16: a skipped step must halve the scale")
    print("fp16: skipped steps", int(skipped.sum()), "final scale", scale[-1])


def same_accuracy(a):
    """A's /eval/accuracy has N entries, each within T of B's."""
    acc = []
    for path in (a.a, a.b):
        with h5(path) as f:
            acc.append(f["eval/accuracy"][:])
    x, y = acc
    expect(len(x) == a.evals and np.allclose(x, y, atol=a.atol),
           f"accuracies {x} and {y}: expected {a.evals}, within {a.atol:g}")
    print("accuracies", x, y)


def conv_plans(a):
    """Writes to OUT the convolution plans' lines of rank 0's kernel choices ("conv " and a digit:
    one a shape, its algorithms), so that two runs' plans can be compared."""
    with h5(a.file) as f:
        kc = choices(f)
    plans = [l for l in kc.splitlines() if l[:5] == "conv " and l[5:6].isdigit()]
    with open(a.out, "w") as out:
        print("\n".join(plans), file=out)


if __name__ == "__main__":
    ap, sub = parser(__doc__)
    command(sub, conv_algo, ("file",), ("how", {"choices": ("find", "heuristic")}))
    command(sub, recorded, ("file",))
    command(sub, precisions, ("fp32",), ("tf32",), ("bf16",), ("fp16",))
    command(sub, same_accuracy, ("a",), ("b",), ("--evals", {"type": int, "required": True}),
            ("--atol", {"type": float, "required": True}))
    command(sub, conv_plans, ("file",), ("out",))
    main(ap)
