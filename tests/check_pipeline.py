"""check_pipeline.py - pipeline schedules (src/run/schedule_*.c), for test_schedules.sh. Exit 0 when
the check holds, 1 with one line. (check_h5.py pipeline checks a pipeline run's whole file.)

  order TEXT SCHEDULE --stages K --microbatches M
                              the per-stage orders `dtbench --dry-run` printed (TEXT): each
                              micro-batch's forward then backward once per stage; in flight at
                              most min(K-k, M) on stage k with 1f1b, M with gpipe
  straggler FILE --rank R --ms D --min-idle-ms I
                              --straggler R:+D in a pipeline: the delay recorded on that stage
                              alone, and the stage before it idle (about D) waiting for it
"""
import re

import numpy as np

from checkutil import command, die, h5, main, parser


def order(a):
    """Every stage's order (lines `  stage k: F0 F1 B0 ...`) holds each micro-batch's forward and
    backward once, no backward before its forward, and at most as many forwards awaiting their
    backward (in flight) as the schedule keeps: min(K-k, M) with 1f1b, M with gpipe, exactly."""
    with open(a.text) as fh:
        stages = re.findall(r"^  stage (\d+): ((?:[FB]\d+ ?)+)$", fh.read(), re.M)
    K, M = a.stages, a.microbatches
    if len(stages) != K:
        die(f"{a.text}: {len(stages)} stage orders, expected {K}")
    for k, line in stages:
        k, steps = int(k), line.split()
        if sorted(steps) != sorted([f"F{j}" for j in range(M)] + [f"B{j}" for j in range(M)]):
            die(f"{a.schedule} stage {k}: not each micro-batch's forward and backward once: {line}")
        flight, most = 0, 0
        for i, st in enumerate(steps):
            if st[0] == "B" and f"F{st[1:]}" not in steps[:i]:
                die(f"{a.schedule} stage {k}: {st} before its forward")
            flight += 1 if st[0] == "F" else -1
            most = max(most, flight)
        want = min(K - k, M) if a.schedule == "1f1b" else M
        if most != want:
            die(f"{a.schedule} stage {k}: {most} micro-batches in flight, expected {want}: {line}")
    bound = "min(K-k, M)" if a.schedule == "1f1b" else "M"
    print(f"ok: {a.schedule}: every stage's order is valid, in flight at most {bound}")


def straggler(a):
    """/iterations/straggler_delay is D ms (within 1 us) on rank R and 0 elsewhere; rank R-1,
    which waits for R's gradients, records a median pipe_idle of at least I ms."""
    d = a.ms / 1e3
    with h5(a.file) as f:
        delay, idle = f["iterations/straggler_delay"][:], f["iterations/pipe_idle"][:]
    others = np.arange(len(delay)) != a.rank
    if not (np.abs(delay[a.rank] - d) < 1e-6).all() or (delay[others] != 0).any():
        die(f"straggler_delay per rank {delay}: expected {d:.3f} on rank {a.rank} only")
    waiting = idle[a.rank - 1]
    if np.median(waiting) < a.min_idle_ms / 1e3:
        die(f"stage {a.rank - 1} idle {waiting}: it did not wait for the delayed stage")
    print(f"ok: straggler_delay {delay[a.rank][0]:.3f} s on stage {a.rank}; stage {a.rank - 1} "
          f"idle median {np.median(waiting) * 1e3:.1f} ms")


if __name__ == "__main__":
    ap, sub = parser(__doc__)
    command(sub, order, ("text",), ("schedule", {"choices": ["gpipe", "1f1b"]}),
            ("--stages", {"type": int, "required": True}),
            ("--microbatches", {"type": int, "required": True}))
    command(sub, straggler, ("file",), ("--rank", {"type": int, "required": True}),
            ("--ms", {"type": float, "required": True}),
            ("--min-idle-ms", {"type": float, "required": True}))
    main(ap)
