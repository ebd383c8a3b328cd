"""fuzz_options.py - the option parser as a user meets it (test_reliability_fuzz.sh): random command
lines run by dtbench alone for SECONDS, reproducible from SEED.

Usage: fuzz_options.py DTBENCH HELP_TEXT SECONDS SEED   (run in a folder of its own: it writes
fuzz.h5 and fuzz.params there and removes them after each run)

Each command line holds 0 to 5 options named in HELP_TEXT (dtbench --help; one in ten with one
dash), most with a value from a list of extreme, non-finite, empty, huge, non-UTF-8 and
one-dash values, after options that keep an accepted run short. Every run must end within 60 s
with exit 0, or with exit 2, exactly one line "dtbench: error: ..." and no results file (nor
hidden partial file) left. Exit 0 with one line counting the runs and their exit statuses; 1
with one FAIL line for the first breach.
"""
import argparse
import os
import random
import re
import subprocess
import time

from checkutil import die

VALUES = ["0", "1", "-1", "2", "3", "64", "1073741824", "1073741825", "2147483648",
          "99999999999999999999", "-0", "1e308", "1e-308", "inf", "-inf", "nan", "0x10", "",
          " ", "abc", "1:2", "0:+inf", "1:+30000", "0:nan", "synthetic", "lenet", "sync", "ssp",
          "cpu", "data", "model", "x" * 5000, "caf\udce9", "-", "--", "-model", "0.5", "1.5",
          "/proc/x", "/nonexistent/x.h5", "fuzz.h5", "mnist", "cifar10", "1,2", ",,"]


def command_line(dtbench, names, rng):
    args = []
    for _ in range(rng.randint(0, 5)):
        name = rng.choice(names)
        dash = "--" if rng.random() < 0.9 else "-"
        args.append(dash + name)
        if rng.random() < 0.9:
            args.append(rng.choice(VALUES))
    # keep accepted runs short; the fuzzed options come after and may override these
    cmd = [dtbench, "--dataset", "synthetic", "--iters", "1", "--warmup", "0", "--batch", "2",
           "--sample-hz", "0", "--output", "fuzz.h5", "--overwrite"] + args
    return args, [os.fsencode(a) if "\udce9" not in a else a.encode("utf-8", "surrogateescape")
                  for a in cmd]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("dtbench")
    ap.add_argument("help_text")
    ap.add_argument("seconds", type=float)
    ap.add_argument("seed", type=int)
    a = ap.parse_args()
    with open(a.help_text) as fh:
        names = re.findall(r"^  --([a-z0-9-]+)", fh.read(), re.M)
    rng = random.Random(a.seed)
    env = dict(os.environ, OMPI_MCA_btl="self")
    runs, outcomes, end = 0, {}, time.time() + a.seconds
    while time.time() < end:
        args, cmd = command_line(a.dtbench, names, rng)
        try:
            p = subprocess.run(cmd, capture_output=True, timeout=60, env=env)
        except subprocess.TimeoutExpired:
            die(f"hang: {cmd}")
        runs += 1
        outcomes[p.returncode] = outcomes.get(p.returncode, 0) + 1
        err = p.stderr.decode("utf-8", "replace").strip().splitlines()
        if p.returncode == 2:
            lines = [line for line in err if line.startswith("dtbench")]
            if len(lines) != 1 or not lines[0].startswith("dtbench: error: "):
                die(f"exit 2 without one error line: {args}: {err}")
            if os.path.exists("fuzz.h5") or any(n.startswith(".fuzz.h5.") for n in os.listdir(".")):
                die(f"refused run left a file: {args}")
        elif p.returncode != 0:
            die(f"exit {p.returncode}: {args}: {err[-5:]}")
        for f in ("fuzz.h5", "fuzz.params"):
            if os.path.exists(f):
                os.unlink(f)
    print(f"ok: option fuzz: {runs} command lines in {a.seconds:.0f} s (seed {a.seed}), exit "
          f"statuses {dict(sorted(outcomes.items()))}")


if __name__ == "__main__":
    main()
