# test_reliability_fuzz.sh - the reliability fuzz runs, bounded in time for CI
# (FUZZ_SECONDS each, 20 by default; longer by hand, e.g. FUZZ_SECONDS=600 FUZZ_SEED=7):
#  1. the data readers: fuzz/fuzz_readers, a deterministic mutation driver over IDX and CIFAR-10
#     files, plain, gzip'd and with damaged gzip streams (the same target builds for libFuzzer
#     with `make fuzz-libfuzzer`); it aborts on any crash or broken promise (data.h);
#  2. the option parser, as a user meets it: random command lines (option names from --help, with
#     extreme, non-finite, empty, huge, non-UTF-8 and one-dash values) run by dtbench alone; each
#     must end with exit 0, or with exit 2 and exactly one line "dtbench: error: ..." and no file
#     left - never a crash, a hang, or another status.
. "$(dirname "$0")/lib.sh"
cd "$WORK"
SECONDS_EACH=${FUZZ_SECONDS:-20}
SEED=${FUZZ_SEED:-1}
FUZZ_READERS=${FUZZ_READERS:-$(dirname "$DTBENCH")/../fuzz/fuzz_readers}

TMPDIR=$WORK "$FUZZ_READERS" "$SECONDS_EACH" "$SEED" || fail "fuzz_readers found a crash (seed $SEED)"

"$DTBENCH" --help >help.txt
"$PYTHON" - "$DTBENCH" "$SECONDS_EACH" "$SEED" <<'PY'
import os, random, re, subprocess, sys, time
dtbench, seconds, seed = sys.argv[1], float(sys.argv[2]), int(sys.argv[3])
names = re.findall(r"^  --([a-z0-9-]+)", open("help.txt").read(), re.M)
rng = random.Random(seed)
values = ["0", "1", "-1", "2", "3", "64", "1073741824", "1073741825", "2147483648",
          "99999999999999999999", "-0", "1e308", "1e-308", "inf", "-inf", "nan", "0x10", "",
          " ", "abc", "1:2", "0:+inf", "1:+30000", "0:nan", "synthetic", "lenet", "sync", "ssp",
          "cpu", "data", "model", "x" * 5000, "caf\udce9", "-", "--", "-model", "0.5", "1.5",
          "/proc/x", "/nonexistent/x.h5", "fuzz.h5", "mnist", "cifar10", "1,2", ",,"]
env = dict(os.environ, OMPI_MCA_btl="self")
runs, outcomes, end = 0, {}, time.time() + seconds
while time.time() < end:
    args = []
    for _ in range(rng.randint(0, 5)):
        name = rng.choice(names)
        dash = "--" if rng.random() < 0.9 else "-"
        args.append(dash + name)
        if rng.random() < 0.9:
            args.append(rng.choice(values))
    # keep accepted runs short; the fuzzed options come after and may override these
    cmd = [dtbench, "--dataset", "synthetic", "--iters", "1", "--warmup", "0", "--batch", "2",
           "--sample-hz", "0", "--output", "fuzz.h5", "--overwrite"] + args
    cmd = [os.fsencode(a) if "\udce9" not in a else a.encode("utf-8", "surrogateescape")
           for a in cmd]
    try:
        p = subprocess.run(cmd, capture_output=True, timeout=60, env=env)
    except subprocess.TimeoutExpired:
        sys.exit(f"FAIL: hang: {cmd}")
    runs += 1
    outcomes[p.returncode] = outcomes.get(p.returncode, 0) + 1
    err = p.stderr.decode("utf-8", "replace").strip().splitlines()
    if p.returncode == 2:
        lines = [l for l in err if l.startswith("dtbench")]
        if len(lines) != 1 or not lines[0].startswith("dtbench: error: "):
            sys.exit(f"FAIL: exit 2 without one error line: {args}: {err}")
        if os.path.exists("fuzz.h5") or any(n.startswith(".fuzz.h5.") for n in os.listdir(".")):
            sys.exit(f"FAIL: refused run left a file: {args}")
    elif p.returncode != 0:
        sys.exit(f"FAIL: exit {p.returncode}: {args}: {err[-5:]}")
    for f in ("fuzz.h5", "fuzz.params"):
        if os.path.exists(f):
            os.unlink(f)
print(f"ok: option fuzz: {runs} command lines in {seconds:.0f} s (seed {seed}), exit statuses "
      f"{dict(sorted(outcomes.items()))}")
PY
pass "fuzz runs: readers and option parser, $SECONDS_EACH s each, seed $SEED"
