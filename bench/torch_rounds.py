#!/usr/bin/env python3
"""torch_rounds.py - bench/torch_peer.py's measurement, many times in ONE process.

bench/gpu_bench.py alternates rounds of dtbench and PyTorch. Importing torch and creating its CUDA
context take about 10 s on a GPU machine (the first H200 benchmark: 10-14 s per PyTorch process
for 0.1-1 s of steps), which a training job pays once; paid per round it was most of the
benchmark's time. So the PyTorch side is this one process, started once: each request builds a
fresh network, optimizer and data pool with torch_peer.py's own code (its main()), from
PyTorch's default settings again (TF32 flags, cudnn.benchmark, oneDNN as at start), runs the
warm-up and measured steps, and gives the cached GPU memory back before it answers, so the next
dtbench process finds the GPU as it would after a PyTorch process ended.

Protocol: first a JSON line on stdout, {"ready": true, "torch": ..., "cuda": ..., "cudnn": ...,
"gpu": ..., "cuda_available": ...}; then for each JSON line on stdin, {"argv": [torch_peer
arguments], "out": FILE, "log": FILE}, torch_peer's JSON goes to FILE and its diagnostics to
the log, and one JSON line answers on stdout: {"rc": 0} or {"rc": 1, "error": "..."}. Ends at
the end of stdin.
"""
import contextlib
import gc
import json
import os
import sys
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
# torch_peer parses its command line when imported (and sets the thread variables from it
# before it imports torch): give it a valid one
sys.argv = [os.path.join(HERE, "torch_peer.py"), "--model", "lenet", "--threads", "1"]
import torch_peer  # noqa: E402
import torch  # noqa: E402

REPLY = sys.stdout


def defaults():
    b = torch.backends
    return (b.cudnn.allow_tf32, b.cuda.matmul.allow_tf32, b.cudnn.benchmark, b.mkldnn.enabled)


def restore(d):
    b = torch.backends
    b.cudnn.allow_tf32, b.cuda.matmul.allow_tf32, b.cudnn.benchmark, b.mkldnn.enabled = d


def answer(obj):
    REPLY.write(json.dumps(obj) + "\n")
    REPLY.flush()


def serve(req, start):
    """One measurement: torch_peer's main() with REQ's arguments, from the start's settings."""
    restore(start)
    with open(req["out"], "w") as out, open(req["log"], "w") as log, \
            contextlib.redirect_stdout(out), contextlib.redirect_stderr(log):
        try:
            torch_peer.ARGS = torch_peer.parse_args(req["argv"])
            torch_peer.main()
            return {"rc": 0}
        except SystemExit as e:  # torch_peer's own refusals, argparse's errors
            msg = str(e.code) if e.code not in (None, 0) else ""
            if not msg:
                return {"rc": 0}
            print(msg, file=sys.stderr)
            return {"rc": 1, "error": msg[:200]}
        except Exception as e:  # an out-of-memory, a CUDA error: this round fails, not the rest
            traceback.print_exc()
            return {"rc": 1, "error": f"{type(e).__name__}: {e}"[:200]}
        finally:
            gc.collect()
            if torch.cuda.is_available():
                torch.cuda.empty_cache()


def main():
    # torch_peer sets one inter-op thread per process; a second call aborts the process (PyTorch
    # 1.13) or raises, so it is made here once and torch_peer's calls do nothing after
    torch.set_num_interop_threads(1)
    torch.set_num_interop_threads = lambda n: None
    start = defaults()
    cuda = torch.cuda.is_available()
    answer({"ready": True, "torch": torch.__version__, "cuda": torch.version.cuda,
            "cudnn": torch.backends.cudnn.version() if cuda else None,
            "gpu": torch.cuda.get_device_name() if cuda else None, "cuda_available": cuda,
            "python": sys.executable})
    for line in sys.stdin:
        if line.strip():
            answer(serve(json.loads(line), start))
    return 0


if __name__ == "__main__":
    sys.exit(main())
